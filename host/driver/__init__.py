"""Driver layer of the host runtime: the only host code that touches rings, semaphores
and shared memory (links to device workers, the node's control socket, pinned memory)."""
