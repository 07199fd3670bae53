// The quantized GEMM microkernel on every implementation this CPU has, against a definition
// written here (int64 dot product, requantization by kernels/portable/quant.h): both operand
// signednesses, rows 1-8, K groups 1-300, partial panels, weight zero points on and off,
// extreme values (u8 255 x s8 -128 everywhere: what saturates vpmaddubsw), clamps.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/portable/quant.h"
#include "kernels/simd/qgemm.h"

namespace kiln::simd {
namespace {

TEST(Qgemm, EveryIsaMatchesTheDefinition) {
  std::mt19937 rng(11);
  int ran = 0, skipped = 0;
  for (const char* isa : {"plain", "avx2", "avx512vnni", "neon", "neondot"}) {
    for (bool au : {true, false})
      for (size_t mr : {1, 2, 3, 4, 7, 8})
        for (size_t kp : {4, 8, 36, 1200})
          for (size_t nc : {16, 5})
            for (int variant = 0; variant < 3; ++variant) {  // 0 random, 1 extreme, 2 random with wz
              std::vector<uint8_t> a(mr * (kp + 4)), panel(qgemm_panel_bytes(kp));
              const size_t lda = kp + 4;
              for (uint8_t& v : a) v = variant == 1 ? (au ? 255 : 0x80) : static_cast<uint8_t>(rng());
              for (uint8_t& v : panel) v = variant == 1 ? (au ? 0x80 : 255) : static_cast<uint8_t>(rng());
              std::vector<int32_t> bias(16), wz(16), rowsum(mr);
              std::vector<float> ratio(16);
              for (size_t j = 0; j < 16; ++j) {
                bias[j] = static_cast<int32_t>(rng() % 20001) - 10000;
                wz[j] = static_cast<int32_t>(rng() % 256);
                ratio[j] = (variant == 1 ? 1e-6f : 1e-4f) * static_cast<float>(1 + rng() % 100);
              }
              for (int32_t& s : rowsum) s = static_cast<int32_t>(rng() % 4001) - 2000;
              QgemmEpilogue e;
              e.bias = bias.data(), e.ratio = ratio.data(), e.wz = variant == 2 ? wz.data() : nullptr;
              e.zp = au ? -3 : 7, e.lo = au ? -128 : 0, e.hi = au ? 100 : 255;
              std::vector<uint8_t> y(mr * 20, 0xAB);
              if (!qgemm_on(isa, mr, kp, a.data(), lda, rowsum.data(), panel.data(), e, y.data(), 20, nc, au)) {
                ++skipped;
                continue;
              }
              ++ran;
              for (size_t r = 0; r < mr; ++r)
                for (size_t j = 0; j < 20; ++j) {
                  if (j >= nc) {
                    ASSERT_EQ(y[r * 20 + j], 0xAB) << isa << ": wrote past the panel's channels";
                    continue;
                  }
                  int64_t dot = 0;
                  for (size_t k = 0; k < kp; ++k) {
                    const uint8_t av = a[r * lda + k], bv = panel[qgemm_panel_index(k, j)];
                    dot += au ? int64_t{av} * static_cast<int8_t>(bv) : int64_t{static_cast<int8_t>(av)} * bv;
                  }
                  int64_t acc = dot + bias[j] - (e.wz ? int64_t{wz[j]} * rowsum[r] : 0);
                  const int32_t want = kernels::requantize(static_cast<int32_t>(acc), ratio[j], e.zp, e.lo, e.hi);
                  ASSERT_EQ(static_cast<int32_t>(au ? static_cast<int32_t>(static_cast<int8_t>(y[r * 20 + j]))
                                                    : static_cast<int32_t>(y[r * 20 + j])),
                            want)
                      << isa << " au=" << au << " mr=" << mr << " kp=" << kp << " nc=" << nc << " variant=" << variant
                      << " at " << r << "," << j;
                }
            }
  }
  EXPECT_GT(ran, 0);
  if (skipped > 0) GTEST_LOG_(INFO) << "this CPU lacks " << skipped / 288 << " of the ISAs; checked: " << ran << " calls";
  GTEST_LOG_(INFO) << "qgemm uses " << qgemm_isa();
}

TEST(Qgemm, FloatEpilogueOnEveryIsaMatchesTheDefinition) {
  std::mt19937 rng(23);
  int ran = 0;
  for (const char* isa : {"plain", "avx2", "avx512vnni", "neon", "neondot"})
    for (bool au : {true, false})
      for (size_t mr : {1, 3, 8})
        for (size_t kp : {4, 68})
          for (size_t nc : {16, 9})
            for (int variant = 0; variant < 2; ++variant) {  // 0: no wz, no bias; 1: both
              std::vector<uint8_t> a(mr * kp), panel(qgemm_panel_bytes(kp));
              for (uint8_t& v : a) v = static_cast<uint8_t>(rng());
              for (uint8_t& v : panel) v = static_cast<uint8_t>(rng());
              std::vector<int32_t> bias(16), wz(16), rowsum(mr);
              std::vector<float> scale(16), fbias(16);
              for (size_t j = 0; j < 16; ++j) {
                bias[j] = static_cast<int32_t>(rng() % 20001) - 10000, wz[j] = static_cast<int32_t>(rng() % 256);
                scale[j] = 1e-3f * static_cast<float>(1 + rng() % 97), fbias[j] = 0.1f * static_cast<float>(rng() % 21) - 1.f;
              }
              for (int32_t& v : rowsum) v = static_cast<int32_t>(rng() % 4001) - 2000;
              QgemmF32Epilogue e;
              e.bias = bias.data(), e.scale = scale.data();
              if (variant) e.wz = wz.data(), e.fbias = fbias.data();
              std::vector<float> y(mr * 17, -7.f);
              if (!qgemm_f32_on(isa, mr, kp, a.data(), kp, rowsum.data(), panel.data(), e, y.data(), 17, nc, au)) continue;
              ++ran;
              for (size_t r = 0; r < mr; ++r)
                for (size_t j = 0; j < 17; ++j) {
                  if (j >= nc) {
                    ASSERT_EQ(y[r * 17 + j], -7.f) << isa << ": wrote past the panel's channels";
                    continue;
                  }
                  int64_t dot = 0;
                  for (size_t k = 0; k < kp; ++k) {
                    const uint8_t av = a[r * kp + k], bv = panel[qgemm_panel_index(k, j)];
                    dot += au ? int64_t{av} * static_cast<int8_t>(bv) : int64_t{static_cast<int8_t>(av)} * bv;
                  }
                  const int64_t acc = dot + bias[j] - (e.wz ? int64_t{wz[j]} * rowsum[r] : 0);
                  volatile float want = static_cast<float>(static_cast<int32_t>(acc)) * scale[j];  // two roundings
                  if (e.fbias) want = want + fbias[j];
                  ASSERT_EQ(y[r * 17 + j], want) << isa << " au=" << au << " mr=" << mr << " kp=" << kp << " at " << r << "," << j;
                }
            }
  EXPECT_GE(ran, 48);  // the plain path always runs
}

TEST(Qgemm, TransposedInt32EpilogueOnEveryIsaMatchesTheDefinition) {
  std::mt19937 rng(29);
  int ran = 0;
  for (const char* isa : {"plain", "avx2", "avx512vnni", "neon", "neondot"})
    for (bool au : {true, false})
      for (size_t mr : {1, 4, 8})
        for (size_t nc : {16, 3})
          for (bool with_wz : {false, true}) {
            const size_t kp = 148, ldy = 11;
            std::vector<uint8_t> a(mr * kp), panel(qgemm_panel_bytes(kp));
            for (uint8_t& v : a) v = static_cast<uint8_t>(rng());
            for (uint8_t& v : panel) v = static_cast<uint8_t>(rng());
            std::vector<int32_t> bias(16), wz(16), rowsum(mr);
            for (size_t j = 0; j < 16; ++j) bias[j] = static_cast<int32_t>(rng() % 2000001) - 1000000, wz[j] = static_cast<int32_t>(rng() % 256);
            for (int32_t& v : rowsum) v = static_cast<int32_t>(rng() % 40001) - 20000;
            QgemmI32Epilogue e;
            e.bias = bias.data(), e.wz = with_wz ? wz.data() : nullptr;
            std::vector<int32_t> y(16 * ldy, -99);
            if (!qgemm_i32t_on(isa, mr, kp, a.data(), kp, rowsum.data(), panel.data(), e, y.data(), ldy, nc, au)) continue;
            ++ran;
            for (size_t j = 0; j < 16; ++j)
              for (size_t r = 0; r < ldy; ++r) {
                if (j >= nc || r >= mr) {
                  ASSERT_EQ(y[j * ldy + r], -99) << isa << ": wrote outside the block";
                  continue;
                }
                int64_t dot = 0;
                for (size_t k = 0; k < kp; ++k) {
                  const uint8_t av = a[r * kp + k], bv = panel[qgemm_panel_index(k, j)];
                  dot += au ? int64_t{av} * static_cast<int8_t>(bv) : int64_t{static_cast<int8_t>(av)} * bv;
                }
                ASSERT_EQ(y[j * ldy + r], dot + bias[j] - (with_wz ? int64_t{wz[j]} * rowsum[r] : 0))
                    << isa << " au=" << au << " mr=" << mr << " at " << r << "," << j;
              }
          }
  EXPECT_GE(ran, 24);
}

TEST(Qgemm, DepthwiseRowOnEveryIsaMatchesPlain) {
  std::mt19937 rng(17);
  int ran = 0;
  for (size_t c : {1, 7, 16, 17, 40})
    for (size_t taps : {1, 9, 25})
      for (bool xs : {true, false}) {
        const size_t padded = (c + 15) / 16 * 16;
        std::vector<std::vector<uint8_t>> rows(taps, std::vector<uint8_t>(c));
        std::vector<const uint8_t*> x(taps);
        for (size_t t = 0; t < taps; ++t) {
          for (uint8_t& v : rows[t]) v = static_cast<uint8_t>(rng());
          x[t] = rows[t].data();
        }
        std::vector<int16_t> w(padded * taps);
        for (int16_t& v : w) v = static_cast<int16_t>(static_cast<int>(rng() % 511) - 255);
        std::vector<int32_t> bias(padded);
        std::vector<float> ratio(padded);
        for (size_t j = 0; j < padded; ++j) bias[j] = static_cast<int32_t>(rng() % 20001) - 10000, ratio[j] = 1e-3f * (1 + rng() % 20);
        QgemmEpilogue e;
        e.bias = bias.data(), e.ratio = ratio.data(), e.zp = xs ? 5 : 130, e.lo = xs ? -128 : 0, e.hi = xs ? 127 : 255;
        std::vector<uint8_t> want(c + 1, 0xEE);
        const std::vector<size_t> step(taps, 0);
        ASSERT_TRUE(qdw_row_on("plain", taps, x.data(), step.data(), 1, xs, c, w.data(), e, want.data()));
        for (size_t j = 0; j < c; ++j) {
          int64_t acc = bias[j];
          for (size_t t = 0; t < taps; ++t)
            acc += int64_t{xs ? static_cast<int8_t>(rows[t][j]) : rows[t][j]} * w[(j / 16) * taps * 16 + t * 16 + j % 16];
          ASSERT_EQ(static_cast<int32_t>(xs ? static_cast<int8_t>(want[j]) : want[j]),
                    kernels::requantize(static_cast<int32_t>(acc), ratio[j], e.zp, e.lo, e.hi));
        }
        for (const char* isa : {"avx2", "avx512vnni", "neon", "neondot"}) {
          std::vector<uint8_t> y(c + 1, 0xEE);
          if (!qdw_row_on(isa, taps, x.data(), step.data(), 1, xs, c, w.data(), e, y.data())) continue;
          ++ran;
          ASSERT_EQ(y, want) << isa << " c=" << c << " taps=" << taps << " xs=" << xs;
        }
      }
  if (ran == 0) GTEST_LOG_(INFO) << "this CPU has no vector row (AVX2, AVX-512, NEON): only the plain path was checked";
}

}  // namespace
}  // namespace kiln::simd
