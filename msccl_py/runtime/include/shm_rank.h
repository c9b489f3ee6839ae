// What the shm runtime's native executors share: the arena's control words, the
// wake-up protocol (Rank::drive), call entry and the peer barrier, and NumPy-exact
// element arithmetic. Included by shm_exec.cpp (MSCCL XML) and plan_exec.cpp
// (MSCCL++ plans); each builds into its own library.
#pragma once

#include <semaphore.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ops.h"

namespace {

using msccl::i64;
using msccl::u64;

enum : int {
  C_BASE = 0, C_BUF0, C_BUF1, C_BUF2, C_TBS, C_STEPS, C_DEPS, C_STATE, C_SEMS, C_VERIFIED,
  C_S, C_NITER, C_L, C_MAC, C_CAP, C_M, C_NTB, C_SLOT, C_RANK, C_WORLD, C_SPIN_NS,
  C_TIMEOUT_NS, C_PARENT, C_HIST, C_DESC_WORDS, C_OUT_PEER, C_ENTER, C_PEERS,
};
enum : int { P_SEQ = 0, P_DESC0, P_DONE, P_SLEEP, P_WORDS };
enum : int { RC_DONE = 0, RC_ABORT, RC_DEADLOCK, RC_PARENT, RC_PEER };
constexpr i64 WAIT_SLICE_NS = 100000000;

inline i64 load(const i64* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void store(i64* p, i64 v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
inline void fence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline i64 bit(i64 rank) { return (i64)1 << (rank < 62 ? rank : 62); }
inline i64 now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (i64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// Big writes into the caller's arrays bypass the cache (non-temporal stores):
// the executor does not read them back soon, and skipping the read-for-
// ownership of every line cuts a large call's memory traffic by about a
// third. FIFO slots keep normal stores: the peer reads them next.
constexpr i64 STREAM_MIN_BYTES = 1 << 18;
constexpr i64 STREAM_BLOCK_BYTES = 4096;

inline void stream_bytes(char* d, const char* s, i64 n) {
#if defined(__SSE2__)
  for (; n > 0 && (reinterpret_cast<std::uintptr_t>(d) & 15); n--) *d++ = *s++;
  const i64 k = n / 16;
  for (i64 i = 0; i < k; i++)
    _mm_stream_si128(reinterpret_cast<__m128i*>(d) + i,
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s) + i));
  d += k * 16, s += k * 16, n -= k * 16;
  for (; n > 0; n--) *d++ = *s++;
#else
  std::memcpy(d, s, (size_t)n);
#endif
}

inline void stream_done() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

template <class T> inline bool is_nan(T x) {
  if constexpr (std::is_same_v<T, msccl::half_t> || std::is_same_v<T, msccl::bf16_t>)
    return std::isnan(msccl::to_float(x));
  else if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}

// NumPy's ufuncs: maximum/minimum propagate a NaN operand, the rest is ops.h.
template <class T, class Op> struct NpOp {
  static inline T apply(T a, T b) {
    if constexpr (std::is_same_v<Op, msccl::OpMax> || std::is_same_v<Op, msccl::OpMin>) {
      if (is_nan(a)) return a;
      if (is_nan(b)) return b;
    }
    return msccl::Reduce<T, Op>::apply(a, b);
  }
};


// What every wait needs: the arena, the peers' descriptors and doorbells.
struct Rank {
  i64* c;
  i64* w;
  char* base;
  i64* verified;
  sem_t** sems;
  i64 rank, seq, me;
  i64 desc[7];

  // The call is the one this rank entered last: its number and descriptor
  // come from the rank's own slot in the arena.
  explicit Rank(i64* ctl) : c(ctl) {
    base = reinterpret_cast<char*>(c[C_BASE]);
    w = reinterpret_cast<i64*>(base);
    verified = reinterpret_cast<i64*>(c[C_VERIFIED]);
    sems = reinterpret_cast<sem_t**>(c[C_SEMS]);
    rank = c[C_RANK], me = bit(rank);
    seq = load(w + peer_word(rank, P_SEQ));
    const i64 d = peer_word(rank, P_DESC0) + (seq % c[C_HIST]) * c[C_DESC_WORDS];
    for (int j = 0; j < 7; j++) desc[j] = load(w + d + 1 + j);
  }

  i64 peer_word(i64 p, int k) const { return c[C_PEERS + p * P_WORDS + k]; }

  // True once `p` entered this call with an equal descriptor; anything else
  // that Python must judge (a mismatch, a peer that returned) sets *peer.
  bool peer_ready(i64 p, i64* peer) {
    if (verified[p] >= seq) return true;
    const i64 theirs = load(w + peer_word(p, P_SEQ));
    if (theirs < seq) {
      // returned for good, and not just after entering this call
      if (load(w + peer_word(p, P_DONE)) && load(w + peer_word(p, P_SEQ)) < seq) *peer = p;
      return false;
    }
    const i64 d = peer_word(p, P_DESC0) + (seq % c[C_HIST]) * c[C_DESC_WORDS];
    if (load(w + d) == seq)
      for (int j = 0; j < 7; j++)
        if (load(w + d + 1 + j) != desc[j]) {
          *peer = p;
          return false;
        }
    verified[p] = seq;
    return true;
  }

  // Call step(&moved, &peer) until it returns true. Without progress: poll
  // (yielding) for C_SPIN_NS, then publish mask() as this rank's sleep mask,
  // fence, look once more, and sleep on the semaphore in WAIT_SLICE_NS naps,
  // checking the abort word, the watchdog and the parent between them.
  template <class Step, class Mask>
  int drive(Step step, Mask mask) {
    i64* sleep_w = w + peer_word(rank, P_SLEEP);
    sem_t* sem = sems[rank];
    const i64 spin_ns = c[C_SPIN_NS], timeout = c[C_TIMEOUT_NS];
    i64 published = -1, blocked_since = 0, spin_until = -1;
    int rc = RC_DONE;
    for (;;) {
      bool moved = false;
      i64 peer = -1;
      const bool done = step(&moved, &peer);
      if (peer >= 0) {
        c[C_OUT_PEER] = peer;
        rc = RC_PEER;
        break;
      }
      if (done) break;
      if (moved) {
        if (published >= 0) {
          store(sleep_w, 0);
          published = -1;
        }
        spin_until = -1;
        continue;
      }
      if (load(w)) {
        rc = RC_ABORT;
        break;
      }
      const i64 now = now_ns();
      if (spin_until < 0) spin_until = now + spin_ns;
      if (now < spin_until) {
        sched_yield();
        continue;
      }
      const i64 m = mask();
      if (m != published) {
        // first sleep, or what we wait on changed: publish, fence, look once more
        if (published < 0) blocked_since = now;
        published = m;
        store(sleep_w, m);
        fence();
        while (sem_trywait(sem) == 0) {}
        continue;
      }
      timespec until;
      clock_gettime(CLOCK_REALTIME, &until);
      until.tv_nsec += WAIT_SLICE_NS;
      if (until.tv_nsec >= 1000000000) {
        until.tv_sec += 1;
        until.tv_nsec -= 1000000000;
      }
      while (sem_timedwait(sem, &until) != 0 && errno == EINTR) {}
      if (now_ns() - blocked_since > timeout) {
        rc = RC_DEADLOCK;
        break;
      }
      if (getppid() != c[C_PARENT]) {
        rc = RC_PARENT;
        break;
      }
    }
    store(sleep_w, 0);
    return rc;
  }

  // Wait until every peer has entered this call; ctl[C_STATE] gets who is missing (1 each).
  int barrier() {
    const i64 n = c[C_WORLD];
    std::vector<i64> pending;
    for (i64 p = 0; p < n; p++)
      if (p != rank) pending.push_back(p);
    const int rc = drive(
        [&](bool* moved, i64* peer) {
          while (!pending.empty() && peer_ready(pending.back(), peer)) {
            pending.pop_back();
            *moved = true;
          }
          return pending.empty();
        },
        [&] {
          i64 m = 0;
          for (i64 p : pending) m |= bit(p);
          return m;
        });
    i64* out = reinterpret_cast<i64*>(c[C_STATE]);
    for (i64 p = 0; p < n; p++) out[p] = 0;
    for (i64 p : pending) out[p] = 1;
    return rc;
  }
};

// RankRuntime.enter in compiled code: publish call seq+1 with the descriptor at
// ctl[C_ENTER], fence, and post every peer that sleeps waiting on this rank.
int enter_call(i64* c) {
  i64* w = reinterpret_cast<i64*>(c[C_BASE]);
  if (load(w)) return RC_ABORT;
  const i64 rank = c[C_RANK], me = bit(rank), n = c[C_WORLD];
  const i64* word = c + C_PEERS;
  const i64 seq = load(w + word[rank * P_WORDS + P_SEQ]) + 1;
  const i64* desc = reinterpret_cast<const i64*>(c[C_ENTER]);
  const i64 d = word[rank * P_WORDS + P_DESC0] + (seq % c[C_HIST]) * c[C_DESC_WORDS];
  for (int j = 0; j < 7; j++) store(w + d + 1 + j, desc[j]);
  store(w + d, seq);
  store(w + word[rank * P_WORDS + P_SEQ], seq);
  fence();
  sem_t** sems = reinterpret_cast<sem_t**>(c[C_SEMS]);
  for (i64 p = 0; p < n; p++)
    if (p != rank && (load(w + word[p * P_WORDS + P_SLEEP]) & me)) sem_post(sems[p]);
  return RC_DONE;
}

}  // namespace
