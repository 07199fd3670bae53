// A convolution whose channels-last output only a Concat reads writes it straight into its
// channel slice of the Concat's output (DelegateOp::into), and the Concat skips that copy: Kiln's
// dense kernel (1x1 GEMM, 3x3 direct rows of one input channel and of three, a gated 3x3),
// its Winograd kernel (3x3 stride 1), next to inputs the Concat still copies (an Add, a
// convolution with a second reader). Checked against the portable kernels of the same file at
// many H, W down to 1x1, over arenas of NaN bytes (a slice nobody wrote shows as NaN), with a
// NaN in the input; the export marks exactly the convolutions that may, and the file is a trust
// boundary: a damaged `into` is refused at load.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
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

format::ProgramDesc concat_program() {
  exporter::GraphBuilder g;
  EXPECT_TRUE(g.add_dim("H", 1, 36).ok());
  EXPECT_TRUE(g.add_dim("W", 1, 29).ok());
  int x = *g.add_input("x", DType::kF32, {2, 8, "H", "W"});
  RandomConstants weights(g, 11, 0.5f);
  auto conv = [&](const std::string& name, int in, std::vector<int64_t> w, int64_t pad) {
    core::AttrStore a;
    a.set_ints("pads", {pad, pad, pad, pad});
    return *g.add("Conv", name, {in, weights(w), weights({w[0]})}, a);
  };
  auto relu = [&](const std::string& name, int in) { return *g.add("Relu", name, {in}); };
  int sq = relu("squeeze_relu", conv("squeeze", x, {16, 8, 1, 1}, 0));
  int e1 = relu("e1_relu", conv("expand_1x1", sq, {24, 16, 1, 1}, 0));       // 24: a partial block
  int e3 = relu("e3_relu", conv("expand_3x3", sq, {40, 16, 3, 3}, 1));       // Winograd where it pays
  int c5 = conv("gated_3x3", sq, {20, 16, 3, 3}, 1);
  int e5 = *g.add("Mul", "silu", {c5, *g.add("Sigmoid", "sig", {c5})});
  int one = conv("to_one", x, {1, 8, 1, 1}, 0);
  int d1 = conv("direct_c1", one, {16, 1, 3, 3}, 1);                          // direct rows, C = 1
  int three = conv("to_three", x, {3, 8, 1, 1}, 0);
  int d3 = conv("direct_c3", three, {12, 3, 3, 3}, 1);                        // direct rows, C = 3
  int mp = *g.add("Add", "doubled", {sq, sq});  // copied
  int twice = conv("read_twice", sq, {8, 16, 1, 1}, 0);                      // copied: a second reader
  core::AttrStore ch;
  ch.set_int("axis", 1);
  int cat = *g.add("Concat", "cat", {e1, mp, e3, e5, d1, twice, d3}, ch);    // 24+16+40+20+16+8+12
  int y = conv("after", cat, {16, 136, 1, 1}, 0);
  int z = *g.add("Add", "second_reader", {twice, twice});
  EXPECT_TRUE(g.mark_output(y, "y").ok());
  EXPECT_TRUE(g.mark_output(cat, "cat").ok());
  EXPECT_TRUE(g.mark_output(z, "z").ok());
  format::ProgramDesc desc;
  EXPECT_TRUE(g.emit(&desc).ok());
  EXPECT_TRUE(exporter::partition_xnnpack(&desc.methods[0], desc.constants).ok());
  return desc;
}

TEST(ConcatSlice, ExportMarksTheConvolutionsOnlyTheConcatReads) {
  const format::ProgramDesc desc = concat_program();
  const format::MethodDesc& m = desc.methods[0];
  ASSERT_TRUE(m.delegate.declined.empty()) << m.delegate.declined[0].reason;
  std::set<std::string> marked;
  for (const format::DelegateRegionDesc& r : m.delegate.regions)
    for (const format::DelegateOpDesc& op : r.ops)
      if (op.into >= 0) {
        marked.insert(m.instructions[static_cast<size_t>(op.source)].node_name);
        EXPECT_EQ(m.values[static_cast<size_t>(op.into)].storage, format::Storage::kDelegate);
      }
  EXPECT_EQ(marked, (std::set<std::string>{"expand_1x1", "expand_3x3", "gated_3x3", "direct_c1", "direct_c3"}));
}

TEST(ConcatSlice, MatchesPortableBelowTheBoundAndKeepsNaN) {
  DelegatePair pair(concat_program());  // the NaN goes in: do the slices carry it?
  ASSERT_EQ(pair.make(), "");
  std::unique_ptr<Method>& d = pair.delegated;
  std::unique_ptr<Method>& p = pair.portable;
  for (int64_t h : {36, 1, 2, 9, 20}) {
    for (int64_t w : {29, 1, 6, 13}) {
      for (bool nan : {false, true}) {
        ASSERT_EQ(pair.run({2, 8, h, w}, static_cast<uint32_t>(h * 100 + w), nan ? h * w / 2 : -1), "");
        for (size_t o = 0; o < 3; ++o) {
          const TensorView& a = d->output(o);
          const TensorView& b = p->output(o);
          ASSERT_EQ(a.numel(), b.numel());
          int64_t nans = 0;
          for (int64_t i = 0; i < a.numel(); ++i) {
            const float av = a.as<float>()[i], bv = b.as<float>()[i];
            nans += std::isnan(bv);
            // A NaN stays NaN, through the slices and the delegate's Add alike.
            if (std::isnan(bv)) {
              ASSERT_TRUE(std::isnan(av)) << "H=" << h << " W=" << w << " nan=" << nan << " output " << o << " element " << i << " " << av << " " << bv;
            }
            if (!std::isnan(bv)) {
              ASSERT_NEAR(av, bv, 2e-4f * std::max(1.f, std::fabs(bv))) << "H=" << h << " W=" << w << " output " << o
                                                                       << " element " << i;
            }
          }
          EXPECT_EQ(nans > 0, nan) << "output " << o << ": a NaN in the input reaches it, and only then";
        }
      }
    }
  }
}

TEST(ConcatSlice, DamagedIntoIsRefusedAtLoad) {
  const format::ProgramDesc good = concat_program();
  ASSERT_TRUE(load_status(good).ok()) << load_status(good).message();
  auto op_of = [](format::ProgramDesc& d, const std::string& node) -> format::DelegateOpDesc& {
    for (auto& r : d.methods[0].delegate.regions)
      for (auto& op : r.ops)
        if (op.kind == format::DelegateOpKind::kKernel &&
            d.methods[0].instructions[static_cast<size_t>(op.source)].node_name == node)
          return op;
    throw std::runtime_error("no op for " + node);
  };
  auto refused = [](const format::ProgramDesc& d, const std::string& words) {
    Status s = load_status(d);
    EXPECT_EQ(s.code(), Code::kDataLoss) << s.message();
    EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
  };
  {  // out of range
    format::ProgramDesc d = good;
    op_of(d, "expand_1x1").into = static_cast<int32_t>(d.methods[0].values.size());
    refused(d, "writes into no valid value");
  }
  {  // a convolution whose output has a second reader
    format::ProgramDesc d = good;
    op_of(d, "read_twice").into = op_of(d, "expand_1x1").into;
    refused(d, "another step reads");
  }
  {  // into a value that is no Concat's output
    format::ProgramDesc d = good;
    op_of(d, "expand_1x1").into = op_of(d, "expand_3x3").outputs[0];
    refused(d, "not a later Concat's output");
  }
  {  // not a convolution
    format::ProgramDesc d = good;
    op_of(d, "doubled").into = op_of(d, "expand_1x1").into;
    refused(d, "not a channels-last convolution");
  }
}

}  // namespace
}  // namespace kiln::testing
