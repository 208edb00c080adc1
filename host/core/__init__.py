"""Runtime core of the host: devices, contexts, memory, streams, events, callbacks,
kernels, peer access, faults and host logs."""
