#pragma once
// The one rule every ISA table of Kiln's kernel families follows: implementations are listed
// best first, each with a name and a check of the running CPU, and the first available one
// that the cap allows is used. The environment variable KILN_MAX_ISA caps it, so tests and
// benchmarks run every path the CPU has: "plain" (portable C++ only), "avx2", "avx512vnni";
// an unknown value caps nothing.

namespace kiln::simd {

/// True when KILN_MAX_ISA allows implementation `name` (one of the names above).
bool isa_allowed(const char* name);

}  // namespace kiln::simd
