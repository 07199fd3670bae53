// simd::binary_rows and simd::clamp (the delegate's Add, Sub, Mul, Div, Max, Min and clamps)
// against a scalar reference written here: every operation, each operand advancing or
// repeating along the row and across rows, lengths around every vector width (tails), clamps
// none / Relu / Relu6, in place, with NaN, +-Inf and +-0 among the values. Bit for bit, NaN
// class included: NaN stays NaN through every clamp and wins Max and Min in either position.
// scripts/test_isas.sh runs it under each row the CPU has; arm64 runs the plain row (NEON).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/simd/vbinary.h"

namespace kiln::simd {
namespace {

float reference(BinaryKind op, float a, float b, float lo, float hi) {
  float v = 0.f;
  switch (op) {
    case BinaryKind::kAdd: v = a + b; break;
    case BinaryKind::kSub: v = a - b; break;
    case BinaryKind::kMul: v = a * b; break;
    case BinaryKind::kDiv: v = a / b; break;
    case BinaryKind::kMax: v = std::isnan(a) ? a : std::isnan(b) ? b : std::max(a, b); break;
    case BinaryKind::kMin: v = std::isnan(a) ? a : std::isnan(b) ? b : std::min(a, b); break;
  }
  const float t = v < lo ? lo : v;  // kernels::clamp_keep_nan's order (-0 stays -0 above lo = 0)
  return t > hi ? hi : t;
}

// Equal bits, or both NaN.
bool same(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  uint32_t bx, by;
  std::memcpy(&bx, &x, 4);
  std::memcpy(&by, &y, 4);
  return bx == by;
}

std::vector<float> values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 3.f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.f, -0.f};
  for (size_t i = seed % 7; i < n; i += 11) v[i] = specials[(i / 11) % 5];
  return v;
}

const char* name(BinaryKind op) {
  const char* names[] = {"add", "sub", "mul", "div", "max", "min"};
  return names[static_cast<int>(op)];
}

TEST(VBinary, EveryOperationAndBroadcastMatchesTheScalarReference) {
  SCOPED_TRACE(std::string("row ") + vbinary_isa());
  const BinaryKind ops[] = {BinaryKind::kAdd, BinaryKind::kSub, BinaryKind::kMul,
                            BinaryKind::kDiv, BinaryKind::kMax, BinaryKind::kMin};
  const float clamps[][2] = {{-INFINITY, INFINITY}, {0.f, INFINITY}, {0.f, 6.f}};
  uint32_t seed = 1;
  for (BinaryKind op : ops)
    for (const auto& c : clamps)
      for (size_t cols : {1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 77})
        for (size_t rows : {1, 3})
          for (int pattern = 0; pattern < 16; ++pattern) {
            // bit 0/1: a/b advance along the row; bit 2/3: a/b advance across rows
            const size_t sa = pattern & 1, sb = (pattern >> 1) & 1;
            const size_t lda = (pattern & 4) ? cols + 2 : 0, ldb = (pattern & 8) ? cols + 5 : 0;
            const std::vector<float> a = values(rows * (cols + 2) + 1, ++seed), b = values(rows * (cols + 5) + 1, ++seed);
            const size_t ldy = cols + 1;
            std::vector<float> y(rows * ldy, 1234.f);
            binary_rows(op, a.data(), lda, sa, b.data(), ldb, sb, y.data(), ldy, rows, cols, c[0], c[1]);
            for (size_t r = 0; r < rows; ++r) {
              for (size_t i = 0; i < cols; ++i) {
                const float want = reference(op, a[r * lda + i * sa], b[r * ldb + i * sb], c[0], c[1]);
                ASSERT_TRUE(same(y[r * ldy + i], want))
                    << name(op) << " clamp [" << c[0] << ", " << c[1] << "] cols " << cols << " rows " << rows
                    << " pattern " << pattern << " at " << r << "," << i << ": " << y[r * ldy + i] << " vs " << want;
              }
              EXPECT_EQ(y[r * ldy + cols], 1234.f) << "wrote past the row";
            }
          }
}

TEST(VBinary, InPlaceOnEitherOperand) {
  for (size_t n : {5, 16, 40, 1000}) {
    const std::vector<float> a0 = values(n, 3), b0 = values(n, 4);
    for (int target = 0; target < 2; ++target) {
      std::vector<float> a = a0, b = b0;
      float* y = target == 0 ? a.data() : b.data();
      binary_rows(BinaryKind::kSub, a.data(), 0, 1, b.data(), 0, 1, y, 0, 1, n, 0.f, INFINITY);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(same(y[i], reference(BinaryKind::kSub, a0[i], b0[i], 0.f, INFINITY))) << "n " << n << " at " << i;
      }
    }
  }
}

TEST(VBinary, ClampKeepsNaNAndInfinities) {
  for (size_t n : {1, 7, 8, 9, 16, 33, 100}) {
    const std::vector<float> x = values(n, static_cast<uint32_t>(n));
    for (const auto& c : {std::pair<float, float>{0.f, INFINITY}, {0.f, 6.f}, {-1.f, 1.f}}) {
      std::vector<float> y(n + 1, 1234.f);
      clamp(x.data(), y.data(), n, c.first, c.second);
      for (size_t i = 0; i < n; ++i) {
        const float t = x[i] < c.first ? c.first : x[i], want = t > c.second ? c.second : t;
        ASSERT_TRUE(same(y[i], want)) << "n " << n << " at " << i << ": " << y[i] << " vs " << want;
      }
      EXPECT_EQ(y[n], 1234.f);
    }
  }
}

}  // namespace
}  // namespace kiln::simd
