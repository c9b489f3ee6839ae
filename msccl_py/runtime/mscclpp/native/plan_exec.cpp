// Native executor of MSCCL++ plans on the shm runtime: one rank's threadblocks, cooperatively,
// in one thread, over the process group's arena.
//
// msccl_py/runtime/mscclpp/shm_program.py flattens the plan (keep the codes and row widths in sync):
// every operand is a byte offset into the arena, where every rank's buffers, LL packet space
// (payload, then one flag byte per element) and signal counters (one int64 per cache line,
// incremented by the one peer at the other end of the channel pair) live. A call clears this
// rank's memory (poison over its buffers but the input, zeros over its flags and counters),
// enters the call and waits for every peer to enter it (shm_rank.h: the XML executor's
// descriptor check and doorbells), then runs the threadblocks until all finish. A threadblock
// runs steps until one blocks: a wait with no signal left on a channel, a barrier or
// semaphore not yet released, LL packets not yet written. Waits poll, then sleep on the
// rank's semaphore with a mask of the peers they wait on (Rank::drive); a rank that signals or
// writes packets to a sleeping peer posts it. Each step reads all its sources before it
// writes (as the reference backend does), reductions use NpOp (NumPy's results bit for bit).
//
//   q[]        Q_* below: table addresses and sizes, state arrays, the poison element
//   tbs[][2]   nsteps, first step
//   steps[][9] kind, act begin, act count, chan begin, chan count, check (or semaphore list)
//              begin, count, barrier slot, barrier threadblocks
//   acts[][6]  mode, src begin, src count, dst begin, dst count, elements
//   srcs[]     payload byte offset
//   dsts[][10] mode, byte offset, elements, flag offset (-1: none), flags to clear (data),
//              clobber offset (-1: none), clobber elements, raw source payload, raw source
//              flags, owner rank
//   chans[][3] counter word index, taken slot (-1 for a signal), peer
//   checks[][2] flag byte offset, elements
//   lists[]    semaphore ids
//   resets[][3] byte offset, bytes, R_ZERO or R_FILL
//   state[][4] out: step, wait kind, detail (channel, check, semaphore or barrier), flags seen
#include <algorithm>

#include "shm_rank.h"

namespace {

enum : int {
  Q_TBS = 0, Q_NTB, Q_STEPS, Q_ACTS, Q_SRCS, Q_DSTS, Q_CHANS, Q_CHECKS, Q_LISTS, Q_RESETS,
  Q_NRESETS, Q_SEM_INIT, Q_NSEMS, Q_TAKEN, Q_NTAKEN, Q_SEMS, Q_BARS, Q_NBARS, Q_STATE, Q_FILL,
  Q_PHASE, Q_WORDS,
};
enum : int { K_NOP = 0, K_DATA, K_SIGNAL, K_WAIT, K_BARRIER, K_SEM_ACQ, K_SEM_REL };
enum : int { A_DIRECT = 0, A_BLOCKS, A_TEMP };
enum : int { D_DATA = 0, D_PKT, D_RAW };
enum : int { R_ZERO = 0, R_FILL };
enum : int { X_NONE = 0, X_SIGNAL, X_PACKETS, X_BARRIER, X_SEMAPHORE };
enum : int { PHASE_ENTER = 0, PHASE_RUN, PHASE_DONE };
constexpr int STEP_W = 9, ACT_W = 6, DST_W = 10, CHAN_W = 3, CHECK_W = 2, RESET_W = 3,
              STATE_W = 4;
constexpr i64 BLOCK_BYTES = 4096;

// n elements of value at d; big ranges with non-temporal stores: the poison is not read
// back soon (the plan overwrites it), and skipping each line's read-for-ownership and its
// stay in the cache makes a 16 MiB call's clearing about three times cheaper
template <class T>
void poison(T* d, i64 n, T value) {
  if (n * (i64)sizeof(T) < STREAM_MIN_BYTES) {
    std::fill_n(d, n, value);
    return;
  }
#if defined(__SSE2__)
  for (; n > 0 && (reinterpret_cast<std::uintptr_t>(d) & 15); n--) *d++ = value;
  alignas(16) T pattern[16 / sizeof(T)];
  std::fill_n(pattern, 16 / sizeof(T), value);
  const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(pattern));
  const i64 k = n * (i64)sizeof(T) / 16;
  for (i64 i = 0; i < k; i++) _mm_stream_si128(reinterpret_cast<__m128i*>(d) + i, v);
  stream_done();
  d += k * 16 / (i64)sizeof(T);
  n -= k * 16 / (i64)sizeof(T);
#endif
  std::fill_n(d, n, value);
}

template <class T>
void clear(char* base, const i64* rows, i64 n, i64 fill_word) {
  T fill;
  std::memcpy(&fill, &fill_word, sizeof(T));
  for (i64 i = 0; i < n; i++) {
    const i64* r = rows + i * RESET_W;
    if (r[2] == R_ZERO) std::memset(base + r[0], 0, (size_t)r[1]);
    else poison(reinterpret_cast<T*>(base + r[0]), r[1] / (i64)sizeof(T), fill);
  }
}

struct PTb {
  i64 nsteps, begin, pos, bar_gen, wait, detail, ci, seen;
};

template <class T, class Op>
struct PlanExec : Rank {
  i64* q;
  const i64 *steps, *acts, *srcs, *dsts, *chans, *checks, *lists;
  i64 *taken, *semv, *bars;
  T fill;
  i64 peers_mask = 0, wake = 0;
  std::vector<PTb> tb;
  std::vector<T> temp;

  PlanExec(i64* ctl, i64* plan) : Rank(ctl), q(plan) {
    steps = reinterpret_cast<const i64*>(q[Q_STEPS]);
    acts = reinterpret_cast<const i64*>(q[Q_ACTS]);
    srcs = reinterpret_cast<const i64*>(q[Q_SRCS]);
    dsts = reinterpret_cast<const i64*>(q[Q_DSTS]);
    chans = reinterpret_cast<const i64*>(q[Q_CHANS]);
    checks = reinterpret_cast<const i64*>(q[Q_CHECKS]);
    lists = reinterpret_cast<const i64*>(q[Q_LISTS]);
    taken = reinterpret_cast<i64*>(q[Q_TAKEN]);
    semv = reinterpret_cast<i64*>(q[Q_SEMS]);
    bars = reinterpret_cast<i64*>(q[Q_BARS]);
    std::memcpy(&fill, &q[Q_FILL], sizeof(T));
    for (i64 p = 0; p < c[C_WORLD]; p++)
      if (p != rank) peers_mask |= bit(p);
    const i64* rows = reinterpret_cast<const i64*>(q[Q_TBS]);
    tb.resize(q[Q_NTB]);
    for (size_t i = 0; i < tb.size(); i++)
      tb[i] = PTb{rows[2 * i], rows[2 * i + 1], 0, -1, X_NONE, 0, 0, 0};
  }

  T* at(i64 off) const { return reinterpret_cast<T*>(base + off); }

  static void move(T* d, const T* s, i64 n) {
    if (n > 0 && d != s) std::memmove(d, s, (size_t)n * sizeof(T));
  }
  // d[i] = a[i] (op) b[i]; d may alias a or b element for element
  static void reduce(T* d, const T* a, const T* b, i64 n) {
    for (i64 i = 0; i < n; i++) d[i] = NpOp<T, Op>::apply(a[i], b[i]);
  }

  void note(i64 peer) {
    if (peer != rank) wake |= bit(peer);
  }

  // Post every peer this rank signalled or wrote packets to that sleeps waiting on it.
  void wake_peers() {
    if (!wake) return;
    fence();
    for (i64 p = 0; p < c[C_WORLD]; p++)
      if ((wake & bit(p)) && (load(w + peer_word(p, P_SLEEP)) & me)) sem_post(sems[p]);
    wake = 0;
  }

  // What follows a destination's payload: packet flags (after a release fence, so a reader
  // that sees them sees the payload), LL scratch's lost packets or overwritten data.
  void finish(const i64* d) {
    if (d[0] == D_DATA) {
      if (d[3] >= 0 && d[4] > 0) std::memset(base + d[3], 0, (size_t)d[4]);
      return;
    }
    __atomic_thread_fence(__ATOMIC_RELEASE);
    if (d[0] == D_RAW) std::memmove(base + d[3], base + d[8], (size_t)d[2]);
    else std::memset(base + d[3], 1, (size_t)d[2]);
    if (d[5] >= 0) std::fill_n(at(d[5]), d[6], fill);
    note(d[9]);
  }

  void act(const i64* a) {
    const i64 mode = a[0], ns = a[2], nd = a[4], n = a[5];
    const i64* S = srcs + a[1];
    const i64* D = dsts + a[3] * DST_W;
    if (mode == A_DIRECT) {
      if (D[0] == D_RAW) move(at(D[1]), at(D[7]), D[2]);
      else if (ns == 1) move(at(D[1]), at(S[0]), D[2]);
      else reduce(at(D[1]), at(S[0]), at(S[1]), D[2]);
      finish(D);
      return;
    }
    if (mode == A_BLOCKS) {
      constexpr i64 B = BLOCK_BYTES / (i64)sizeof(T);
      T tmp[B];
      for (i64 i = 0; i < n; i += B) {
        const i64 b = n - i < B ? n - i : B;
        if (ns == 1) move(tmp, at(S[0]) + i, b);
        else reduce(tmp, at(S[0]) + i, at(S[1]) + i, b);
        for (i64 j = 2; j < ns; j++) reduce(tmp, tmp, at(S[j]) + i, b);
        for (i64 j = 0; j < nd; j++) {
          const i64* d = D + j * DST_W;
          const i64 k = std::min(d[2] - i, b);
          if (k > 0) move(at(d[1]) + i, tmp, k);
        }
      }
    } else {  // A_TEMP: the whole result first, then each destination in order
      temp.resize((size_t)n);
      T* acc = temp.data();
      if (ns == 1) move(acc, at(S[0]), n);
      else reduce(acc, at(S[0]), at(S[1]), n);
      for (i64 j = 2; j < ns; j++) reduce(acc, acc, at(S[j]), n);
      for (i64 j = 0; j < nd; j++) {
        const i64* d = D + j * DST_W;
        move(at(d[1]), acc, d[2]);
        finish(d);
      }
      return;
    }
    for (i64 j = 0; j < nd; j++) finish(D + j * DST_W);
  }

  void signal(const i64* s) {
    for (i64 j = 0; j < s[4]; j++) {
      const i64* ch = chans + (s[3] + j) * CHAN_W;
      __atomic_fetch_add(w + ch[0], 1, __ATOMIC_RELEASE);
      note(ch[2]);
    }
  }

  bool block(PTb& t, int kind, i64 detail) {
    t.wait = kind;
    t.detail = detail;
    return false;
  }

  // Run one step of t if it can; false (with t.wait set) when it blocks.
  bool step(PTb& t, bool* arrived) {
    const i64* s = steps + (t.begin + t.pos) * STEP_W;
    switch (s[0]) {
      case K_WAIT: {
        const i64* ch = chans + s[3] * CHAN_W;
        for (i64 j = 0; j < s[4]; j++)
          if (load(w + ch[j * CHAN_W]) <= taken[ch[j * CHAN_W + 1]]) return block(t, X_SIGNAL, j);
        for (i64 j = 0; j < s[4]; j++) taken[ch[j * CHAN_W + 1]]++;
        break;
      }
      case K_SIGNAL: signal(s); break;
      case K_BARRIER: {
        i64* b = bars + 2 * s[7];
        if (t.bar_gen < 0) {
          t.bar_gen = b[1];
          *arrived = true;
          if (++b[0] >= s[8]) {
            b[0] = 0;
            b[1]++;
          }
        }
        if (b[1] <= t.bar_gen) return block(t, X_BARRIER, s[7]);
        t.bar_gen = -1;
        break;
      }
      case K_SEM_ACQ:
        for (i64 j = 0; j < s[6]; j++)
          if (semv[lists[s[5] + j]] <= 0) return block(t, X_SEMAPHORE, j);
        for (i64 j = 0; j < s[6]; j++) semv[lists[s[5] + j]]--;
        break;
      case K_SEM_REL:
        for (i64 j = 0; j < s[6]; j++) semv[lists[s[5] + j]]++;
        break;
      case K_DATA: {
        for (; t.ci < s[6]; t.ci++, t.seen = 0) {
          const i64* ck = checks + (s[5] + t.ci) * CHECK_W;
          const char* f = base + ck[0];
          const void* z = std::memchr(f + t.seen, 0, (size_t)(ck[1] - t.seen));
          if (z) {
            t.seen = static_cast<const char*>(z) - f;
            return block(t, X_PACKETS, t.ci);
          }
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        for (i64 j = 0; j < s[2]; j++) act(acts + (s[1] + j) * ACT_W);
        if (s[4]) signal(s);
        break;
      }
      default: break;  // K_NOP
    }
    wake_peers();  // at once: a peer asleep on this step's signal or packets waits for no one
    t.pos++;
    t.ci = t.seen = 0;
    t.wait = X_NONE;
    return true;
  }

  bool advance(PTb& t) {
    bool moved = false;
    while (t.pos < t.nsteps) {
      if (!step(t, &moved)) break;
      moved = true;
    }
    return moved;
  }

  // Still waiting for a signal that has not come? (a cheap look before re-entering step)
  bool still_blocked(const PTb& t) const {
    if (t.wait != X_SIGNAL) return false;
    const i64* ch = chans + (steps[(t.begin + t.pos) * STEP_W + 3] + t.detail) * CHAN_W;
    return load(w + ch[0]) <= taken[ch[1]];
  }

  i64 mask() const {
    i64 m = 0;
    for (const PTb& t : tb) {
      if (t.pos >= t.nsteps) continue;
      if (t.wait == X_SIGNAL)
        m |= bit(chans[(steps[(t.begin + t.pos) * STEP_W + 3] + t.detail) * CHAN_W + 2]);
      else if (t.wait == X_PACKETS)
        m |= peers_mask;
    }
    return m;
  }

  int run() {
    std::vector<size_t> active;
    for (size_t i = 0; i < tb.size(); i++)
      if (tb[i].pos < tb[i].nsteps) active.push_back(i);
    const int rc = drive(
        [&](bool* moved, i64*) {
          for (size_t i : active) {
            PTb& t = tb[i];
            if (still_blocked(t)) continue;
            if (advance(t)) *moved = true;
          }
          if (*moved) {
            size_t k = 0;
            for (size_t i : active)
              if (tb[i].pos < tb[i].nsteps) active[k++] = i;
            active.resize(k);
          }
          return active.empty();
        },
        [&] { return mask(); });
    i64* out = reinterpret_cast<i64*>(q[Q_STATE]);
    for (size_t i = 0; i < tb.size(); i++) {
      i64* o = out + i * STATE_W;
      o[0] = tb[i].pos, o[1] = tb[i].wait, o[2] = tb[i].detail, o[3] = tb[i].seen;
    }
    return rc;
  }
};

// One call: clear, enter, meet every peer, run.
template <class T, class Op>
int call(i64* ctl, i64* q) {
  char* base = reinterpret_cast<char*>(ctl[C_BASE]);
  clear<T>(base, reinterpret_cast<const i64*>(q[Q_RESETS]), q[Q_NRESETS], q[Q_FILL]);
  i64* taken = reinterpret_cast<i64*>(q[Q_TAKEN]);
  std::fill_n(taken, q[Q_NTAKEN], 0);
  std::memcpy(reinterpret_cast<i64*>(q[Q_SEMS]), reinterpret_cast<const i64*>(q[Q_SEM_INIT]),
              (size_t)q[Q_NSEMS] * sizeof(i64));
  std::fill_n(reinterpret_cast<i64*>(q[Q_BARS]), 2 * q[Q_NBARS], 0);
  std::fill_n(reinterpret_cast<i64*>(q[Q_STATE]), STATE_W * q[Q_NTB], 0);
  q[Q_PHASE] = PHASE_ENTER;
  int rc = enter_call(ctl);
  if (rc != RC_DONE) return rc;
  rc = Rank(ctl).barrier();
  if (rc != RC_DONE) return rc;
  q[Q_PHASE] = PHASE_RUN;
  rc = PlanExec<T, Op>(ctl, q).run();
  if (rc == RC_DONE) q[Q_PHASE] = PHASE_DONE;
  return rc;
}

template <class T>
int by_op(int op, i64* ctl, i64* q) {
  switch (op) {
    case 0: return call<T, msccl::OpSum>(ctl, q);
    case 1: return call<T, msccl::OpProd>(ctl, q);
    case 2: return call<T, msccl::OpMax>(ctl, q);
    case 3: return call<T, msccl::OpMin>(ctl, q);
  }
  return -1;
}

}  // namespace

extern "C" {

// dtype codes: float16, float32, float64, int32, int64, uint8; op codes: sum, prod, max, min.
// ctl: the XML executor's call parameters (shm_native.py's head, C_ENTER and C_STATE set);
// q: this plan's tables. Returns RC_* (or -1 for a code this build does not know).
int msccl_plan_execute(int dtype, int op, long long* ctl, long long* q) {
  switch (dtype) {
    case 0: return by_op<msccl::half_t>(op, ctl, q);
    case 1: return by_op<float>(op, ctl, q);
    case 2: return by_op<double>(op, ctl, q);
    case 3: return by_op<int>(op, ctl, q);
    case 4: return by_op<long long>(op, ctl, q);
    case 5: return by_op<unsigned char>(op, ctl, q);
  }
  return -1;
}

// Layout constants Python checks before trusting the library.
int msccl_plan_abi() {
  return Q_WORDS * 100000 + STEP_W * 10000 + ACT_W * 1000 + DST_W * 10 + CHAN_W;
}
}
