// Persistent MSCCL interpreter: one CUDA block runs one XML threadblock.
//
// Every block loops over pipeline iterations and runs its whole step list
// once per iteration, as the MSCCL runtimes do. Each send/recv-type step is
// one primitive call per group of at most `maxAllowedCount` chunks; a call
// moves through the connection's 8-slot FIFO in `slicesPerCall` slices of
// `stepsPerSlice` slots (Simple: 2 x 2, LL/LL128: 1 x 1), waiting on the
// receiver-side tail / sender-side head counters exactly like NCCL's Simple
// transport. Dependencies are u64 flags (epoch, iteration, step) published
// with release semantics after each step that has dependents.
//
// Tables (all packed by msccl_py/runtime/cupy/packer.py; keep in sync):
//   P[NPARAMS] (i64)        parameters and table pointers, indices P_* below
//   blocks[B][8] (i32)      rank, tb, channel, sendConn, recvConn, stepBegin, nSteps, flagIdx
//   steps[*][8] (i32)       op | srcBuf<<4 | dstBuf<<6 | nRed<<8, srcOff, dstOff, cnt,
//                           depBegin, nDeps, publish (IR step index or -1), redBegin
//   deps[*][2] (i32)        flag index, IR step index waited for
//   reds[*] (i32)           source chunk offsets of a fused `re`
//   bufs[R][3] (u64)        input, output, scratch base addresses per rank
//   conns[C][CONN_WORDS]    FIFO base, tail*, head*, sendStep*, recvStep*
//   flags[F] (u64)          one per block, never reset between calls (epoch-tagged)
//   err[ERR_WORDS] (u64)    watchdog record; err[0] != 0 means aborted
//   waits[B][WAIT_WORDS]    every block's pending wait at the abort (kind 0: none)
// A wait that exceeds P[P_WATCHDOG] ns claims err[0], records who waited on
// what, and every block returns cleanly (no trap, so the context survives).
#pragma once
#include "ops.h"

namespace msccl {

enum : int {
  P_S = 0, P_ITER_ELEMS, P_NITER, P_SLOT_ELEMS, P_SLICES, P_STEPS_PER_SLICE, P_MAX_COUNT,
  P_NBLOCKS, P_EPOCH, P_WATCHDOG, P_BLOCKS, P_STEPS, P_DEPS, P_REDS, P_BUFS, P_CONNS,
  P_FLAGS, P_ERR, P_NSLOTS, P_BLOCK_BASE, P_WAITS, NPARAMS
};
enum : int { OP_SEND = 1, OP_RECV, OP_RCS, OP_RRS, OP_RRC, OP_RRCS, OP_COPY, OP_REDUCE };
enum : int { WAIT_DEP = 1, WAIT_RECV = 2, WAIT_SEND = 3 };
enum : int {
  ERR_ABORT = 0, ERR_BLOCK, ERR_STEP, ERR_ITER, ERR_KIND, ERR_TARGET, ERR_SEEN, ERR_WANTED,
  ERR_SLICE, ERR_WORDS = 16
};
// waits[B][WAIT_WORDS] (u64): what each block was waiting on when the call aborted
enum : int { W_KIND = 0, W_STEP, W_ITER, W_TARGET, W_SEEN, W_WANTED, W_SLICE, WAIT_WORDS = 8 };
enum : int { CONN_FIFO = 0, CONN_TAIL, CONN_HEAD, CONN_SEND_STEP, CONN_RECV_STEP, CONN_WORDS = 8 };
enum : int { STEP_WORDS = 8, BLOCK_WORDS = 8, MAX_SMEM_STEPS = 256 };
constexpr int UNROLL = 2;

MSCCL_HOSTDEV u64 make_flag(u64 epoch, u64 iter, u64 s) { return (epoch << 44) | (iter << 16) | s; }

// Block-invariant state lives in shared memory, not registers, so the copy
// loops keep their registers (the kernel must stay within 64 per thread).
struct BlockState {
  const int* steps;
  const int* deps;
  const int* reds;
  u64* flags;
  u64* err;
  u64* waits;
  void* buf[3];
  void* sendFifo;
  u64 *sendTail, *sendHead, *sendStepPtr;
  void* recvFifo;
  u64 *recvTail, *recvHead, *recvStepPtr;
  i64 S, iterElems, nIter, slotElems;
  u64 epoch, nslots, watchdog, blockId;
  int nSteps, flagIdx, slices, sps, maxCount;
  // FIFO positions; only thread 0 writes them, others read after a barrier
  u64 sendStep, recvStep;
  // where thread 0 is, for the watchdog record
  int curStep, curSlice;
  i64 curIter;
  int abort;
};

struct BlockShared {
  int steps[MAX_SMEM_STEPS * STEP_WORDS];
  BlockState st;
};

MSCCL_DEV bool aligned16(const void* p) { return ((unsigned long long)p & 15ull) == 0; }

// d0 (and d1 when given) <- s0 (+ s1 when given), n elements: 16-byte packs
// with UNROLL packs in flight per thread, element-wise when any pointer is
// misaligned. Which operands exist is uniform across the block.
template <class T, class Op>
MSCCL_DEV void reduce_copy(const T* s0, const T* s1, T* d0, T* d1, i64 n) {
  const int tid = thread_idx(), nt = block_threads();
  constexpr int EPP = 16 / sizeof(T);
  const bool vec = aligned16(s0) && aligned16(d0) && aligned16(s1) && aligned16(d1);
  i64 done = 0;
  if (vec) {
    // a call moves at most a few MiB, so pack indices fit in 32 bits
    const int npacks = (int)(n / EPP);
    const pack16_t* a = reinterpret_cast<const pack16_t*>(s0);
    const pack16_t* b = reinterpret_cast<const pack16_t*>(s1);
    pack16_t* c = reinterpret_cast<pack16_t*>(d0);
    pack16_t* d = reinterpret_cast<pack16_t*>(d1);
    for (int base = tid; base < npacks; base += nt * UNROLL) {
      pack16_t acc[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; u++)
        if (base + u * nt < npacks) acc[u] = ld_pack(a + base + u * nt);
      if (b) {
        pack16_t v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
          if (base + u * nt < npacks) v[u] = ld_pack(b + base + u * nt);
#pragma unroll
        for (int u = 0; u < UNROLL; u++) acc[u] = ReducePack<T, Op>::apply(acc[u], v[u]);
      }
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        if (base + u * nt < npacks) {
          st_pack(c + base + u * nt, acc[u]);
          if (d) st_pack(d + base + u * nt, acc[u]);
        }
      }
    }
    done = (i64)npacks * EPP;
  }
  for (i64 i = done + tid; i < n; i += nt) {
    T x = ld_elem(s0 + i);
    if (s1) x = Reduce<T, Op>::apply(x, ld_elem(s1 + i));
    st_elem(d0 + i, x);
    if (d1) st_elem(d1 + i, x);
  }
}

// Fused `re`: dst <- src_0 (+) ... (+) src_{nr-1} (+) dst, where
// src_r = base + offs[r] * S + add; one pass, dst read and written once.
template <class T, class Op>
MSCCL_DEV void reduce_multi(const T* base, const int* offs, int nr, i64 S, i64 add, T* dst, i64 n) {
  const int tid = thread_idx(), nt = block_threads();
  constexpr int EPP = 16 / sizeof(T);
  bool vec = aligned16(dst);
  for (int r = 0; r < nr; r++) vec = vec && aligned16(base + (i64)offs[r] * S + add);
  i64 done = 0;
  if (vec) {
    const i64 npacks = n / EPP;
    for (i64 b0 = tid; b0 < npacks; b0 += (i64)nt * UNROLL) {
      pack16_t acc[UNROLL];
#pragma unroll 1
      for (int r = 0; r <= nr; r++) {
        const T* src = r < nr ? base + (i64)offs[r] * S + add : dst;
        pack16_t v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
          const i64 i = b0 + (i64)u * nt;
          if (i < npacks) v[u] = ld_pack(src + i * EPP);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
          const i64 i = b0 + (i64)u * nt;
          if (i < npacks) acc[u] = r == 0 ? v[u] : ReducePack<T, Op>::apply(acc[u], v[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        const i64 i = b0 + (i64)u * nt;
        if (i < npacks) st_pack(dst + i * EPP, acc[u]);
      }
    }
    done = npacks * EPP;
  }
  for (i64 i = done + tid; i < n; i += nt) {
    T a = ld_elem(base + (i64)offs[0] * S + add + i);
#pragma unroll 1
    for (int r = 1; r < nr; r++) a = Reduce<T, Op>::apply(a, ld_elem(base + (i64)offs[r] * S + add + i));
    st_elem(dst + i, Reduce<T, Op>::apply(a, ld_elem(dst + i)));
  }
}

template <class T, class Op, class Scope>
struct Interp {
  BlockState& b;
  int tid;

  MSCCL_DEV Interp(const i64* P, BlockShared& sh) : b(sh.st) {
    tid = thread_idx();
    const int nt = block_threads();
    const int* blk = reinterpret_cast<const int*>(P[P_BLOCKS]) + block_idx() * BLOCK_WORDS;
    const int rank = blk[0], sendConn = blk[3], recvConn = blk[4], stepBegin = blk[5];
    const int nSteps = blk[6];
    const int* gsteps = reinterpret_cast<const int*>(P[P_STEPS]) + (i64)stepBegin * STEP_WORDS;
    if (nSteps <= MAX_SMEM_STEPS)
      for (int i = tid; i < nSteps * STEP_WORDS; i += nt) sh.steps[i] = gsteps[i];
    const u64* conns = reinterpret_cast<const u64*>(P[P_CONNS]);
    const u64* sc = sendConn >= 0 ? conns + (i64)sendConn * CONN_WORDS : nullptr;
    const u64* rc = recvConn >= 0 ? conns + (i64)recvConn * CONN_WORDS : nullptr;
    if (tid == 0) {
      b.sendStep = sc ? ld_plain(reinterpret_cast<u64*>(sc[CONN_SEND_STEP])) : 0;
      b.recvStep = rc ? ld_plain(reinterpret_cast<u64*>(rc[CONN_RECV_STEP])) : 0;
      b.steps = nSteps <= MAX_SMEM_STEPS ? sh.steps : gsteps;
      b.deps = reinterpret_cast<const int*>(P[P_DEPS]);
      b.reds = reinterpret_cast<const int*>(P[P_REDS]);
      b.flags = reinterpret_cast<u64*>(P[P_FLAGS]);
      b.err = reinterpret_cast<u64*>(P[P_ERR]);
      b.waits = reinterpret_cast<u64*>(P[P_WAITS]) + (i64)block_idx() * WAIT_WORDS;
      const u64* bp = reinterpret_cast<const u64*>(P[P_BUFS]) + rank * 3;
      for (int k = 0; k < 3; k++) b.buf[k] = reinterpret_cast<void*>(bp[k]);
      b.sendFifo = sc ? reinterpret_cast<void*>(sc[CONN_FIFO]) : nullptr;
      b.sendTail = sc ? reinterpret_cast<u64*>(sc[CONN_TAIL]) : nullptr;
      b.sendHead = sc ? reinterpret_cast<u64*>(sc[CONN_HEAD]) : nullptr;
      b.sendStepPtr = sc ? reinterpret_cast<u64*>(sc[CONN_SEND_STEP]) : nullptr;
      b.recvFifo = rc ? reinterpret_cast<void*>(rc[CONN_FIFO]) : nullptr;
      b.recvTail = rc ? reinterpret_cast<u64*>(rc[CONN_TAIL]) : nullptr;
      b.recvHead = rc ? reinterpret_cast<u64*>(rc[CONN_HEAD]) : nullptr;
      b.recvStepPtr = rc ? reinterpret_cast<u64*>(rc[CONN_RECV_STEP]) : nullptr;
      b.S = P[P_S];
      b.iterElems = P[P_ITER_ELEMS];
      b.nIter = P[P_NITER];
      b.slotElems = P[P_SLOT_ELEMS];
      b.epoch = (u64)P[P_EPOCH];
      b.nslots = (u64)P[P_NSLOTS];
      b.watchdog = (u64)P[P_WATCHDOG];
      b.blockId = (u64)(P[P_BLOCK_BASE] + block_idx());
      b.nSteps = nSteps;
      b.flagIdx = blk[7];
      b.slices = (int)P[P_SLICES];
      b.sps = (int)P[P_STEPS_PER_SLICE];
      b.maxCount = (int)P[P_MAX_COUNT];
      b.curStep = b.curSlice = 0;
      b.curIter = 0;
      b.abort = 0;
    }
    block_barrier();
  }

  MSCCL_DEV T* buffer(int k) const { return static_cast<T*>(b.buf[k]); }

  // Record this block's unmet wait for the host's report; always false.
  MSCCL_DEV bool note_wait(int kind, int target, u64 seen, u64 wanted) {
    u64* w = b.waits;
    w[W_STEP] = (u64)b.curStep;
    w[W_ITER] = (u64)b.curIter;
    w[W_TARGET] = (u64)target;
    w[W_SEEN] = seen;
    w[W_WANTED] = wanted;
    w[W_SLICE] = (u64)b.curSlice;
    w[W_KIND] = (u64)kind;
    return false;
  }

  // Spin (thread 0 only) until *p >= wanted; false when this or another block aborted.
  template <class WS>
  MSCCL_DEV bool wait_geq(WS scope, const u64* p, u64 wanted, int kind, int target) {
    u64 v = ld_acquire(scope, p);
    if (v >= wanted) return true;
    u64* err = b.err;
    u64 start = now_ns(), seen = progress_stamp();
    for (unsigned polls = 1;; polls++) {
      v = ld_acquire(scope, p);
      if (v >= wanted) return true;
      if ((polls & MSCCL_POLL_MASK) == 0) {
        if (ld_plain(err + ERR_ABORT) != 0) return note_wait(kind, target, v, wanted);
        const u64 t = now_ns(), moved = progress_stamp();
        if (moved != seen) {
          seen = moved;
          start = t;
        }
        if (t - start > b.watchdog) {
          if (atomic_cas(err + ERR_ABORT, 0, 1) == 0) {
            err[ERR_BLOCK] = b.blockId;
            err[ERR_STEP] = (u64)b.curStep;
            err[ERR_ITER] = (u64)b.curIter;
            err[ERR_KIND] = (u64)kind;
            err[ERR_TARGET] = (u64)target;
            err[ERR_SEEN] = v;
            err[ERR_WANTED] = wanted;
            err[ERR_SLICE] = (u64)b.curSlice;
            st_plain(err + ERR_ABORT, 2);
          }
          return note_wait(kind, target, v, wanted);
        }
      }
      spin_pause(polls);
    }
  }

  // One primitive call of n elements through the FIFO(s); false on abort.
  // Block parameters are re-read from shared memory after each barrier so
  // that little stays live across the copy loop.
  MSCCL_DEV bool fifo_call(int op, const T* src, T* dst, i64 n) {
    for (int k = 0; k < b.slices; k++) {
      const bool isSend = op == OP_SEND || op == OP_RCS || op == OP_RRS || op == OP_RRCS;
      const bool isRecv = op != OP_SEND;
      if (tid == 0) {
        b.curSlice = k;
        bool ok = true;
        if (isRecv) ok = wait_geq(Scope(), b.recvTail, b.recvStep + b.sps, WAIT_RECV, 0);
        if (ok && isSend) {
          const u64 need = b.sendStep + b.sps;
          ok = wait_geq(Scope(), b.sendHead, need > b.nslots ? need - b.nslots : 0, WAIT_SEND, 0);
        }
        if (!ok) b.abort = 1;
      }
      block_barrier();
      if (b.abort) return false;
      i64 sliceLen = (n + b.slices - 1) / b.slices;
      sliceLen = (sliceLen + 15) / 16 * 16;
      if (sliceLen > (i64)b.sps * b.slotElems) sliceLen = (i64)b.sps * b.slotElems;
      const i64 off = (i64)k * sliceLen;
      const i64 len = n - off < sliceLen ? n - off : sliceLen;
      if (len > 0) {
        const T* in = static_cast<const T*>(b.recvFifo) + (i64)(b.recvStep % b.nslots) * b.slotElems;
        T* out = static_cast<T*>(b.sendFifo) + (i64)(b.sendStep % b.nslots) * b.slotElems;
        // operands: received data first, then the local source (NCCL's order)
        const bool reduces = op == OP_RRS || op == OP_RRC || op == OP_RRCS;
        const bool stores = op == OP_RECV || op == OP_RCS || op == OP_RRC || op == OP_RRCS;
        const T* x = isRecv ? in : src + off;
        const T* y = reduces ? src + off : nullptr;
        T* d = stores ? dst + off : out;
        T* e = stores && isSend ? out : nullptr;
        reduce_copy<T, Op>(x, y, d, e, len);
      }
      block_barrier();
      if (tid == 0) {
        if (isSend) {
          post(Scope(), b.sendTail, b.sendStep + b.sps);
          b.sendStep += b.sps;
        }
        if (isRecv) {
          post(Scope(), b.recvHead, b.recvStep + b.sps);
          b.recvStep += b.sps;
        }
      }
    }
    return true;
  }

  // Thread 0 waits for every dependency of step st; false on abort.
  MSCCL_DEV bool wait_deps(const int* st, i64 iter) {
    const int depBegin = st[4], nDeps = st[5];
    if (nDeps == 0) return true;
    if (tid == 0) {
      const int* deps = b.deps;
      for (int d = 0; d < nDeps; d++) {
        const int f = deps[2 * (depBegin + d)], s = deps[2 * (depBegin + d) + 1];
        if (!wait_geq(ScopeGpu(), b.flags + f, make_flag(b.epoch, (u64)iter, (u64)s), WAIT_DEP, f)) {
          b.abort = 1;
          break;
        }
      }
    }
    block_barrier();
    return !b.abort;
  }

  MSCCL_DEV bool run() {
    for (i64 iter = 0; iter < b.nIter; iter++) {
      for (int i = 0; i < b.nSteps; i++) {
        if (tid == 0) {
          b.curStep = i;
          b.curIter = iter;
          b.curSlice = 0;
        }
        const int* st = b.steps + i * STEP_WORDS;
        if (!wait_deps(st, iter)) return false;
        for (int c = 0; c < st[3]; c += b.maxCount) {
          const int w0 = st[0];
          const int op = w0 & 15, srcBuf = (w0 >> 4) & 3, dstBuf = (w0 >> 6) & 3;
          const i64 S = b.S, gridOffset = iter * b.iterElems;
          const i64 nelem = S - gridOffset < b.iterElems ? S - gridOffset : b.iterElems;
          const int thisCount = st[3] - c < b.maxCount ? st[3] - c : b.maxCount;
          const i64 n = nelem * thisCount;
          const i64 add = (i64)c * S + gridOffset;
          const T* src = buffer(srcBuf) + (i64)st[1] * S + add;
          T* dst = buffer(dstBuf) + (i64)st[2] * S + add;
          if (op == OP_COPY) {
            reduce_copy<T, Op>(src, nullptr, dst, nullptr, n);
            block_barrier();
          } else if (op == OP_REDUCE) {
            reduce_multi<T, Op>(buffer(srcBuf), b.reds + st[7], (w0 >> 8) & 255, S, add, dst, n);
            block_barrier();
          } else if (!fifo_call(op, src, dst, n)) {
            return false;
          }
        }
        if (st[6] >= 0) {
          block_barrier();
          if (tid == 0)
            post(ScopeGpu(), b.flags + b.flagIdx, make_flag(b.epoch, (u64)iter, (u64)st[6]));
        }
      }
    }
    return true;
  }

  // Persist the FIFO step counters for the next call on these connections.
  MSCCL_DEV void finish() {
    if (tid != 0) return;
    if (b.sendStepPtr) st_plain(b.sendStepPtr, b.sendStep);
    if (b.recvStepPtr) st_plain(b.recvStepPtr, b.recvStep);
  }
};

template <class T, class Op, class Scope>
MSCCL_DEV void interp(const i64* P) {
  MSCCL_SHARED(BlockShared, sh);
  Interp<T, Op, Scope> it(P, sh);
  it.run();
  it.finish();
}

}  // namespace msccl
