// The contract at bind: each input's shape against the program's dims (static sizes, ranges,
// steps, shared dims, max_shapes caps), the shape expressions and guards at those dims, and
// the way out each refusal names (the nearest admissible size, for the dims tied to it too).
#include <algorithm>
#include <string>
#include <vector>

#include "core/dim_text.h"
#include "runtime/method_impl.h"
#include "core/status.h"

namespace kiln {

using runtime::shape_text;

Status Method::Impl::set_caps(const std::vector<std::vector<int64_t>>& max_shapes) {
  dim_cap.resize(meta.dims.size());
  for (size_t d = 0; d < dim_cap.size(); ++d) dim_cap[d] = meta.dims[d].max;
  cap_bytes.resize(m->values()->size());
  for (size_t v = 0; v < cap_bytes.size(); ++v) cap_bytes[v] = m->values()->Get(v)->nbytes();
  if (max_shapes.empty()) return ok_status();
  // The contract's own check of the shapes, then each dim's value is its cap.
  std::vector<TensorView> t(max_shapes.size());
  if (max_shapes.size() != inputs.size())
    return invalid_argument("max_shapes gives " + std::to_string(max_shapes.size()) + " shapes; method '" + meta.name +
                            "' takes " + std::to_string(inputs.size()) + " inputs");
  std::fill(dim_origin.begin(), dim_origin.end(), -1);
  std::fill(provisional.begin(), provisional.end(), -1);
  for (size_t i = 0; i < t.size(); ++i) {
    if (max_shapes[i].size() > static_cast<size_t>(kMaxRank))
      return invalid_argument("max_shapes: input #" + std::to_string(i) + " has rank above " + std::to_string(kMaxRank));
    t[i].dtype = meta.inputs[i].dtype;
    t[i].rank = static_cast<int32_t>(max_shapes[i].size());
    for (size_t k = 0; k < max_shapes[i].size(); ++k) t[i].dims[k] = max_shapes[i][k];
    KILN_TRY(check_input(i, t[i]).with_prefix("max_shapes: "));
  }
  for (size_t d = 0; d < dim_cap.size(); ++d)
    if (dim_origin[d] >= 0) dim_cap[d] = dim_values[d];
  // Each value's size at most over [min, cap] of every dim (interval arithmetic: sound).
  std::vector<core::Interval> r(exprs.size());
  for (size_t i = 0; i < exprs.size(); ++i) {
    const core::ExprNode& e = exprs[i];
    core::Interval a, b;
    if (e.op == core::ExprOp::kDim) a = {meta.dims[e.a].min, dim_cap[e.a]};
    else if (e.op != core::ExprOp::kConst) a = r[e.a], b = r[e.b];
    r[i] = core::node_range(e.op, a, b, e.value);
  }
  for (size_t v = 0; v < cap_bytes.size(); ++v) {
    const fb::Value* value = m->values()->Get(v);
    if (value->storage() == fb::StorageKind::Constant) continue;
    uint64_t n = dtype_size(static_cast<DType>(value->dtype()));
    for (int32_t e : *value->shape()) {
      const uint64_t hi = static_cast<uint64_t>(std::max<int64_t>(0, r[e].hi));
      n = hi != 0 && n > cap_bytes[v] / hi ? cap_bytes[v] : n * hi;  // never above the bound's
    }
    cap_bytes[v] = std::min(cap_bytes[v], n);
  }
  return ok_status();
}

bool Method::Impl::admits(const std::vector<int64_t>& dims, const std::vector<bool>& known) const {
  std::vector<int64_t> v(exprs.size());
  if (!core::eval_exprs(exprs.data(), exprs.size(), dims.data(), v.data(), nullptr)) return false;
  auto decided = [&](int32_t e) {  // reads only known dims
    const std::vector<bool> used = dims_read(e);
    for (size_t k = 0; k < used.size(); ++k)
      if (used[k] && !known[k]) return false;
    return true;
  };
  if (m->guards())
    for (const fb::Guard* g : *m->guards()) {
      const int64_t l = v[g->lhs()], r = v[g->rhs()];
      const bool pass = g->op() == fb::GuardOp::Eq ? l == r : g->op() == fb::GuardOp::Ge ? l >= r : (r != 0 && l % r == 0);
      if (!pass && decided(g->lhs()) && decided(g->rhs())) return false;
    }
  for (const fb::Value* value : *m->values())
    for (int32_t e : *value->shape())
      if (v[e] < 0 && decided(e)) return false;
  return true;
}

std::vector<int> Method::Impl::tied_dims(int d) const {
  std::vector<int> tied = {d};
  for (bool grew = true; grew && m->guards();) {
    grew = false;
    for (const fb::Guard* g : *m->guards()) {
      const core::ExprNode &l = exprs[g->lhs()], &r = exprs[g->rhs()];
      if (g->op() != fb::GuardOp::Eq || l.op != core::ExprOp::kDim || r.op != core::ExprOp::kDim) continue;
      const bool has_l = std::find(tied.begin(), tied.end(), l.a) != tied.end();
      const bool has_r = std::find(tied.begin(), tied.end(), r.a) != tied.end();
      if (has_l != has_r) {
        tied.push_back(has_l ? r.a : l.a);
        grew = true;
      }
    }
  }
  return tied;
}

int64_t Method::Impl::nearest_admissible(int d, int64_t got) const {
  constexpr int kTries = 4096;
  const DimSpec& s = meta.dims[static_cast<size_t>(d)];
  std::vector<int64_t> dims(provisional.size());
  std::vector<bool> known(provisional.size());
  const std::vector<int> tied = tied_dims(d);
  for (size_t k = 0; k < dims.size(); ++k) {
    known[k] = provisional[k] >= 0 || std::find(tied.begin(), tied.end(), static_cast<int>(k)) != tied.end();
    dims[k] = provisional[k] >= 0 ? provisional[k] : meta.dims[k].min;
  }
  auto ok = [&](int64_t v) {
    for (int t : tied) dims[static_cast<size_t>(t)] = v;
    return admits(dims, known);
  };
  // Bounds are on the step's grid (export checks), so are these; a cap (max_shapes) may not be.
  const int64_t hi = dim_cap.empty() ? s.max : core::floor_div(dim_cap[static_cast<size_t>(d)], s.step) * s.step;
  int64_t up = -1, down = -1;
  if (got <= hi) {
    int64_t v = got < s.min ? s.min : core::ceil_div(got, s.step) * s.step;
    for (int k = 0; k < kTries && v <= hi && up < 0; ++k, v += s.step)
      if (ok(v)) up = v;
  }
  if (got > s.min) {
    int64_t v = got > hi ? hi : core::floor_div(got - 1, s.step) * s.step;
    for (int k = 0; k < kTries && v >= s.min && down < 0; ++k, v -= s.step)
      if (ok(v)) down = v;
  }
  if (up < 0) return down;
  if (down < 0) return up;
  // Compared as distances from got, which lies between them (no overflow: both are in range).
  return up - got <= got - down ? up : down;
}

// A batch axis: a dim named like one (batch, batch_size, bs, N, B) that every input carries on
// axis 0. Its way out is splitting or padding the batch, never resizing.
bool Method::Impl::batch_axis(int d) const {
  if (!core::is_batch_name(dim_names[static_cast<size_t>(d)])) return false;
  for (const TensorSpec& t : meta.inputs)
    for (size_t k = 1; k < t.axes.size(); ++k)
      if (t.axes[k].dim == d) return false;
  return true;
}

std::string Method::Impl::way_out(int d, int64_t got) const {
  const int64_t v = nearest_admissible(d, got);
  if (v < 0) return "";
  if (batch_axis(d)) {
    if (got == 0) return "; a batch of 0 has nothing to run: skip the call";
    return v > got ? "; pad the batch with " + std::to_string(v - got) + " row(s) to " + std::to_string(v) +
                         " on the host and drop their outputs"
                   : "; split the batch into calls of at most " + std::to_string(v) + " on the host";
  }
  std::string also;  // tied dims the inputs give another size
  for (int t : tied_dims(d))
    if (t != d && provisional[t] >= 0 && provisional[t] != v) also += (also.empty() ? "" : ", ") + dim_names[t];
  // An image's height or width (axis 2 or 3 of a rank-4 input) is cropped or resized; any
  // other axis (a sequence, a count) is truncated.
  bool spatial = false;
  for (const TensorSpec& t : meta.inputs)
    spatial = spatial || (t.axes.size() == 4 && (t.axes[2].dim == d || t.axes[3].dim == d));
  return (v > got ? "; pad on the host to " : spatial ? "; crop or resize on the host to " : "; truncate on the host to ") +
         std::to_string(v) +
         (also.empty() ? "" : " (and " + also + " to " + std::to_string(v) + ", which must equal it)");
}

std::vector<bool> Method::Impl::dims_read(int32_t id) const {
  std::vector<bool> used(dim_values.size(), false), seen(exprs.size(), false);
  std::vector<int32_t> stack = {id};
  while (!stack.empty()) {
    int32_t e = stack.back();
    stack.pop_back();
    if (e < 0 || seen[e]) continue;
    seen[e] = true;
    if (exprs[e].op == core::ExprOp::kDim) {
      used[exprs[e].a] = true;
    } else if (exprs[e].op != core::ExprOp::kConst) {
      stack.push_back(exprs[e].a);
      stack.push_back(exprs[e].b);
    }
  }
  return used;
}

std::string Method::Impl::dims_of_expr(int32_t id) const {
  // Lists "H = 100, W = 64" for the dims an expression reads.
  const std::vector<bool> used = dims_read(id);
  std::string s;
  for (size_t d = 0; d < used.size(); ++d)
    if (used[d]) s += (s.empty() ? "" : ", ") + dim_names[d] + " = " + std::to_string(dim_values[d]);
  return s;
}

Status Method::Impl::check_input(size_t i, const TensorView& t) {
  const TensorSpec& spec = meta.inputs[i];
  const fb::Value* v = m->values()->Get(inputs[i]);
  if (t.dtype != spec.dtype)
    return invalid_argument("input " + input_label(i) + " has dtype " + dtype_name(t.dtype) + " but the program expects " +
                            dtype_name(spec.dtype) + "; convert it on the host");
  if (t.rank != static_cast<int32_t>(spec.axes.size()))
    return invalid_argument("input " + input_label(i) + " has rank " + std::to_string(t.rank) + " (shape " +
                            shape_text(t.dims, t.rank, "x") + ") but the program expects rank " +
                            std::to_string(spec.axes.size()) + " " + spec.shape_text());
  for (int k = 0; k < t.rank; ++k) {
    const core::ExprNode& e = exprs[v->shape()->Get(k)];
    int64_t got = t.dims[k];
    auto axis = [&] { return "input " + input_label(i) + " dim " + std::to_string(k); };  // for messages only
    if (e.op == core::ExprOp::kConst) {
      if (got != e.value) {
        // The shape it was exported from when one is known; else the program's shape for it.
        std::string example = spec.example_shape.empty() ? " (the program's input is " + spec.shape_text() + ")"
                                                         : " (exported from example shape " + shape_text(spec.example_shape, "x") + ")";
        return invalid_argument(axis() + " is " + std::to_string(got) + " but the program fixed it to " +
                                std::to_string(e.value) + example +
                                "; resize on the host or re-export with --dim to make it dynamic");
      }
      continue;
    }
    const DimSpec& d = meta.dims[e.a];
    if (got < d.min || got > d.max)
      return out_of_range(axis() + " ('" + d.name + "') is " + std::to_string(got) + ", outside its range [" +
                          std::to_string(d.min) + ", " + std::to_string(d.max) + "]" + way_out(e.a, got));
    if (!dim_cap.empty() && got > dim_cap[e.a])
      return out_of_range(axis() + " ('" + d.name + "') is " + std::to_string(got) + ", above " +
                          std::to_string(dim_cap[e.a]) + ", the most this Method was created for (max_shapes; the "
                          "program admits up to " + std::to_string(d.max) + ")" + way_out(e.a, got));
    if (got % d.step != 0)
      return out_of_range(axis() + " ('" + d.name + "') is " + std::to_string(got) + ", not a multiple of its step " +
                          std::to_string(d.step) + " (range [" + std::to_string(d.min) + ", " + std::to_string(d.max) +
                          "])" + way_out(e.a, got));
    if (dim_origin[e.a] >= 0) {
      if (dim_values[e.a] != got) {
        size_t oi = static_cast<size_t>(dim_origin[e.a] >> 8);
        int ok = dim_origin[e.a] & 0xff;
        return invalid_argument("inputs '" + meta.inputs[oi].name + "' dim " + std::to_string(ok) + " and '" + spec.name +
                                "' dim " + std::to_string(k) + " share dim '" + d.name + "' and must be equal: got " +
                                std::to_string(dim_values[e.a]) + " and " + std::to_string(got));
      }
    } else {
      dim_values[e.a] = got;
      dim_origin[e.a] = static_cast<int32_t>(i << 8 | static_cast<size_t>(k));
    }
  }
  return ok_status();
}

Status Method::Impl::check_inputs(const TensorView* in, size_t n) {
  std::fill(dim_origin.begin(), dim_origin.end(), -1);
  // Each dim's first valid size among all inputs: what an error's way out keeps the other dims at.
  std::fill(provisional.begin(), provisional.end(), -1);
  for (size_t i = 0; i < n; ++i) {
    const flatbuffers::Vector<int32_t>* shape = m->values()->Get(inputs[i])->shape();
    if (in[i].rank != static_cast<int32_t>(shape->size())) continue;
    for (int k = 0; k < in[i].rank; ++k) {
      const core::ExprNode& e = exprs[shape->Get(k)];
      const int64_t got = in[i].dims[k];
      if (e.op != core::ExprOp::kDim || provisional[e.a] >= 0) continue;
      const DimSpec& d = meta.dims[e.a];
      if (got >= d.min && got <= d.max && got % d.step == 0) provisional[e.a] = got;
    }
  }
  for (size_t i = 0; i < n; ++i) KILN_TRY(check_input(i, in[i]));
  return ok_status();
}

Status Method::Impl::apply_shapes() {
  size_t bad = 0;
  if (!core::eval_exprs(exprs.data(), exprs.size(), dim_values.data(), expr_values.data(), &bad))
    return invalid_argument("shape expression " + core::format_expr(exprs.data(), exprs.size(), dim_names, static_cast<int32_t>(bad)) +
                            " divides by zero or overflows int64 for " + dims_of_expr(static_cast<int32_t>(bad)));
  if (m->guards()) {
    for (const fb::Guard* g : *m->guards()) {
      int64_t l = expr_values[g->lhs()], r = expr_values[g->rhs()];
      bool pass = g->op() == fb::GuardOp::Eq ? l == r : g->op() == fb::GuardOp::Ge ? l >= r : (r != 0 && l % r == 0);
      if (pass) continue;
      return guard_failure(g);
    }
  }
  std::fill(block_bad.begin(), block_bad.end(), -1);
  for (size_t i = 0; i < views.size(); ++i) {
    const fb::Value* v = m->values()->Get(i);
    TensorView& t = views[i];
    const int32_t blk = value_block.empty() ? -1 : value_block[i];
    if (blk >= 0) {  // inside a block: an invalid shape marks the block instead of failing bind
      bool valid = true;
      uint64_t n = dtype_size(t.dtype);
      for (int k = 0; k < t.rank; ++k) {
        const int64_t d = expr_values[v->shape()->Get(k)];
        valid = valid && d >= 0 && !__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n);
      }
      const uint64_t limit = v->storage() == fb::StorageKind::Alias ? m->values()->Get(v->alias_of())->nbytes() : v->nbytes();
      if (!valid || n > limit) {
        if (block_bad[static_cast<size_t>(blk)] < 0) block_bad[static_cast<size_t>(blk)] = static_cast<int32_t>(i);
        for (int k = 0; k < t.rank; ++k) t.dims[k] = 0;  // never read: execute refuses the block
        continue;
      }
    }
    for (int k = 0; k < t.rank; ++k) {
      int64_t d = expr_values[v->shape()->Get(k)];
      if (d < 0)
        return invalid_argument("value '" + v->name()->str() + "' would have negative size " + std::to_string(d) +
                                " on axis " + std::to_string(k) + " for " + dims_of_expr(v->shape()->Get(k)));
      t.dims[k] = d;
    }
    uint64_t limit = v->storage() == fb::StorageKind::Alias ? m->values()->Get(v->alias_of())->nbytes() : v->nbytes();
    if (t.nbytes() > limit)
      return internal_error("value '" + v->name()->str() + "' needs " + std::to_string(t.nbytes()) +
                            " bytes but the plan reserved " + std::to_string(limit));
  }
  return ok_status();
}

std::vector<std::vector<int64_t>> Method::Impl::bound_shapes() const {
  std::vector<std::vector<int64_t>> shapes;
  for (const TensorSpec& t : meta.inputs) {
    std::vector<int64_t> s;
    for (const AxisSpec& a : t.axes) {
      if (a.dim < 0) { s.push_back(a.size); continue; }
      const DimSpec& d = meta.dims[a.dim];
      s.push_back(d.max / d.step * d.step);  // largest admissible value
    }
    shapes.push_back(std::move(s));
  }
  return shapes;
}

Status Method::Impl::guard_failure(const fb::Guard* g) const {
  std::string vars = dims_of_expr(g->lhs());
  std::string rvars = dims_of_expr(g->rhs());
  if (!rvars.empty() && rvars != vars) vars += (vars.empty() ? "" : ", ") + rvars;
  std::string origin = g->node_name() ? g->node_name()->str() : "";
  std::string op = g->op_type() ? g->op_type()->str() : "";
  std::string ctx = g->context() && g->context()->size() ? " " + g->context()->str() : "";
  // The way out: for each dim the guard reads, its nearest value that the others admit.
  std::vector<int32_t> read;
  for (int32_t root : {g->lhs(), g->rhs()}) {
    std::vector<int32_t> stack = {root};
    while (!stack.empty()) {
      const int32_t x = stack.back();
      stack.pop_back();
      if (exprs[x].op == core::ExprOp::kDim) {
        if (std::find(read.begin(), read.end(), exprs[x].a) == read.end()) read.push_back(exprs[x].a);
      } else if (exprs[x].op != core::ExprOp::kConst) {
        stack.push_back(exprs[x].a);
        stack.push_back(exprs[x].b);
      }
    }
  }
  std::sort(read.begin(), read.end());
  std::vector<std::string> options;
  for (int32_t d : read) {
    const int64_t v = nearest_admissible(d, dim_values[d]);
    if (v < 0) continue;
    std::vector<int> tied = tied_dims(d);  // they move together: "seq = W = 4"
    std::sort(tied.begin(), tied.end());
    std::string option;
    for (int t : tied) option += dim_names[t] + " = ";
    option += std::to_string(v);
    if (std::find(options.begin(), options.end(), option) == options.end()) options.push_back(option);
  }
  std::string nearby;
  for (const std::string& o : options) nearby += (nearby.empty() ? "; the nearest admissible: " : " or ") + o;
  return Status(Code::kInvalidArgument,
                "guard " + runtime::guard_text(g, exprs, dim_names) + " failed for " + vars + " (needed by node '" +
                    origin + "' (" + op + ")" + ctx + ")" + nearby,
                Reason::kGuardFailed);
}

}  // namespace kiln
