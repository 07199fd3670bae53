#pragma once
// Kiln's integer GEMM: C[m, n] (int32) = sum over k of A'[m, k] * B'[k, n], where A' and B' are
// 8-bit operands with their zero points already subtracted (so values in [-255, 255], held as
// int16). Every product and every pair sum fits int32, so the result is exact, the same bits
// on every ISA, and the portable int8 kernels (MatMulInteger, QLinearMatMul, ConvInteger,
// QLinearConv) are checked against it only through their ONNX Runtime references.
//
// The pair layout is the one vpmaddwd (AVX2) reads: two k at a time. Not vpmaddubsw: its int16
// saturation of a u8 x s8 pair sum would change results (ONNX Runtime's AVX2 path shows it).
//
// ISA: one table of implementations (plain C++, AVX2), best available chosen at first use;
// the environment variable KILN_MAX_ISA=plain caps it (tests run every path the CPU has).
// Never allocates: the caller packs into planned scratch.

#include <cstddef>
#include <cstdint>

namespace kiln::simd {

/// Columns of one packed block of B.
constexpr size_t kInt8GemmCols = 16;

/// k rounded up to pairs.
inline size_t int8_gemm_k_pairs(size_t k) { return (k + 1) / 2; }
/// int16 elements of a packed A of m rows (each 2 * k_pairs long, zero padded).
inline size_t int8_gemm_a_elems(size_t m, size_t k) { return m * 2 * int8_gemm_k_pairs(k); }
/// int16 elements of a packed B: column blocks of kInt8GemmCols, k pairs of 2*kInt8GemmCols.
inline size_t int8_gemm_b_elems(size_t k, size_t n) {
  return (n + kInt8GemmCols - 1) / kInt8GemmCols * int8_gemm_k_pairs(k) * 2 * kInt8GemmCols;
}

/// Where packed B's element (k, j) goes (the caller's packing loops use it).
inline size_t int8_gemm_b_index(size_t k_pairs, size_t kk, size_t j) {
  return ((j / kInt8GemmCols) * k_pairs + kk / 2) * 2 * kInt8GemmCols + (j % kInt8GemmCols) * 2 + kk % 2;
}

/// Rows [row_begin, row_end) of C = A' B' with A' packed (int8_gemm_a_elems layout: row r at
/// r * 2 * k_pairs) and B' packed (int8_gemm_b_index layout); C row-major with row stride ldc.
void int8_gemm(const int16_t* a, const int16_t* b, size_t k, size_t n, int32_t* c, size_t ldc, size_t row_begin,
               size_t row_end);

/// The implementation int8_gemm uses: "avx2" or "plain".
const char* int8_gemm_isa();

/// int8_gemm on implementation `isa` ("avx2", "plain"); false (nothing done) when this CPU or
/// build lacks it. Tests compare every path against the plain one.
bool int8_gemm_on(const char* isa, const int16_t* a, const int16_t* b, size_t k, size_t n, int32_t* c, size_t ldc,
                  size_t row_begin, size_t row_end);

}  // namespace kiln::simd
