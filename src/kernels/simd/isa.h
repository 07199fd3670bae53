#pragma once
// The one rule every ISA table of Kiln's kernel families follows: implementations are listed
// best first, each with a name and a check of the running CPU, and the first available one
// that the cap allows is used. The environment variable KILN_MAX_ISA caps it, so tests and
// benchmarks run every path the CPU has: "plain" (portable C++ only), then per architecture
// x86-64 "avx2" < "avx512" = "avx512vnni" and arm64 "neon" < "neondot" (each cap also names
// the other rows of the same rank); an unknown value caps nothing.

#include <cstddef>

namespace kiln::simd {

/// True when KILN_MAX_ISA allows implementation `name` (one of the names above).
bool isa_allowed(const char* name);

/// The running CPU's features, checked once; false on other architectures, where the x86
/// rows of the tables are not even compiled.
bool cpu_has_avx2();        ///< AVX2 and FMA
bool cpu_has_avx512f();     ///< AVX-512 F and VL (with AVX2 and FMA)
bool cpu_has_avx512vnni();  ///< AVX-512 F, BW, VL and VNNI
bool cpu_has_neon_dotprod();  ///< arm64 with the ARMv8.2 dot product (sdot/udot; HWCAP_ASIMDDP)

/// A family's implementation: the first row of `impls` (best first, each with `name` and
/// `available()`) that the CPU has and KILN_MAX_ISA allows; the last row runs anywhere.
template <typename Impl, size_t N>
const Impl* pick_isa(const Impl (&impls)[N]) {
  for (const Impl& i : impls)
    if (i.available() && isa_allowed(i.name)) return &i;
  return &impls[N - 1];
}

/// The row named `name` when the CPU has it (tests run every row against the plain one).
template <typename Impl, size_t N>
const Impl* find_isa(const Impl (&impls)[N], const char* name) {
  for (const Impl& i : impls) {
    const char* a = i.name;
    const char* b = name;
    while (*a && *a == *b) ++a, ++b;
    if (*a == *b && i.available()) return &i;
  }
  return nullptr;
}

}  // namespace kiln::simd
