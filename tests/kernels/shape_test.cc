// Shape: hand cases with start/end, a seeded sweep of ranks and attribute values against
// Python-style slicing written here, and the symbolic values the importer folds with.
#include <gtest/gtest.h>

#include <algorithm>

#include "fold_test_util.h"

namespace kiln::testing {
namespace {

using V = std::vector<int64_t>;

core::AttrStore range_attrs(const V& start_end) {
  core::AttrStore a;
  if (start_end.size() > 0) a.set_int("start", start_end[0]);
  if (start_end.size() > 1) a.set_int("end", start_end[1]);
  return a;
}

Tensor zeros(const V& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return make_tensor<float>(dims, std::vector<float>(n, 0.f));
}

V shape_of(const V& dims, const V& start_end = {}) {
  OpResult r = run_op("Shape", {zeros(dims)}, range_attrs(start_end));
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.kernel, kernels::KernelStatus::kOk);
  EXPECT_EQ(r.outputs[0].dtype, DType::kI64);
  return r.outputs[0].values<int64_t>();
}

TEST(Shape, HandComputed) {
  EXPECT_EQ(shape_of({2, 3, 4}), (V{2, 3, 4}));
  EXPECT_EQ(shape_of({2, 3, 4}, {1}), (V{3, 4}));
  EXPECT_EQ(shape_of({2, 3, 4}, {0, -1}), (V{2, 3}));
  EXPECT_EQ(shape_of({2, 3, 4}, {-2, 10}), (V{3, 4}));
  EXPECT_EQ(shape_of({2, 3, 4}, {-10, 1}), (V{2}));
  EXPECT_EQ(shape_of({2, 3, 4}, {2, 1}), (V{}));
  EXPECT_EQ(shape_of({}), (V{}));
  EXPECT_EQ(shape_of({5, 0}), (V{5, 0}));
}

TEST(Shape, RandomSweep) {
  std::mt19937 rng(15);
  for (int iter = 0; iter < 300; ++iter) {
    const int rank = static_cast<int>(rng() % 6);
    V dims = random_shape(rng, rank, 4);
    const int64_t start = static_cast<int64_t>(rng() % 15) - 7, end = static_cast<int64_t>(rng() % 15) - 7;
    V args = iter % 3 == 0 ? V{} : iter % 3 == 1 ? V{start} : V{start, end};
    // Python slicing dims[start:end].
    auto norm = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
    const int64_t b = args.empty() ? 0 : norm(args[0]), e = args.size() < 2 ? rank : norm(args[1]);
    V want;
    for (int64_t k = b; k < e; ++k) want.push_back(dims[k]);
    ASSERT_EQ(shape_of(dims, args), want) << "iter " << iter;
  }
}

TEST(Shape, Errors) {
  Tensor x = make_tensor<float>({1}, {0});
  EXPECT_TRUE(has_text(run_op("Shape", {x, x}).status, "node 'test' (Shape): expects 1 inputs, got 2"));
  EXPECT_TRUE(has_text(run_op("Shape", {}).status, "expects 1 inputs, got 0"));
}

TEST(ShapeSymbolic, ValuesAreTheDimsAndTheKernelWritesTheActualOnes) {
  SymPool s;
  core::ExprPool& p = s.pool;
  auto x = sym_input(DType::kF32, {s.batch, s.seq, s.c(64)});
  SymResult r = infer(p, "Shape", {x});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[3]");
  EXPECT_EQ(values_of(p, r), "[batch, seq, 64]");
  r = infer(p, "Shape", {x}, range_attrs({-2}));
  EXPECT_EQ(r.shape, "[2]");
  EXPECT_EQ(values_of(p, r), "[seq, 64]");
  EXPECT_EQ(values_of(p, infer(p, "Shape", {x}, range_attrs({1, 2}))), "[seq]");
  EXPECT_EQ(infer(p, "Shape", {x}, range_attrs({2, 1})).shape, "[0]");

  for (V dims : {V{1, 1, 64}, V{3, 17, 64}, V{8, 512, 64}}) {  // below the bound
    std::vector<Tensor> out(1);
    out[0].dtype = DType::kI64;
    out[0].shape = {2};
    Tensor xt;
    xt.shape = dims;  // the kernel reads only the dims
    ASSERT_EQ(run_kernel("Shape", {xt}, &out, range_attrs({0, 2})), kernels::KernelStatus::kOk);
    EXPECT_EQ(out[0].values<int64_t>(), (V{dims[0], dims[1]}));
  }
}

}  // namespace
}  // namespace kiln::testing
