"""Card memory: the arenas (HBM/DDR shared-memory regions), the pure offset allocator, the page
pools and the IPC share table. Nothing here runs threads of its own."""
