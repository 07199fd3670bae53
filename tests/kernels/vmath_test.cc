// kernels/simd/vmath: the error bounds its header states, on dense grids against double libm
// (erf, tanh and softmax are also checked through the delegate's threaded wrappers in
// tests/delegates/pointwise_test.cc), and vecmat and gru_row against plain double loops at sizes
// around every vector-block edge (8 and 24 columns on the AVX2 row, 16 and 48 on AVX-512, which
// takes matrices of 2^13 elements and more).
#include "kernels/simd/vmath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace kiln::testing {
namespace {

std::vector<float> grid(float lo, float hi, size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(n - 1);
  return x;
}

TEST(Vmath, SigmoidWithinTwoTenMillionths) {
  std::vector<float> x = grid(-30.f, 30.f, 200003), y(x.size());  // odd length: the scalar tail runs too
  simd::sigmoid(x.data(), y.data(), x.size());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(y[i] - 1.0 / (1.0 + std::exp(-double(x[i])))));
  EXPECT_LE(worst, 2e-7);
  // in the vector body (the first 16) and in the tail alike
  std::vector<float> big(19, 1e30f), out(big.size());
  big[0] = big[17] = -INFINITY, big[1] = big[18] = INFINITY, big[2] = -1e30f;
  simd::sigmoid(big.data(), out.data(), big.size());
  for (size_t i = 0; i < big.size(); ++i) EXPECT_EQ(out[i], big[i] < 0 ? 0.f : 1.f) << i;
}

TEST(Vmath, TanhAndErfWithinTheirBoundsInPlace) {
  std::vector<float> x = grid(-9.f, 9.f, 100001), t = x, e = x;
  simd::tanh(t.data(), t.data(), t.size());  // in place, as the recurrent kernels call it
  simd::erf(e.data(), e.data(), e.size());
  double wt = 0, we = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    wt = std::max(wt, std::fabs(t[i] - std::tanh(double(x[i]))));
    we = std::max(we, std::fabs(e[i] - std::erf(double(x[i]))));
  }
  const std::string isa = simd::vmath_isa();
  EXPECT_LE(wt, isa == "avx2" || isa == "avx512" || isa == "neon" ? 3e-7 : 4e-7);  // vmath.h: without FMA (plain), 4e-7
  EXPECT_LE(we, 4e-7);
}

TEST(Vmath, GeluBothFormsWithinErfAndTanhBounds) {
  std::vector<float> x = grid(-10.f, 10.f, 40001), e(x.size()), t(x.size());
  simd::gelu(x.data(), e.data(), x.size(), false);
  simd::gelu(x.data(), t.data(), x.size(), true);
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double we = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    const double wt = 0.5 * v * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    ASSERT_NEAR(e[i], we, 1e-6 * std::max(1.0, std::fabs(v))) << v;
    ASSERT_NEAR(t[i], wt, 1e-6 * std::max(1.0, std::fabs(v))) << v;
  }
}

TEST(Vmath, LayerNormRowMatchesDoubleAtEveryTailLength) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(3.f, 2.f);  // a large mean: the two-pass variance matters
  for (size_t n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 64, 100}) {
    std::vector<float> x(n), gamma(n), beta(n), y(n + 1, 123.f);
    for (size_t i = 0; i < n; ++i) x[i] = g(rng), gamma[i] = g(rng), beta[i] = g(rng);
    for (bool with_beta : {true, false}) {
      simd::layer_norm_row(x.data(), y.data(), n, gamma.data(), with_beta ? beta.data() : nullptr, 1e-5f);
      double mean = 0, var = 0;
      for (float v : x) mean += v;
      mean /= double(n);
      for (float v : x) var += (v - mean) * (v - mean);
      var /= double(n);
      for (size_t i = 0; i < n; ++i) {
        const double want = (x[i] - mean) / std::sqrt(var + 1e-5) * gamma[i] + (with_beta ? beta[i] : 0.0);
        ASSERT_NEAR(y[i], want, 2e-5 * std::max(1.0, std::fabs(want))) << "n=" << n << " i=" << i;
      }
      EXPECT_EQ(y[n], 123.f) << "wrote past the row, n=" << n;
    }
  }
}

TEST(Vmath, NanPassesThroughInVectorBodyAndScalarTail) {
  std::vector<float> x(11, 0.5f), y(11);
  x[3] = x[9] = NAN;  // lane 3 of the vector body, and the scalar tail (9 >= 8)
  for (auto f : {simd::erf, simd::tanh, simd::sigmoid}) {
    f(x.data(), y.data(), x.size());
    EXPECT_TRUE(std::isnan(y[3]) && std::isnan(y[9]));
    EXPECT_FALSE(std::isnan(y[0]) || std::isnan(y[10]));
  }
  for (bool t : {false, true}) {
    simd::gelu(x.data(), y.data(), x.size(), t);
    EXPECT_TRUE(std::isnan(y[3]) && std::isnan(y[9]));
  }
}

TEST(Vmath, AddVecmatMatchesDoubleAtBlockEdges) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (size_t rows : {1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40, 47, 48, 49, 64, 65, 96, 97, 128})
    for (size_t cols : {0, 1, 5, 16, 33, 700})
      for (size_t nv : {1, 2, 3, 4, 5, 9}) {
        const size_t ld = rows + 3;                 // a column block of a wider matrix, as Rh^T in GRU
        const size_t ldv = cols + 2, ldo = rows + 5;  // vectors and outputs as rows of wider buffers
        std::vector<float> mt(cols * ld + 1), v(nv * ldv + 1), out(nv * ldo);
        for (float& a : mt) a = u(rng);
        for (float& a : v) a = u(rng);
        for (float& a : out) a = u(rng);
        std::vector<double> want(out.begin(), out.end());
        for (size_t r = 0; r < nv; ++r)
          for (size_t k = 0; k < cols; ++k)
            for (size_t j = 0; j < rows; ++j) want[r * ldo + j] += double(v[r * ldv + k]) * mt[k * ld + j];
        std::vector<float> one = out;  // vector by vector: the same bits as all at once
        for (size_t r = 0; r < nv; ++r)
          simd::add_vecmat(mt.data(), ld, rows, cols, v.data() + r * ldv, ldv, one.data() + r * ldo, ldo, 1);
        // From one bias row (ldi = 0) into other rows: the bits of accumulating onto copies of it.
        std::vector<float> bias(rows), from_bias(nv * ldo, 7.f), acc = from_bias;
        for (float& a : bias) a = u(rng);
        for (size_t r = 0; r < nv; ++r) std::copy(bias.begin(), bias.end(), acc.begin() + r * ldo);
        simd::add_vecmat(mt.data(), ld, rows, cols, v.data(), ldv, acc.data(), ldo, nv);
        simd::vecmat(mt.data(), ld, rows, cols, v.data(), ldv, bias.data(), 0, from_bias.data(), ldo, nv);
        simd::add_vecmat(mt.data(), ld, rows, cols, v.data(), ldv, out.data(), ldo, nv);
        for (size_t i = 0; i < out.size(); ++i) {
          const bool written = i % ldo < rows;
          ASSERT_NEAR(out[i], want[i], written ? 2e-7 * (cols + 10) * (1 + std::fabs(want[i])) : 0.0) << rows << "x" << cols << " nv=" << nv << " i=" << i;
          ASSERT_EQ(out[i], one[i]) << rows << "x" << cols << " nv=" << nv << " i=" << i;
          ASSERT_EQ(from_bias[i], acc[i]) << rows << "x" << cols << " nv=" << nv << " i=" << i << " (from a bias row)";
        }
      }
}

// One GRU row (linear_before_reset, Sigmoid, Tanh) against the equations in double, at widths
// around the 8- and 16-lane blocks and the AVX-512 row's 3n >= 256 (n = 86); NaN stays NaN.
TEST(Vmath, GruRowMatchesDoubleAtBlockEdges) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  for (size_t n : {1, 3, 7, 8, 9, 15, 16, 17, 33, 85, 86, 87, 100, 128, 131}) {
    std::vector<float> x(3 * n), a(3 * n), h(n), y(n, 9.f);
    for (float& v : x) v = u(rng);
    for (float& v : a) v = u(rng);
    for (float& v : h) v = u(rng) / 4;
    std::vector<double> want(n);
    for (size_t i = 0; i < n; ++i) {
      const double z = sig(double(x[i]) + a[i]), r = sig(double(x[n + i]) + a[n + i]);
      const double c = std::tanh(double(x[2 * n + i]) + r * a[2 * n + i]);
      want[i] = (1 - z) * c + z * h[i];
    }
    simd::gru_row(x.data(), a.data(), h.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(h[i], want[i], 2e-6) << "n " << n << " i " << i;
      ASSERT_EQ(y[i], h[i]) << "n " << n << " i " << i;
    }
    x[n - 1] = NAN;  // a NaN input gate sum, in the last (tail) unit
    simd::gru_row(x.data(), a.data(), h.data(), y.data(), n);
    EXPECT_TRUE(std::isnan(h[n - 1]) && std::isnan(y[n - 1])) << "n " << n;
  }
}

}  // namespace
}  // namespace kiln::testing
