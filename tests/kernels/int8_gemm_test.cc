// Kiln's integer GEMM and its packing helpers on every implementation this CPU has, against
// the plain definition (sum of (a - az)(b - bz) in int64), at many sizes: k odd and even, n
// not a multiple of the column block, row counts around the 4-row block, extreme values (the
// u8 x s8 pair sums that saturate vpmaddubsw).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/simd/int8_gemm.h"
#include "kernels/simd/quantize.h"

namespace kiln::simd {
namespace {

struct Case {
  size_t m, k, n;
};

TEST(Int8Gemm, EveryIsaMatchesTheDefinition) {
  std::mt19937 rng(7);
  const Case cases[] = {{1, 1, 1}, {1, 2, 16}, {3, 5, 17}, {4, 64, 64}, {5, 33, 31}, {9, 128, 40}, {17, 255, 3}, {2, 1000, 48}};
  int ran = 0;
  for (const char* isa : {"plain", "avx2"}) {
    for (const Case& cs : cases) {
      for (int extreme = 0; extreme < 2; ++extreme) {
        std::vector<int16_t> a(cs.m * 2 * int8_gemm_k_pairs(cs.k), 0), b(int8_gemm_b_elems(cs.k, cs.n), 0);
        std::vector<int32_t> av(cs.m * cs.k), bv(cs.k * cs.n);
        std::uniform_int_distribution<int> d(-255, 255);
        for (size_t r = 0; r < cs.m; ++r)
          for (size_t kk = 0; kk < cs.k; ++kk) a[r * 2 * int8_gemm_k_pairs(cs.k) + kk] = static_cast<int16_t>(av[r * cs.k + kk] = extreme ? 255 : d(rng));
        for (size_t kk = 0; kk < cs.k; ++kk)
          for (size_t j = 0; j < cs.n; ++j)
            b[int8_gemm_b_index(int8_gemm_k_pairs(cs.k), kk, j)] = static_cast<int16_t>(bv[kk * cs.n + j] = extreme ? -128 : d(rng));
        std::vector<int32_t> c(cs.m * cs.n, 12345);
        if (!int8_gemm_on(isa, a.data(), b.data(), cs.k, cs.n, c.data(), cs.n, 0, cs.m)) continue;
        ++ran;
        for (size_t r = 0; r < cs.m; ++r)
          for (size_t j = 0; j < cs.n; ++j) {
            int64_t want = 0;
            for (size_t kk = 0; kk < cs.k; ++kk) want += int64_t{av[r * cs.k + kk]} * bv[kk * cs.n + j];
            ASSERT_EQ(c[r * cs.n + j], want) << isa << " m" << cs.m << " k" << cs.k << " n" << cs.n << " at " << r << "," << j;
          }
      }
    }
  }
  EXPECT_GE(ran, 16);  // the plain path always runs
  if (ran == 16) GTEST_LOG_(INFO) << "this CPU has no AVX2: only the plain path was checked";
}

TEST(Int8Pack, WidenInterleaveAndRequantizeMatchTheDefinition) {
  std::mt19937 rng(3);
  for (size_t n : {0, 1, 15, 16, 31, 32, 33, 100, 256}) {
    std::vector<uint8_t> u(n);
    std::vector<int8_t> s(n);
    for (size_t i = 0; i < n; ++i) u[i] = static_cast<uint8_t>(rng()), s[i] = static_cast<int8_t>(rng());
    std::vector<int16_t> wu(n), ws(n);
    widen_u8(u.data(), n, 131, wu.data());
    widen_i8(s.data(), n, -7, ws.data());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(wu[i], u[i] - 131);
      ASSERT_EQ(ws[i], s[i] + 7);
    }
    const size_t blocks = (n + 15) / 16;
    std::vector<int16_t> out(blocks * 64, 0);
    interleave_pairs(wu.data(), ws.data(), n, out.data(), 64);
    for (size_t j = 0; j < n; ++j) {
      ASSERT_EQ(out[j / 16 * 64 + j % 16 * 2], wu[j]);
      ASSERT_EQ(out[j / 16 * 64 + j % 16 * 2 + 1], ws[j]);
    }
    std::vector<int32_t> acc(n);
    for (size_t i = 0; i < n; ++i) acc[i] = static_cast<int32_t>(rng() % 200001) - 100000;
    if (n > 2) acc[0] = 250, acc[1] = 350, acc[2] = -250;  // ties at ratio 0.01: 2.5, 3.5, -2.5
    std::vector<uint8_t> yu(n);
    std::vector<int8_t> yi(n);
    requantize_u8(acc.data(), n, 0, 0.01f, 100, 0, 255, yu.data());
    requantize_i8(acc.data(), n, 0, 0.01f, -3, -128, 100, yi.data());
    for (size_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(acc[i]) * 0.01f;
      const auto q = [&](int32_t zp, int32_t lo, int32_t hi) {
        float c = v < lo - zp ? lo - zp : v > hi - zp ? hi - zp : v;
        return static_cast<int32_t>(std::nearbyint(c)) + zp;
      };
      ASSERT_EQ(yu[i], q(100, 0, 255)) << i;
      ASSERT_EQ(yi[i], q(-3, -128, 100)) << i;
    }
  }
}

}  // namespace
}  // namespace kiln::simd
