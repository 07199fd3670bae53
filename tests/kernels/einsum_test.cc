// Einsum: the ONNX spec forms with values from ONNX Runtime (explicit and implicit outputs,
// diagonals, sums, transposes, outer products, batch dims, "..." with size-1 broadcasting),
// integer dtypes, a seeded sweep of equations and sizes against an independent double
// evaluator (also run in oversized slots), errors by text, and symbolic shapes with their
// guards, evaluated and run far below the bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bound_slot_util.h"
#include "guard_text_util.h"
#include "op_test_util.h"
#include "sym_test_util.h"

namespace kiln::testing {
namespace {

core::AttrStore eq_attr(const std::string& equation) { return core::AttrStore().set_str("equation", equation); }

struct RefResult {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

// Numpy einsum in double, by scatter: "..." becomes digit labels (an operand whose "..." covers
// n of the E broadcast dims gets the last n), then every assignment of every label is visited
// recursively and the operands' product is added to its output element. A dim of size 1
// reads index 0 (broadcast).
RefResult reference_einsum(std::string eq, const std::vector<Tensor>& ins) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  std::string lhs = eq, rhs;
  const size_t arrow = eq.find("->");
  const bool explicit_out = arrow != std::string::npos;
  if (explicit_out) lhs = eq.substr(0, arrow), rhs = eq.substr(arrow + 2);
  std::vector<std::string> terms(1);
  for (char ch : lhs) {
    if (ch == ',') terms.emplace_back();
    else terms.back() += ch;
  }
  size_t ell = 0;
  for (size_t i = 0; i < terms.size(); ++i)
    if (terms[i].find("...") != std::string::npos) ell = std::max(ell, ins[i].shape.size() - (terms[i].size() - 3));
  std::string ell_labels;
  for (size_t k = 0; k < ell; ++k) ell_labels += static_cast<char>('0' + k);
  for (size_t i = 0; i < terms.size(); ++i) {
    size_t at = terms[i].find("...");
    if (at == std::string::npos) continue;
    size_t n = ins[i].shape.size() - (terms[i].size() - 3);
    terms[i].replace(at, 3, ell_labels.substr(ell - n));
  }
  if (explicit_out) {
    size_t at = rhs.find("...");
    if (at != std::string::npos) rhs.replace(at, 3, ell_labels);
  } else {
    std::map<char, int> count;  // ordered by char: ASCII, upper case first
    for (const std::string& t : terms)
      for (char ch : t) ++count[ch];
    rhs = ell_labels;
    for (auto [ch, n] : count)
      if (n == 1 && std::isalpha(static_cast<unsigned char>(ch))) rhs += ch;
  }
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t k = 0; k < terms[i].size(); ++k) size[terms[i][k]] = std::max(size[terms[i][k]], ins[i].shape[k]);
  RefResult r;
  int64_t numel = 1;
  for (char ch : rhs) r.shape.push_back(size[ch]), numel *= size[ch];
  r.values.assign(numel, 0.0);
  std::vector<char> labels;
  for (auto [ch, n] : size) labels.push_back(ch);
  std::map<char, int64_t> at;
  auto flat = [&](const std::string& term, const std::vector<int64_t>& shape) {
    int64_t f = 0;
    for (size_t k = 0; k < term.size(); ++k) f = f * shape[k] + (shape[k] == 1 ? 0 : at[term[k]]);
    return f;
  };
  std::function<void(size_t)> visit = [&](size_t depth) {
    if (depth == labels.size()) {
      double prod = 1;
      for (size_t i = 0; i < terms.size(); ++i) prod *= ins[i].at(flat(terms[i], ins[i].shape));
      r.values[flat(rhs, r.shape)] += prod;
      return;
    }
    for (int64_t v = 0; v < size[labels[depth]]; ++v) {
      at[labels[depth]] = v;
      visit(depth + 1);
    }
  };
  visit(0);
  return r;
}

// Small integers, different per operand, so float results are exact.
Tensor pattern(int i, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(n);
  for (int64_t k = 0; k < n; ++k) v[k] = static_cast<float>((k * (i + 3) + i) % 7 - 3);
  return make_tensor<float>(std::move(shape), v);
}

struct SpecCase {
  const char* equation;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> out_shape;
  std::vector<float> want;  // from ONNX Runtime 1.30 on the same inputs
};

TEST(Einsum, OnnxFormsMatchOnnxRuntime) {
  const SpecCase cases[] = {
      {"ij->ji", {{3, 4}}, {4, 3}, {-3, 2, 0, 0, -2, 3, 3, 1, -1, -1, -3, 2}},
      {"ij->i", {{3, 4}}, {3}, {-1, -2, 4}},
      {"... ii ->... i", {{2, 3, 3}}, {2, 3}, {-3, 2, 0, 3, 1, -1}},
      {"i,i", {{5}, {5}}, {}, {0}},
      {"bij, bjk -> bik", {{2, 2, 3}, {2, 3, 2}}, {2, 2, 2}, {6, -15, 0, 10, -5, 1, 7, -5}},
      {"ii->", {{3, 3}}, {}, {-1}},
      {"ii", {{3, 3}}, {}, {-1}},
      {"ii->i", {{3, 3}}, {3}, {-3, 2, 0}},
      {"i,j->ij", {{2}, {3}}, {2, 3}, {6, -6, 3, 0, 0, 0}},
      {"bn,anm,bm->ba", {{2, 3}, {2, 3, 2}, {2, 2}}, {2, 2}, {39, -24, 0, -6}},
      {"...ij,...jk->...ik",
       {{2, 1, 2, 3}, {1, 3, 3, 2}},
       {2, 3, 2, 2},
       {6, -15, 0, 10, 6, 6, -3, 0, 6, 6, 1, -3, 1, -7, -5, -3, -5, 1, 7, -5, 3, -5, -9, 7}},
      {"ij,jk", {{2, 3}, {3, 2}}, {2, 2}, {6, -15, 0, 10}},
      {"ij->", {{2, 3}}, {}, {-1}},
      {"bhqd,bhkd->bhqk", {{1, 2, 3, 2}, {1, 2, 2, 2}}, {1, 2, 3, 2}, {6, 3, -8, -6, -8, -8, 9, 7, -9, -6, -6, -5}},
      {"ijk->kji", {{2, 3, 2}}, {2, 3, 2}, {-3, 1, 3, 0, 2, -1, 0, -3, -1, 3, -2, 2}},
      {"iij->j", {{2, 2, 3}}, {3}, {0, -1, 5}},
  };
  for (const SpecCase& sc : cases) {
    std::vector<Tensor> ins;
    for (size_t i = 0; i < sc.shapes.size(); ++i) ins.push_back(pattern(static_cast<int>(i), sc.shapes[i]));
    SlotRun s = run_op_in_slots("Einsum", ins, eq_attr(sc.equation));
    ASSERT_TRUE(s.exact.status.ok()) << sc.equation << ": " << s.exact.status.message();
    ASSERT_EQ(s.exact.kernel, kernels::KernelStatus::kOk) << sc.equation;
    EXPECT_EQ(s.exact.outputs[0].dtype, DType::kF32);
    EXPECT_EQ(s.exact.outputs[0].shape, sc.out_shape) << sc.equation;
    EXPECT_EQ(s.exact.outputs[0].values<float>(), sc.want) << sc.equation;
    EXPECT_EQ(s.outputs[0].values<float>(), sc.want) << sc.equation << " (in slots)";
    EXPECT_TRUE(s.tails_intact) << sc.equation;
    // The test's own evaluator agrees too.
    RefResult ref = reference_einsum(sc.equation, ins);
    EXPECT_EQ(ref.shape, sc.out_shape) << sc.equation;
    EXPECT_EQ(std::vector<float>(ref.values.begin(), ref.values.end()), sc.want) << sc.equation;
  }
}

TEST(Einsum, HandComputed) {
  Tensor a = make_tensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = make_tensor<float>({3, 2}, {1, 0, 0, 1, 1, 1});
  OpResult r = run_op("Einsum", {a, b}, eq_attr("ij,jk->ik"));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{4, 5, 10, 11}));
  // Output order follows the output term: "ij,jk->ki" is the transposed product.
  r = run_op("Einsum", {a, b}, eq_attr("ij,jk->ki"));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{4, 10, 5, 11}));
  // Implicit output in ASCII order: "ba" gives "ab", a transpose; upper case comes first.
  r = run_op("Einsum", {a}, eq_attr("ba"));
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  r = run_op("Einsum", {a}, eq_attr("bB"));
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  r = run_op("Einsum", {a}, eq_attr("Ab"));
  EXPECT_EQ(r.outputs[0].values<float>(), a.values<float>());
  // Elementwise product, column sums, total.
  EXPECT_EQ(run_op("Einsum", {a, a}, eq_attr("ij,ij->ij")).outputs[0].values<float>(),
            (std::vector<float>{1, 4, 9, 16, 25, 36}));
  EXPECT_EQ(run_op("Einsum", {a}, eq_attr("ij->j")).outputs[0].values<float>(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(run_op("Einsum", {a}, eq_attr("ij->")).outputs[0].values<float>(), (std::vector<float>{21}));
  // A scalar operand scales a vector.
  Tensor two = make_tensor<float>({}, {2});
  r = run_op("Einsum", {two, make_tensor<float>({3}, {1, 2, 3})}, eq_attr(",i->i"));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{2, 4, 6}));
  // "..." covering no dims, and an output "..." when no input has dims under it.
  EXPECT_EQ(run_op("Einsum", {a}, eq_attr("...ij->ij")).outputs[0].values<float>(), a.values<float>());
  r = run_op("Einsum", {a}, eq_attr("ij->...ji"));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  // A summed label of size 0 gives zeros.
  r = run_op("Einsum", {make_tensor<float>({2, 0}, {}), make_tensor<float>({0, 2}, {})}, eq_attr("ij,jk->ik"));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].values<float>(), (std::vector<float>{0, 0, 0, 0}));
}

TEST(Einsum, EllipsisBroadcastsAcrossRanks) {
  // numpy style: "..." may cover different numbers of dims per operand ([2, 1] and [3]).
  Tensor a = pattern(0, {2, 1, 2, 3}), b = pattern(1, {3, 3, 2});
  SlotRun s = run_op_in_slots("Einsum", {a, b}, eq_attr("...ij,...jk->...ik"));
  ASSERT_TRUE(s.exact.status.ok()) << s.exact.status.message();
  RefResult ref = reference_einsum("...ij,...jk->...ik", {a, b});
  EXPECT_EQ(s.exact.outputs[0].shape, (std::vector<int64_t>{2, 3, 2, 2}));
  EXPECT_EQ(s.exact.outputs[0].shape, ref.shape);
  EXPECT_EQ(s.exact.outputs[0].values<float>(), std::vector<float>(ref.values.begin(), ref.values.end()));
  EXPECT_EQ(s.outputs[0].values<float>(), s.exact.outputs[0].values<float>());
  EXPECT_TRUE(s.tails_intact);
  // Batch [2, 3, 2, 2]: element (1, 2) is the product of a's batch 1 and b's batch 2.
  EXPECT_EQ(s.exact.outputs[0].at(((1 * 3 + 2) * 2 + 0) * 2 + 1),
            a.at(6 + 0) * b.at(12 + 1) + a.at(6 + 1) * b.at(12 + 3) + a.at(6 + 2) * b.at(12 + 5));
  // Implicit output puts the "..." dims first.
  OpResult r = run_op("Einsum", {pattern(0, {3, 2, 2})}, eq_attr("...ii"));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{3}));
}

TEST(Einsum, IntegerDtypes) {
  Tensor a = make_tensor<int64_t>({2, 3}, {1, -2, 3, 4, 5, -6});
  Tensor b = make_tensor<int64_t>({3, 2}, {1, 0, 0, 1, 1, 1});
  OpResult r = run_op("Einsum", {a, b}, eq_attr("ij,jk->ik"));
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.outputs[0].dtype, DType::kI64);
  EXPECT_EQ(r.outputs[0].values<int64_t>(), (std::vector<int64_t>{4, 1, -2, -1}));
  // Large values are exact (no trip through float).
  Tensor big = make_tensor<int64_t>({2}, {int64_t{1} << 40, 3});
  EXPECT_EQ(run_op("Einsum", {big, make_tensor<int64_t>({2}, {5, 1})}, eq_attr("i,i")).outputs[0].values<int64_t>(),
            (std::vector<int64_t>{(int64_t{5} << 40) + 3}));
  Tensor c = make_tensor<int32_t>({2, 2}, {1, 2, 3, 4});
  r = run_op("Einsum", {c}, eq_attr("ii->"));
  EXPECT_EQ(r.outputs[0].dtype, DType::kI32);
  EXPECT_EQ(r.outputs[0].values<int32_t>(), (std::vector<int32_t>{5}));
}

TEST(Einsum, RandomSweepAgainstReference) {
  const char* equations[] = {
      "ij,jk->ik", "ij,jk", "bij,bjk->bik", "bhqd,bhkd->bhqk", "ii->i", "ii->", "ii", "iij->j", "ij->ji",
      "ijk->kji", "ij->", "ij->j", "i,j->ij", "i,j", "i,i->", "i,i", "ij,ij->ij", "ij,ji->", "bn,anm,bm->ba",
      "abc,cd,de->abe", ",i->i", "...ij,...jk->...ik", "...ij,...jk", "...ii->...i", "... ii ->... i",
      "...i,...i->...", "i...,i...->...", "a...b,...b->...a", "...->...", "ij...,jk...->...ik", "i...j->j...i",
      "Bij,bjk->Bbik", "bB", "ab,ab,ab->", "iji->ij",
  };
  constexpr int kEquations = static_cast<int>(std::size(equations));
  std::mt19937 rng(4242);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int64_t compared = 0, ellipsis_dims = 0;
  for (int iter = 0; iter < 30 * kEquations; ++iter) {
    const std::string eq = equations[iter % kEquations];
    std::string lhs = eq.substr(0, eq.find("->"));
    lhs.erase(std::remove(lhs.begin(), lhs.end(), ' '), lhs.end());
    std::map<char, int64_t> size;
    for (char ch : lhs)
      if (std::isalpha(static_cast<unsigned char>(ch)) && !size.count(ch)) size[ch] = pick(1, 5);
    std::vector<int64_t> ell = random_shape(rng, static_cast<int>(pick(0, 3)), 3);
    const int dtype_pick = static_cast<int>(pick(0, 5));  // mostly f32, sometimes i64 or i32
    std::vector<Tensor> ins;
    int operand = 0;
    for (size_t start = 0; start <= lhs.size(); ++operand) {
      size_t end = std::min(lhs.find(',', start), lhs.size());
      std::string term = lhs.substr(start, end - start);
      start = end + 1;
      std::vector<int64_t> shape;
      for (size_t k = 0; k < term.size(); ++k) {
        if (term[k] != '.') {
          shape.push_back(size[term[k]]);
          continue;
        }
        // This operand's "..." covers a suffix of the broadcast dims, some set to 1;
        // the first covers them all, so the broadcast shape is `ell`.
        std::vector<int64_t> sub(ell.begin() + (operand == 0 ? 0 : pick(0, static_cast<int64_t>(ell.size()))),
                                 ell.end());
        for (auto& d : sub)
          if (operand > 0 && pick(0, 2) == 0) d = 1;
        shape.insert(shape.end(), sub.begin(), sub.end());
        k += 2;
      }
      Tensor t = random_tensor(rng, dtype_pick == 0 ? DType::kI64 : dtype_pick == 1 ? DType::kI32 : DType::kF32, shape);
      for (int64_t e = 0; e < t.numel(); ++e) {  // small integers: no overflow, exact in double
        if (t.dtype == DType::kI64) t.data<int64_t>()[e] %= 50;
        if (t.dtype == DType::kI32) t.data<int32_t>()[e] %= 50;
      }
      ins.push_back(std::move(t));
    }
    RefResult ref = reference_einsum(eq, ins);
    SlotRun s = run_op_in_slots("Einsum", ins, eq_attr(eq));
    ASSERT_TRUE(s.exact.status.ok()) << eq << " iter " << iter << ": " << s.exact.status.message();
    ASSERT_EQ(s.exact.kernel, kernels::KernelStatus::kOk) << eq << " iter " << iter;
    ASSERT_EQ(s.exact.outputs[0].shape, ref.shape) << eq << " iter " << iter;
    ASSERT_EQ(s.exact.outputs[0].dtype, ins[0].dtype) << eq;
    EXPECT_TRUE(s.tails_intact) << eq << " iter " << iter;
    EXPECT_EQ(s.outputs[0].bytes, s.exact.outputs[0].bytes) << "slotted run differs: " << eq << " iter " << iter;
    compared += static_cast<int64_t>(ref.values.size());
    ellipsis_dims += eq.find("...") != std::string::npos ? static_cast<int64_t>(ell.size()) : 0;
    for (size_t i = 0; i < ref.values.size(); ++i) {
      if (ins[0].dtype == DType::kF32)
        ASSERT_NEAR(s.exact.outputs[0].at(i), ref.values[i], 1e-4 * (1 + std::abs(ref.values[i])))
            << eq << " iter " << iter << " at " << i;
      else
        ASSERT_EQ(s.exact.outputs[0].at(i), ref.values[i]) << eq << " iter " << iter << " at " << i;
    }
  }
  EXPECT_GT(compared, 10000);  // the sweep really covers many values and broadcast dims
  EXPECT_GT(ellipsis_dims, 300);
}

TEST(Einsum, ParseErrors) {
  Tensor m = pattern(0, {2, 2});
  auto status = [&](const std::string& eq, std::vector<Tensor> ins) {
    return run_op("Einsum", ins, eq_attr(eq)).status;
  };
  EXPECT_TRUE(has_text(status("ij,j1->i", {m, m}),
                       "node 'test' (Einsum): equation 'ij,j1->i': unexpected character '1' at position 4"));
  EXPECT_TRUE(has_text(status("ij->i,j", {m}), "unexpected character ',' at position 5"));
  EXPECT_TRUE(has_text(status("..ij", {m}), "equation '..ij': '.' at position 0 does not begin an ellipsis '...'"));
  EXPECT_TRUE(has_text(status("...i...->i", {m}), "a term has a second '...' at position 4"));
  EXPECT_TRUE(has_text(status("ij-ji", {m}), "'-' at position 2 is not the one '->' of the equation"));
  EXPECT_TRUE(has_text(status("ij->j->i", {m}), "'-' at position 5 is not the one '->' of the equation"));
  EXPECT_TRUE(has_text(status("ij->ii", {m}), "equation 'ij->ii': output label 'i' appears more than once"));
  EXPECT_TRUE(has_text(status("ij->k", {m}), "output label 'k' appears in no input term"));
  EXPECT_TRUE(has_text(status("abcdefghijklmnopq", {m}), "a term has more than 16 labels at position 16"));
  EXPECT_TRUE(has_text(status("ij,jk->ik", {m}), "equation 'ij,jk->ik' has 2 operand terms but the node has 1 inputs"));
  EXPECT_TRUE(has_text(run_op("Einsum", {m}).status, "needs the string attribute 'equation'"));
}

TEST(Einsum, ShapeErrors) {
  auto status = [&](const std::string& eq, std::vector<Tensor> ins) {
    return run_op("Einsum", ins, eq_attr(eq)).status;
  };
  Tensor a = pattern(0, {2, 3}), v = pattern(1, {3});
  EXPECT_TRUE(has_text(status("ij,jk->ik", {a, v}),
                       "equation 'ij,jk->ik': term 'jk' needs rank 2 but input #1 has shape [3]"));
  EXPECT_TRUE(has_text(status("...ijk", {a}), "term '...ijk' needs rank >= 3 but input #0 has shape [2, 3]"));
  EXPECT_TRUE(has_text(status("ij,jk->ik", {a, pattern(1, {4, 2})}),
                       "node 'test' (Einsum): sizes 3 and 4 must be equal (label 'j' at input #0 dim 1 and input #1 "
                       "dim 0 of equation 'ij,jk->ik')"));
  EXPECT_TRUE(has_text(status("ii->i", {a}), "sizes 2 and 3 must be equal (label 'i' at input #0 dim 0 and input #0 "
                                             "dim 1 of equation 'ii->i')"));
  EXPECT_TRUE(has_text(status("...ij,...jk->...ik", {pattern(0, {2, 2, 3}), pattern(1, {3, 3, 2})}),
                       "cannot broadcast [2] with [3]"));
  EXPECT_TRUE(has_text(status("...ij->ij", {pattern(0, {4, 2, 3})}),
                       "equation '...ij->ij': the inputs have 1 dims under '...' but the output term has no '...'"));
  Tensor r8 = pattern(0, {1, 1, 1, 1, 1, 1, 1, 2});
  EXPECT_TRUE(has_text(status("abcdefgh,ijklmnop->ap", {r8, r8}),
                       "equation 'abcdefgh,ijklmnop->ap' uses 16 distinct labels (counting each dim under '...'); at "
                       "most 12 are supported"));
  EXPECT_TRUE(has_text(status("abcdefgh,ijklmnop->abcdefghi", {r8, r8}), "gives an output of rank 9, above 8"));
  EXPECT_TRUE(has_text(status("ij,jk->ik", {a, make_tensor<int64_t>({3, 2}, std::vector<int64_t>(6, 1))}),
                       "input #1 has dtype i64, expected f32 like input #0"));
  EXPECT_TRUE(has_text(status("i", {make_tensor<bool>({2}, {true, false})}),
                       "input #0 has dtype bool, expected f32, i64 or i32"));
}

class EinsumSymbolic : public ::testing::Test {
 protected:
  SymResult einsum(const std::string& eq, std::vector<std::vector<ExprId>> shapes) {
    std::vector<kernels::SymTensor> ins;
    for (auto& s : shapes) ins.push_back(sym_input(DType::kF32, s));
    attrs = eq_attr(eq);
    return infer(sp.pool, "Einsum", ins, attrs);
  }
  SymPool sp;
  core::AttrStore attrs;
};

TEST_F(EinsumSymbolic, Shapes) {
  SymResult r =
      einsum("bhqd,bhkd->bhqk", {{sp.batch, sp.c(4), sp.seq, sp.c(16)}, {sp.batch, sp.c(4), sp.seq, sp.c(16)}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 4, seq, seq]");
  EXPECT_EQ(guards_text(sp.pool, r), "");

  r = einsum("...ij,...jk->...ik", {{sp.batch, sp.seq, sp.c(8)}, {sp.c(8), sp.c(4)}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, seq, 4]");

  r = einsum("ii->i", {{sp.seq, sp.seq}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[seq]");
  EXPECT_EQ(guards_text(sp.pool, r), "");

  // A constant occurrence names the size even when a symbolic one came first.
  r = einsum("ij,jk->ijk", {{sp.batch, sp.seq}, {sp.c(6), sp.c(2)}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[batch, 6, 2]");
  EXPECT_EQ(guards_text(sp.pool, r), "seq == 6");
}

TEST_F(EinsumSymbolic, UnprovableRelationsBecomeGuards) {
  ExprId hidden = sp.pool.dim(sp.pool.add_dim({"hidden", 1, 128, 1}));
  ExprId other = sp.pool.dim(sp.pool.add_dim({"other", 1, 128, 1}));
  SymResult r = einsum("ij,jk->ik", {{sp.seq, hidden}, {other, sp.c(3)}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.shape, "[seq, 3]");
  EXPECT_EQ(guards_text(sp.pool, r), "hidden == other");
  EXPECT_EQ(r.guards[0].op_type, "Einsum");
  EXPECT_NE(r.guards[0].context.find("label 'j'"), std::string::npos) << r.guards[0].context;
  // A dim that can never reach the other size is refused at export.
  EXPECT_TRUE(has_text(einsum("ij,jk->ik", {{sp.seq, sp.batch}, {sp.c(64), sp.c(3)}}).status,
                       "sizes batch and 64 can never be equal"));
}

TEST_F(EinsumSymbolic, BindThenExecuteBelowTheBound) {
  const std::string eq = "bhqd,bhkd->bhqk";
  SymResult r = einsum(eq, {{sp.batch, sp.c(4), sp.seq, sp.c(16)}, {sp.batch, sp.c(4), sp.seq, sp.c(16)}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  std::mt19937 rng(9);
  for (std::vector<int64_t> dims : {std::vector<int64_t>{1, 1}, {2, 3}, {1, 17}, {3, 5}}) {
    std::vector<int64_t> in_shape = {dims[0], 4, dims[1], 16};
    Tensor q = random_f32(rng, in_shape), k = random_f32(rng, in_shape);
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(sp.pool, r.outputs[0].shape, dims);
    RefResult ref = reference_einsum(eq, {q, k});
    ASSERT_EQ(out[0].shape, ref.shape);
    ASSERT_EQ(run_kernel("Einsum", {q, k}, &out, attrs), kernels::KernelStatus::kOk);
    for (size_t i = 0; i < ref.values.size(); ++i)
      ASSERT_NEAR(out[0].at(i), ref.values[i], 1e-4 * (1 + std::abs(ref.values[i]))) << "dims " << dims[1];
  }
  // "..." over a symbolic batch, broadcast against a rank-2 operand.
  r = einsum("...ij,...jk->...ik", {{sp.batch, sp.seq, sp.c(8)}, {sp.c(8), sp.c(4)}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  for (std::vector<int64_t> dims : {std::vector<int64_t>{1, 1}, {3, 2}, {2, 9}}) {
    Tensor a = random_f32(rng, {dims[0], dims[1], 8}), b = random_f32(rng, {8, 4});
    std::vector<Tensor> out(1);
    out[0].shape = eval_shape(sp.pool, r.outputs[0].shape, dims);
    RefResult ref = reference_einsum("...ij,...jk->...ik", {a, b});
    ASSERT_EQ(out[0].shape, ref.shape);
    ASSERT_EQ(run_kernel("Einsum", {a, b}, &out, attrs), kernels::KernelStatus::kOk);
    for (size_t i = 0; i < ref.values.size(); ++i)
      ASSERT_NEAR(out[0].at(i), ref.values[i], 1e-4 * (1 + std::abs(ref.values[i])));
  }
}

}  // namespace
}  // namespace kiln::testing
