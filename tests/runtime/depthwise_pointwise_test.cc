// A depthwise convolution whose output only the 1x1 convolution after it reads is computed
// inside that step (depthwise_pointwise): its rows never go to memory. Checked against the
// portable kernels of the same program at many H, W down to 1x1, over arenas of NaN bytes, with
// a NaN in the input; depthwise outputs with a second reader (an Add) or that leave the method
// are written as before; the profile says which step is computed in the next one, and only
// where it pays (an output of 1 MiB or more: at the bound, not at 7x7).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "delegate_pair.h"
#include "delegates/xnnpack/dense_conv.h"
#include "random_graph.h"
#include "export/graph.h"
#include "export/xnnpack_partition.h"
#include "format/program_desc.h"
#include "kiln/method.h"

namespace kiln::testing {
namespace {

// A Conv with random weights and bias, `w` = {out, in / group, kh, kw}.
int add_conv(exporter::GraphBuilder& g, RandomConstants& weights, const std::string& name, int in,
             const std::vector<int64_t>& w, int64_t group, int64_t stride, int64_t pad) {
  core::AttrStore a;
  a.set_int("group", group).set_ints("strides", {stride, stride}).set_ints("pads", {pad, pad, pad, pad});
  return *g.add("Conv", name, {in, weights(w), weights({w[0]})}, a);
}

format::ProgramDesc inverted_residuals() {
  exporter::GraphBuilder g;
  EXPECT_TRUE(g.add_dim("H", 1, 64).ok());
  EXPECT_TRUE(g.add_dim("W", 1, 64).ok());
  int x = *g.add_input("x", DType::kF32, {2, 16, "H", "W"});
  RandomConstants weights(g, 23, 0.5f);
  int lo = *g.add_constant<float>("lo", DType::kF32, {}, {0.f});
  int hi = *g.add_constant<float>("hi", DType::kF32, {}, {6.f});
  auto conv = [&](const std::string& name, int in, std::vector<int64_t> w, int64_t group, int64_t stride, int64_t pad,
                  bool relu6) {
    int y = add_conv(g, weights, name, in, w, group, stride, pad);
    return relu6 ? *g.add("Clip", name + "_relu6", {y, lo, hi}) : y;
  };
  int e = conv("expand", x, {48, 16, 1, 1}, 1, 1, 0, true);
  int d1 = conv("dw1", e, {48, 1, 3, 3}, 48, 1, 1, true);
  int p1 = conv("project1", d1, {16, 48, 1, 1}, 1, 1, 0, false);  // d1's only reader: computed together
  int d2 = conv("dw2", e, {48, 1, 3, 3}, 48, 1, 1, false);
  int p2 = conv("project2", d2, {16, 48, 1, 1}, 1, 1, 0, false);
  int s2 = *g.add("Add", "dw2_again", {d2, e});  // d2's second reader
  int p2b = conv("project2b", s2, {16, 48, 1, 1}, 1, 1, 0, false);
  int d3 = conv("dw3", e, {48, 1, 5, 5}, 48, 1, 2, false);
  int p3 = conv("project3", d3, {8, 48, 1, 1}, 1, 1, 0, true);
  int y = *g.add("Add", "sum", {*g.add("Add", "sum_a", {p1, p2}), p2b});
  EXPECT_TRUE(g.mark_output(y, "y").ok());
  EXPECT_TRUE(g.mark_output(p3, "p3").ok());
  EXPECT_TRUE(g.mark_output(d3, "d3").ok());  // leaves the method: written
  format::ProgramDesc desc;
  EXPECT_TRUE(g.emit(&desc).ok());
  EXPECT_TRUE(exporter::partition_xnnpack(&desc.methods[0], desc.constants).ok());
  return desc;
}

// An inverted residual as MobileNetV2 has it: the expansion's output has no reader but the
// depthwise layer, so a planner that knew only the instructions' own reads would put the 1x1's
// output in its bytes, which the fused pass still reads. `out` channels (more than 48: the
// output rows run ahead of the input rows even on one worker).
format::ProgramDesc inverted_residual_chain(int64_t out) {
  exporter::GraphBuilder g;
  EXPECT_TRUE(g.add_dim("H", 1, 64).ok());
  EXPECT_TRUE(g.add_dim("W", 1, 64).ok());
  int x = *g.add_input("x", DType::kF32, {2, 16, "H", "W"});
  RandomConstants weights(g, 29, 0.5f);
  auto conv = [&](const std::string& name, int in, std::vector<int64_t> w, int64_t group, int64_t pad) {
    return add_conv(g, weights, name, in, w, group, 1, pad);
  };
  int e = conv("expand", x, {48, 16, 1, 1}, 1, 0);
  int d = conv("dw", e, {48, 1, 3, 3}, 48, 1);
  int y = conv("project", d, {out, 48, 1, 1}, 1, 0);
  EXPECT_TRUE(g.mark_output(y, "y").ok());
  format::ProgramDesc desc;
  EXPECT_TRUE(g.emit(&desc).ok());
  EXPECT_TRUE(exporter::partition_xnnpack(&desc.methods[0], desc.constants).ok());
  return desc;
}

// The fused pass writes output rows while other workers read input rows: the plan keeps the
// depthwise input alive through the 1x1 (a race at 2 threads on a busy CPU before it did), and
// the pass runs at 2 threads. Many runs at the bound, then below it.
TEST(DepthwisePointwise, ItsInputAndOutputNeverShareBytesAtTwoThreads) {
  for (int64_t out : {16, 96}) {
    DelegatePair pair(inverted_residual_chain(out));
    ASSERT_EQ(pair.make(/*threads=*/2), "");
    pair.delegated->set_profiling(true);
    for (int run = 0; run < 24; ++run) {
      const int64_t h = run < 16 ? 64 : 64 - 7 * (run - 15), w = run < 16 ? 64 : 61 - 5 * (run - 15);
      ASSERT_EQ(pair.run({2, 16, h, w}, static_cast<uint32_t>(run), -1), "");
      const TensorView& a = pair.delegated->output(0);
      const TensorView& b = pair.portable->output(0);
      ASSERT_EQ(a.numel(), b.numel());
      for (int64_t i = 0; i < a.numel(); ++i) {
        const float av = a.as<float>()[i], bv = b.as<float>()[i];
        ASSERT_NEAR(av, bv, 2e-4f * std::max(1.f, std::fabs(bv))) << "out=" << out << " run " << run << " element " << i;
      }
      if (run == 0 && delegates::xnnpack::dense_conv_available())
        for (const ProfileRow& r : pair.delegated->profile())
          if (r.delegated && r.node == "dw") EXPECT_TRUE(r.in_next) << "out=" << out << ": the fused pass did not run";
    }
  }
}

TEST(DepthwisePointwise, MatchesPortableBelowTheBoundAndKeepsNaN) {
  DelegatePair pair(inverted_residuals());
  ASSERT_EQ(pair.make(), "");
  std::unique_ptr<Method>& d = pair.delegated;
  std::unique_ptr<Method>& p = pair.portable;
  for (int64_t h : {64, 1, 2, 7, 31}) {
    for (int64_t w : {64, 1, 5, 33}) {
      for (bool nan : {false, true}) {
        ASSERT_EQ(pair.run({2, 16, h, w}, static_cast<uint32_t>(h * 100 + w), nan ? 16 * h * w + h * w / 2 : -1), "");
        for (size_t o = 0; o < 3; ++o) {
          const TensorView& a = d->output(o);
          const TensorView& b = p->output(o);
          ASSERT_EQ(a.numel(), b.numel());
          int64_t nans = 0;
          for (int64_t i = 0; i < a.numel(); ++i) {
            const float av = a.as<float>()[i], bv = b.as<float>()[i];
            nans += std::isnan(bv);
            if (!std::isnan(bv) && std::isfinite(av)) {
              ASSERT_NEAR(av, bv, 2e-4f * std::max(1.f, std::fabs(bv))) << "H=" << h << " W=" << w << " output " << o
                                                                        << " element " << i;
            } else if (!std::isnan(bv)) {
              ASSERT_TRUE(nan) << "H=" << h << " W=" << w << " output " << o << " element " << i << " is " << av;
            }
          }
          EXPECT_EQ(nans > 0, nan) << "a NaN in the input reaches the outputs, and only then";
        }
      }
    }
  }
}

TEST(DepthwisePointwise, TheProfileSaysWhichStepIsComputedInTheNext) {
  DelegatePair pair(inverted_residuals());
  ASSERT_EQ(pair.make(), "");
  std::unique_ptr<Method>& d = pair.delegated;
  d->set_profiling(true);
  auto in_next = [&] {
    std::map<std::string, bool> nodes;  // the convolutions' steps
    for (const ProfileRow& r : d->profile())
      if (r.delegated && r.op.rfind("Conv", 0) == 0) nodes[r.node] = r.in_next;
    return nodes;
  };
  // Kiln's depthwise kernel takes dw1 on the rows with SIMD kernels (AVX2, AVX-512); elsewhere
  // (KILN_MAX_ISA=plain, arm64) XNNPACK's operator computes it, which hands nothing on.
  const bool kiln_depthwise = delegates::xnnpack::dense_conv_available();
  ASSERT_EQ(pair.run({2, 16, 64, 64}, 1, -1), "");  // dw1's output 2x64x64x48: 1.5 MiB
  const std::map<std::string, bool> bound = in_next();
  EXPECT_EQ(bound.at("dw1"), kiln_depthwise);
  for (const char* node : {"expand", "project1", "dw2", "project2", "project2b", "dw3", "project3"})
    EXPECT_FALSE(bound.at(node)) << node;
  ASSERT_EQ(pair.run({2, 16, 7, 7}, 2, -1), "");  // 18 KiB: stays in cache, two steps
  for (const auto& [node, fused] : in_next()) EXPECT_FALSE(fused) << node;
  ASSERT_EQ(pair.run({2, 16, 64, 48}, 3, -1), "");  // back above the threshold at another shape
  EXPECT_EQ(in_next().at("dw1"), kiln_depthwise);
}

}  // namespace
}  // namespace kiln::testing
