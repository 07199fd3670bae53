#include "kernels/simd/isa.h"

#include <cstdlib>
#include <cstring>

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace kiln::simd {

namespace {

// Rank of an ISA name; -1 when unknown. Rows of one rank on different architectures share it.
int rank_of(const char* name) {
  static const struct {
    const char* name;
    int rank;
  } kOrder[] = {{"plain", 0}, {"avx2", 1}, {"neon", 1}, {"avx512", 2}, {"avx512vnni", 2}, {"neondot", 2}};
  for (const auto& o : kOrder)
    if (std::strcmp(name, o.name) == 0) return o.rank;
  return -1;
}

}  // namespace

bool cpu_has_avx2() {
#if defined(__x86_64__)
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
#else
  return false;
#endif
}

bool cpu_has_avx512f() {
#if defined(__x86_64__)
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && cpu_has_avx2();
  return ok;
#else
  return false;
#endif
}

bool cpu_has_avx512vnni() {
#if defined(__x86_64__)
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return ok;
#else
  return false;
#endif
}

bool cpu_has_neon_dotprod() {
#if defined(__aarch64__) && defined(__linux__)
  static const bool ok = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  return ok;
#else
  return false;
#endif
}

bool isa_allowed(const char* name) {
  const char* cap = std::getenv("KILN_MAX_ISA");
  if (cap == nullptr) return true;
  const int c = rank_of(cap), n = rank_of(name);
  return c < 0 || n < 0 || n <= c;
}

}  // namespace kiln::simd
