// Several Methods of one Program on different threads at once, each at its own shapes, with
// and without the delegate: a Program is shared read-only, a Method is its own state. Each
// thread's outputs must equal what the same Method computes alone. Run under ThreadSanitizer
// by scripts/sanitize.sh (build-tsan), and as a plain test everywhere else. Under TSan each
// Method runs on its caller's thread alone: pthreadpool is not instrumented, so TSan cannot
// see the synchronization inside it (the pool's own threads are checked by the plain runs,
// which compare every output bit for bit).
#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "aligned_bytes.h"
#include "export/onnx/onnx_import.h"
#include "format/program_desc.h"
#include "kiln/method.h"
#include "kiln/program.h"
#include "zoo_manifest.h"

namespace kiln::testing {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

std::vector<float> run_once(Method& m, const std::vector<std::vector<int64_t>>& shapes, uint32_t seed) {
  EXPECT_TRUE(m.bind_shapes(shapes).ok());
  std::mt19937 rng(seed);
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    TensorView t = m.input(i);
    if (t.dtype == DType::kF32) {
      std::normal_distribution<float> g;
      for (int64_t k = 0; k < t.numel(); ++k) t.as<float>()[k] = g(rng);
    } else if (t.dtype == DType::kI64) {
      for (int64_t k = 0; k < t.numel(); ++k) t.as<int64_t>()[k] = static_cast<int64_t>(rng() % 50);
    }
  }
  EXPECT_TRUE(m.execute().ok());
  std::vector<float> out;
  for (size_t o = 0; o < m.num_outputs(); ++o) {
    const TensorView& t = m.output(o);
    if (t.dtype == DType::kF32) out.insert(out.end(), t.as<float>(), t.as<float>() + t.numel());
  }
  return out;
}

TEST(Concurrency, MethodsOfOneProgramOnManyThreads) {
  const nlohmann::json model = zoo_model("bert_tiny");
  format::ProgramDesc desc;
  auto report = exporter::export_onnx(zoo_dir() + "/" + model["onnx"].get<std::string>(), zoo_export_options(model), &desc);
  ASSERT_TRUE(report.ok()) << report.status().message();
  AlignedBytes image(*format::serialize_program(desc));
  auto program = image.load();
  ASSERT_TRUE(program.ok());
  struct Job {
    int64_t batch, seq;
    bool delegate;
    int threads;
  };
  std::vector<Job> jobs = {{1, 1, true, 1}, {2, 17, true, 2}, {4, 128, false, 1}, {3, 64, true, 1},
                           {1, 100, false, 2}, {4, 5, true, 2}};
  if (kThreadSanitizer)
    for (Job& j : jobs) j.threads = 1;
  // Alone first: the reference per job.
  std::vector<std::vector<float>> want;
  for (size_t j = 0; j < jobs.size(); ++j) {
    MethodOptions o;
    o.use_delegate = jobs[j].delegate;
    o.cpu_threads = jobs[j].threads;
    auto m = Method::create(**program, "forward", o);
    ASSERT_TRUE(m.ok());
    want.push_back(run_once(**m, {{jobs[j].batch, jobs[j].seq}, {jobs[j].batch, jobs[j].seq}}, 100 + j));
  }
  // Then all at once, each thread creating its own Method and running it several times.
  std::vector<std::vector<float>> got(jobs.size());
  std::vector<std::thread> threads;
  for (size_t j = 0; j < jobs.size(); ++j)
    threads.emplace_back([&, j] {
      MethodOptions o;
      o.use_delegate = jobs[j].delegate;
      o.cpu_threads = jobs[j].threads;
      auto m = Method::create(**program, "forward", o);
      if (!m.ok()) return;
      for (int rep = 0; rep < 3; ++rep) got[j] = run_once(**m, {{jobs[j].batch, jobs[j].seq}, {jobs[j].batch, jobs[j].seq}}, 100 + j);
    });
  for (std::thread& t : threads) t.join();
  for (size_t j = 0; j < jobs.size(); ++j) EXPECT_EQ(got[j], want[j]) << "job " << j;
}

}  // namespace
}  // namespace kiln::testing
