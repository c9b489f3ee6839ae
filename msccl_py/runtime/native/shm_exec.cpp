// Native executor of the shm runtime: one rank's threadblocks, cooperatively, in one thread.
//
// It is msccl_py/runtime/shm_exec.py's `RankRuntime.execute` in compiled code and
// speaks the same protocol over the same arena, so native and Python ranks can
// even share a call: per-connection tail/head counters (int64 words, monotone),
// FIFO slots of `slot` elements, dependency flags local to the rank, the peer
// descriptor check before the first transfer with a peer, and the doorbell
// handshake (publish a sleep mask, full fence, sleep on the rank's POSIX
// semaphore, which glibc implements on a futex; a peer that advances a counter
// posts only when its bit is in that mask). Element arithmetic comes from the
// GPU kernel's ops.h (same wrapping integers and 16-bit float rounding), with
// NumPy's NaN propagation for max/min.
//
// Python packs the tables (see msccl_py/runtime/shm_native.py; keep in sync):
//   ctl[]      call parameters and table addresses, C_* below, then per rank P_WORDS words
//              (its seq, descriptor history, done and sleep word indices); C_ENTER, when
//              not 0, is the address of the call's 7-word descriptor: the executor enters
//              the call itself first, as RankRuntime.enter does (saves Python's word writes)
//   tbs[][12]  nsteps, step_begin, send peer, recv peer, send tail/head word,
//              recv tail/head word, send FIFO byte offset, recv FIFO byte offset
//   steps[][12] op, src buf, src off, dst buf, dst off, count, dep begin, ndeps,
//              has_dep, recv, send, accumulate buf
//   deps[][2]  threadblock index, step index
//   state[][8] out: it, si, ti, wait kind, dep tb, dep step, send tail, recv head
#include "shm_rank.h"

namespace {

enum : int { OP_SEND = 0, OP_RECV, OP_RCS, OP_RRS, OP_RRC, OP_RRCS, OP_COPY, OP_REDUCE };
enum : int { W_NONE = 0, W_DEP, W_ENTER_RECV, W_ENTER_SEND, W_RECV, W_SEND };
constexpr int TB_WORDS = 12, STEP_WORDS = 12, STATE_WORDS = 8;

struct Tb {
  const i64* row;
  i64 it, si, ti, wait, wdep_t, wdep_s, stail, rhead, lo, ln;
  bool s_ok, r_ok;
};

template <class T, class Op>
struct Exec : Rank {
  T* buf[3];
  const i64* steps;
  const i64* deps;
  std::vector<Tb> tb;
  std::vector<i64> flags;
  i64 S, niter, L, mac, cap, M, slot;

  explicit Exec(i64* ctl) : Rank(ctl) {
    for (int k = 0; k < 3; k++) buf[k] = reinterpret_cast<T*>(c[C_BUF0 + k]);
    steps = reinterpret_cast<const i64*>(c[C_STEPS]);
    deps = reinterpret_cast<const i64*>(c[C_DEPS]);
    S = c[C_S], niter = c[C_NITER], L = c[C_L], mac = c[C_MAC], cap = c[C_CAP], M = c[C_M];
    slot = c[C_SLOT];
    const i64* rows = reinterpret_cast<const i64*>(c[C_TBS]);
    tb.resize(c[C_NTB]);
    flags.assign(tb.size(), -1);
    for (size_t i = 0; i < tb.size(); i++) {
      Tb& t = tb[i];
      t.row = rows + i * TB_WORDS;
      t.it = t.si = t.ti = t.wait = t.wdep_t = t.wdep_s = t.lo = 0;
      t.ln = L < S ? L : S;
      t.s_ok = t.r_ok = false;
      t.stail = t.row[4] >= 0 ? load(w + t.row[4]) : 0;
      t.rhead = t.row[7] >= 0 ? load(w + t.row[7]) : 0;
      if (t.row[0] == 0) t.it = niter;
    }
  }

  int fifo_wait(Tb& t, bool recv, bool send, i64* peer) {
    if (recv) {
      if (!t.r_ok) {
        if (!peer_ready(t.row[3], peer)) return W_ENTER_RECV;
        t.r_ok = true;
      }
      if (load(w + t.row[6]) <= t.rhead) return W_RECV;
    }
    if (send) {
      if (!t.s_ok) {
        if (!peer_ready(t.row[2], peer)) return W_ENTER_SEND;
        t.s_ok = true;
      }
      if (t.stail - load(w + t.row[5]) >= cap) return W_SEND;
    }
    return W_NONE;
  }

  void transferred(Tb& t, bool recv, bool send) {
    if (recv) store(w + t.row[7], ++t.rhead);
    if (send) store(w + t.row[4], ++t.stail);
    fence();
    if (recv && (load(w + peer_word(t.row[3], P_SLEEP)) & me)) sem_post(sems[t.row[3]]);
    if (send && (load(w + peer_word(t.row[2], P_SLEEP)) & me)) sem_post(sems[t.row[2]]);
  }

  static void copy(T* d, const T* s, i64 n) {
    if (n > 0 && d != s) __builtin_memmove(d, s, (size_t)n * sizeof(T));
  }
  // d[i] = a[i] (op) b[i]; d may alias a or b element for element
  static void reduce(T* d, const T* a, const T* b, i64 n) {
    for (i64 i = 0; i < n; i++) d[i] = NpOp<T, Op>::apply(a[i], b[i]);
  }
  static bool big(i64 n) { return n * (i64)sizeof(T) >= STREAM_MIN_BYTES; }
  // The caller's array d gets s (streamed when big); a FIFO slot f, if any, too.
  static void out_copy(T* d, T* f, const T* s, i64 n) {
    if (big(n) && d != s) {
      stream_bytes(reinterpret_cast<char*>(d), reinterpret_cast<const char*>(s),
                   n * (i64)sizeof(T));
      stream_done();
    } else {
      copy(d, s, n);
    }
    if (f) copy(f, s, n);
  }
  // The caller's array d gets a (op) b, and a FIFO slot f, if any, the same values;
  // big ones go through an L1-sized block, so d may still alias a or b.
  static void out_reduce(T* d, T* f, const T* a, const T* b, i64 n) {
    if (!big(n)) {
      reduce(d, a, b, n);
      if (f) copy(f, d, n);
      return;
    }
    constexpr i64 B = STREAM_BLOCK_BYTES / (i64)sizeof(T);
    T tmp[B];
    for (i64 i = 0; i < n; i += B) {
      const i64 k = n - i < B ? n - i : B;
      reduce(tmp, a + i, b + i, k);
      stream_bytes(reinterpret_cast<char*>(d + i), reinterpret_cast<const char*>(tmp),
                   k * (i64)sizeof(T));
      if (f) copy(f + i, tmp, k);
    }
    stream_done();
  }

  // Run `t` until it waits or finishes; returns whether it moved. *peer >= 0: stop.
  bool advance(Tb& t, size_t idx, i64* peer) {
    bool moved = false;
    const i64 nsteps = t.row[0];
    for (;;) {
      const i64* st = steps + (t.row[1] + t.si) * STEP_WORDS;
      const i64 op = st[0], sb = st[1], so = st[2], db = st[3], dof = st[4], cnt = st[5];
      if (t.ti == 0 && st[7]) {
        const i64 need = t.it * M;
        for (i64 d = 0; d < st[7]; d++) {
          const i64* dp = deps + (st[6] + d) * 2;
          if (flags[dp[0]] < need + dp[1]) {
            t.wait = W_DEP;
            t.wdep_t = dp[0];
            t.wdep_s = dp[1];
            return moved;
          }
        }
      }
      const i64 lo = t.lo, ln = t.ln;
      const i64 ntr = cnt > 0 ? (cnt + mac - 1) / mac : 1;
      if (op >= OP_COPY) {
        for (i64 k_ = 0; k_ < ntr; k_++) {
          const i64 k0 = k_ * mac, k = cnt - k0 < mac ? cnt - k0 : mac;
          const i64 n = k > 0 ? (k - 1) * S + ln : 0;
          const i64 s0 = (so + k0) * S + lo, d0 = (dof + k0) * S + lo;
          if (op == OP_COPY) copy(buf[db] + d0, buf[sb] + s0, n);
          else reduce(buf[db] + d0, buf[st[11]] + d0, buf[sb] + s0, n);
        }
      } else {
        const bool recv = st[9], send = st[10];
        while (t.ti < ntr) {
          const int kind = fifo_wait(t, recv, send, peer);
          if (kind != W_NONE) {
            t.wait = kind;
            return moved;
          }
          const i64 k0 = t.ti * mac, k = cnt - k0 < mac ? cnt - k0 : mac;
          const i64 n = k > 0 ? (k - 1) * S + ln : 0;
          const T* rs = recv ? reinterpret_cast<const T*>(base + t.row[9]) + (t.rhead % cap) * slot
                             : nullptr;
          T* ss = send ? reinterpret_cast<T*>(base + t.row[8]) + (t.stail % cap) * slot : nullptr;
          const i64 s0 = (so + k0) * S + lo, d0 = (dof + k0) * S + lo;
          switch (op) {
            case OP_SEND: copy(ss, buf[sb] + s0, n); break;
            case OP_RECV: out_copy(buf[db] + d0, nullptr, rs, n); break;
            case OP_RRS: reduce(ss, rs, buf[sb] + s0, n); break;
            case OP_RCS: out_copy(buf[db] + d0, ss, rs, n); break;
            default:  // OP_RRC, OP_RRCS (ss is null for rrc)
              out_reduce(buf[db] + d0, ss, rs, buf[sb] + s0, n);
          }
          transferred(t, recv, send);
          t.ti++;
          moved = true;
        }
      }
      t.ti = 0;
      if (st[8]) flags[idx] = t.it * M + t.si;
      moved = true;
      if (++t.si == nsteps) {
        t.si = 0;
        if (++t.it >= niter) return true;
        t.lo = t.it * L;
        t.ln = L < S - t.lo ? L : S - t.lo;
      }
    }
  }

  // Still waiting for the same thing? (cheap re-check before re-entering advance)
  bool still_blocked(const Tb& t) const {
    switch (t.wait) {
      case W_RECV: return load(w + t.row[6]) <= t.rhead;
      case W_SEND: return t.stail - load(w + t.row[5]) >= cap;
      case W_DEP: return flags[t.wdep_t] < t.it * M + t.wdep_s;
    }
    return false;
  }

  i64 mask() const {
    i64 m = 0;
    for (const Tb& t : tb) {
      if (t.it >= niter) continue;
      if (t.wait == W_RECV || t.wait == W_ENTER_RECV) m |= bit(t.row[3]);
      else if (t.wait == W_SEND || t.wait == W_ENTER_SEND) m |= bit(t.row[2]);
    }
    return m;
  }

  int run() {
    std::vector<size_t> active;
    for (size_t i = 0; i < tb.size(); i++)
      if (tb[i].it < niter) active.push_back(i);
    const int rc = drive(
        [&](bool* moved, i64* peer) {
          for (size_t i : active) {
            Tb& t = tb[i];
            if (still_blocked(t)) continue;
            t.wait = W_NONE;
            if (advance(t, i, peer)) *moved = true;
            if (*peer >= 0) return false;
          }
          if (*moved) {
            size_t k = 0;
            for (size_t i : active)
              if (tb[i].it < niter) active[k++] = i;
            active.resize(k);
          }
          return active.empty();
        },
        [&] { return mask(); });
    i64* out = reinterpret_cast<i64*>(c[C_STATE]);
    for (size_t i = 0; i < tb.size(); i++) {
      const Tb& t = tb[i];
      i64* o = out + i * STATE_WORDS;
      o[0] = t.it, o[1] = t.si, o[2] = t.ti, o[3] = t.wait;
      o[4] = t.wdep_t, o[5] = t.wdep_s, o[6] = t.stail, o[7] = t.rhead;
    }
    return rc;
  }
};

template <class T>
int by_op(int op, i64* ctl) {
  switch (op) {
    case 0: return Exec<T, msccl::OpSum>(ctl).run();
    case 1: return Exec<T, msccl::OpProd>(ctl).run();
    case 2: return Exec<T, msccl::OpMax>(ctl).run();
    case 3: return Exec<T, msccl::OpMin>(ctl).run();
  }
  return -1;
}

}  // namespace

extern "C" {

// dtype codes: float16, float32, float64, int32, int64, uint8, int8, bfloat16; op codes: sum,
// prod, max, min.
// Returns RC_* (or -1 for a code this build does not know).
int msccl_shm_execute(int dtype, int op, long long* ctl) {
  if (ctl[C_ENTER]) {
    const int rc = enter_call(ctl);
    if (rc != RC_DONE) return rc;
  }
  switch (dtype) {
    case 0: return by_op<msccl::half_t>(op, ctl);
    case 1: return by_op<float>(op, ctl);
    case 2: return by_op<double>(op, ctl);
    case 3: return by_op<int>(op, ctl);
    case 4: return by_op<long long>(op, ctl);
    case 5: return by_op<unsigned char>(op, ctl);
    case 6: return by_op<signed char>(op, ctl);
    case 7: return by_op<msccl::bf16_t>(op, ctl);
  }
  return -1;
}

// Wait until every peer entered this rank's current call with an equal descriptor (RC_*).
int msccl_shm_barrier(long long* ctl) { return Rank(ctl).barrier(); }

// Layout constants Python checks before trusting the library.
int msccl_shm_abi() { return C_PEERS * 1000 + P_WORDS * 100 + TB_WORDS; }
}
