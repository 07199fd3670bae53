#include "kiln/bucketed.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/bytes.h"
#include "format/file_header.h"
#include "runtime/method_impl.h"
#include "runtime/program_impl.h"
#include "core/status.h"

namespace kiln {

namespace {

// Writes `value` as `dtype` into n elements at dst.
void fill(void* dst, DType dtype, double value, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    switch (dtype) {
      case DType::kF32: static_cast<float*>(dst)[k] = static_cast<float>(value); break;
      case DType::kI64: static_cast<int64_t*>(dst)[k] = static_cast<int64_t>(value); break;
      case DType::kI32: static_cast<int32_t*>(dst)[k] = static_cast<int32_t>(value); break;
      case DType::kBool: static_cast<uint8_t*>(dst)[k] = value != 0; break;
      case DType::kI8: static_cast<int8_t*>(dst)[k] = static_cast<int8_t>(value); break;
      case DType::kU8: static_cast<uint8_t*>(dst)[k] = static_cast<uint8_t>(value); break;
    }
  }
}

// Copies the top corner of size `n` (per axis) from row-major `src` (dims s) to row-major
// `dst` (dims d); n <= s and n <= d on every axis. Padding copies an input into a larger
// bucket; cutting back copies a bucket's output into a smaller one.
void copy_corner(const uint8_t* src, const int64_t* s, uint8_t* dst, const int64_t* d, const int64_t* n, int rank, size_t elem) {
  if (rank == 0) return std::memcpy(dst, src, elem), void();
  for (int k = 0; k < rank; ++k)
    if (n[k] == 0) return;
  int64_t idx[kMaxRank] = {};
  const size_t row = static_cast<size_t>(n[rank - 1]) * elem;
  while (true) {
    int64_t so = 0, dof = 0;
    for (int k = 0; k < rank - 1; ++k) so = so * s[k] + idx[k], dof = dof * d[k] + idx[k];
    std::memcpy(dst + static_cast<size_t>(dof * d[rank - 1]) * elem, src + static_cast<size_t>(so * s[rank - 1]) * elem, row);
    int k = rank - 2;
    for (; k >= 0; --k) {
      if (++idx[k] < n[k]) break;
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

}  // namespace

std::string BucketSpec::rule() const {
  std::string r = "the smallest bucket with " + dim + " >= the inputs' " + dim;
  auto num = [](double v) {
    std::string t = std::to_string(v);
    t.erase(t.find_last_not_of('0') + 1);
    if (!t.empty() && t.back() == '.') t.pop_back();
    return t;
  };
  for (const Axis& a : inputs) r += "; input '" + a.tensor + "' axis " + std::to_string(a.axis) + " padded with " + num(a.pad);
  for (const Axis& a : outputs) r += "; output '" + a.tensor + "' axis " + std::to_string(a.axis) + " cut back";
  return r;
}

struct BucketedMethod::Impl {
  BucketSpec spec;
  std::string last;
  std::vector<std::unique_ptr<Method>> methods;
  void* arena = nullptr;
  std::vector<std::vector<uint8_t>> out_bufs;  // cut-back outputs, sized for the largest bucket
  std::vector<TensorView> outs;
  int bound = -1;      // the bucket bind_shapes chose
  int64_t actual = 0;  // the dim's size at that bind
  ~Impl() {
    methods.clear();  // before the arena they use
    std::free(arena);
  }
};

BucketedMethod::BucketedMethod(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BucketedMethod::~BucketedMethod() = default;

namespace {

// The bucket methods of the file grouped by logical name, each group sorted by size.
std::vector<std::pair<std::string, std::vector<std::pair<int64_t, const fb::Method*>>>> bucket_groups(const Program& program) {
  std::vector<std::pair<std::string, std::vector<std::pair<int64_t, const fb::Method*>>>> groups;
  for (const fb::Method* m : *ProgramAccess::impl(program).file.program->methods()) {
    if (!m->bucket()) continue;
    const std::string of = m->bucket()->of()->str();
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == of; });
    if (g == groups.end()) g = groups.insert(groups.end(), {of, {}});
    g->second.emplace_back(m->bucket()->size(), m);
  }
  for (auto& g : groups)
    std::sort(g.second.begin(), g.second.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return groups;
}

Result<BucketSpec> spec_of(const Program& program, const std::string& name,
                           const std::vector<std::pair<int64_t, const fb::Method*>>& found) {
  BucketSpec s;
  s.method = name;
  const fb::Bucket* first = found.front().second->bucket();
  s.dim = first->dim()->str();
  KILN_ASSIGN_OR_RETURN(MethodMeta meta, program.method_meta(found.front().second->name()->str()));
  for (size_t k = 0; k + 1 < first->input_axes()->size(); k += 2) {
    const int32_t i = first->input_axes()->Get(k);
    s.inputs.push_back({meta.inputs.at(static_cast<size_t>(i)).name, i, first->input_axes()->Get(k + 1),
                        static_cast<size_t>(i) < first->pads()->size() ? first->pads()->Get(static_cast<flatbuffers::uoffset_t>(i)) : 0.0});
  }
  for (size_t k = 0; k + 1 < first->output_axes()->size(); k += 2) {
    const int32_t o = first->output_axes()->Get(k);
    s.outputs.push_back({meta.outputs.at(static_cast<size_t>(o)).name, o, first->output_axes()->Get(k + 1), 0.0});
  }
  for (const auto& [size, m] : found) {
    const fb::Bucket* b = m->bucket();
    if (b->dim()->str() != s.dim || b->input_axes()->size() != first->input_axes()->size() || b->pads()->size() != first->pads()->size())
      return invalid_argument("the buckets of '" + name + "' disagree on their dim or axes");
    if (!s.sizes.empty() && s.sizes.back() == size) return invalid_argument("two buckets of '" + name + "' have size " + std::to_string(size));
    s.sizes.push_back(size);
    s.bucket_methods.push_back(m->name()->str());
  }
  return s;
}

}  // namespace

std::vector<BucketSpec> BucketedMethod::describe(const Program& program) {
  std::vector<BucketSpec> out;
  for (const auto& [name, found] : bucket_groups(program)) {
    Result<BucketSpec> s = spec_of(program, name, found);
    if (s.ok()) out.push_back(std::move(*s));
  }
  return out;
}

bool BucketedMethod::has_buckets(const Program& program, const std::string& name) {
  for (const fb::Method* m : *ProgramAccess::impl(program).file.program->methods())
    if (m->bucket() && m->bucket()->of()->str() == name) return true;
  return false;
}

Result<std::unique_ptr<BucketedMethod>> BucketedMethod::create(const Program& program, const std::string& name,
                                                               const MethodOptions& options) {
  auto impl = std::make_unique<Impl>();
  Impl& s = *impl;
  for (const auto& [of, found] : bucket_groups(program)) {
    if (of != name) continue;
    KILN_ASSIGN_OR_RETURN(s.spec, spec_of(program, name, found));
  }
  if (s.spec.sizes.empty())
    return not_found("no buckets of method '" + name + "' in the program; it has " + ProgramAccess::impl(program).method_names());
  uint64_t arena = 0;
  for (const std::string& n : s.spec.bucket_methods) {
    KILN_ASSIGN_OR_RETURN(uint64_t need, Method::arena_bytes(program, n, options));
    arena = std::max(arena, need);
  }
  // One arena for all: one bucket runs at a time, and outputs are copied out of it.
  s.arena = allocate_owned_arena(arena);
  if (!s.arena)
    return resource_exhausted("cannot allocate the arena the buckets of method '" + name + "' share: " +
                              core::human_bytes(arena) + " (" + std::to_string(arena) + " bytes, the largest bucket's arena); export fewer or smaller buckets, or free memory");
  size_t n_out = 0;
  for (const std::string& n : s.spec.bucket_methods) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Method> m, Method::create(program, n, options, s.arena, arena ? arena : 64));
    n_out = m->num_outputs();
    if (s.out_bufs.size() < n_out) s.out_bufs.resize(n_out);
    for (size_t o = 0; o < n_out; ++o)  // static shapes: the views hold each output's bytes already
      if (s.out_bufs[o].size() < m->output(o).nbytes()) s.out_bufs[o].resize(m->output(o).nbytes());
    s.methods.push_back(std::move(m));
  }
  s.outs.resize(n_out);
  return std::unique_ptr<BucketedMethod>(new BucketedMethod(std::move(impl)));
}

Result<size_t> BucketedMethod::select(const std::vector<std::vector<int64_t>>& shapes) const {
  const Impl& s = *impl_;
  const MethodMeta& meta = s.methods.front()->meta();
  if (shapes.size() != meta.inputs.size())
    return invalid_argument("method '" + s.spec.method + "' takes " + std::to_string(meta.inputs.size()) + " inputs, got " +
                            std::to_string(shapes.size()));
  int64_t actual = -1;
  for (const BucketSpec::Axis& a : s.spec.inputs) {
    const std::vector<int64_t>& shape = shapes[static_cast<size_t>(a.index)];
    if (static_cast<int64_t>(shape.size()) <= a.axis)
      return invalid_argument("input '" + a.tensor + "' has rank " + std::to_string(shape.size()) + "; the program expects " +
                              meta.inputs[static_cast<size_t>(a.index)].shape_text());
    const int64_t v = shape[static_cast<size_t>(a.axis)];
    if (actual >= 0 && v != actual)
      return invalid_argument("inputs disagree on '" + s.spec.dim + "': " + std::to_string(actual) + " and " + std::to_string(v));
    actual = v;
  }
  auto it = std::lower_bound(s.spec.sizes.begin(), s.spec.sizes.end(), actual);
  if (it == s.spec.sizes.end()) {
    std::string list;
    for (int64_t v : s.spec.sizes) list += (list.empty() ? "" : ", ") + std::to_string(v);
    return out_of_range("'" + s.spec.dim + "' is " + std::to_string(actual) + ", above the largest bucket " +
                        std::to_string(s.spec.sizes.back()) + " (buckets: " + list + "); truncate on the host or export a larger bucket");
  }
  return static_cast<size_t>(it - s.spec.sizes.begin());
}

Status BucketedMethod::bind_shapes(const std::vector<std::vector<int64_t>>& shapes) {
  Impl& s = *impl_;
  s.bound = -1;
  KILN_ASSIGN_OR_RETURN(size_t b, select(shapes));
  std::vector<std::vector<int64_t>> padded = shapes;
  for (const BucketSpec::Axis& a : s.spec.inputs) padded[static_cast<size_t>(a.index)][static_cast<size_t>(a.axis)] = s.spec.sizes[b];
  Method& m = *s.methods[b];
  KILN_TRY(m.bind_shapes(padded));
  s.actual = s.spec.inputs.empty() ? s.spec.sizes[b] : shapes[static_cast<size_t>(s.spec.inputs[0].index)][static_cast<size_t>(s.spec.inputs[0].axis)];
  if (s.actual != s.spec.sizes[b])  // the rows past the actual size hold the pad value
    for (const BucketSpec::Axis& a : s.spec.inputs) {
      const TensorView& dst = m.input(static_cast<size_t>(a.index));
      fill(dst.data, dst.dtype, a.pad, dst.numel());
    }
  s.bound = static_cast<int>(b);
  s.last = s.spec.bucket_methods[b];
  return ok_status();
}

const TensorView& BucketedMethod::bound_input(size_t i) const {
  static const TensorView kNone{};
  const Impl& s = *impl_;
  if (s.bound < 0 || i >= s.methods[static_cast<size_t>(s.bound)]->num_inputs()) return kNone;
  return s.methods[static_cast<size_t>(s.bound)]->input(i);
}

Status BucketedMethod::execute() {
  Impl& s = *impl_;
  if (s.bound < 0) return failed_precondition("method '" + s.spec.method + "': bind shapes before execute");
  Method& m = *s.methods[static_cast<size_t>(s.bound)];
  KILN_TRY(m.execute());
  for (size_t o = 0; o < s.outs.size(); ++o) {
    const TensorView& full = m.output(o);
    TensorView& cut = s.outs[o];
    cut = full;
    for (const BucketSpec::Axis& a : s.spec.outputs)
      if (static_cast<size_t>(a.index) == o) cut.dims[a.axis] = s.actual;
    cut.data = s.out_bufs[o].data();
    copy_corner(static_cast<const uint8_t*>(full.data), full.dims, static_cast<uint8_t*>(cut.data), cut.dims, cut.dims,
                cut.rank, dtype_size(cut.dtype));
  }
  return ok_status();
}

Status BucketedMethod::run(const TensorView* inputs, size_t n) {
  std::vector<std::vector<int64_t>> shapes(n);
  for (size_t i = 0; i < n; ++i) shapes[i].assign(inputs[i].dims, inputs[i].dims + inputs[i].rank);
  KILN_TRY(bind_shapes(shapes));
  for (size_t i = 0; i < n; ++i) {
    const TensorView& dst = bound_input(i);
    copy_corner(static_cast<const uint8_t*>(inputs[i].data), inputs[i].dims, static_cast<uint8_t*>(dst.data), dst.dims,
                inputs[i].dims, dst.rank, dtype_size(dst.dtype));
  }
  return execute();
}

size_t BucketedMethod::num_inputs() const { return impl_->methods.front()->num_inputs(); }
size_t BucketedMethod::num_outputs() const { return impl_->outs.size(); }
const TensorView& BucketedMethod::output(size_t i) const {
  static const TensorView kNone{};
  return i < impl_->outs.size() ? impl_->outs[i] : kNone;
}
const std::string& BucketedMethod::dim() const { return impl_->spec.dim; }
const std::vector<int64_t>& BucketedMethod::sizes() const { return impl_->spec.sizes; }
const std::string& BucketedMethod::last_bucket() const { return impl_->last; }
const BucketSpec& BucketedMethod::spec() const { return impl_->spec; }
Method* BucketedMethod::bucket(size_t i) { return i < impl_->methods.size() ? impl_->methods[i].get() : nullptr; }

}  // namespace kiln
