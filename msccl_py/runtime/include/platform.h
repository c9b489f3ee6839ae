// Platform layer of the MSCCL interpreter: the only header with #ifdefs.
//
// The interpreter (cupy/kernel/interp.h) is written once against these helpers. Under
// nvcc/NVRTC they are inline PTX with the scope the template asks for; under
// g++ they map to std::atomic_ref and std::barrier so the same source runs
// one OS thread per emulated CUDA thread (see cupy/kernel/emulation.cpp), and spins yield
// instead of burning the CPU.
#pragma once

#ifdef __CUDACC__
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#define MSCCL_DEV __device__ __forceinline__
#define MSCCL_HOSTDEV __host__ __device__ __forceinline__
#define MSCCL_SHARED(type, name) __shared__ type name
// polls between watchdog/abort checks
#define MSCCL_POLL_MASK 1023u
#else
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#define MSCCL_DEV inline
#define MSCCL_HOSTDEV inline
#define MSCCL_SHARED(type, name) type& name = *static_cast<type*>(msccl::emu::ctx.smem)
#define MSCCL_POLL_MASK 7u
#endif

namespace msccl {

typedef unsigned long long u64;
typedef long long i64;

struct ScopeGpu {};
struct ScopeSys {};

#ifdef __CUDACC__

typedef __half half_t;
typedef __nv_bfloat16 bf16_t;
typedef uint4 pack16_t;

MSCCL_DEV int thread_idx() { return threadIdx.x; }
MSCCL_DEV int block_threads() { return blockDim.x; }
MSCCL_DEV int block_idx() { return blockIdx.x; }
MSCCL_DEV void block_barrier() { __syncthreads(); }

MSCCL_DEV u64 ld_acquire(ScopeGpu, const u64* p) {
  u64 v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
MSCCL_DEV u64 ld_acquire(ScopeSys, const u64* p) {
  u64 v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// Release a counter after the block's data: fence.acq_rel then a relaxed store
// (cumulative over the barrier that precedes it), as NCCL posts its tail.
MSCCL_DEV void post(ScopeGpu, u64* p, u64 v) {
  asm volatile("fence.acq_rel.gpu;\n\tst.relaxed.gpu.global.u64 [%0], %1;"
               :: "l"(p), "l"(v) : "memory");
}
MSCCL_DEV void post(ScopeSys, u64* p, u64 v) {
  asm volatile("fence.acq_rel.sys;\n\tst.relaxed.sys.global.u64 [%0], %1;"
               :: "l"(p), "l"(v) : "memory");
}
MSCCL_DEV u64 atomic_cas(u64* p, u64 expected, u64 desired) {
  return atomicCAS(p, expected, desired);
}
MSCCL_DEV void st_plain(u64* p, u64 v) { *(volatile u64*)p = v; }
MSCCL_DEV u64 ld_plain(const u64* p) { return *(const volatile u64*)p; }
MSCCL_DEV u64 now_ns() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
MSCCL_DEV void spin_pause(unsigned) {}
// The device watchdog times each wait on its own (a counter every block
// bumps would cost an atomic per post); see the host version below.
MSCCL_DEV u64 progress_stamp() { return 0; }

// Data written by other blocks or GPUs is read through L2 (no stale L1).
MSCCL_DEV pack16_t ld_pack(const void* p) { return __ldcg(static_cast<const uint4*>(p)); }
MSCCL_DEV void st_pack(void* p, pack16_t v) { __stcg(static_cast<uint4*>(p), v); }
template <class T> MSCCL_DEV T ld_elem(const T* p) {
  if constexpr (sizeof(T) == 1) {
    unsigned char b = __ldcg(reinterpret_cast<const unsigned char*>(p));
    return *reinterpret_cast<T*>(&b);
  } else if constexpr (sizeof(T) == 2) {
    unsigned short b = __ldcg(reinterpret_cast<const unsigned short*>(p));
    return *reinterpret_cast<T*>(&b);
  } else if constexpr (sizeof(T) == 4) {
    unsigned int b = __ldcg(reinterpret_cast<const unsigned int*>(p));
    return *reinterpret_cast<T*>(&b);
  } else {
    unsigned long long b = __ldcg(reinterpret_cast<const unsigned long long*>(p));
    return *reinterpret_cast<T*>(&b);
  }
}
template <class T> MSCCL_DEV void st_elem(T* p, T v) { *p = v; }

#else  // host emulation

namespace emu {
// Per-OS-thread view of "which CUDA thread am I".
struct Ctx {
  int tid = 0;
  int nthreads = 1;
  int bid = 0;
  void* smem = nullptr;
  std::barrier<>* bar = nullptr;
};
inline thread_local Ctx ctx;
// Bumped by every post: the emulated watchdog only fires when no block at
// all has moved, so an overloaded host does not fake a deadlock.
inline std::atomic<u64> progress{0};
}  // namespace emu

// Software 16-bit floats; arithmetic goes through float and rounds back.
struct half_t { uint16_t bits; };
struct bf16_t { uint16_t bits; };
struct alignas(16) pack16_t { uint32_t x, y, z, w; };

inline float bits_to_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t float_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float to_float(half_t h) {
  uint32_t s = (uint32_t)(h.bits & 0x8000u) << 16, e = (h.bits >> 10) & 0x1f, m = h.bits & 0x3ff;
  if (e == 0x1f) return bits_to_float(s | 0x7f800000u | (m << 13));
  if (e == 0) {
    float v = (float)m * (1.0f / 16777216.0f);  // m * 2^-24
    return s ? -v : v;
  }
  return bits_to_float(s | ((e + 112) << 23) | (m << 13));
}
inline half_t to_half(float f) {
  uint32_t u = float_to_bits(f), s = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return {(uint16_t)(s | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u))};
  if (a >= 0x477ff000u) return {(uint16_t)(s | 0x7c00u)};  // rounds to infinity
  if (a < 0x38800000u) {  // subnormal half: round(|f| * 2^24) to nearest even
    float v = bits_to_float(a) * 16777216.0f;
    uint32_t q = (uint32_t)v;
    float r = v - (float)q;
    if (r > 0.5f || (r == 0.5f && (q & 1u))) q++;
    return {(uint16_t)(s | q)};
  }
  uint32_t e = (a >> 23) - 112, m = a & 0x7fffffu;
  uint32_t h = (e << 10) | (m >> 13), rest = m & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
  return {(uint16_t)(s | h)};
}
inline float to_float(bf16_t b) { return bits_to_float((uint32_t)b.bits << 16); }
inline bf16_t to_bf16(float f) {
  uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {(uint16_t)((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {(uint16_t)(u >> 16)};
}

MSCCL_DEV int thread_idx() { return emu::ctx.tid; }
MSCCL_DEV int block_threads() { return emu::ctx.nthreads; }
MSCCL_DEV int block_idx() { return emu::ctx.bid; }
MSCCL_DEV void block_barrier() {
  if (emu::ctx.nthreads > 1) emu::ctx.bar->arrive_and_wait();
}

template <class S> MSCCL_DEV u64 ld_acquire(S, const u64* p) {
  return std::atomic_ref<u64>(*const_cast<u64*>(p)).load(std::memory_order_acquire);
}
template <class S> MSCCL_DEV void post(S, u64* p, u64 v) {
  std::atomic_ref<u64>(*p).store(v, std::memory_order_release);
  emu::progress.fetch_add(1, std::memory_order_relaxed);
}
MSCCL_DEV u64 progress_stamp() { return emu::progress.load(std::memory_order_relaxed); }
MSCCL_DEV u64 atomic_cas(u64* p, u64 expected, u64 desired) {
  std::atomic_ref<u64>(*p).compare_exchange_strong(expected, desired, std::memory_order_acq_rel);
  return expected;
}
MSCCL_DEV void st_plain(u64* p, u64 v) {
  std::atomic_ref<u64>(*p).store(v, std::memory_order_release);
}
MSCCL_DEV u64 ld_plain(const u64* p) {
  return std::atomic_ref<u64>(*const_cast<u64*>(p)).load(std::memory_order_acquire);
}
MSCCL_DEV u64 now_ns() {
  return (u64)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
// Hundreds of emulated blocks share two cores: yield first, then sleep.
MSCCL_DEV void spin_pause(unsigned polls) {
  if (polls < 8) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(polls < 64 ? 20 : 200));
}

MSCCL_DEV pack16_t ld_pack(const void* p) { pack16_t v; std::memcpy(&v, p, 16); return v; }
MSCCL_DEV void st_pack(void* p, pack16_t v) { std::memcpy(p, &v, 16); }
template <class T> MSCCL_DEV T ld_elem(const T* p) { return *p; }
template <class T> MSCCL_DEV void st_elem(T* p, T v) { *p = v; }

#endif

}  // namespace msccl
