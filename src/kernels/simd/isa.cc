#include "kernels/simd/isa.h"

#include <cstdlib>
#include <cstring>

namespace kiln::simd {

namespace {

// Rank of an ISA name; -1 when unknown.
int rank_of(const char* name) {
  static const char* const kOrder[] = {"plain", "avx2", "avx512vnni"};
  for (int k = 0; k < 3; ++k)
    if (std::strcmp(name, kOrder[k]) == 0) return k;
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

bool cpu_has_avx512vnni() {
#if defined(__x86_64__)
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
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
