// Batched matrix multiply with two run-time operands (attention's Q K^T and P V, a decode
// step's q K^T): Kiln's kernel (delegates/xnnpack/dense_conv.h batch_matmul) against one
// library per build, chosen with -DLIB_OPENBLAS, -DLIB_BLIS, -DLIB_EIGEN or -DLIB_DNNL.
// bench/matmul_libs.sh builds one binary per library and writes the comparison table.
// Prints one line per (shape, threads): "<lib> <shape> <threads> <kiln us> <lib us> <max abs diff>".
#include <pthreadpool.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "delegates/xnnpack/dense_conv.h"

#if defined(LIB_OPENBLAS)
#include <cblas.h>
static const char* kLib = "openblas";
#elif defined(LIB_BLIS)
#include <blis.h>
static const char* kLib = "blis";
#elif defined(LIB_EIGEN)
#include <Eigen/Dense>
static const char* kLib = "eigen";
#elif defined(LIB_DNNL)
#include <dnnl.hpp>
#include <omp.h>
static const char* kLib = "onednn";
#endif

namespace {

struct Shape {
  const char* name;
  size_t batch, m, k, n;
};

template <typename F>
double median_us(F f, int reps) {
  std::vector<double> t;
  for (int r = 0; r < reps + 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (r >= 3) t.push_back(us);  // 3 warm-ups
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main() {
  const Shape shapes[] = {{"qk_bert_4x4x128x16x128", 16, 128, 16, 128}, {"av_bert_4x4x128x128x16", 16, 128, 128, 16},
                          {"qk_gpt_4x4x64x8x64", 16, 64, 8, 64},       {"decode_qk_4x4x1x8x57", 16, 1, 8, 57},
                          {"linear_512x64x256", 1, 512, 64, 256},      {"conformer_qk_4x4x63x16x63", 16, 63, 16, 63}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (const Shape& s : shapes) {
    std::vector<float> a(s.batch * s.m * s.k), b(s.batch * s.k * s.n), y0(s.batch * s.m * s.n), y1(y0.size());
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    const int64_t ad[3] = {static_cast<int64_t>(s.batch), static_cast<int64_t>(s.m), static_cast<int64_t>(s.k)};
    const int64_t bd[3] = {static_cast<int64_t>(s.batch), static_cast<int64_t>(s.k), static_cast<int64_t>(s.n)};
    const auto geom = kiln::delegates::xnnpack::matmul_geometry(ad, 3, bd, 3);
    const int reps = std::max(20, static_cast<int>(2e7 / (2.0 * s.batch * s.m * s.k * s.n + 1)));
    for (int threads : {1, 2}) {
      pthreadpool_t pool = threads > 1 ? pthreadpool_create(threads) : nullptr;
      const double kiln_us = median_us([&] { kiln::delegates::xnnpack::batch_matmul(geom, a.data(), b.data(), y0.data(), pool); }, reps);
#if defined(LIB_OPENBLAS)
      openblas_set_num_threads(threads);
      auto run = [&] {
        for (size_t i = 0; i < s.batch; ++i)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(s.m), static_cast<int>(s.n),
                      static_cast<int>(s.k), 1.f, a.data() + i * s.m * s.k, static_cast<int>(s.k), b.data() + i * s.k * s.n,
                      static_cast<int>(s.n), 0.f, y1.data() + i * s.m * s.n, static_cast<int>(s.n));
      };
#elif defined(LIB_BLIS)
      bli_thread_set_num_threads(threads);
      float one = 1.f, zero = 0.f;
      auto run = [&] {
        for (size_t i = 0; i < s.batch; ++i)
          bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, s.m, s.n, s.k, &one, a.data() + i * s.m * s.k, s.k, 1,
                    b.data() + i * s.k * s.n, s.n, 1, &zero, y1.data() + i * s.m * s.n, s.n, 1);
      };
#elif defined(LIB_EIGEN)
      if (threads > 1) {  // Eigen runs a product on one thread unless built with OpenMP
        if (pool) pthreadpool_destroy(pool);
        continue;
      }
      using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
      auto run = [&] {
        for (size_t i = 0; i < s.batch; ++i) {
          Eigen::Map<const Mat> A(a.data() + i * s.m * s.k, s.m, s.k), B(b.data() + i * s.k * s.n, s.k, s.n);
          Eigen::Map<Mat> C(y1.data() + i * s.m * s.n, s.m, s.n);
          C.noalias() = A * B;
        }
      };
#elif defined(LIB_DNNL)
      omp_set_num_threads(threads);
      using namespace dnnl;
      static engine eng(engine::kind::cpu, 0);
      static stream strm(eng);
      const memory::dim R = DNNL_RUNTIME_DIM_VAL;
      // One primitive for any batch, M, K and N (run-time dims), made once.
      static matmul prim = [&] {
        memory::desc ad_({R, R, R}, memory::data_type::f32, {R, R, 1});
        memory::desc bd_({R, R, R}, memory::data_type::f32, {R, R, 1});
        memory::desc cd_({R, R, R}, memory::data_type::f32, {R, R, 1});
        return matmul(matmul::primitive_desc(matmul::desc(ad_, bd_, cd_), eng));  // oneDNN 2.x API
      }();
      const memory::dim B = s.batch, M = s.m, K = s.k, N = s.n;
      memory am({{B, M, K}, memory::data_type::f32, memory::format_tag::abc}, eng, a.data());
      memory bm({{B, K, N}, memory::data_type::f32, memory::format_tag::abc}, eng, b.data());
      memory cm({{B, M, N}, memory::data_type::f32, memory::format_tag::abc}, eng, y1.data());
      auto run = [&] {
        prim.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
        strm.wait();
      };
#endif
      const double lib_us = median_us(run, reps);
      double diff = 0;
      for (size_t i = 0; i < y0.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(y0[i] - y1[i])));
      std::printf("%s %s %d %.2f %.2f %.1e\n", kLib, s.name, threads, kiln_us, lib_us, diff);
      if (pool) pthreadpool_destroy(pool);
    }
  }
  return 0;
}
