// execute() performs zero heap allocations: counted by replacing global operator new.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <sstream>
#include <cstdlib>
#include <new>

#include "aligned_bytes.h"
#include "export/graph.h"
#include "kiln/method.h"
#include "kiln/program.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocs{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting) ++g_allocs;
  void* p = std::malloc(n ? n : 1);
  if (!p) std::abort();
  return p;
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (g_counting) ++g_allocs;
  return std::malloc(n ? n : 1);
}
void* operator new(std::size_t n, std::align_val_t a) {
  if (g_counting) ++g_allocs;
  void* p = std::aligned_alloc(static_cast<size_t>(a), (n + static_cast<size_t>(a) - 1) / static_cast<size_t>(a) * static_cast<size_t>(a));
  if (!p) std::abort();
  return p;
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

TEST(Allocations, ExecuteAllocatesNothing) {
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
    ASSERT_TRUE((*m)->bind_shapes({{batch, 8}}).ok());
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
        ASSERT_TRUE((*m)->bind_shapes(shapes).ok());
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
