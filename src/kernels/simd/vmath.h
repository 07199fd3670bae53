#pragma once
// Vectorized f32 math over arrays, shared by the portable kernels and the XNNPACK delegate
// (which splits the same calls over its thread pool). One ISA table (isa.h): AVX2+FMA on
// x86-64 CPUs that have it, NEON (with FMA) on arm64, else the same formulas in plain C++
// (what other architectures compile), so results agree to the stated bounds on every CPU.
//
// Approximations and their error bounds (checked by tests/kernels/vmath_test.cc against
// double-precision libm over dense grids):
// - erf: odd rational of degree 13/8 on [-4, 4] (outside, erf is +-1 in f32), as Eigen and
//   XLA evaluate it; max abs error 4e-7.
// - tanh: Eigen's rational on [-7.9, 7.9] (clamped outside); max abs error 3e-7 with FMA
//   (avx2, neon; avx512 divides by a refined reciprocal), 4e-7 evaluated without (the plain
//   row on x86-64).
// - sigmoid(x) = (1 + tanh(x/2)) / 2; max abs error 2e-7.
// - exp: Cephes' expf (2^n * polynomial on |r| <= ln2/2), inputs clamped to [-87.3, 88.4];
//   max relative error 2e-7; below -87.3 (exp(-inf) too) it is 0.
// None of these allocates.

#include <cstddef>

namespace kiln::simd {

/// True when the table's AVX2 row, or the AVX-512 one above it, runs (the CPU has AVX2 and FMA,
/// KILN_MAX_ISA allows it).
bool has_avx2();
/// The row the functions below run: "avx512" (tanh, sigmoid, the gates, vecmat and gru_row 16 lanes
/// wide, the rest as avx2), "avx2", "neon" or "plain".
const char* vmath_isa();

void erf(const float* x, float* y, size_t n);
void tanh(const float* x, float* y, size_t n);
void sigmoid(const float* x, float* y, size_t n);

/// y[i] = x[i] * sigmoid(x[i]) (hard = false: Swish/SiLU), or x[i] * clamp(alpha * x[i] +
/// beta, 0, 1) (hard: HardSwish and x * HardSigmoid(x)).
void gate(const float* x, float* y, size_t n, bool hard, float alpha, float beta);

/// GELU: x/2 (1 + erf(x / sqrt 2)), or (tanh_form) x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
/// the error is that of erf or tanh above, times |x|/2.
void gelu(const float* x, float* y, size_t n, bool tanh_form);

/// LayerNorm over one row of n: y = (x - mean) / sqrt(var + eps) * gamma + beta (beta may be
/// null), the variance the mean of squared deviations (two passes, as the decomposed graph).
void layer_norm_row(const float* x, float* y, size_t n, const float* gamma, const float* beta, float eps);

/// One softmax row: y = exp(x - max) / sum. A row whose entries are all -inf gives NaN, as
/// the portable Softmax does.
void softmax_row(const float* x, float* y, size_t n);

/// For each of nv vectors r: out[r * ldo + j] = init[r * ldi + j] + sum over k < cols of
/// v[r * ldv + k] * mt[k * ld + j], for j < rows: vectors times a matrix stored transposed (rows
/// `ld` apart), vectorized over j with no reductions (the gates of a recurrent step, 3H or 4H of
/// them, side by side), up to 4 vectors per pass over the matrix (each weight load serves all of
/// them). `init` is `out` itself (ldi = ldo: accumulate), or one bias row for every vector
/// (ldi = 0), or rows that do not overlap the outputs. Each output is summed over k in order,
/// starting from its init value (the same bits for any nv on a given row of the table).
void vecmat(const float* mt, size_t ld, size_t rows, size_t cols, const float* v, size_t ldv, const float* init,
            size_t ldi, float* out, size_t ldo, size_t nv);
/// out += v * M (init = out).
inline void add_vecmat(const float* mt, size_t ld, size_t rows, size_t cols, const float* v, size_t ldv, float* out,
                       size_t ldo, size_t nv) {
  vecmat(mt, ld, rows, cols, v, ldv, out, ldo, out, ldo, nv);
}
/// One vector (nv = 1).
inline void add_vecmat(const float* mt, size_t ld, size_t rows, size_t cols, const float* v, float* out) {
  add_vecmat(mt, ld, rows, cols, v, cols, out, rows, 1);
}

/// One GRU row of n hidden units with linear_before_reset = 1 and the default activations, from
/// the input part x = [Xz | Xr | Xh] (biases included, 3n) and the recurrent part a = [Az | Ar |
/// Ah] (Ht-1*R^T, Rbh included in Ah, 3n):
///   z = sigmoid(Xz + Az), r = sigmoid(Xr + Ar), c = tanh(Xh + r.Ah), h = (1 - z).c + z.h
/// h is updated in place and copied to y. The same formulas as sigmoid and tanh above.
void gru_row(const float* x, const float* a, float* h, float* y, size_t n);

}  // namespace kiln::simd
