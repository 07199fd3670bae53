// Carried values (sym_values) of small integer tensors through the shape functions of the
// ops exporters use for shape arithmetic: hand cases over Dims (Shape -> Gather -> Mul ->
// Concat -> Reshape, Equal/Where), the rules that keep folding exact, a sweep checking
// folded constants against the kernels, and random chains evaluated at many dim values.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "fold_test_util.h"

namespace kiln::testing {
namespace {

using core::ExprId;
using V = std::vector<int64_t>;

Tensor scalar(int64_t v) { return make_tensor<int64_t>({}, {v}); }
const uint64_t kEmptyValues = 0;


/// Output 0 of `r` as the input of the next node.
kernels::SymTensor next(const SymResult& r) {
  EXPECT_TRUE(r.status.ok()) << r.status.message();
  return r.outputs.empty() ? kernels::SymTensor() : r.outputs[0];
}

TEST(SymValues, ShapeGatherMul) {
  SymPool s;
  core::ExprPool& p = s.pool;
  Tensor zero = scalar(0), four = i64s({4});
  SymResult g = infer(p, "Gather", {sym_values_input(p, {s.batch, s.seq, s.c(64)}), const_input(p, zero)});
  EXPECT_EQ(g.shape, "[]");
  EXPECT_EQ(values_of(p, g), "[batch]");
  SymResult m = infer(p, "Mul", {next(g), const_input(p, four)});
  EXPECT_EQ(m.shape, "[1]");
  EXPECT_EQ(values_of(p, m), "[4*batch]");
}

// torchvision's _topk_min: K = ReduceMin(Concat([100], Unsqueeze(Shape(scores)[0]))) is
// min(100, n); Max, Sum and Prod fold alike, per kept axis; a reduction over no elements
// carries nothing.
TEST(SymValues, ReduceMinMaxSumProdOfKnownValues) {
  SymPool s;
  core::ExprPool& p = s.pool;
  auto v = sym_values_input(p, {p.constant(100), s.seq});
  EXPECT_EQ(values_of(p, infer(p, "ReduceMin", {v}, core::AttrStore().set_int("keepdims", 1))), "[min(100,seq)]");
  EXPECT_EQ(values_of(p, infer(p, "ReduceMax", {v}, core::AttrStore().set_int("keepdims", 0))), "[max(100,seq)]");
  // The pool's ranges simplify: batch <= 8 < 100.
  EXPECT_EQ(values_of(p, infer(p, "ReduceMin", {sym_values_input(p, {p.constant(100), s.batch})})), "[batch]");
  EXPECT_EQ(values_of(p, infer(p, "ReduceProd", {sym_values_input(p, {s.batch, s.seq, p.constant(4)})})),
            "[4*batch*seq]");
  Tensor axes1 = i64s({1});
  kernels::SymTensor m = sym_values_input(p, {s.batch, p.constant(2), s.seq, p.constant(5)});
  m.shape = {p.constant(2), p.constant(2)};
  EXPECT_EQ(values_of(p, infer(p, "ReduceSum", {m, const_input(p, axes1)}, core::AttrStore().set_int("keepdims", 0))),
            "[batch + 2, seq + 5]");
  // Constants fold exactly as the kernel computes.
  for (const char* op : {"ReduceMin", "ReduceMax", "ReduceSum", "ReduceProd"})
    EXPECT_TRUE(fold_matches_kernel(op, {make_tensor<int64_t>({2, 3}, {4, -2, 7, 1, 9, 3})},
                                    core::AttrStore().set_ints("axes", {1}).set_int("keepdims", 0)));
  kernels::SymTensor empty = sym_input(DType::kI64, {p.constant(0)});
  empty.const_data = &kEmptyValues;
  EXPECT_EQ(values_of(p, infer(p, "ReduceMin", {empty})), "[]");
}

TEST(SymValues, SizeIsTheProductOfTheDims) {
  SymPool s;
  core::ExprPool& p = s.pool;
  SymResult n = infer(p, "Size", {sym_input(DType::kF32, {s.batch, s.seq, s.c(3)})});
  EXPECT_EQ(n.shape, "[]");
  EXPECT_EQ(values_of(p, n), "[3*batch*seq]");
  std::vector<Tensor> out(1);
  out[0].dtype = DType::kI64;
  out[0].shape = {};
  Tensor x = make_tensor<float>({2, 0, 3}, {});
  ASSERT_EQ(run_kernel("Size", {x}, &out), kernels::KernelStatus::kOk);
  EXPECT_EQ(out[0].values<int64_t>(), V{0});
  x = make_tensor<float>({2, 5}, std::vector<float>(10, 1.f));
  ASSERT_EQ(run_kernel("Size", {x}, &out), kernels::KernelStatus::kOk);
  EXPECT_EQ(out[0].values<int64_t>(), V{10});
}

TEST(SymValues, ReshapeTargetFromShapeArithmetic) {
  // x: [batch, seq, 64] -> Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0) * Gather(Shape(x), 1)), [-1]))
  SymPool s;
  core::ExprPool& p = s.pool;
  auto x = sym_input(DType::kF32, {s.batch, s.seq, s.c(64)});
  SymResult shape = infer(p, "Shape", {x});
  EXPECT_EQ(values_of(p, shape), "[batch, seq, 64]");
  Tensor zero = scalar(0), one = scalar(1), axes = i64s({0}), minus_one = i64s({-1});
  SymResult b = infer(p, "Gather", {next(shape), const_input(p, zero)});
  SymResult q = infer(p, "Gather", {next(shape), const_input(p, one)});
  SymResult bq = infer(p, "Mul", {next(b), next(q)});
  EXPECT_EQ(values_of(p, bq), "[batch*seq]");
  SymResult u = infer(p, "Unsqueeze", {next(bq), const_input(p, axes)});
  EXPECT_EQ(u.shape, "[1]");
  SymResult cat = infer(p, "Concat", {next(u), const_input(p, minus_one)}, axis_attr(0));
  EXPECT_EQ(values_of(p, cat), "[batch*seq, -1]");
  SymResult r = infer(p, "Reshape", {x, next(cat)});
  EXPECT_EQ(r.shape, "[batch*seq, 64]");
  EXPECT_TRUE(r.guards.empty());

  // Shape -> Slice [1:] -> Cast -> Concat with a leading -1.
  Tensor starts = i64s({1}), ends = i64s({std::numeric_limits<int64_t>::max()});
  SymResult tail = infer(p, "Slice", {next(shape), const_input(p, starts), const_input(p, ends)});
  EXPECT_EQ(values_of(p, tail), "[seq, 64]");
  SymResult cast = infer(p, "Cast", {next(tail)}, core::AttrStore().set_int("to", 6));
  EXPECT_EQ(values_of(p, cast), "[seq, 64]");
  Tensor rev_s = i64s({-1}), rev_e = i64s({std::numeric_limits<int64_t>::min()}), ax0 = i64s({0}), st = i64s({-1});
  SymResult rev = infer(p, "Slice", {next(shape), const_input(p, rev_s), const_input(p, rev_e), const_input(p, ax0),
                                     const_input(p, st)});
  EXPECT_EQ(values_of(p, rev), "[64, seq, batch]");
}

TEST(SymValues, DivisionByAWindowCountFolds) {
  // B_ // num_windows, where num_windows' range includes 0 but no dim value makes it 0.
  SymPool s;
  core::ExprPool& p = s.pool;
  ExprId windows = p.add(p.sub(p.mul(s.seq, s.seq), s.seq), s.c(1));
  ASSERT_LT(p.range(windows).lo, 1);
  ExprId total = p.mul(s.batch, windows);
  SymResult d = infer(p, "Div", {sym_values_input(p, {total}), sym_values_input(p, {windows})});
  ASSERT_EQ(d.outputs[0].sym_values.size(), 1u);
  for (int64_t b : {1, 8})
    for (int64_t q : {1, 2, 7, 512}) EXPECT_EQ(eval_all(p, {b, q})[d.outputs[0].sym_values[0]], b) << b << " " << q;
}

TEST(SymValues, EmptyTensorsAreKnown) {
  // torch's F.pad: Concat(Shape(y), Shape(x)[2:]) where x has rank 2, so the slice is empty.
  SymPool s;
  core::ExprPool& p = s.pool;
  SymResult shape = infer(p, "Shape", {sym_input(DType::kF32, {s.batch, s.seq})});
  SymResult tail = infer(p, "Slice", {next(shape), const_input(p, i64s({2})), const_input(p, i64s({INT64_MAX}))});
  EXPECT_EQ(tail.shape, "[0]");
  SymResult cat = infer(p, "Concat", {next(shape), next(tail)}, axis_attr(0));
  EXPECT_EQ(values_of(p, cat), "[batch, seq]");
  EXPECT_TRUE(fold_matches_kernel("Concat", {i64s({3, 4}), i64s({})}, axis_attr(0)));
}

TEST(SymValues, ViewsKeepValues) {
  SymPool s;
  core::ExprPool& p = s.pool;
  auto v = sym_values_input(p, {s.batch, s.seq, s.c(2), s.c(3)});
  Tensor spec = i64s({2, 2}), axes = i64s({0});
  SymResult r = infer(p, "Reshape", {v, const_input(p, spec)});
  EXPECT_EQ(r.shape, "[2, 2]");
  EXPECT_EQ(values_of(p, r), "[batch, seq, 2, 3]");
  EXPECT_EQ(values_of(p, infer(p, "Flatten", {next(r)}, axis_attr(0))), "[batch, seq, 2, 3]");
  SymResult u = infer(p, "Unsqueeze", {v, const_input(p, axes)});
  EXPECT_EQ(u.shape, "[1, 4]");
  EXPECT_EQ(values_of(p, infer(p, "Squeeze", {next(u)})), "[batch, seq, 2, 3]");
  EXPECT_EQ(values_of(p, infer(p, "Expand", {sym_values_input(p, {s.seq}), const_input(p, spec)})),
            "[seq, seq, seq, seq]");
}

TEST(SymValues, ArithmeticRules) {
  SymPool s;
  core::ExprPool& p = s.pool;
  auto vals = [&](const char* op, std::vector<kernels::SymTensor> in) { return values_of(p, infer(p, op, in)); };
  auto one = [&](ExprId e) { return sym_values_input(p, {e}); };
  EXPECT_EQ(vals("Sub", {one(s.seq), one(s.c(1))}), "[seq - 1]");
  EXPECT_EQ(vals("Add", {sym_values_input(p, {s.batch, s.seq}), one(s.c(1))}), "[batch + 1, seq + 1]");
  EXPECT_EQ(vals("Div", {one(s.seq), one(s.c(2))}), "[floordiv(seq,2)]");
  EXPECT_EQ(vals("Div", {one(s.seq), one(s.batch)}), "[floordiv(seq,batch)]");
  EXPECT_EQ(vals("Div", {one(p.sub(s.seq, s.c(5))), one(s.c(2))}), "[]");  // may be negative: truncation differs
  EXPECT_EQ(vals("Div", {one(s.c(-7)), one(s.c(2))}), "[-3]");              // ONNX truncates
  EXPECT_EQ(vals("Div", {one(s.seq), one(s.c(0))}), "[]");                  // the kernel fails instead
  EXPECT_EQ(vals("Mul", {one(s.seq), one(s.c(int64_t{1} << 40))}), "[]");   // could overflow
  EXPECT_EQ(vals("Max", {one(s.seq), one(s.c(1))}), "[seq]");               // seq >= 1 always
  EXPECT_EQ(vals("Min", {one(s.seq), one(s.c(16))}), "[min(16,seq)]");
  EXPECT_EQ(vals("Max", {one(s.seq), one(s.batch), one(s.c(3))}), "[max(3,max(batch,seq))]");
  EXPECT_EQ(vals("Sum", {one(s.seq), one(s.batch), one(s.c(1))}), "[batch + seq + 1]");
  EXPECT_EQ(vals("Min", {one(s.seq)}), "[seq]");

  // i32 results must not wrap where the expression would not.
  auto i32 = [&](ExprId e) {
    kernels::SymTensor t = sym_values_input(p, {e});
    t.dtype = DType::kI32;
    return t;
  };
  EXPECT_EQ(vals("Mul", {i32(s.seq), i32(s.c(1 << 20))}), "[1048576*seq]");
  EXPECT_EQ(vals("Mul", {i32(s.seq), i32(s.c(1 << 30))}), "[]");
  EXPECT_EQ(vals("Add", {i32(s.c(std::numeric_limits<int32_t>::max())), i32(s.c(1))}), "[-2147483648]");

  // Unknown or float operands, and big constants, carry nothing.
  EXPECT_EQ(vals("Add", {sym_input(DType::kI64, {s.c(1)}), one(s.c(1))}), "[]");
  EXPECT_EQ(vals("Add", {sym_input(DType::kF32, {s.c(1)}), sym_input(DType::kF32, {s.c(1)})}), "[]");
  Tensor big = make_tensor<int64_t>({65}, V(65, 1));
  EXPECT_EQ(vals("Add", {const_input(p, big), const_input(p, big)}), "[]");
  EXPECT_EQ(vals("Add", {sym_values_input(p, {s.seq}), sym_input(DType::kI64, {s.batch})}), "[]");  // shape unknown
}

TEST(SymValues, CompareAndWhereAroundExpand) {
  // Where(Equal(shape, -1), 1, shape): the pattern exporters emit to build an Expand shape.
  SymPool s;
  core::ExprPool& p = s.pool;
  auto shape = sym_values_input(p, {s.batch, s.c(-1), s.seq});
  Tensor minus_one = i64s({-1}), ones = i64s({1, 1, 1});
  SymResult eq = infer(p, "Equal", {shape, const_input(p, minus_one)});
  EXPECT_EQ(eq.outputs[0].dtype, DType::kBool);
  EXPECT_EQ(values_of(p, eq), "[0, 1, 0]");
  SymResult w = infer(p, "Where", {next(eq), const_input(p, ones), shape});
  EXPECT_EQ(values_of(p, w), "[batch, 1, seq]");
  SymResult e = infer(p, "Expand", {sym_input(DType::kF32, {s.c(1), s.c(1), s.seq}), next(w)});
  EXPECT_EQ(e.shape, "[batch, 1, seq]");
  EXPECT_TRUE(e.guards.empty());

  auto cmp = [&](const char* op, ExprId a, ExprId b) {
    return values_of(p, infer(p, op, {sym_values_input(p, {a}), sym_values_input(p, {b})}));
  };
  EXPECT_EQ(cmp("Equal", s.seq, s.seq), "[1]");
  EXPECT_EQ(cmp("Equal", p.add(s.seq, s.c(1)), s.seq), "[0]");
  EXPECT_EQ(cmp("Equal", s.seq, s.batch), "[]");  // unprovable: no value
  EXPECT_EQ(cmp("Less", s.seq, s.c(0)), "[0]");
  EXPECT_EQ(cmp("GreaterOrEqual", s.seq, s.c(1)), "[1]");
  EXPECT_EQ(cmp("Greater", p.mul(s.seq, s.c(2)), s.seq), "[1]");
  EXPECT_EQ(cmp("LessOrEqual", s.seq, s.c(512)), "[1]");
  EXPECT_EQ(cmp("Less", s.seq, s.c(512)), "[]");
  EXPECT_EQ(cmp("Greater", s.c(std::numeric_limits<int64_t>::max()), s.seq), "[1]");
  EXPECT_EQ(cmp("Less", s.c(std::numeric_limits<int64_t>::min()), s.seq), "[1]");

  // An unknown condition leaves the result unknown; a known one may ignore an unknown side.
  SymResult unknown = infer(p, "Equal", {sym_values_input(p, {s.seq}), sym_values_input(p, {s.batch})});
  EXPECT_EQ(values_of(p, infer(p, "Where", {next(unknown), sym_values_input(p, {s.c(1)}), shape})), "[]");
  Tensor cond = make_tensor<bool>({3}, {true, true, false});
  EXPECT_EQ(values_of(p, infer(p, "Where", {const_input(p, cond), shape, sym_input(DType::kI64, {s.c(3)})})), "[]");
  EXPECT_EQ(values_of(p, infer(p, "Where", {const_input(p, cond), shape, sym_input(DType::kI64, {s.c(1)})})),
            "[]");  // the unknown side is chosen for element 2
  Tensor all = make_tensor<bool>({3}, {true, true, true});
  EXPECT_EQ(values_of(p, infer(p, "Where", {const_input(p, all), shape, sym_input(DType::kI64, {s.c(1)})})),
            "[batch, -1, seq]");
  EXPECT_EQ(values_of(p, infer(p, "Not", {next(eq)})), "[1, 0, 1]");
  auto unknown_bools = sym_input(DType::kBool, {s.c(3)});
  EXPECT_EQ(values_of(p, infer(p, "And", {next(eq), unknown_bools})), "[]");  // element 1 depends on it
  Tensor minus_five = i64s({-5});
  SymResult never = infer(p, "Equal", {shape, const_input(p, minus_five)});
  EXPECT_EQ(values_of(p, never), "[0, 0, 0]");
  EXPECT_EQ(values_of(p, infer(p, "And", {next(never), unknown_bools})), "[0, 0, 0]");  // false And x
  SymResult always = infer(p, "Not", {next(never)});
  EXPECT_EQ(values_of(p, infer(p, "Or", {unknown_bools, next(always)})), "[1, 1, 1]");  // x Or true
  EXPECT_EQ(values_of(p, infer(p, "Xor", {unknown_bools, next(always)})), "[]");
}

TEST(SymValues, FoldMatchesKernelSweep) {
  std::mt19937 rng(97);
  auto ints = [&](DType t, std::vector<int64_t> shape, int64_t lo, int64_t hi) {
    Tensor x = make_tensor<int64_t>(shape, {});
    x.dtype = t;
    x.bytes.resize(static_cast<size_t>(x.numel()) * dtype_size(t));
    std::uniform_int_distribution<int64_t> d(lo, hi);
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t v = d(rng);
      if (t == DType::kI64) x.data<int64_t>()[i] = v;
      if (t == DType::kI32) x.data<int32_t>()[i] = static_cast<int32_t>(v);
      if (t == DType::kBool) x.bytes[i] = v & 1;
    }
    return x;
  };
  auto shape = [&]() {
    std::vector<int64_t> s(rng() % 3);
    for (auto& d : s) d = 1 + static_cast<int64_t>(rng() % 3);
    return s;
  };
  const int64_t big = std::numeric_limits<int32_t>::max();
  const int32_t low32 = std::numeric_limits<int32_t>::min();
  const int64_t low64 = std::numeric_limits<int64_t>::min();
  EXPECT_TRUE(fold_matches_kernel("Div", {make_tensor<int32_t>({3}, {low32, 7, -7}), make_tensor<int32_t>({1}, {-1})}));
  EXPECT_TRUE(fold_matches_kernel("Div", {make_tensor<int64_t>({2}, {low64, -9}), make_tensor<int64_t>({2}, {-1, 4})}));
  EXPECT_TRUE(fold_matches_kernel("Mul", {make_tensor<int64_t>({1}, {low64}), make_tensor<int64_t>({1}, {-1})}));
  for (int iter = 0; iter < 300; ++iter) {
    const DType t = iter % 2 ? DType::kI64 : DType::kI32;
    const std::string it = "iter " + std::to_string(iter);
    std::vector<int64_t> sa = shape(), sb = sa;
    if (rng() % 2) sb.assign(sa.begin() + static_cast<int64_t>(rng() % (sa.size() + 1)), sa.end());
    const bool wide = rng() % 4 == 0;  // values at the edge of i32, to check wrapping
    Tensor a = ints(t, sa, wide ? -big : -9, wide ? big : 9), b = ints(t, sb, wide ? -big : -9, wide ? big : 9);
    for (const char* op : {"Add", "Sub", "Mul", "Max", "Min", "Equal", "Less", "Greater", "LessOrEqual",
                           "GreaterOrEqual"}) {
      EXPECT_TRUE(fold_matches_kernel(op, {a, b})) << it;
      EXPECT_TRUE(fold_matches_kernel(op, {b, a})) << it;
    }
    Tensor nz = ints(t, sb, 1, 9);
    if (rng() % 2)  // negative divisors
      for (int64_t i = 0; i < nz.numel(); ++i) {
        if (t == DType::kI64) nz.data<int64_t>()[i] *= -1;
        if (t == DType::kI32) nz.data<int32_t>()[i] *= -1;
      }
    EXPECT_TRUE(fold_matches_kernel("Div", {a, nz})) << it;
    EXPECT_TRUE(fold_matches_kernel("Sum", {a, b, nz})) << it;
    EXPECT_TRUE(fold_matches_kernel("Max", {nz, a, b})) << it;
    Tensor c = ints(DType::kBool, sa, 0, 1), d = ints(DType::kBool, sb, 0, 1);
    for (const char* op : {"And", "Or", "Xor", "Equal"}) EXPECT_TRUE(fold_matches_kernel(op, {c, d})) << it;
    EXPECT_TRUE(fold_matches_kernel("Not", {c})) << it;
    EXPECT_TRUE(fold_matches_kernel("Where", {d, a, b})) << it;
    EXPECT_TRUE(fold_matches_kernel("Where", {c, b, a})) << it;

    // Data movement over a rank-1..3 tensor.
    std::vector<int64_t> sx = shape();
    sx.push_back(1 + static_cast<int64_t>(rng() % 4));
    Tensor x = ints(t, sx, -50, 50);
    const int64_t rank = static_cast<int64_t>(sx.size()), axis = static_cast<int64_t>(rng() % rank);
    Tensor idx = ints(DType::kI64, shape(), -sx[axis], sx[axis] - 1);
    EXPECT_TRUE(fold_matches_kernel("Gather", {x, idx}, axis_attr(axis))) << it;
    EXPECT_TRUE(fold_matches_kernel("Concat", {x, x, x}, axis_attr(axis - (rng() % 2 ? rank : 0)))) << it;
    EXPECT_TRUE(fold_matches_kernel("Slice", {x, i64s({-2}), i64s({99}), i64s({axis}), i64s({1})})) << it;
    EXPECT_TRUE(fold_matches_kernel("Slice", {x, i64s({9}), i64s({-99}), i64s({axis}), i64s({-2})})) << it;
    EXPECT_TRUE(fold_matches_kernel("Unsqueeze", {x, i64s({-1})})) << it;
    V perm(rank);
    for (int64_t k = 0; k < rank; ++k) perm[k] = k;
    std::shuffle(perm.begin(), perm.end(), rng);
    EXPECT_TRUE(fold_matches_kernel("Transpose", {x}, core::AttrStore().set_ints("perm", perm))) << it;
    EXPECT_TRUE(fold_matches_kernel("Flatten", {x}, axis_attr(axis))) << it;
    EXPECT_TRUE(fold_matches_kernel("Reshape", {x, i64s({-1})})) << it;
    V reps(rank);
    for (auto& r : reps) r = static_cast<int64_t>(rng() % 3);
    EXPECT_TRUE(fold_matches_kernel("Tile", {x, i64s(reps)})) << it;
    V target = sx;
    target.insert(target.begin(), 2);
    EXPECT_TRUE(fold_matches_kernel("Expand", {x, i64s(target)})) << it;
    EXPECT_TRUE(fold_matches_kernel("Cast", {x}, core::AttrStore().set_int("to", iter % 3 ? 7 : 6))) << it;
  }
}

TEST(SymValues, FloatFoldMatchesKernelSweep) {
  // f32 tensors carry values only while each is an integer that f32 holds exactly; then every
  // carried value must be exactly what the kernel computes in float arithmetic.
  std::mt19937 rng(98);
  auto floats = [&](std::vector<int64_t> shape, bool halves) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = static_cast<float>(static_cast<int>(rng() % 19) - 9) + (halves && rng() % 2 ? 0.5f : 0.f);
    return make_tensor<float>(shape, v);
  };
  auto shape = [&]() {
    std::vector<int64_t> s(rng() % 3);
    for (auto& d : s) d = 1 + static_cast<int64_t>(rng() % 3);
    return s;
  };
  const auto to = [](int64_t code) { return core::AttrStore().set_int("to", code); };
  for (int iter = 0; iter < 200; ++iter) {
    const std::string it = "iter " + std::to_string(iter);
    std::vector<int64_t> sa = shape(), sb = sa;
    if (rng() % 2) sb.assign(sa.begin() + static_cast<int64_t>(rng() % (sa.size() + 1)), sa.end());
    Tensor a = floats(sa, false), b = floats(sb, false), h = floats(sb, true);
    for (const char* op : {"Add", "Sub", "Mul", "Max", "Min", "Equal", "Less", "GreaterOrEqual"}) {
      EXPECT_TRUE(fold_matches_kernel(op, {a, b})) << op << " " << it;
      EXPECT_TRUE(fold_matches_kernel(op, {a, h}, {}, false)) << op << " with halves " << it;
    }
    EXPECT_TRUE(fold_matches_kernel("Div", {a, b}, {}, false)) << it;  // only where b divides a
    EXPECT_TRUE(fold_matches_kernel("Mod", {a, b}, core::AttrStore().set_int("fmod", 1), false)) << it;
    EXPECT_TRUE(fold_matches_kernel("Sum", {a, b, a})) << it;
    for (const char* op : {"Neg", "Floor", "Ceil", "Round"}) {
      EXPECT_TRUE(fold_matches_kernel(op, {a})) << op << " " << it;
      EXPECT_TRUE(fold_matches_kernel(op, {h}, {}, false)) << op << " with halves " << it;
    }
    for (int64_t code : {7, 6, 9, 1}) EXPECT_TRUE(fold_matches_kernel("Cast", {a}, to(code))) << code << " " << it;
    EXPECT_TRUE(fold_matches_kernel("Cast", {h}, to(7), false)) << it;
    EXPECT_TRUE(fold_matches_kernel("Cast", {make_tensor<int64_t>({2}, {-9, 9})}, to(1))) << it;
  }
  // Integers past 2^24 are not exact in f32: not carried.
  EXPECT_TRUE(fold_matches_kernel("Cast", {make_tensor<int64_t>({1}, {(int64_t{1} << 24) + 1})}, to(1), false));
  core::ExprPool p;
  SymResult big = infer(p, "Cast", {const_input(p, make_tensor<int64_t>({1}, {(int64_t{1} << 24) + 1}))}, to(1));
  EXPECT_EQ(values_of(p, big), "[]");
}

TEST(SymValues, FloatShapeArithmeticAsTf2onnxWritesIt) {
  // Shape -> Cast(float) -> Mul 2.0 -> Div -> Floor -> Cast(int64): exact while every value
  // is an integer.
  SymPool s;
  core::ExprPool& p = s.pool;
  const auto to = [](int64_t code) { return core::AttrStore().set_int("to", code); };
  SymResult f = infer(p, "Cast", {sym_values_input(p, {s.batch, s.seq})}, to(1));
  EXPECT_EQ(values_of(p, f), "[batch, seq]");
  Tensor two = make_tensor<float>({1}, {2.f}), four = make_tensor<float>({1}, {4.f}), half = make_tensor<float>({1}, {0.5f});
  SymResult m = infer(p, "Mul", {next(f), const_input(p, two)});
  EXPECT_EQ(values_of(p, m), "[2*batch, 2*seq]");
  EXPECT_EQ(values_of(p, infer(p, "Div", {next(m), const_input(p, two)})), "[batch, seq]");
  EXPECT_EQ(values_of(p, infer(p, "Div", {next(m), const_input(p, four)})), "[]");  // seq may be odd
  EXPECT_EQ(values_of(p, infer(p, "Mul", {next(f), const_input(p, half)})), "[]");   // 0.5 is not carried
  SymResult fl = infer(p, "Floor", {next(m)});
  EXPECT_EQ(values_of(p, fl), "[2*batch, 2*seq]");
  SymResult back = infer(p, "Cast", {next(fl)}, to(7));
  EXPECT_EQ(values_of(p, back), "[2*batch, 2*seq]");
  // A step makes the division exact.
  core::ExprPool q;
  ExprId even = q.dim(q.add_dim({"H", 2, 64, 2}));
  SymResult fh = infer(q, "Cast", {sym_values_input(q, {even})}, to(1));
  EXPECT_EQ(values_of(q, infer(q, "Div", {next(fh), const_input(q, two)})), "[floordiv(H,2)]");
  // f32 values are not sizes: a Reshape target must be i64.
  EXPECT_FALSE(infer(p, "Reshape", {sym_input(DType::kF32, {s.batch, s.seq}), next(m)}).status.ok());
}

// Random chains of arithmetic on [batch, seq], folded symbolically, must agree with the
// kernels run on the actual dims at many dim values.
TEST(SymValues, ChainsEvaluateLikeTheKernels) {
  std::mt19937 rng(5);
  const char* ops[] = {"Add", "Sub", "Mul", "Div", "Max", "Min"};
  const std::vector<V> dim_values = {{1, 1}, {2, 7}, {8, 512}, {5, 100}, {3, 2}};
  int folded = 0;
  for (int iter = 0; iter < 200; ++iter) {
    SymPool s;
    core::ExprPool& p = s.pool;
    kernels::SymTensor cur = sym_values_input(p, {s.batch, s.seq});
    std::vector<std::pair<std::string, int64_t>> steps;  // op and constant operand
    bool known = true;
    for (int k = 0; k < 4 && known; ++k) {
      const std::string op = ops[rng() % 6];
      const int64_t v = static_cast<int64_t>(rng() % 9) - (op == "Div" ? -1 : 3);  // Div by 1..9
      Tensor held = i64s({v});
      SymResult r = infer(p, op.c_str(), {cur, const_input(p, held)});
      ASSERT_TRUE(r.status.ok()) << r.status.message();
      known = !r.outputs[0].sym_values.empty();
      if (known) {
        cur = r.outputs[0];
        steps.emplace_back(op, v);
      }
    }
    folded += static_cast<int>(steps.size());
    for (const V& dims : dim_values) {
      std::vector<int64_t> ev = eval_all(p, dims);
      Tensor x = i64s(dims);
      for (const auto& [op, v] : steps) x = run_op(op.c_str(), {x, i64s({v})}).outputs[0];
      for (size_t i = 0; i < 2; ++i)
        ASSERT_EQ(ev[cur.sym_values[i]], x.data<int64_t>()[i])
            << "iter " << iter << ": " << p.to_string(cur.sym_values[i]) << " at " << dims[0] << ", " << dims[1];
    }
  }
  EXPECT_GT(folded, 400);  // most steps fold
}

}  // namespace
}  // namespace kiln::testing
