// Host emulation of the interpreter kernel: the same interp.h under g++.
//
// Each emulated CUDA block is `threads` OS threads sharing one BlockShared
// and one std::barrier (__syncthreads). All blocks start together, as in a
// cooperative launch, so inter-block spins behave as on the device; spins
// yield and sleep (platform.h) so hundreds of blocks fit on a few cores.
// Driven from Python through ctypes (msccl_py/runtime/cupy/emulation.py).
#include <cstdio>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "interp.h"

namespace {

char g_error[512];

template <class T, class Op>
int launch(const long long* P, int nblocks, int threads) {
  std::vector<std::unique_ptr<msccl::BlockShared>> smem;
  std::vector<std::unique_ptr<std::barrier<>>> bars;
  smem.reserve(nblocks);
  bars.reserve(nblocks);
  for (int b = 0; b < nblocks; b++) {
    smem.emplace_back(new msccl::BlockShared());
    bars.emplace_back(new std::barrier<>(threads));
  }
  std::vector<std::thread> pool;
  pool.reserve((size_t)nblocks * threads);
  try {
    for (int b = 0; b < nblocks; b++)
      for (int t = 0; t < threads; t++)
        pool.emplace_back([=, &smem, &bars] {
          msccl::emu::ctx = {t, threads, b, smem[b].get(), bars[b].get()};
          msccl::interp<T, Op, msccl::ScopeGpu>(P);
        });
  } catch (const std::exception& e) {
    // Could not start every block: abort the started ones through the
    // watchdog word so they return, then report.
    unsigned long long* err = reinterpret_cast<unsigned long long*>(P[msccl::P_ERR]);
    msccl::atomic_cas(err, 0, 3);
    for (auto& th : pool) th.join();
    std::snprintf(g_error, sizeof g_error, "could not start %d emulated blocks x %d threads: %s",
                  nblocks, threads, e.what());
    return -1;
  }
  for (auto& th : pool) th.join();
  return 0;
}

template <class T>
int by_op(int op, const long long* P, int nblocks, int threads) {
  switch (op) {
    case 0: return launch<T, msccl::OpSum>(P, nblocks, threads);
    case 1: return launch<T, msccl::OpProd>(P, nblocks, threads);
    case 2: return launch<T, msccl::OpMax>(P, nblocks, threads);
    case 3: return launch<T, msccl::OpMin>(P, nblocks, threads);
  }
  std::snprintf(g_error, sizeof g_error, "unknown reduction op code %d", op);
  return -1;
}

}  // namespace

extern "C" {

// dtype codes follow msccl_py/runtime/cupy/kernel_source.py DTYPES; op codes OPS.
int msccl_emu_run(int dtype, int op, const long long* P, int nblocks, int threads) {
  if (nblocks <= 0 || threads <= 0) {
    std::snprintf(g_error, sizeof g_error, "bad launch: %d blocks x %d threads", nblocks, threads);
    return -1;
  }
  switch (dtype) {
    case 0: return by_op<msccl::half_t>(op, P, nblocks, threads);
    case 1: return by_op<msccl::bf16_t>(op, P, nblocks, threads);
    case 2: return by_op<float>(op, P, nblocks, threads);
    case 3: return by_op<double>(op, P, nblocks, threads);
    case 4: return by_op<int>(op, P, nblocks, threads);
    case 5: return by_op<long long>(op, P, nblocks, threads);
    case 6: return by_op<unsigned char>(op, P, nblocks, threads);
  }
  std::snprintf(g_error, sizeof g_error, "unknown dtype code %d", dtype);
  return -1;
}

const char* msccl_emu_error() { return g_error; }

int msccl_emu_params() { return msccl::NPARAMS; }
}
