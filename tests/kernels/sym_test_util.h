#pragma once
// Helpers for symbolic shape tests and for running kernels below the bound: infer shapes
// over Dims, evaluate the result at chosen dim values, then run the kernel on buffers of
// exactly those (smaller) sizes, as bind + execute would.

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "op_test_util.h"
#include "core/status.h"

namespace kiln::testing {

using core::ExprId;

/// A symbolic input of `dtype` with shape `shape` and no known contents.
inline kernels::SymTensor sym_input(DType dtype, std::vector<ExprId> shape) {
  kernels::SymTensor s;
  s.dtype = dtype;
  s.shape = std::move(shape);
  return s;
}

/// A constant input backed by `t` (which must outlive the shape call).
inline kernels::SymTensor const_input(core::ExprPool& pool, const Tensor& t) {
  kernels::SymTensor s;
  s.dtype = t.dtype;
  for (int64_t d : t.shape) s.shape.push_back(pool.constant(d));
  s.const_data = t.bytes.data();
  return s;
}

/// A 1-D i64 input whose contents are known symbolically (a folded Shape computation).
inline kernels::SymTensor sym_values_input(core::ExprPool& pool, std::vector<ExprId> values) {
  kernels::SymTensor s;
  s.dtype = DType::kI64;
  s.shape = {pool.constant(static_cast<int64_t>(values.size()))};
  s.sym_values = std::move(values);
  return s;
}

struct SymResult {
  Status status;
  std::vector<kernels::SymTensor> outputs;
  std::vector<kernels::Guard> guards;
  /// Output 0's shape as text, e.g. "[batch, seq - 1]".
  std::string shape;
  /// Planned scratch bytes the shape function asked for (kNoExpr = none).
  ExprId scratch_bytes = core::kNoExpr;
  /// The shape function said output 0 has input 0's bytes (the builder makes it a view).
  bool same_bytes = false;
};

/// Runs op `name`'s shape function over symbolic inputs.
inline SymResult infer(core::ExprPool& pool, const char* name, std::vector<kernels::SymTensor> inputs,
                       const core::AttrStore& attrs = core::AttrStore(), size_t num_outputs = 1) {
  SymResult r;
  const kernels::OpDef* op = kernels::find_op(name);
  if (!op) {
    r.status = not_found(std::string("no op ") + name);
    return r;
  }
  kernels::ShapeCtx ctx(pool, attrs.view());
  ctx.node_name = "test";
  ctx.op_type = name;
  ctx.inputs = std::move(inputs);
  ctx.outputs.resize(num_outputs);
  r.status = op->shape(ctx);
  r.outputs = ctx.outputs;
  r.guards = ctx.guards;
  r.scratch_bytes = ctx.scratch_bytes;
  r.same_bytes = ctx.same_bytes;
  if (r.status.ok()) r.shape = pool.shape_to_string(ctx.outputs[0].shape);
  return r;
}

/// Values of every pool node with dims set to `dim_values` (one per pool dim).
inline std::vector<int64_t> eval_all(const core::ExprPool& pool, const std::vector<int64_t>& dim_values) {
  std::vector<int64_t> v(pool.size());
  EXPECT_TRUE(core::eval_exprs(pool.nodes().data(), pool.size(), dim_values.data(), v.data(), nullptr));
  return v;
}

/// A symbolic shape evaluated at `dim_values`.
inline std::vector<int64_t> eval_shape(const core::ExprPool& pool, const std::vector<ExprId>& shape,
                                       const std::vector<int64_t>& dim_values) {
  std::vector<int64_t> v = eval_all(pool, dim_values), out;
  for (ExprId e : shape) out.push_back(v[e]);
  return out;
}

/// Whether a guard holds at `dim_values`.
inline bool guard_holds(const core::ExprPool& pool, const kernels::Guard& g, const std::vector<int64_t>& dim_values) {
  std::vector<int64_t> v = eval_all(pool, dim_values);
  int64_t a = v[g.lhs], b = v[g.rhs];
  switch (g.op) {
    case kernels::Guard::Op::kEq: return a == b;
    case kernels::Guard::Op::kGe: return a >= b;
    case kernels::Guard::Op::kDivisible: return b != 0 && a % b == 0;
  }
  return false;
}

/// Random tensor of any dtype: f32 in [-1, 1), integers in [-1000, 1000), bool 0/1.
inline Tensor random_tensor(std::mt19937& rng, DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  const int64_t n = t.numel();
  t.bytes.resize(static_cast<size_t>(n) * dtype_size(dtype));
  std::uniform_int_distribution<int> iv(-1000, 999);
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::kF32: t.data<float>()[i] = static_cast<float>(iv(rng)) / 1000.f; break;
      case DType::kI64: t.data<int64_t>()[i] = iv(rng) * int64_t{1000003}; break;
      case DType::kI32: t.data<int32_t>()[i] = iv(rng); break;
      case DType::kBool: t.bytes[i] = static_cast<unsigned char>(rng() & 1); break;
      case DType::kI8:
      case DType::kU8: t.bytes[i] = static_cast<unsigned char>(rng()); break;
    }
  }
  return t;
}

/// Expects out element i to equal src element from[i], byte for byte.
inline void expect_picked(const Tensor& out, const Tensor& src, const std::vector<int64_t>& from,
                          const std::string& what) {
  ASSERT_EQ(out.numel(), static_cast<int64_t>(from.size())) << what;
  const size_t es = dtype_size(src.dtype);
  for (size_t i = 0; i < from.size(); ++i)
    ASSERT_EQ(std::memcmp(out.bytes.data() + i * es, src.bytes.data() + from[i] * es, es), 0)
        << what << ": element " << i << " should be input element " << from[i];
}

inline ::testing::AssertionResult has_text(const Status& s, const std::string& part) {
  if (s.ok()) return ::testing::AssertionFailure() << "status is ok, expected an error containing '" << part << "'";
  if (s.message().find(part) == std::string::npos)
    return ::testing::AssertionFailure() << "message '" << s.message() << "' lacks '" << part << "'";
  return ::testing::AssertionSuccess();
}

/// A pool with the Dims the symbolic tests use: batch in [1, 8], seq in [1, 512].
struct SymPool {
  core::ExprPool pool;
  ExprId batch = pool.dim(pool.add_dim({"batch", 1, 8, 1}));
  ExprId seq = pool.dim(pool.add_dim({"seq", 1, 512, 1}));
  ExprId c(int64_t v) { return pool.constant(v); }
};

}  // namespace kiln::testing
