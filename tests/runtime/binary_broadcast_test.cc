// The delegate's Add, Sub, Mul, Div, Max and Min (Kiln's kernel, simd/vbinary.h) against the
// portable kernels of the same file, channels-last inside a region: operands of one shape, a
// per-channel constant, a scalar on either side, an SE block's [N, C, 1, 1] on either side, a
// fused Relu, at many N, H, W down to 1x1, with and without a NaN in the input. Every output
// element has the portable path's class (NaN, +-Inf, finite) and value: the delegate carries a
// NaN as the portable kernels do (XNNPACK's binary operators gave -Inf, and 0 with the Relu).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "delegate_pair.h"
#include "random_graph.h"
#include "export/graph.h"
#include "export/xnnpack_partition.h"
#include "format/program_desc.h"
#include "kiln/method.h"

namespace kiln::testing {
namespace {

format::ProgramDesc broadcast_program() {
  exporter::GraphBuilder g;
  EXPECT_TRUE(g.add_dim("N", 1, 3).ok());
  EXPECT_TRUE(g.add_dim("H", 1, 12).ok());
  EXPECT_TRUE(g.add_dim("W", 1, 10).ok());
  int x = *g.add_input("x", DType::kF32, {"N", 24, "H", "W"});
  RandomConstants consts(g, 21, 0.5f);
  core::AttrStore none;
  int c = *g.add("Conv", "conv", {x, consts({24, 24, 1, 1}), consts({24})}, none);  // channels-last from here
  int same = *g.add("Add", "same_shape", {c, x});
  int relu = *g.add("Relu", "relu", {same});                                           // Add+Relu in one step
  int per_channel = *g.add("Mul", "per_channel", {relu, consts({24, 1, 1})});
  int scalar_left = *g.add("Sub", "scalar_left", {consts({1}), per_channel});
  int gap = *g.add("GlobalAveragePool", "gap", {scalar_left});
  int se_right = *g.add("Max", "se_right", {scalar_left, gap});
  int se_left = *g.add("Min", "se_left", {gap, se_right});
  int div = *g.add("Div", "div", {se_left, consts({24, 1, 1})});
  int y = *g.add("Conv", "after", {div, consts({8, 24, 1, 1}), consts({8})}, none);
  EXPECT_TRUE(g.mark_output(y, "y").ok());
  EXPECT_TRUE(g.mark_output(relu, "relu").ok());
  EXPECT_TRUE(g.mark_output(scalar_left, "scalar_left").ok());
  EXPECT_TRUE(g.mark_output(se_left, "se_left").ok());
  format::ProgramDesc desc;
  EXPECT_TRUE(g.emit(&desc).ok());
  EXPECT_TRUE(exporter::partition_xnnpack(&desc.methods[0], desc.constants).ok());
  return desc;
}

TEST(BinaryBroadcast, TheDelegateTakesEveryBinaryOp) {
  const format::ProgramDesc desc = broadcast_program();
  const format::MethodDesc& m = desc.methods[0];
  ASSERT_TRUE(m.delegate.declined.empty()) << m.delegate.declined[0].reason;
  ASSERT_EQ(m.delegate.regions.size(), 1u);
}

TEST(BinaryBroadcast, MatchesPortableBelowTheBoundAndCarriesNaN) {
  DelegatePair pair(broadcast_program());
  ASSERT_EQ(pair.make(), "");
  for (int64_t n : {3, 1, 2})
    for (int64_t h : {12, 1, 5})
      for (int64_t w : {10, 1, 7})
        for (bool nan : {false, true}) {
          const std::string at = "N=" + std::to_string(n) + " H=" + std::to_string(h) + " W=" + std::to_string(w) +
                                 (nan ? " with a NaN" : "");
          ASSERT_EQ(pair.run({n, 24, h, w}, static_cast<uint32_t>(n * 1000 + h * 10 + w), nan ? n * 24 * h * w / 2 : -1), "")
              << at;
          for (size_t o = 0; o < pair.delegated->num_outputs(); ++o) {
            const TensorView& a = pair.delegated->output(o);
            const TensorView& b = pair.portable->output(o);
            ASSERT_EQ(a.numel(), b.numel());
            int64_t nans = 0;
            for (int64_t i = 0; i < a.numel(); ++i) {
              const float av = a.as<float>()[i], bv = b.as<float>()[i];
              nans += std::isnan(bv);
              if (!std::isfinite(bv)) {
                ASSERT_TRUE(std::isnan(bv) ? std::isnan(av) : av == bv)
                    << at << " output " << o << " element " << i << ": " << av << " delegated, " << bv << " portable";
              } else {
                ASSERT_NEAR(av, bv, 1e-4f * std::max(1.f, std::fabs(bv))) << at << " output " << o << " element " << i;
              }
            }
            EXPECT_EQ(nans > 0, nan) << at << " output " << o << ": the NaN reaches it, and only then";
          }
        }
}

// A memory-bound step is split over the pool by the elements it moves, not the ones it writes:
// a GlobalAveragePool that reads 64x32x32 floats and writes 64 runs on both threads (each reads
// the rows its thread's share of the convolution just wrote), and so do an Add and the region's
// entry ToNhwc down to 16,384 elements; at 2,048 they stay on the calling thread (the
// convolution, 262,144 multiply-adds, is still split). One parallel job per split step, counted
// by the pool (the count does not depend on timing: a job the caller runs alone counts too).
TEST(BinaryBroadcast, MemoryBoundStepsSplitByTheElementsTheyMove) {
  exporter::GraphBuilder g;
  ASSERT_TRUE(g.add_dim("H", 1, 32).ok());
  int x = *g.add_input("x", DType::kF32, {1, 64, "H", 32});
  RandomConstants consts(g, 5, 0.5f);
  core::AttrStore none;
  int c = *g.add("Conv", "conv", {x, consts({64, 64, 1, 1}), consts({64})}, none);
  int add = *g.add("Add", "add", {c, x});
  int gap = *g.add("GlobalAveragePool", "gap", {add});
  EXPECT_TRUE(g.mark_output(gap, "y").ok());
  format::ProgramDesc desc;
  ASSERT_TRUE(g.emit(&desc).ok());
  ASSERT_TRUE(exporter::partition_xnnpack(&desc.methods[0], desc.constants).ok());
  AlignedBytes image(*format::serialize_program(desc));
  auto program = image.load();
  ASSERT_TRUE(program.ok()) << program.status().message();
  MethodOptions two;
  two.cpu_threads = 2;
  auto m = Method::create(**program, "forward", two);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE((*m)->delegated()) << (*m)->delegate_warning();
  // H = 32: ToNhwc, conv, Add (65,536 elements) and GlobalAveragePool (65,536 read) on the pool;
  // H = 8: ToNhwc, the Add and the pool move 16,384: still split; H = 1: only the conv.
  for (auto [h, jobs] : {std::pair<int64_t, uint64_t>{32, 4}, {8, 4}, {1, 1}}) {
    ASSERT_TRUE((*m)->bind_shapes({{1, 64, h, 32}}).ok());
    fill_normal((*m)->input(0), 9);
    (*m)->set_profiling(true);
    ASSERT_TRUE((*m)->execute().ok());
    const ThreadProfile t = (*m)->thread_profile();
    (*m)->set_profiling(false);
    EXPECT_EQ(t.jobs, jobs) << "H=" << h;
  }
}

}  // namespace
}  // namespace kiln::testing
