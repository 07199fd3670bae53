// execute() performs zero heap allocations: counted by replacing global operator new. The
// same replacement fails a chosen allocation on purpose: every allocation of load and create
// may fail, and each failure must come back as an error, with nothing leaked.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <sstream>
#include <cstdlib>
#include <memory>
#include <new>
#include <set>
#include <string>

#include "aligned_bytes.h"
#include "export/graph.h"
#include "kiln/method.h"
#include "kiln/program.h"
#include "core/status.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocs{0};
std::atomic<long> g_fail_at{0};  // while counting, the g_fail_at-th allocation fails (0: none)

// Counts an allocation; true when it is the one to fail.
bool count_and_fail() {
  if (!g_counting) return false;
  const long n = ++g_allocs;
  return n == g_fail_at;
}
}  // namespace

void* operator new(std::size_t n) {
  if (count_and_fail()) throw std::bad_alloc();
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (count_and_fail()) return nullptr;
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void* operator new(std::size_t n, std::align_val_t a) {
  if (count_and_fail()) throw std::bad_alloc();
  void* p = std::aligned_alloc(static_cast<size_t>(a), (n + static_cast<size_t>(a) - 1) / static_cast<size_t>(a) * static_cast<size_t>(a));
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  if (count_and_fail()) return nullptr;
  return std::aligned_alloc(static_cast<size_t>(a), (n + static_cast<size_t>(a) - 1) / static_cast<size_t>(a) * static_cast<size_t>(a));
}
// Every replaced operator new above allocates with malloc or aligned_alloc, so free is the
// matching release; GCC cannot see that across the replacement and warns.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace kiln {
namespace {

long count_allocs(const std::function<void()>& fn) {
  g_allocs = 0;
  g_counting = true;
  fn();
  g_counting = false;
  return g_allocs;
}

TEST(Allocations, HookCountsAllocations) {
  long n = count_allocs([] {
    int* volatile p = new int(3);
    delete p;
  });
  EXPECT_EQ(n, 1);
}

TEST(Allocations, BindAndExecuteAllocateNothing) {
  exporter::GraphBuilder g;
  ASSERT_TRUE(g.add_dim("batch", 1, 16).ok());
  int x = *g.add_input("x", DType::kF32, {"batch", 8});
  int w = *g.add_constant<float>("w", DType::kF32, {8}, std::vector<float>(8, 0.5f));
  int h = *g.add("Mul", "mul", {x, w});
  int y = *g.add("Sub", "sub", {h, x});
  ASSERT_TRUE(g.mark_output(y, "y").ok());
  format::ProgramDesc d;
  ASSERT_TRUE(g.emit(&d).ok());
  std::vector<uint8_t> bytes = *format::serialize_program(d);
  testing::AlignedBytes buf(bytes);
  auto p = buf.load();
  ASSERT_TRUE(p.ok());
  auto m = Method::create(**p, "forward");
  ASSERT_TRUE(m.ok());
  for (int64_t batch : {16, 3, 1}) {
    const std::vector<std::vector<int64_t>> shapes = {{batch, 8}};
    long b = count_allocs([&] { ASSERT_TRUE((*m)->bind_shapes(shapes).ok()); });
    EXPECT_EQ(b, 0) << "bind allocated at batch " << batch;
    long n = count_allocs([&] { ASSERT_TRUE((*m)->execute().ok()); });
    EXPECT_EQ(n, 0) << "execute allocated at batch " << batch;
    EXPECT_EQ((*m)->output(0).dims[0], batch);
  }
}

}  // namespace
}  // namespace kiln

#include <fstream>

#include <nlohmann/json.hpp>

#include "delegates/xnnpack/delegate.h"
#include "export/onnx/onnx_import.h"
#include "zoo_manifest.h"

namespace kiln {
namespace {

// Every op the zoo uses, at the bound and below it: execute allocates nothing.
TEST(Allocations, ZooModelsExecuteWithoutAllocating) {
  auto manifest = testing::zoo_manifest();
  ASSERT_FALSE(manifest.is_discarded());
  for (const auto& model : manifest["models"]) {
    format::ProgramDesc desc;
    auto report = exporter::export_onnx(testing::zoo_dir() + "/" + model["onnx"].get<std::string>(),
                                        testing::zoo_export_options(model), &desc);
    ASSERT_TRUE(report.ok()) << report.status().message();
    std::vector<uint8_t> bytes = *format::serialize_program(desc);
    testing::AlignedBytes buf(bytes);
    {
      auto p = buf.load();
      ASSERT_TRUE(p.ok());
      for (int threads : {1, 2}) {
      MethodOptions opts;
      opts.cpu_threads = threads;
      auto m = Method::create(**p, "forward", opts);
      ASSERT_TRUE(m.ok());
      EXPECT_TRUE((*m)->delegate_warning().empty()) << (*m)->delegate_warning();
      for (const auto& c : model["cases"]) {
        std::vector<std::vector<int64_t>> shapes;
        std::stringstream ss(c["input_shapes"].get<std::string>());
        std::string tok;
        while (std::getline(ss, tok, ',')) {
          std::vector<int64_t> s;
          std::stringstream ds(tok);
          std::string d;
          while (std::getline(ds, d, 'x')) s.push_back(std::stoll(d));
          shapes.push_back(s);
        }
        // Method::create bound at the bound, so XNNPACK's setup buffers are bound-sized: a
        // bind below it and every execute allocate nothing through Kiln's xnn_allocator.
        const uint64_t xnn_before = delegates::xnnpack::allocation_count();
        long b = count_allocs([&] { ASSERT_TRUE((*m)->bind_shapes(shapes).ok()); });
        EXPECT_EQ(b, 0) << model["name"] << " at " << c["input_shapes"] << " threads " << threads << ": bind allocated";
        for (size_t i = 0; i < (*m)->num_inputs(); ++i) std::memset((*m)->input(i).data, 0, (*m)->input(i).nbytes());
        long n = count_allocs([&] { ASSERT_TRUE((*m)->execute().ok()); });
        EXPECT_EQ(n, 0) << model["name"] << " at " << c["input_shapes"] << " threads " << threads;
        EXPECT_EQ(delegates::xnnpack::allocation_count(), xnn_before)
            << model["name"] << " at " << c["input_shapes"] << ": XNNPACK allocated in bind or execute";
      }
      }
    }
  }
}

}  // namespace
}  // namespace kiln

#include <malloc.h>

#include "export/xnnpack_partition.h"
#include "tooling/examples.h"

namespace kiln {
namespace {

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define KILN_TEST_ASAN 1
#endif

// Bytes the process holds on the heap (glibc); under ASan, LeakSanitizer checks instead.
size_t heap_in_use() {
#ifdef KILN_TEST_ASAN
  return 0;
#else
  return mallinfo2().uordblks;
#endif
}

// Loads `image` and creates its method (delegate on, `threads` threads); the Status of the
// first step that fails, or ok with the delegate's warning (a delegate that cannot be made
// leaves the portable kernels running, and says why).
Status load_and_create(const testing::AlignedBytes& image, int threads, std::string* warning) {
  auto p = image.load();
  if (!p.ok()) return p.status();
  MethodOptions o;
  o.cpu_threads = threads;
  auto m = Method::create(**p, "forward", o);
  if (!m.ok()) return m.status();
  *warning = (*m)->delegate_warning();
  return ok_status();
}

// A model whose delegated steps are XNNPACK operators on every CPU (a transposed convolution and
// a Sigmoid): the bundled examples run on Kiln's own kernels where the CPU has AVX2.
Result<tooling::ExampleModel> make_xnnpack_model() {
  tooling::ExampleModel m;
  exporter::GraphBuilder g;
  KILN_TRY(g.add_dim("H", 1, 16));
  KILN_ASSIGN_OR_RETURN(int x, g.add_input("x", DType::kF32, {1, 4, "H", "H"}, {1, 4, 8, 8}));
  m.weights["w"] = tooling::example_weights(7, 4 * 6 * 3 * 3, 0.3f);
  KILN_ASSIGN_OR_RETURN(int w, g.add_constant("w", DType::kF32, {4, 6, 3, 3}, m.weights["w"]));
  core::AttrStore up;
  up.set_ints("kernel_shape", {3, 3}).set_ints("strides", {2, 2}).set_ints("pads", {1, 1, 1, 1});
  KILN_ASSIGN_OR_RETURN(int h, g.add("ConvTranspose", "up", {x, w}, up));
  KILN_ASSIGN_OR_RETURN(int y, g.add("Sigmoid", "act", {h}));
  KILN_TRY(g.mark_output(y, "y"));
  KILN_TRY(g.emit(&m.program).status());
  return m;
}

// Allocation failure injected at every allocation of load and create, in turn (Kiln's own and
// XNNPACK's, which come through Kiln's allocator): each gives an error ("out of memory"), or
// the portable kernels with the delegate's warning; never a crash, and the heap returns to
// where it was, so nothing leaks on any way out.
TEST(Allocations, EveryAllocationInLoadAndCreateMayFail) {
  for (const char* which : {"mlp", "cnn", "xnnpack"}) {
    const std::string w = which;
    auto model = w == "mlp" ? tooling::make_mlp_example() : w == "cnn" ? tooling::make_cnn_example() : make_xnnpack_model();
    ASSERT_TRUE(model.ok());
    ASSERT_TRUE(exporter::partition_xnnpack(&model->program.methods[0], model->program.constants).ok());
    testing::AlignedBytes image(*format::serialize_program(model->program));
    for (int threads : {1, 2}) {
      std::string warning;
      ASSERT_TRUE(load_and_create(image, threads, &warning).ok());  // warm: one-time initialization
      ASSERT_TRUE(warning.empty()) << warning;
      const long total = count_allocs([&] { ASSERT_TRUE(load_and_create(image, threads, &warning).ok()); });
      ASSERT_GT(total, 10) << which;
      // Up to six sweeps, until one leaves the heap within 512 bytes of where it began: the
      // first throws of a process set up the unwinder's caches (a few hundred bytes, once, and
      // not always in the first sweep, depending on the heap's layout), while a leak on failure
      // paths leaks at each of hundreds of them, every sweep. LeakSanitizer checks the same
      // test exactly in the sanitized job.
      long errors = 0, fallbacks = 0;
      size_t heap_before = 0;
      for (int sweep = 0; sweep < 6; ++sweep) {
        if (sweep >= 2 && heap_in_use() <= heap_before + 512) break;
        heap_before = heap_in_use();
        errors = fallbacks = 0;
        for (long k = 1; k <= total; ++k) {
          g_fail_at = k;
          Status s;
          warning.clear();
          count_allocs([&] { s = load_and_create(image, threads, &warning); });
          g_fail_at = 0;
          if (!s.ok()) {
            ++errors;
            EXPECT_EQ(s.code(), Code::kResourceExhausted) << which << " allocation " << k << ": " << s.message();
            EXPECT_NE(s.message().find("out of memory"), std::string::npos) << which << " allocation " << k << ": " << s.message();
          } else {
            ++fallbacks;
            EXPECT_NE(warning.find("xnnpack delegate unavailable"), std::string::npos)
                << which << " allocation " << k << " of " << total << " failed and nothing said so: " << warning;
            EXPECT_NE(warning.find("out of memory"), std::string::npos) << warning;
          }
        }
      }
      // With a pool (2 threads), its threads' own allocator state comes and goes with timing:
      // the heap is compared on one thread only (LeakSanitizer covers both exactly).
      if (threads == 1) {
        EXPECT_LE(heap_in_use(), heap_before + 512) << which << ": the failed loads and creates leaked";
      }
      if (w == "xnnpack") {  // (the examples may have no XNNPACK operator to fail)
        EXPECT_GT(fallbacks, 0) << which << ": no XNNPACK allocation was failed";
      }
      RecordProperty(std::string(which) + "_threads" + std::to_string(threads),
                     std::to_string(total) + " allocations: " + std::to_string(errors) + " errors, " +
                         std::to_string(fallbacks) + " portable fallbacks");
    }
  }
}

}  // namespace
}  // namespace kiln

#include "e2e/e2e_util.h"
#include "scratch_dir.h"
#include "tooling/npy.h"

namespace kiln {
namespace {

// `kiln export` of zoo model `onnx` (relative to zoo/) with `args` into the scratch dir as
// `name`.kiln; its bytes, aligned for loading (null, with a failure added, when it fails).
std::unique_ptr<testing::AlignedBytes> export_zoo_program(const std::string& onnx, const std::string& args,
                                                          const std::string& name) {
  const std::string path = testing::scratch_dir() + "/" + name + ".kiln";
  testing::CommandResult exp =
      testing::run_command(testing::bin("kiln") + " export " + testing::zoo_dir() + "/" + onnx + " -o " + path + args);
  if (exp.exit_code != 0) return ADD_FAILURE() << exp.output, nullptr;
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return std::make_unique<testing::AlignedBytes>(bytes);
}

// Programs whose execute does more than run kernels in order: a data-dependent count
// (NonZero, NonMaxSuppression, TopK with K from the data, torchvision's detectors; execute
// re-sizes the values that read it), runtime branches (Silero VAD's If on
// the sample rate) and runtime loops (execute jumps back). Exported with their op zoo
// contracts, run at every reference case with its real inputs: execute allocates nothing.
TEST(Allocations, OpZooControlAndDataDependentProgramsExecuteWithoutAllocating) {
  const nlohmann::json all = testing::zoo_manifest("ops/manifest.json");
  ASSERT_FALSE(all.is_discarded());
  int tried = 0;
  for (const auto& model : all["models"]) {
    const std::string name = model["name"];
    static const std::set<std::string> kNames = {"nonzero_postprocess", "nonzero_pairs", "silero_vad", "loop_dynamic",
                                                 "loop_while", "yolo_nms", "topk_data_k", "tv_ssd", "tv_retinanet"};
    if (!kNames.count(name)) continue;
    ++tried;
    std::string args;
    for (const auto& a : model["export_args"]) args += " " + a.get<std::string>();
    std::unique_ptr<testing::AlignedBytes> buf = export_zoo_program(model["onnx"].get<std::string>(), args, "alloc_" + name);
    ASSERT_TRUE(buf);
    auto p = buf->load();
    ASSERT_TRUE(p.ok()) << p.status().message();
    for (bool delegate : {true, false}) {
      MethodOptions opts;
      opts.use_delegate = delegate;
      auto m = Method::create(**p, "forward", opts);
      ASSERT_TRUE(m.ok()) << m.status().message();
      for (const auto& c : model["cases"]) {
        std::vector<tooling::NpyArray> in;
        std::vector<std::vector<int64_t>> shapes;
        for (const auto& file : c["inputs"]) {
          auto a = tooling::read_npy(testing::zoo_dir() + "/" + file.get<std::string>());
          ASSERT_TRUE(a.ok()) << a.status().message();
          shapes.push_back(a->shape);
          in.push_back(std::move(*a));
        }
        const std::string what = name + " case " + c["name"].get<std::string>() + (delegate ? " delegated" : " portable");
        long b = count_allocs([&] { ASSERT_TRUE((*m)->bind_shapes(shapes).ok()) << what; });
        EXPECT_EQ(b, 0) << what << ": bind allocated";
        for (size_t i = 0; i < in.size(); ++i) {
          ASSERT_EQ((*m)->input(i).nbytes(), in[i].data.size()) << what;
          std::memcpy((*m)->input(i).data, in[i].data.data(), in[i].data.size());
        }
        long n = count_allocs([&] { ASSERT_TRUE((*m)->execute().ok()) << what; });
        EXPECT_EQ(n, 0) << what;
      }
    }
  }
  EXPECT_EQ(tried, 9);
}

// One bind, then executes whose data-dependent count goes down and up again: each execute
// starts from the count's bound (its whole reservation), not from the last run's count, and
// allocates nothing. (Compress: scores above 0.5 keep their boxes.)
TEST(Allocations, ExecuteAfterExecuteFindsTheWholeReservationAgain) {
  std::unique_ptr<testing::AlignedBytes> buf = export_zoo_program(
      "ops/models/compress_boxes.onnx", " --input scores=N --input boxes=N,4 --dim N=1..12", "alloc_compress_again");
  ASSERT_TRUE(buf);
  auto p = buf->load();
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto m = Method::create(**p, "forward");
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE((*m)->bind_shapes({{12}, {12, 4}}).ok());
  float* boxes = static_cast<float*>((*m)->input(1).data);
  for (int i = 0; i < 48; ++i) boxes[i] = static_cast<float>(i);
  for (int kept : {1, 12, 0, 5, 12}) {
    float* scores = static_cast<float*>((*m)->input(0).data);
    for (int i = 0; i < 12; ++i) scores[i] = i < kept ? 1.f : 0.f;
    long n = count_allocs([&] { ASSERT_TRUE((*m)->execute().ok()) << kept << " kept"; });
    EXPECT_EQ(n, 0) << kept << " kept";
    ASSERT_EQ((*m)->output(0).dims[0], kept);
    ASSERT_EQ((*m)->output(1).dims[0], kept);
    for (int i = 0; i < kept * 4; ++i) ASSERT_EQ((*m)->output(0).as<float>()[i], static_cast<float>(i)) << kept << " kept";
  }
}

}  // namespace
}  // namespace kiln
