// The XNNPACK delegate against the portable kernels of the same file: every zoo model at 12
// or more admissible shapes (each dim's minimum and maximum, server-mode order max, min, max,
// mid, and seeded random shapes), over arenas filled with NaN bytes, so an operator set up
// at the bound, an output sized from the bound, or a read of bytes nobody wrote shows up.
// Also: the delegate runs threaded, falls back to portable with a warning when it cannot
// initialize, and --delegate=none / use_delegate=false runs the portable path.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>

#include <cmath>
#include <fstream>
#include <memory>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "aligned_bytes.h"
#include "load_status.h"
#include "export/graph.h"
#include "export/onnx/onnx_import.h"
#include "export/xnnpack_partition.h"
#include "format/program_desc.h"
#include "kiln/method.h"
#include "runtime/program_impl.h"
#include "kiln/program.h"
#include "zoo_manifest.h"
#include "tooling/program_report.h"
#include "core/status.h"

namespace kiln::testing {
namespace {

const std::string kZoo = zoo_dir();

std::unique_ptr<AlignedBytes> export_model(const nlohmann::json& model, const std::string& delegate, bool fuse = true) {
  format::ProgramDesc desc;
  exporter::ExportOptions opts = zoo_export_options(model, delegate);
  opts.fuse = fuse;
  auto report = exporter::export_onnx(kZoo + "/" + model["onnx"].get<std::string>(), opts, &desc);
  EXPECT_TRUE(report.ok()) << report.status().message();
  auto bytes = format::serialize_program(desc);
  EXPECT_TRUE(bytes.ok());
  return std::make_unique<AlignedBytes>(*bytes);
}

using Dims = std::map<std::string, int64_t>;

// Random dim sets per model after the fixed ones: 24, or KILN_SWEEP_RANDOM_SHAPES (the
// sanitized job runs the fixed sets only, on every model).
int random_sets() {
  const char* e = std::getenv("KILN_SWEEP_RANDOM_SHAPES");
  return e && *e ? std::atoi(e) : 24;
}

// Shapes each comparison must run (guards may refuse some of the sets).
int min_shapes() { return random_sets() >= 6 ? 10 : 3; }

// Admissible dim values: each dim at min, at max, then max/min/max/mid, then random.
std::vector<Dims> dim_sets(const nlohmann::json& dims, std::mt19937& rng) {
  auto at = [&](double t) {
    Dims d;
    for (const auto& [name, r] : dims.items()) {
      int64_t lo = r["min"], hi = r["max"], step = r.value("step", 1);
      lo = (lo + step - 1) / step * step;
      hi = hi / step * step;
      int64_t v = lo + static_cast<int64_t>(t * static_cast<double>(hi - lo));
      d[name] = v / step * step < lo ? lo : v / step * step;
    }
    return d;
  };
  std::vector<Dims> sets = {at(1), at(0), at(1), at(0.5)};
  for (const auto& [name, r] : dims.items()) {  // one dim at its minimum, the rest at the bound
    Dims d = at(1);
    int64_t step = r.value("step", 1);
    d[name] = (r["min"].get<int64_t>() + step - 1) / step * step;
    sets.push_back(d);
  }
  std::uniform_real_distribution<double> u(0, 1);
  for (int k = 0; k < random_sets(); ++k) {
    Dims d;
    for (const auto& [name, r] : dims.items()) {
      int64_t step = r.value("step", 1), lo = (r["min"].get<int64_t>() + step - 1) / step, hi = r["max"].get<int64_t>() / step;
      d[name] = step * (lo + static_cast<int64_t>(u(rng) * static_cast<double>(hi - lo + 1) * 0.999));
    }
    sets.push_back(d);
  }
  // A dim the contract ties to others ("sum_of": the KV cache's mask covers past + T) follows them.
  for (Dims& d : sets)
    for (const auto& [name, r] : dims.items())
      if (r.contains("sum_of")) {
        d[name] = 0;
        for (const auto& part : r["sum_of"]) d[name] += d.at(part.get<std::string>());
      }
  return sets;
}

// Normal floats, ints in the generator's range, masks of ones, lengths in [1, the measured axis].
void fill_input(TensorView t, const nlohmann::json& gen, const std::vector<std::vector<int64_t>>& shapes,
                std::mt19937& rng) {
  size_t n = 1;
  for (int k = 0; k < t.rank; ++k) n *= static_cast<size_t>(t.dims[k]);
  const std::string kind = gen.value("kind", "normal");
  if (kind == "lengths" && t.dtype == DType::kI64) {
    std::uniform_int_distribution<int64_t> g(1, shapes.at(gen["input"].get<size_t>()).at(gen["axis"].get<size_t>()));
    for (size_t i = 0; i < n; ++i) t.as<int64_t>()[i] = g(rng);
    return;
  }
  if (t.dtype == DType::kF32) {
    std::normal_distribution<float> g(0.f, 1.f);
    for (size_t i = 0; i < n; ++i) t.as<float>()[i] = g(rng);
  } else if (t.dtype == DType::kI64) {
    int64_t lo = kind == "int" ? gen["low"].get<int64_t>() : 1, hi = kind == "int" ? gen["high"].get<int64_t>() - 1 : 1;
    std::uniform_int_distribution<int64_t> g(lo, hi);
    for (size_t i = 0; i < n; ++i) t.as<int64_t>()[i] = g(rng);
  }
}

double max_abs(const TensorView& t) {
  double m = 0;
  size_t n = 1;
  for (int k = 0; k < t.rank; ++k) n *= static_cast<size_t>(t.dims[k]);
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(t.as<float>()[i])));
  return m;
}

// Runs methods `d` and `p` (of one model) side by side at the model's admissible shapes (dim
// sets above; guards decide) over NaN-poisoned arenas on the same random inputs, and expects
// the same outputs (floats within 1e-4 of the largest). Returns how many shapes ran.
int compare_at_every_shape(const nlohmann::json& model, Method& d, Method& p, uint32_t seed, const std::string& what) {
  const std::string name = model["name"];
  std::mt19937 rng(seed);
  int ran = 0;
  for (const Dims& dims : dim_sets(model["dims"], rng)) {
    std::vector<std::vector<int64_t>> shapes;
    for (const auto& in : model["input_dims"]) {
      std::vector<int64_t> s;
      for (const auto& a : in) s.push_back(a.is_number() ? a.get<int64_t>() : dims.at(a.get<std::string>()));
      shapes.push_back(s);
    }
    if (!p.bind_shapes(shapes).ok()) continue;  // a guard refuses it: not in the contract
    if (!d.bind_shapes(shapes).ok()) return ADD_FAILURE() << name << ": only one method binds, " << what, -1;
    MethodAccess::fill_arena(d, 0xFF);  // NaN everywhere: reading unwritten bytes poisons the output
    MethodAccess::fill_arena(p, 0xFF);
    const uint32_t inputs_seed = static_cast<uint32_t>(rng());
    for (size_t i = 0; i < shapes.size(); ++i) {
      std::mt19937 r1(inputs_seed + static_cast<uint32_t>(i)), r2(inputs_seed + static_cast<uint32_t>(i));
      fill_input(d.input(i), model["input_generators"][i], shapes, r1);
      fill_input(p.input(i), model["input_generators"][i], shapes, r2);
    }
    if (!d.execute().ok() || !p.execute().ok()) return ADD_FAILURE() << name << ": execute failed, " << what, -1;
    for (size_t o = 0; o < p.num_outputs(); ++o) {
      const TensorView& a = d.output(o);
      const TensorView& b = p.output(o);
      size_t n = 1;
      bool same = a.rank == b.rank;
      for (int k = 0; same && k < a.rank; ++k) {
        same = a.dims[k] == b.dims[k];
        n *= static_cast<size_t>(a.dims[k]);
      }
      if (!same) return ADD_FAILURE() << name << " output " << o << ": shapes differ, " << what, -1;
      if (a.dtype != DType::kF32) continue;
      const double tol = 1e-4 * std::max(1.0, max_abs(b));
      for (size_t i = 0; i < n; ++i) {
        const float x = a.as<float>()[i], y = b.as<float>()[i];
        if ((std::isfinite(x) || !std::isfinite(y)) && std::fabs(double(x) - y) <= tol) continue;
        return ADD_FAILURE() << name << " output " << o << " element " << i << ": " << x << " vs " << y << " (tolerance "
                             << tol << "), " << what,
               -1;
      }
    }
    ++ran;
  }
  return ran;
}

// Export's fusions (LayerNormalization, Gelu) against the unfused graph on the portable
// kernels: fused and delegated (1 and 2 threads) and fused portable, at every shape.
class FusedVsUnfused : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedVsUnfused, SameOutputsAtEveryShape) {
  const nlohmann::json model = zoo_model(GetParam());
  std::unique_ptr<AlignedBytes> fused = export_model(model, "xnnpack", true), plain = export_model(model, "none", false);
  auto fp = fused->load();
  auto pp = plain->load();
  ASSERT_TRUE(fp.ok() && pp.ok());
  // Every one of these models normalizes with LayerNorm chains: export fused them, and the file
  // names the nodes each fused instruction replaces (what `kiln inspect` lists).
  auto report = tooling::method_report(**fp, "forward");
  auto plain_report = tooling::method_report(**pp, "forward");
  ASSERT_TRUE(report.ok() && plain_report.ok());
  int layer_norms = 0;
  for (const tooling::InstructionReport& in : report->instructions)
    if (in.op == "LayerNormalization") {
      ++layer_norms;
      EXPECT_EQ(in.fused_from.size(), 9u) << in.node;  // ReduceMean .. Add
    }
  EXPECT_GE(layer_norms, 5);
  for (const tooling::InstructionReport& in : plain_report->instructions) EXPECT_TRUE(in.fused_from.empty());
  MethodOptions reference;
  reference.use_delegate = false;
  auto ref = Method::create(**pp, "forward", reference);
  ASSERT_TRUE(ref.ok());
  for (int variant = 0; variant < 3; ++variant) {  // delegated 1 thread, 2 threads, portable
    MethodOptions o;
    o.cpu_threads = variant == 1 ? 2 : 1;
    o.use_delegate = variant < 2;
    auto m = Method::create(**fp, "forward", o);
    ASSERT_TRUE(m.ok());
    const std::string what = variant == 2 ? "fused portable" : "fused delegated, threads " + std::to_string(o.cpu_threads);
    EXPECT_GE(compare_at_every_shape(model, **m, **ref, 99 + variant, what), min_shapes()) << GetParam();
  }
}

// Portable kernels that split work over the pool (Transpose, Slice, the recurrent layers'
// input projections, ...) on two threads against one, at every shape: the split follows the
// actual shapes, never the bound.
class PortableThreads : public ::testing::TestWithParam<std::string> {};

TEST_P(PortableThreads, TwoThreadsMatchOneAtEveryShape) {
  const nlohmann::json model = zoo_model(GetParam());
  std::unique_ptr<AlignedBytes> image = export_model(model, "none");
  auto program = image->load();
  ASSERT_TRUE(program.ok()) << program.status().message();
  MethodOptions one, two;
  two.cpu_threads = 2;
  auto a = Method::create(**program, "forward", two);
  auto b = Method::create(**program, "forward", one);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GE(compare_at_every_shape(model, **a, **b, 1235, "portable, 2 threads vs 1"), min_shapes()) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Models, PortableThreads, ::testing::ValuesIn(zoo_model_names()),
                         [](const auto& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(Transformers, FusedVsUnfused,
                         ::testing::Values("bert_tiny", "gpt_tiny", "gpt_kv_step", "conformer_tiny", "swin_tiny"),
                         [](const auto& info) { return info.param; });

// A thread spinning on its own until destroyed: the other app a device's cores are shared with.
// Workers get preempted mid-job beside it, which is when a race between them shows (the fused
// depthwise-pointwise pass once wrote output rows into bytes another worker still read: wrong
// at 2 threads only beside a busy loop).
class Spinner {
 public:
  Spinner() : thread_([this] {
    while (!stop_.load(std::memory_order_relaxed)) {
    }
  }) {}
  ~Spinner() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class DelegateVsPortable : public ::testing::TestWithParam<std::string> {};

TEST_P(DelegateVsPortable, SameOutputsAtEveryShapeOverPoisonedArenas) {
  const nlohmann::json model = zoo_model(GetParam());
  std::unique_ptr<AlignedBytes> image = export_model(model, "xnnpack");
  auto program = image->load();
  ASSERT_TRUE(program.ok()) << program.status().message();
  for (int threads : {1, 2}) {
    MethodOptions on, off;
    on.cpu_threads = threads;
    off.use_delegate = false;
    auto d = Method::create(**program, "forward", on);
    auto p = Method::create(**program, "forward", off);
    ASSERT_TRUE(d.ok() && p.ok());
    const MethodMeta& meta = (*d)->meta();
    EXPECT_EQ((*d)->delegated(), meta.delegate.regions > 0) << (*d)->delegate_warning();
    EXPECT_TRUE((*d)->delegate_warning().empty()) << (*d)->delegate_warning();
    EXPECT_FALSE((*p)->delegated());
    std::unique_ptr<Spinner> busy(threads == 2 ? new Spinner : nullptr);  // 2 threads: on a busy CPU
    EXPECT_GE(compare_at_every_shape(model, **d, **p, 1234 + threads, "threads " + std::to_string(threads)), min_shapes())
        << "too few admissible shapes for " << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Models, DelegateVsPortable, ::testing::ValuesIn(zoo_model_names()),
                         [](const auto& info) { return info.param; });

TEST(Delegate, FallsBackToPortableWithAWarningWhenItCannotInitialize) {
  format::ProgramDesc desc;
  ASSERT_TRUE(exporter::export_onnx(kZoo + "/models/resnet_small.onnx", zoo_export_options(zoo_model("resnet_small")), &desc).ok());
  ASSERT_FALSE(desc.methods[0].delegate.regions.empty());
  desc.methods[0].delegate.backend = "npu-this-runtime-lacks";  // a backend that cannot initialize here
  auto bytes = format::serialize_program(desc);
  AlignedBytes image(*bytes);
  auto program = image.load();
  ASSERT_TRUE(program.ok()) << program.status().message();
  auto m = Method::create(**program, "forward", MethodOptions{});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_FALSE((*m)->delegated());
  EXPECT_NE((*m)->delegate_warning().find("running the portable kernels"), std::string::npos) << (*m)->delegate_warning();
  EXPECT_EQ((*m)->planned_arena_bytes(), (*m)->meta().arena_bytes);
  ASSERT_TRUE((*m)->bind_shapes({{2, 3, 64, 64}}).ok());
  ASSERT_TRUE((*m)->execute().ok());
}

TEST(Delegate, NoneExportHasNoDelegateAndRequireCoverageFailsWithTheDeclinedList) {
  format::ProgramDesc desc;
  exporter::ExportOptions opts;
  opts.delegate = "none";
  opts.dims.push_back(*exporter::parse_dim_arg("batch=1..8"));
  ASSERT_TRUE(exporter::export_onnx(kZoo + "/models/resnet_small.onnx", opts, &desc).ok());
  EXPECT_TRUE(desc.methods[0].delegate.backend.empty());

  exporter::ExportOptions strict;
  strict.require_coverage = 0.95;
  for (const char* d : {"time=1..64", "batch=1..8"}) strict.dims.push_back(*exporter::parse_dim_arg(d));
  format::ProgramDesc gru;
  auto r = exporter::export_onnx(kZoo + "/models/gru_seq.onnx", strict, &gru);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("GRU"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("required 95.0%"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// Ops the delegate runs with Kiln's own kernels inside a region: BatchNormalization
// channels-first and channels-last (with a fused Relu), dense Conv (1x1, 3x3 with
// SAME_UPPER), MaxPool with ceil_mode (and a 1x1 window with stride 2, which XNNPACK
// refuses), portable pointwise ops on channels-last buffers (Tanh), the gates
// x * hardsigmoid(x) and sigmoid(x) * x as one kernel each, Pow by 2 and 0.5, the vectorized Erf, a
// PRelu of one slope (a LeakyRelu), ConvTranspose with output_padding (XNNPACK) and a linear
// Resize channels-last, all at many H, W down to the minimum.
TEST(Delegate, OwnKernelsMatchPortableBelowTheBound) {
  exporter::GraphBuilder g;
  ASSERT_TRUE(g.add_dim("H", 3, 41).ok());
  ASSERT_TRUE(g.add_dim("W", 3, 37).ok());
  int x = *g.add_input("x", DType::kF32, {2, 5, "H", "W"});
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto weights = [&](std::vector<int64_t> shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<float> v(n);
    for (float& f : v) f = u(rng);
    return *g.add_constant<float>("w" + std::to_string(n) + "_" + std::to_string(rng()), DType::kF32, shape, v);
  };
  auto positive = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& f : v) f = 0.5f + std::fabs(u(rng));
    return *g.add_constant<float>("var" + std::to_string(rng()), DType::kF32, {n}, v);
  };
  // BatchNormalization channels-first (on the input) and channels-last (after a Conv, + Relu).
  int bn0 = *g.add("BatchNormalization", "bn_first", {x, weights({5}), weights({5}), weights({5}), positive(5)});
  core::AttrStore same;
  same.set_str("auto_pad", "SAME_UPPER").set_ints("strides", {2, 1});
  int c0 = *g.add("Conv", "conv_same", {bn0, weights({19, 5, 3, 3}), weights({19})}, same);
  int bn1 = *g.add("BatchNormalization", "bn_last", {c0, weights({19}), weights({19}), weights({19}), positive(19)});
  int c1 = *g.add("Relu", "bn_relu", {bn1});
  core::AttrStore ceil;
  ceil.set_ints("kernel_shape", {3, 3}).set_ints("strides", {2, 2}).set_int("ceil_mode", 1);
  int p1 = *g.add("MaxPool", "pool_ceil", {c1}, ceil);
  int hs = *g.add("HardSigmoid", "hsig", {p1});
  int m1 = *g.add("Mul", "hswish", {p1, hs});
  int two = *g.add_constant<float>("two", DType::kF32, {}, {2.f});
  int half = *g.add_constant<float>("half", DType::kF32, {1}, {0.5f});
  int sq = *g.add("Pow", "square", {m1, two});
  int rt = *g.add("Pow", "root", {sq, half});
  int er = *g.add("Erf", "erf", {rt});
  int slope = *g.add_constant<float>("slope", DType::kF32, {1}, {0.25f});
  int pr = *g.add("PRelu", "prelu_scalar", {er, slope});  // one slope: a LeakyRelu
  int t1 = *g.add("Tanh", "tanh", {pr});
  core::AttrStore one;
  one.set_ints("kernel_shape", {1, 1}).set_ints("strides", {2, 2});
  int s1 = *g.add("Sigmoid", "sig", {t1});
  int g1 = *g.add("Mul", "swish", {s1, t1});  // x * sigmoid(x), operands the other way round
  int p2 = *g.add("MaxPool", "pool_1x1", {g1}, one);
  int c2 = *g.add("Conv", "conv_1x1", {p2, weights({7, 19, 1, 1})});
  core::AttrStore up;
  up.set_ints("strides", {2, 2}).set_ints("pads", {1, 1, 1, 1}).set_ints("output_padding", {1, 0});
  int c3 = *g.add("ConvTranspose", "deconv", {c2, weights({7, 4, 3, 3}), weights({4})}, up);
  core::AttrStore lin;
  lin.set_str("mode", "linear").set_str("coordinate_transformation_mode", "half_pixel");
  int sc = *g.add_constant<float>("scales", DType::kF32, {4}, {1.f, 1.f, 2.f, 1.5f});
  int r1 = g.add_op("Resize", "resize", {c3, -1, sc}, lin).value().at(0);
  ASSERT_TRUE(g.mark_output(r1, "y").ok());
  format::ProgramDesc desc;
  ASSERT_TRUE(g.emit(&desc).ok());
  ASSERT_TRUE(exporter::partition_xnnpack(&desc.methods[0], desc.constants).ok());
  ASSERT_TRUE(desc.methods[0].delegate.declined.empty()) << desc.methods[0].delegate.declined[0].reason;
  ASSERT_EQ(desc.methods[0].delegate.regions.size(), 1u);
  AlignedBytes image(*format::serialize_program(desc));
  auto program = image.load();
  ASSERT_TRUE(program.ok()) << program.status().message();
  MethodOptions off;
  off.use_delegate = false;
  auto d = Method::create(**program, "forward");
  auto p = Method::create(**program, "forward", off);
  ASSERT_TRUE(d.ok() && p.ok());
  ASSERT_TRUE((*d)->delegated()) << (*d)->delegate_warning();
  for (int64_t h : {41, 3, 4, 17, 40, 5}) {
    for (int64_t w : {37, 3, 6, 21}) {
      ASSERT_TRUE((*d)->bind_shapes({{2, 5, h, w}}).ok());
      ASSERT_TRUE((*p)->bind_shapes({{2, 5, h, w}}).ok());
      MethodAccess::fill_arena(**d, 0xFF);
      std::mt19937 r1(static_cast<uint32_t>(h * 100 + w)), r2(static_cast<uint32_t>(h * 100 + w));
      fill_input((*d)->input(0), nlohmann::json{{"kind", "normal"}}, {}, r1);
      fill_input((*p)->input(0), nlohmann::json{{"kind", "normal"}}, {}, r2);
      ASSERT_TRUE((*d)->execute().ok());
      ASSERT_TRUE((*p)->execute().ok());
      const TensorView& a = (*d)->output(0);
      const TensorView& b = (*p)->output(0);
      ASSERT_EQ(a.numel(), b.numel());
      for (int64_t i = 0; i < a.numel(); ++i)
        ASSERT_NEAR(a.as<float>()[i], b.as<float>()[i], 1e-4) << "at H=" << h << " W=" << w << " element " << i;
    }
  }
}

// A channel shuffle as shufflenet writes it (Reshape to [N, 2, C/2, H, W], Transpose(0, 2, 1,
// 3, 4), Reshape back) and its chunk(2, dim = 1) become ChannelShuffle and channel Slices that
// stay channels-last: one region, a layout change in and one out. The same graph built with
// export's folding off keeps the Transpose: the portable outputs of the two agree, and the
// delegated ones agree with both, at shapes down to the minimum over poisoned arenas.
format::ProgramDesc shuffle_block(bool fold) {
  exporter::GraphBuilder g;
  g.set_folding(fold);
  EXPECT_TRUE(g.add_dim("N", 1, 3).ok());
  EXPECT_TRUE(g.add_dim("H", 1, 29).ok());
  EXPECT_TRUE(g.add_dim("W", 1, 23).ok());
  int x = *g.add_input("x", DType::kF32, {"N", 12, "H", "W"});
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto weights = [&](std::vector<int64_t> shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<float> v(n);
    for (float& f : v) f = u(rng);
    return *g.add_constant<float>("w" + std::to_string(rng()), DType::kF32, shape, v);
  };
  auto ints = [&](std::vector<int64_t> v) {
    return *g.add_constant<int64_t>("i" + std::to_string(rng()), DType::kI64, {static_cast<int64_t>(v.size())}, v);
  };
  int c0 = *g.add("Relu", "relu0", {*g.add("Conv", "conv0", {x, weights({16, 12, 1, 1}), weights({16})})});
  const std::vector<core::ExprId> s = g.shape(c0);
  core::ExprPool& p = g.pool();
  int five = *g.add_sym_ints({s[0], p.constant(2), p.constant(8), s[2], s[3]}, "split_shape");
  int v5 = *g.add("Reshape", "split", {c0, five});
  core::AttrStore perm;
  perm.set_ints("perm", {0, 2, 1, 3, 4});
  int t = *g.add("Transpose", "shuffle", {v5}, perm);
  int four = *g.add_sym_ints({s[0], p.constant(16), s[2], s[3]}, "back_shape");
  int sh = *g.add("Reshape", "back", {t, four});
  int lo = *g.add("Slice", "chunk0", {sh, ints({0}), ints({8}), ints({1})});
  int hi = *g.add("Slice", "chunk1", {sh, ints({8}), ints({16}), ints({-3})});
  int c1 = *g.add("Conv", "conv1", {hi, weights({8, 8, 1, 1}), weights({8})});
  core::AttrStore ch;
  ch.set_int("axis", 1);
  int cat = *g.add("Concat", "cat", {lo, c1}, ch);
  EXPECT_TRUE(g.mark_output(cat, "y").ok());
  format::ProgramDesc desc;
  EXPECT_TRUE(g.emit(&desc).ok());
  EXPECT_TRUE(exporter::partition_xnnpack(&desc.methods[0], desc.constants).ok());
  return desc;
}

TEST(Delegate, ChannelShuffleAndChannelSlicesStayChannelsLast) {
  format::ProgramDesc folded = shuffle_block(true), plain = shuffle_block(false);
  const format::MethodDesc& m = folded.methods[0];
  size_t shuffles = 0, transposes = 0;
  for (const auto& in : m.instructions) shuffles += in.op == "ChannelShuffle", transposes += in.op == "Transpose";
  EXPECT_EQ(shuffles, 1u);
  EXPECT_EQ(transposes, 0u);
  ASSERT_TRUE(m.delegate.declined.empty()) << m.delegate.declined[0].reason;
  EXPECT_EQ(m.delegate.regions.size(), 1u);
  EXPECT_EQ(m.delegate.layout_changes, 2);
  AlignedBytes a_image(*format::serialize_program(folded)), b_image(*format::serialize_program(plain));
  auto a = a_image.load();
  auto b = b_image.load();
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  MethodOptions off;
  off.use_delegate = false;
  auto d = Method::create(**a, "forward");
  auto pa = Method::create(**a, "forward", off);
  auto pb = Method::create(**b, "forward", off);
  ASSERT_TRUE(d.ok() && pa.ok() && pb.ok());
  ASSERT_TRUE((*d)->delegated()) << (*d)->delegate_warning();
  for (int64_t n : {3, 1, 2})
    for (int64_t h : {29, 1, 2, 7})
      for (int64_t w : {23, 1, 5}) {
        std::vector<TensorView> outs;
        for (auto* meth : {&*d, &*pa, &*pb}) {
          ASSERT_TRUE((**meth).bind_shapes({{n, 12, h, w}}).ok());
          MethodAccess::fill_arena(**meth, 0xFF);
          std::mt19937 r(static_cast<uint32_t>(n * 10000 + h * 100 + w));
          fill_input((**meth).input(0), nlohmann::json{{"kind", "normal"}}, {}, r);
          ASSERT_TRUE((**meth).execute().ok());
          outs.push_back((**meth).output(0));
        }
        ASSERT_EQ(outs[0].numel(), n * 16 * h * w);
        for (int64_t i = 0; i < outs[0].numel(); ++i) {
          ASSERT_EQ(outs[1].as<float>()[i], outs[2].as<float>()[i]) << "portable, at " << n << "x" << h << "x" << w;
          ASSERT_NEAR(outs[0].as<float>()[i], outs[1].as<float>()[i], 1e-5) << "delegated, at " << n << "x" << h << "x" << w;
        }
      }
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

format::ProgramDesc delegated_resnet() {
  format::ProgramDesc desc;
  EXPECT_TRUE(exporter::export_onnx(kZoo + "/models/resnet_small.onnx", zoo_export_options(zoo_model("resnet_small")), &desc).ok());
  return desc;
}

// The file is a trust boundary: a damaged delegated schedule is refused at load, by kind.
TEST(DelegateFormat, DamagedSchedulesAreRefusedAtLoad) {
  const format::ProgramDesc good = delegated_resnet();
  ASSERT_TRUE(load_status(good).ok());
  const format::MethodDesc& m = good.methods[0];
  ASSERT_FALSE(m.delegate.regions.empty());
  {  // two values alive together in the same bytes
    format::ProgramDesc d = good;
    auto& md = d.methods[0];
    const auto& ops = md.delegate.regions[0].ops;
    int32_t a = ops[0].outputs[0], b = ops[1].outputs[0];  // ops[1] reads ops[0]'s output
    if (md.delegate.offsets[a] + md.values[b].nbytes <= md.delegate.arena_bytes) md.delegate.offsets[b] = md.delegate.offsets[a];
    else md.delegate.offsets[a] = md.delegate.offsets[b];
    Status s = load_status(d);
    EXPECT_EQ(s.code(), Code::kDataLoss);
    EXPECT_NE(s.message().find("same bytes"), std::string::npos) << s.message();
  }
  {  // a twin whose shape is not the permutation of its base
    format::ProgramDesc d = good;
    for (auto& v : d.methods[0].values)
      if (v.nhwc_of >= 0) {
        std::swap(v.shape[1], v.shape[3]);
        if (v.shape[1] != v.shape[3]) break;
      }
    Status s = load_status(d);
    EXPECT_EQ(s.code(), Code::kDataLoss) << s.message();
  }
  {  // an instruction computed twice by a region
    format::ProgramDesc d = good;
    auto& ops = d.methods[0].delegate.regions[0].ops;
    ops.push_back(ops[1]);
    Status s = load_status(d);
    EXPECT_EQ(s.code(), Code::kDataLoss);
  }
  {  // a step that reads a value before anything writes it
    format::ProgramDesc d = good;
    auto& ops = d.methods[0].delegate.regions[0].ops;
    std::swap(ops[1], ops[2]);
    Status s = load_status(d);
    EXPECT_EQ(s.code(), Code::kDataLoss);
  }
  {  // a value outside the delegate's arena
    format::ProgramDesc d = good;
    d.methods[0].delegate.offsets[d.methods[0].delegate.regions[0].ops[0].outputs[0]] = d.methods[0].delegate.arena_bytes;
    EXPECT_EQ(load_status(d).code(), Code::kDataLoss);
  }
}

// A caller-owned arena sized by Method::arena_bytes runs the delegated plan; one sized for
// the portable plan only is refused when the delegated plan is larger, with both sizes.
TEST(DelegateFormat, CallerArenaSizedForThePlanThatRuns) {
  format::ProgramDesc desc = delegated_resnet();
  AlignedBytes image(*format::serialize_program(desc));
  auto program = image.load();
  ASSERT_TRUE(program.ok());
  auto need = Method::arena_bytes(**program, "forward", MethodOptions{});
  ASSERT_TRUE(need.ok());
  EXPECT_EQ(*need, desc.methods[0].delegate.arena_bytes);
  std::vector<uint8_t> storage(*need + 64);
  void* arena = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(storage.data()) + 63) / 64 * 64);
  auto m = Method::create(**program, "forward", MethodOptions{}, arena, *need);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE((*m)->delegated());
  ASSERT_TRUE((*m)->bind_shapes({{3, 3, 64, 64}}).ok());
  EXPECT_TRUE((*m)->execute().ok());
  auto small = Method::create(**program, "forward", MethodOptions{}, arena, *need - 64);
  EXPECT_EQ(small.status().code(), Code::kResourceExhausted);
}

}  // namespace
}  // namespace kiln::testing
