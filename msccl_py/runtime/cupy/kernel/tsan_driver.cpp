// Stand-alone driver of the emulation, for ThreadSanitizer runs.
//
// Python cannot load a TSan-instrumented library, so the TSan build is an
// executable: it reads one launch file written by emulation.py, relocates
// the table pointers, runs the emulated grid and writes every section back.
// File: magic u64, dtype, op, nblocks, threads, nsections (i64 each),
// P[NPARAMS] (i64), then per section u64 nbytes + bytes. Pointers are encoded
// as ((section + 1) << 40) + offset; the P table fields, every bufs word and
// every non-zero conns word are pointers.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "emulation.cpp"

namespace {

constexpr unsigned long long MAGIC = 0x6d7363636c747361ull;  // "msccltsa"
constexpr int SHIFT = 40;

std::vector<char*> g_base;
std::vector<unsigned long long> g_size;

unsigned long long reloc(unsigned long long v) {
  if (v == 0) return 0;
  unsigned long long sec = (v >> SHIFT) - 1, off = v & ((1ull << SHIFT) - 1);
  if (sec >= g_base.size()) {
    std::fprintf(stderr, "bad pointer 0x%llx\n", v);
    std::exit(3);
  }
  return (unsigned long long)(g_base[sec] + off);
}

int section_of(unsigned long long v) { return (int)((v >> SHIFT) - 1); }

bool read_all(FILE* f, void* p, size_t n) { return std::fread(p, 1, n, f) == n; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s IN OUT\n", argv[0]);
    return 2;
  }
  FILE* f = std::fopen(argv[1], "rb");
  if (!f) return 2;
  long long hdr[6];
  long long P[msccl::NPARAMS];
  if (!read_all(f, hdr, sizeof hdr) || (unsigned long long)hdr[0] != MAGIC ||
      !read_all(f, P, sizeof P))
    return 2;
  for (long long s = 0; s < hdr[5]; s++) {
    unsigned long long n;
    if (!read_all(f, &n, 8)) return 2;
    char* p = static_cast<char*>(std::aligned_alloc(64, (n + 63) / 64 * 64 + 64));
    if (!read_all(f, p, n)) return 2;
    g_base.push_back(p);
    g_size.push_back(n);
  }
  std::fclose(f);
  const int ptr_fields[] = {msccl::P_BLOCKS, msccl::P_STEPS, msccl::P_DEPS, msccl::P_REDS,
                            msccl::P_BUFS, msccl::P_CONNS, msccl::P_FLAGS, msccl::P_ERR,
                            msccl::P_WAITS};
  const int bufs = section_of(P[msccl::P_BUFS]), conns = section_of(P[msccl::P_CONNS]);
  for (int sec : {bufs, conns}) {
    auto* w = reinterpret_cast<unsigned long long*>(g_base[sec]);
    for (unsigned long long i = 0; i < g_size[sec] / 8; i++) w[i] = reloc(w[i]);
  }
  for (int k : ptr_fields) P[k] = (long long)reloc((unsigned long long)P[k]);
  int rc = msccl_emu_run((int)hdr[1], (int)hdr[2], P, (int)hdr[3], (int)hdr[4]);
  if (rc != 0) {
    std::fprintf(stderr, "%s\n", msccl_emu_error());
    return 1;
  }
  FILE* o = std::fopen(argv[2], "wb");
  if (!o) return 2;
  for (size_t s = 0; s < g_base.size(); s++) std::fwrite(g_base[s], 1, g_size[s], o);
  std::fclose(o);
  return 0;
}
