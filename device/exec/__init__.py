"""What the engines run: kernel bodies (the kernel library and op binaries). Task bodies only;
scheduling is ``device/scheduler.py``."""
