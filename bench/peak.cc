// The physical limits a kernel is measured against, on one core: f32 FMA peak (AVX2 ymm and,
// where the CPU has it, AVX-512 zmm: independent accumulator chains, enough to cover the FMA
// latency) and memory bandwidth (a read-only sum and a triad over buffers far larger than the
// last-level cache), and the ceiling of a GEMM microkernel with its operands in L1 (what the
// dense kernels are built of: MR rows of A broadcast against NV vectors of packed B, MR x NV
// accumulators; the broadcasts and B loads compete with the FMAs, so this sits below the FMA
// peak). bench/peak.sh builds and runs it and writes bench/results/peak.md.
//   g++ -O2 -std=c++17 bench/peak.cc -o peak && ./peak
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Best of `reps` runs of f(), which returns the FLOPs (or bytes) it did; per second.
template <typename F>
double best_rate(int reps, F f) {
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now();
    const double work = f();
    best = std::max(best, work / (now() - t0));
  }
  return best;
}

volatile float g_sink;

// N independent FMA chains of 8 floats.
template <int N>
__attribute__((target("avx2,fma"))) double fma_avx2(long iters) {
  __m256 acc[N];
  for (int k = 0; k < N; ++k) acc[k] = _mm256_set1_ps(static_cast<float>(k));
  const __m256 a = _mm256_set1_ps(0.9999999f), b = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i)
#pragma GCC unroll 64
    for (int k = 0; k < N; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  __m256 s = acc[0];
  for (int k = 1; k < N; ++k) s = _mm256_add_ps(s, acc[k]);
  g_sink = _mm256_cvtss_f32(s);
  return 2.0 * 8 * N * static_cast<double>(iters);
}

// N independent FMA chains of 16 floats.
template <int N>
__attribute__((target("avx512f"))) double fma_avx512(long iters) {
  __m512 acc[N];
  for (int k = 0; k < N; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
  const __m512 a = _mm512_set1_ps(0.9999999f), b = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i)
#pragma GCC unroll 64  // unrolled whole, so the accumulators stay in registers
    for (int k = 0; k < N; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  __m512 s = acc[0];
  for (int k = 1; k < N; ++k) s = _mm512_add_ps(s, acc[k]);
  g_sink = _mm512_reduce_add_ps(s);
  return 2.0 * 16 * N * static_cast<double>(iters);
}

// One MR x (16 NV) tile of C += A (MR rows, k long, rows k apart) x B (k rows of 16 NV), A
// broadcast from memory, all in registers; returns the FLOPs.
template <int MR, int NV>
__attribute__((target("avx512f"), noinline)) double gemm_tile512(const float* a, const float* b, size_t k, float* c) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
#pragma GCC unroll 4
  for (size_t i = 0; i < k; ++i) {
    __m512 w[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) w[v] = _mm512_loadu_ps(b + i * 16 * NV + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * k + i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(x, w[v], acc[r][v]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + (r * NV + v) * 16, acc[r][v]);
  return 2.0 * MR * 16 * NV * static_cast<double>(k);
}

template <int MR, int NV>
__attribute__((target("avx2,fma"), noinline)) double gemm_tile256(const float* a, const float* b, size_t k, float* c) {
  __m256 acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (size_t i = 0; i < k; ++i) {
    __m256 w[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) w[v] = _mm256_loadu_ps(b + i * 8 * NV + 8 * v);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * k + i);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(x, w[v], acc[r][v]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(c + (r * NV + v) * 8, acc[r][v]);
  return 2.0 * MR * 8 * NV * static_cast<double>(k);
}

// The tile called over and over on the same operands (k = 256: A 6 KiB, B 32 KiB, in L1).
template <typename Tile>
double gemm_ceiling(Tile tile, size_t lanes) {
  const size_t k = 256;
  std::vector<float> a(16 * k, 0.5f), b(k * lanes, 0.25f), c(16 * lanes);
  return best_rate(5, [&] {
    double flops = 0;
    for (int i = 0; i < 100000; ++i) flops += tile(a.data(), b.data(), k, c.data());
    g_sink = c[0];
    return flops;
  });
}

// Bytes read per second: a sum over n floats, four accumulators.
__attribute__((target("avx2"))) double read_bw(const float* x, size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_loadu_ps(x + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_loadu_ps(x + i + 24));
  }
  g_sink = _mm256_cvtss_f32(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  return 4.0 * static_cast<double>(n);
}

// STREAM's triad a = b + s * c: bytes moved (two reads, one write) per second.
double triad_bw(float* a, const float* b, const float* c, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = b[i] + 3.f * c[i];
  return 12.0 * static_cast<double>(n);
}

}  // namespace

int main() {
  const long iters = 200'000'000 / 16;
  const double avx2 = best_rate(5, [&] { return fma_avx2<12>(iters); });
  std::printf("fma_avx2_gflops %.1f\n", avx2 / 1e9);
  std::printf("gemm_avx2_gflops %.1f\n", gemm_ceiling(gemm_tile256<6, 2>, 16) / 1e9);  // Kiln's AVX2 tile
  if (__builtin_cpu_supports("avx512f")) {
    const double avx512 = best_rate(5, [&] { return fma_avx512<24>(iters); });
    std::printf("fma_avx512_gflops %.1f\n", avx512 / 1e9);
    // Kiln's AVX-512 tile (6 x 32), and a taller one: whether more rows per weight load help.
    std::printf("gemm_avx512_gflops %.1f\n", gemm_ceiling(gemm_tile512<6, 2>, 32) / 1e9);
    std::printf("gemm_avx512_12x32_gflops %.1f\n", gemm_ceiling(gemm_tile512<12, 2>, 32) / 1e9);
  } else {
    std::printf("fma_avx512_gflops -\n");
    std::printf("gemm_avx512_gflops -\n");
    std::printf("gemm_avx512_12x32_gflops -\n");
  }
  const size_t n = size_t{1} << 27;  // 512 MiB of floats per buffer
  std::vector<float> a(n, 1.f), b(n, 2.f), c(n, 3.f);
  std::printf("read_gbps %.1f\n", best_rate(3, [&] { return read_bw(b.data(), n); }) / 1e9);
  std::printf("triad_gbps %.1f\n", best_rate(3, [&] { return triad_bw(a.data(), b.data(), c.data(), n); }) / 1e9);
  return 0;
}
