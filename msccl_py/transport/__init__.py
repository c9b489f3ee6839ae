"""What carries data between ranks, below every runtime: the shared-memory arena and its
semaphores, the host's shared arena for a joined launch, the engines that carry a
connection between hosts (gloo through torch.distributed, MPI through mpi4py), the
launch's layout, and the C++ builder the native executors use."""
