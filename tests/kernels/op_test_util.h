#pragma once
// Runs one op concretely, the way export + runtime would: shape function over constant
// SymExprs, then the kernel on buffers of exactly the inferred sizes.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "core/attr_store.h"
#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::testing {

/// A view of `data` with `shape` (for calling a kernel's run function directly).
inline TensorView view_of(DType t, const std::vector<int64_t>& shape, void* data) {
  TensorView v;
  v.dtype = t;
  v.rank = static_cast<int32_t>(shape.size());
  for (size_t k = 0; k < shape.size(); ++k) v.dims[k] = shape[k];
  v.data = data;
  return v;
}

/// An owning test tensor.
struct Tensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
  bool present = true;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  template <typename T> T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <typename T> const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
  template <typename T> std::vector<T> values() const { return std::vector<T>(data<T>(), data<T>() + numel()); }
  /// Element as double regardless of dtype.
  double at(int64_t i) const {
    switch (dtype) {
      case DType::kF32: return data<float>()[i];
      case DType::kI64: return static_cast<double>(data<int64_t>()[i]);
      case DType::kI32: return data<int32_t>()[i];
      case DType::kBool: return bytes[i] ? 1.0 : 0.0;
      case DType::kI8: return data<int8_t>()[i];
      case DType::kU8: return data<uint8_t>()[i];
    }
    return 0;
  }
};

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::kF32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::kI64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::kI32; }
template <> constexpr DType dtype_of<bool>() { return DType::kBool; }
template <> constexpr DType dtype_of<int8_t>() { return DType::kI8; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::kU8; }

template <typename T>
Tensor make_tensor(std::vector<int64_t> shape, const std::vector<T>& values) {
  Tensor t;
  t.dtype = dtype_of<T>();
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * dtype_size(t.dtype));
  if constexpr (std::is_same_v<T, bool>) {
    for (size_t i = 0; i < values.size(); ++i) t.bytes[i] = values[i] ? 1 : 0;
  } else if (!values.empty()) {
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  }
  return t;
}

/// A 1-D int64 tensor of the values (shapes, axes, pads, starts and ends as inputs).
inline Tensor i64s(const std::vector<int64_t>& v) { return make_tensor<int64_t>({static_cast<int64_t>(v.size())}, v); }

/// The attributes {axis: axis}.
inline core::AttrStore axis_attr(int64_t axis) { return core::AttrStore().set_int("axis", axis); }

inline Tensor absent() {
  Tensor t;
  t.present = false;
  return t;
}

/// Uniform random f32 tensor in [lo, hi).
inline Tensor random_f32(std::mt19937& rng, std::vector<int64_t> shape, float lo = -1.f, float hi = 1.f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return make_tensor<float>(std::move(shape), v);
}

/// Random shape with rank dims, each in [1, max_dim].
inline std::vector<int64_t> random_shape(std::mt19937& rng, int rank, int64_t max_dim) {
  std::uniform_int_distribution<int64_t> d(1, max_dim);
  std::vector<int64_t> s(rank);
  for (auto& x : s) x = d(rng);
  return s;
}

/// Row-major strides of a shape.
inline std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int k = static_cast<int>(shape.size()) - 2; k >= 0; --k) s[k] = s[k + 1] * shape[k + 1];
  return s;
}

/// A random shape that broadcasts to `out`: some leading axes dropped, some axes set to 1.
inline std::vector<int64_t> broadcastable_shape(std::mt19937& rng, const std::vector<int64_t>& out) {
  std::vector<int64_t> s(out.begin() + static_cast<int64_t>(rng() % (out.size() + 1)), out.end());
  for (auto& d : s)
    if (rng() % 3 == 0) d = 1;
  return s;
}

/// The numpy broadcast of shapes that are known to be compatible.
inline std::vector<int64_t> broadcast_shape(std::initializer_list<const std::vector<int64_t>*> shapes) {
  size_t rank = 0;
  for (const auto* s : shapes) rank = std::max(rank, s->size());
  std::vector<int64_t> out(rank, 1);
  for (const auto* s : shapes)
    for (size_t k = 0; k < s->size(); ++k) out[rank - s->size() + k] = std::max(out[rank - s->size() + k], (*s)[k]);
  return out;
}

/// Flat index into an operand of shape `in` for element e of the broadcast output `out`.
inline int64_t broadcast_source(const std::vector<int64_t>& out, const std::vector<int64_t>& in, int64_t e) {
  const std::vector<int64_t> os = strides_of(out), is = strides_of(in);
  const size_t lead = out.size() - in.size();
  int64_t off = 0;
  for (size_t k = 0; k < in.size(); ++k)
    if (in[k] != 1) off += e / os[k + lead] % out[k + lead] * is[k];
  return off;
}

/// Runs op `name`'s kernel directly on `inputs`, writing outputs of the given shapes
/// (the sizes bind would compute) and dtype. Outputs start poisoned. `scratch` is the planned
/// scratch, for ops whose shape function asks for it.
inline kernels::KernelStatus run_kernel(const char* name, const std::vector<Tensor>& inputs,
                                        std::vector<Tensor>* outputs,
                                        const core::AttrStore& attrs = core::AttrStore(),
                                        void* scratch = nullptr, size_t scratch_bytes = 0,
                                        pthreadpool_t pool = nullptr) {
  const kernels::OpDef* op = kernels::find_op(name);
  EXPECT_TRUE(op && op->run) << name;
  if (!op || !op->run) return kernels::KernelStatus::kInvalidValue;
  std::vector<TensorView> in_views(inputs.size()), out_views(outputs->size());
  std::vector<const TensorView*> in_ptrs(inputs.size());
  std::vector<TensorView*> out_ptrs(outputs->size());
  auto fill = [](TensorView& v, const Tensor& t) {
    v.dtype = t.dtype;
    v.rank = static_cast<int32_t>(t.shape.size());
    for (size_t k = 0; k < t.shape.size(); ++k) v.dims[k] = t.shape[k];
    v.data = const_cast<unsigned char*>(t.bytes.data());
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    fill(in_views[i], inputs[i]);
    in_ptrs[i] = inputs[i].present ? &in_views[i] : nullptr;
  }
  for (size_t i = 0; i < outputs->size(); ++i) {
    Tensor& t = (*outputs)[i];
    t.bytes.assign(static_cast<size_t>(t.numel()) * dtype_size(t.dtype), 0xCD);
    fill(out_views[i], t);
    out_ptrs[i] = &out_views[i];
  }
  kernels::RunCtx rc;
  rc.inputs = in_ptrs.data();
  rc.num_inputs = static_cast<uint32_t>(in_ptrs.size());
  rc.outputs = out_ptrs.data();
  rc.num_outputs = static_cast<uint32_t>(out_ptrs.size());
  rc.attrs = attrs.view();
  rc.scratch = scratch;
  rc.scratch_bytes = scratch_bytes;
  rc.pool = pool;
  return kernels::run_once(*op, rc);
}

/// Whether `s` contains `part` (for message checks that print the message on failure).
struct OpResult {
  Status status;                  ///< shape function status (kernel failures set kernel)
  kernels::KernelStatus kernel = kernels::KernelStatus::kOk;
  std::vector<Tensor> outputs;
  std::vector<kernels::Guard> guards;
};

/// Runs op `name` on `inputs` (all treated as constants known to the shape function).
inline OpResult run_op(const char* name, const std::vector<Tensor>& inputs,
                       const core::AttrStore& attrs = core::AttrStore(), size_t num_outputs = 1) {
  OpResult r;
  const kernels::OpDef* op = kernels::find_op(name);
  if (!op) {
    r.status = not_found(std::string("no op ") + name);
    return r;
  }
  core::ExprPool pool;
  kernels::ShapeCtx ctx(pool, attrs.view());
  ctx.node_name = "test";
  ctx.op_type = name;
  for (const Tensor& t : inputs) {
    kernels::SymTensor s;
    s.present = t.present;
    s.dtype = t.dtype;
    for (int64_t d : t.shape) s.shape.push_back(pool.constant(d));
    static const uint64_t kEmpty = 0;
    s.const_data = !t.present ? nullptr : t.bytes.empty() ? static_cast<const void*>(&kEmpty) : t.bytes.data();
    ctx.inputs.push_back(std::move(s));
  }
  ctx.outputs.resize(num_outputs);
  r.status = op->shape(ctx);
  r.guards = ctx.guards;
  if (!r.status.ok()) return r;
  for (const kernels::SymTensor& o : ctx.outputs) {
    Tensor t;
    t.dtype = o.dtype;
    for (core::ExprId e : o.shape) {
      if (!pool.is_const(e)) {
        r.status = internal_error("output shape not constant: " + pool.to_string(e));
        return r;
      }
      t.shape.push_back(pool.const_value(e));
    }
    t.bytes.assign(static_cast<size_t>(t.numel()) * dtype_size(t.dtype), 0xCD);  // poison
    r.outputs.push_back(std::move(t));
  }
  if (op->view) {  // a view reinterprets input 0
    r.outputs[0].bytes = inputs[0].bytes;
    return r;
  }
  std::vector<uint64_t> scratch;  // planned scratch, when the shape function asked for it
  size_t scratch_bytes = 0;
  if (ctx.scratch_bytes != core::kNoExpr) {
    if (!pool.is_const(ctx.scratch_bytes)) {
      r.status = internal_error("scratch size not constant");
      return r;
    }
    scratch_bytes = static_cast<size_t>(pool.const_value(ctx.scratch_bytes));
    scratch.assign(scratch_bytes / 8 + 8, 0xCDCDCDCDCDCDCDCDull);
  }
  r.kernel = run_kernel(name, inputs, &r.outputs, attrs, scratch.empty() ? nullptr : scratch.data(), scratch_bytes);
  return r;
}

}  // namespace kiln::testing
