// A fully connected layer, its bias Add and the Relu or Clip after it (nn.Linear then ReLU, as
// torch writes it on inputs of rank 3: MatMul, Add, Relu) run as one delegated step: the Add's
// constant joins the layer's bias and the activation becomes its output clamp
// (DelegateOp::clamp). The export marks the layers whose Add output only the activation reads;
// the delegated result matches the portable kernels at many shapes below the bound, a NaN
// input stays NaN; and the file is a trust boundary: a damaged `clamp` is refused at load.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
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

format::ProgramDesc linear_program() {
  exporter::GraphBuilder g;
  EXPECT_TRUE(g.add_dim("B", 1, 3).ok());
  EXPECT_TRUE(g.add_dim("T", 1, 40).ok());
  int x = *g.add_input("x", DType::kF32, {"B", "T", 48});
  RandomConstants w(g, 17, 0.3f);
  int a1 = *g.add("Add", "l1_bias", {*g.add("MatMul", "l1", {x, w({48, 80})}), w({80})});
  int h1 = *g.add("Relu", "l1_relu", {a1});
  int a2 = *g.add("Add", "l2_bias", {w({40}), *g.add("MatMul", "l2", {h1, w({80, 40})})});  // the constant first
  int lo = *g.add_constant<float>("lo", DType::kF32, {}, {-0.5f});
  int hi = *g.add_constant<float>("hi", DType::kF32, {}, {0.75f});
  int h2 = *g.add("Clip", "l2_clip", {a2, lo, hi});
  int a3 = *g.add("Add", "l3_bias", {*g.add("MatMul", "l3", {h2, w({40, 24})}), w({24})});
  int r3 = *g.add("Relu", "l3_relu", {a3});
  int z = *g.add("Add", "l3_both", {a3, r3});  // the Add's output has a second reader: no clamp
  EXPECT_TRUE(g.mark_output(h2, "h2").ok());
  EXPECT_TRUE(g.mark_output(z, "z").ok());
  format::ProgramDesc desc;
  EXPECT_TRUE(g.emit(&desc).ok());
  EXPECT_TRUE(exporter::partition_xnnpack(&desc.methods[0], desc.constants).ok());
  return desc;
}

int32_t instruction(const format::MethodDesc& m, const std::string& node) {
  for (size_t i = 0; i < m.instructions.size(); ++i)
    if (m.instructions[i].node_name == node) return static_cast<int32_t>(i);
  throw std::runtime_error("no instruction " + node);
}

format::DelegateOpDesc& op_of(format::ProgramDesc& d, const std::string& node) {
  format::MethodDesc& m = d.methods[0];
  for (auto& r : m.delegate.regions)
    for (auto& op : r.ops)
      if (op.kind == format::DelegateOpKind::kKernel && op.source == instruction(m, node)) return op;
  throw std::runtime_error("no op for " + node);
}

TEST(LinearClamp, ExportFoldsTheActivationAfterTheBiasAdd) {
  format::ProgramDesc desc = linear_program();
  const format::MethodDesc& m = desc.methods[0];
  ASSERT_TRUE(m.delegate.declined.empty()) << m.delegate.declined[0].reason;
  EXPECT_EQ(op_of(desc, "l1").fused, instruction(m, "l1_bias"));
  EXPECT_EQ(op_of(desc, "l1").clamp, instruction(m, "l1_relu"));
  EXPECT_EQ(op_of(desc, "l2").fused, instruction(m, "l2_bias"));
  EXPECT_EQ(op_of(desc, "l2").clamp, instruction(m, "l2_clip"));
  EXPECT_EQ(op_of(desc, "l3").fused, instruction(m, "l3_bias"));
  EXPECT_EQ(op_of(desc, "l3").clamp, -1) << "the bias Add's output has a second reader";
  EXPECT_EQ(op_of(desc, "l1").outputs, m.instructions[static_cast<size_t>(instruction(m, "l1_relu"))].outputs);
}

TEST(LinearClamp, MatchesPortableBelowTheBoundAndKeepsNaN) {
  DelegatePair pair(linear_program());  // the NaN goes in: does the clamp keep it?
  ASSERT_EQ(pair.make(), "");
  std::unique_ptr<Method>& d = pair.delegated;
  std::unique_ptr<Method>& p = pair.portable;
  for (int64_t b : {3, 1, 2}) {
    for (int64_t t : {40, 1, 7, 33}) {
      for (bool nan : {false, true}) {
        ASSERT_EQ(pair.run({b, t, 48}, static_cast<uint32_t>(b * 100 + t), nan ? (b * t) / 2 * 48 + 5 : -1), "");
        for (size_t o = 0; o < 2; ++o) {
          const TensorView& a = d->output(o);
          const TensorView& r = p->output(o);
          ASSERT_EQ(a.numel(), r.numel());
          int64_t nans = 0;
          for (int64_t i = 0; i < a.numel(); ++i) {
            const float av = a.as<float>()[i], rv = r.as<float>()[i];
            nans += std::isnan(rv);
            // NaN stays NaN through the fused layers' clamp and the delegate's Add.
            ASSERT_EQ(std::isnan(av), std::isnan(rv)) << "B=" << b << " T=" << t << " output " << o << " element " << i
                                                      << ": " << av;
            if (!std::isnan(rv)) {
              ASSERT_NEAR(av, rv, 1e-4f * std::max(1.f, std::fabs(rv))) << "B=" << b << " T=" << t << " output " << o
                                                                       << " element " << i;
            }
          }
          EXPECT_EQ(nans > 0, nan) << "output " << o << ": the NaN row reaches it, and only then";
        }
      }
    }
  }
}

TEST(LinearClamp, DamagedClampIsRefusedAtLoad) {
  const format::ProgramDesc good = linear_program();
  ASSERT_TRUE(load_status(good).ok()) << load_status(good).message();
  auto refused = [](const format::ProgramDesc& d, const std::string& words) {
    Status s = load_status(d);
    EXPECT_EQ(s.code(), Code::kDataLoss) << s.message();
    EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
  };
  const format::MethodDesc& m = good.methods[0];
  {  // out of range
    format::ProgramDesc d = good;
    op_of(d, "l1").clamp = static_cast<int32_t>(m.instructions.size()) + 3;
    refused(d, "outside its region");
  }
  {  // an activation that reads another value
    format::ProgramDesc d = good;
    op_of(d, "l1").clamp = instruction(m, "l3_relu");
    refused(d, "does not read the fused instruction's output");
  }
  {  // no fused bias Add to follow
    format::ProgramDesc d = good;
    format::DelegateOpDesc& op = op_of(d, "l1");
    op.fused = -1;
    refused(d, "without a fused bias Add");
  }
  {  // an activation its own step also computes
    format::ProgramDesc d = good;
    format::DelegateOpDesc& op = op_of(d, "l3");
    op.clamp = instruction(m, "l3_relu");
    op.outputs = m.instructions[static_cast<size_t>(op.clamp)].outputs;
    refused(d, "2 times");
  }
}

}  // namespace
}  // namespace kiln::testing
