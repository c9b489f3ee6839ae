"""MSCCL++ plans on real data: the reference (NumPy, one process) and shm (a process per rank) runtimes."""
