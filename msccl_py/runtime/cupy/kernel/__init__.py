"""The interpreter's C++/CUDA sources (data, not Python): a package so that wheels ship them.

interp.h (the kernel), instances.cu (extern "C" entry points), emulation.cpp
(host build), tsan_driver.cpp (ThreadSanitizer driver). The headers it shares
with the CPU executors, platform.h and ops.h, are in ``runtime/include/``.
"""
