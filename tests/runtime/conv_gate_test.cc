// A convolution's gate y * act(y) (SiLU: Sigmoid then Mul; hard swish: HardSigmoid then Mul)
// folds into the delegate's convolution step (DelegateOp::gate): Kiln's dense kernel applies it
// to each task's output tiles (1x1, 3x3 strided), its Winograd kernel to each task's tiles (3x3
// stride 1), its depthwise kernel to each output row (7x7),
// and after XNNPACK's depthwise operator (3x3, stride 2) it is a pass over the output. Each is
// checked against the portable kernels of the same file at many H, W down to 1x1, over arenas of NaN
// bytes, and with a NaN in the input; a convolution whose output has a third reader keeps its
// gate as a separate step. The file is a trust boundary: a damaged gate is refused at load.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <stdexcept>

#include "aligned_bytes.h"
#include "load_status.h"
#include "delegate_pair.h"
#include "random_graph.h"
#include "core/status.h"
#include "export/graph.h"
#include "export/xnnpack_partition.h"
#include "format/program_desc.h"
#include "kiln/method.h"
#include "kiln/program.h"
#include "runtime/program_impl.h"

namespace kiln::testing {
namespace {

format::ProgramDesc gated_program() {
  exporter::GraphBuilder g;
  EXPECT_TRUE(g.add_dim("H", 1, 40).ok());
  EXPECT_TRUE(g.add_dim("W", 1, 33).ok());
  int x = *g.add_input("x", DType::kF32, {2, 8, "H", "W"});
  RandomConstants weights(g, 5, 0.6f);
  auto conv = [&](const std::string& name, int in, std::vector<int64_t> w, int64_t group, int64_t stride, int64_t pad) {
    core::AttrStore a;
    a.set_int("group", group).set_ints("strides", {stride, stride}).set_ints("pads", {pad, pad, pad, pad});
    return *g.add("Conv", name, {in, weights(w), weights({w[0]})}, a);
  };
  int c1 = conv("expand_1x1", x, {24, 8, 1, 1}, 1, 1, 0);
  int g1 = *g.add("Mul", "silu_1", {c1, *g.add("Sigmoid", "sig_1", {c1})});
  int c1b = conv("same_3x3", g1, {24, 24, 3, 3}, 1, 1, 1);  // Winograd F(2x2, 3x3)
  int g1b = *g.add("Mul", "silu_1b", {c1b, *g.add("Sigmoid", "sig_1b", {c1b})});
  int c2 = conv("dw_7x7", g1b, {24, 1, 7, 7}, 24, 1, 3);
  int g2 = *g.add("Mul", "silu_2", {*g.add("Sigmoid", "sig_2", {c2}), c2});
  int c3 = conv("down_3x3", g2, {16, 24, 3, 3}, 1, 2, 1);
  core::AttrStore hs;
  hs.set_float("alpha", 1.f / 6).set_float("beta", 0.5f);
  int g3 = *g.add("Mul", "hswish_3", {*g.add("HardSigmoid", "hsig_3", {c3}, hs), c3});
  int c4 = conv("dw_3x3_s2", g3, {16, 1, 3, 3}, 16, 2, 1);  // strided: XNNPACK's, then the gate pass
  int g4 = *g.add("Mul", "silu_4", {c4, *g.add("Sigmoid", "sig_4", {c4})});
  int c5 = conv("project_1x1", g4, {16, 16, 1, 1}, 1, 1, 0);
  int g5 = *g.add("Mul", "silu_5", {c5, *g.add("Sigmoid", "sig_5", {c5})});
  int y = *g.add("Add", "residual", {g5, c5});  // c5's third reader: its gate stays a step
  EXPECT_TRUE(g.mark_output(y, "y").ok());
  EXPECT_TRUE(g.mark_output(g3, "mid").ok());  // a gate's output may leave the method
  format::ProgramDesc desc;
  EXPECT_TRUE(g.emit(&desc).ok());
  EXPECT_TRUE(exporter::partition_xnnpack(&desc.methods[0], desc.constants).ok());
  return desc;
}

const std::string& node_of(const format::MethodDesc& m, int32_t i) { return m.instructions[static_cast<size_t>(i)].node_name; }

TEST(ConvGate, ExportFoldsTheGateIntoTheConvolution) {
  const format::ProgramDesc desc = gated_program();
  const format::MethodDesc& m = desc.methods[0];
  ASSERT_TRUE(m.delegate.declined.empty()) << m.delegate.declined[0].reason;
  std::map<std::string, std::string> gates;  // conv node -> "act+mul"
  for (const format::DelegateRegionDesc& r : m.delegate.regions)
    for (const format::DelegateOpDesc& op : r.ops)
      if (op.gate >= 0) gates[node_of(m, op.source)] = node_of(m, op.gate) + "+" + node_of(m, op.fused);
  EXPECT_EQ(gates, (std::map<std::string, std::string>{{"expand_1x1", "sig_1+silu_1"},
                                                       {"same_3x3", "sig_1b+silu_1b"},
                                                       {"dw_7x7", "sig_2+silu_2"},
                                                       {"down_3x3", "hsig_3+hswish_3"},
                                                       {"dw_3x3_s2", "sig_4+silu_4"}}));
}

TEST(ConvGate, MatchesPortableBelowTheBoundAndKeepsNaN) {
  DelegatePair pair(gated_program());  // the NaN goes in: do the gates carry it?
  ASSERT_EQ(pair.make(), "");
  std::unique_ptr<Method>& d = pair.delegated;
  std::unique_ptr<Method>& p = pair.portable;
  d->set_profiling(true);
  for (int64_t h : {40, 1, 2, 7, 23}) {
    for (int64_t w : {33, 1, 5, 16}) {
      for (bool nan : {false, true}) {
        ASSERT_EQ(pair.run({2, 8, h, w}, static_cast<uint32_t>(h * 100 + w), nan ? h * w / 2 : -1), "");
        for (size_t o : {1, 0}) {
          const TensorView& a = d->output(o);
          const TensorView& b = p->output(o);
          ASSERT_EQ(a.numel(), b.numel());
          // 'mid' has run on Kiln's kernels only, which carry NaN; XNNPACK's 3x3 depthwise
          // clamps it into a number (which is why execute refuses non-finite inputs by
          // default), so 'y' is compared where it is a number on both paths.
          const bool carries_nan = o == 1;
          int64_t nans = 0;
          for (int64_t i = 0; i < a.numel(); ++i) {
            const float av = a.as<float>()[i], bv = b.as<float>()[i];
            nans += std::isnan(bv);
            if (carries_nan) {
              ASSERT_EQ(std::isnan(av), std::isnan(bv)) << "H=" << h << " W=" << w << " element " << i;
            }
            if (!std::isnan(bv) && std::isfinite(av)) {
              ASSERT_NEAR(av, bv, 2e-4f * std::max(1.f, std::fabs(bv))) << "H=" << h << " W=" << w << " output " << o << " element " << i;
            } else if (!std::isnan(bv)) {
              ASSERT_TRUE(nan) << "H=" << h << " W=" << w << " output " << o << " element " << i << " is " << av;
            }
          }
          EXPECT_EQ(nans > 0, nan) << "a NaN in the input reaches the outputs, and only then";
        }
      }
    }
  }
  std::vector<std::string> ops;
  for (const ProfileRow& r : d->profile())
    if (r.op.find("Mul") != std::string::npos) ops.push_back(r.op + " " + r.node);
  EXPECT_EQ(ops, (std::vector<std::string>{"Conv+Sigmoid+Mul expand_1x1", "Conv+Sigmoid+Mul same_3x3",
                                           "Conv+Sigmoid+Mul dw_7x7",
                                           "Conv+HardSigmoid+Mul down_3x3", "Conv+Sigmoid+Mul dw_3x3_s2", "Sigmoid+Mul sig_5"}));
}

TEST(ConvGate, DamagedGatesAreRefusedAtLoad) {
  const format::ProgramDesc good = gated_program();
  ASSERT_TRUE(load_status(good).ok()) << load_status(good).message();
  auto gated_op = [](format::ProgramDesc& d) -> format::DelegateOpDesc& {
    for (auto& r : d.methods[0].delegate.regions)
      for (auto& op : r.ops)
        if (op.gate >= 0) return op;
    throw std::runtime_error("no gated op");
  };
  auto refused = [](const format::ProgramDesc& d, const std::string& words) {
    Status s = load_status(d);
    EXPECT_EQ(s.code(), Code::kDataLoss) << s.message();
    EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
  };
  {  // the gate is the source itself
    format::ProgramDesc d = good;
    gated_op(d).gate = gated_op(d).source;
    refused(d, "folds a gate outside its region");
  }
  {  // a gate without its Mul
    format::ProgramDesc d = good;
    format::DelegateOpDesc& op = gated_op(d);
    op.gate = op.fused;
    op.fused = -1;
    refused(d, "folds a gate outside its region");
  }
  {  // an activation that reads another value
    format::ProgramDesc d = good;
    format::DelegateOpDesc& op = gated_op(d);
    const auto& ins = d.methods[0].instructions;
    for (size_t i = 0; i < ins.size(); ++i)
      if (ins[i].op == "Sigmoid" && static_cast<int32_t>(i) != op.gate) {
        op.gate = static_cast<int32_t>(i);
        break;
      }
    refused(d, "does not read its output");
  }
}

}  // namespace
}  // namespace kiln::testing
