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

struct BucketedMethod::Impl {
  std::string name, dim, last;
  std::vector<int64_t> sizes;
  std::vector<std::string> names;
  std::vector<std::unique_ptr<Method>> methods;
  std::vector<std::pair<int32_t, int32_t>> in_axes, out_axes;  // (input/output, axis)
  std::vector<double> pads;
  void* arena = nullptr;
  std::vector<std::vector<uint8_t>> out_bufs;  // cut-back outputs, sized for the largest bucket
  std::vector<TensorView> outs;
  ~Impl() {
    methods.clear();  // before the arena they use
    std::free(arena);
  }
};

BucketedMethod::BucketedMethod(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BucketedMethod::~BucketedMethod() = default;

bool BucketedMethod::has_buckets(const Program& program, const std::string& name) {
  for (const fb::Method* m : *ProgramAccess::impl(program).file.program->methods())
    if (m->bucket() && m->bucket()->of()->str() == name) return true;
  return false;
}

Result<std::unique_ptr<BucketedMethod>> BucketedMethod::create(const Program& program, const std::string& name,
                                                               const MethodOptions& options) {
  auto impl = std::make_unique<Impl>();
  Impl& s = *impl;
  s.name = name;
  std::vector<std::pair<int64_t, const fb::Method*>> found;
  for (const fb::Method* m : *ProgramAccess::impl(program).file.program->methods())
    if (m->bucket() && m->bucket()->of()->str() == name) found.emplace_back(m->bucket()->size(), m);
  if (found.empty()) return not_found("no buckets of method '" + name + "' in the program; it has " + ProgramAccess::impl(program).method_names());
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  const fb::Bucket* first = found.front().second->bucket();
  s.dim = first->dim()->str();
  for (size_t k = 0; k < first->input_axes()->size(); k += 2) s.in_axes.emplace_back(first->input_axes()->Get(k), first->input_axes()->Get(k + 1));
  for (size_t k = 0; k < first->output_axes()->size(); k += 2) s.out_axes.emplace_back(first->output_axes()->Get(k), first->output_axes()->Get(k + 1));
  s.pads.assign(first->pads()->begin(), first->pads()->end());
  uint64_t arena = 0;
  for (const auto& [size, m] : found) {
    const fb::Bucket* b = m->bucket();
    if (b->dim()->str() != s.dim || b->input_axes()->size() != 2 * s.in_axes.size() || b->pads()->size() != s.pads.size())
      return invalid_argument("the buckets of '" + name + "' disagree on their dim or axes");
    if (!s.sizes.empty() && s.sizes.back() == size) return invalid_argument("two buckets of '" + name + "' have size " + std::to_string(size));
    s.sizes.push_back(size);
    s.names.push_back(m->name()->str());
    KILN_ASSIGN_OR_RETURN(uint64_t need, Method::arena_bytes(program, s.names.back(), options));
    arena = std::max(arena, need);
  }
  // One arena for all: one bucket runs at a time, and outputs are copied out of it.
  s.arena = allocate_owned_arena(arena);
  if (!s.arena)
    return resource_exhausted("cannot allocate the arena the buckets of method '" + name + "' share: " +
                              core::human_bytes(arena) + " (" + std::to_string(arena) + " bytes, the largest bucket's arena); export fewer or smaller buckets, or free memory");
  size_t n_out = 0;
  for (const std::string& n : s.names) {
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

Status BucketedMethod::run(const TensorView* inputs, size_t n) {
  Impl& s = *impl_;
  const MethodMeta& meta = s.methods.front()->meta();
  if (n != meta.inputs.size())
    return invalid_argument("method '" + s.name + "' takes " + std::to_string(meta.inputs.size()) + " inputs, got " + std::to_string(n));
  int64_t actual = -1;
  for (const auto& [i, axis] : s.in_axes) {
    if (inputs[i].rank <= axis) return invalid_argument("input '" + meta.inputs[i].name + "' has rank " + std::to_string(inputs[i].rank) +
                                                        "; the program expects " + meta.inputs[i].shape_text());
    const int64_t v = inputs[i].dims[axis];
    if (actual >= 0 && v != actual)
      return invalid_argument("inputs disagree on '" + s.dim + "': " + std::to_string(actual) + " and " + std::to_string(v));
    actual = v;
  }
  auto it = std::lower_bound(s.sizes.begin(), s.sizes.end(), actual);
  if (it == s.sizes.end()) {
    std::string list;
    for (int64_t v : s.sizes) list += (list.empty() ? "" : ", ") + std::to_string(v);
    return out_of_range("'" + s.dim + "' is " + std::to_string(actual) + ", above the largest bucket " +
                        std::to_string(s.sizes.back()) + " (buckets: " + list + "); truncate on the host or export a larger bucket");
  }
  const size_t b = static_cast<size_t>(it - s.sizes.begin());
  Method& m = *s.methods[b];
  s.last = s.names[b];
  TensorView padded[16];
  if (n > 16) return invalid_argument("a bucketed method takes at most 16 inputs");
  for (size_t i = 0; i < n; ++i) {
    padded[i] = inputs[i];
    for (const auto& [j, axis] : s.in_axes)
      if (static_cast<size_t>(j) == i) padded[i].dims[axis] = *it;
  }
  KILN_TRY(m.bind(padded, n));
  for (size_t i = 0; i < n; ++i) {
    const TensorView& dst = m.input(i);
    if (padded[i].numel() != inputs[i].numel()) fill(dst.data, dst.dtype, s.pads[i], dst.numel());
    copy_corner(static_cast<const uint8_t*>(inputs[i].data), inputs[i].dims, static_cast<uint8_t*>(dst.data), dst.dims,
                inputs[i].dims, dst.rank, dtype_size(dst.dtype));
  }
  KILN_TRY(m.execute());
  for (size_t o = 0; o < s.outs.size(); ++o) {
    const TensorView& full = m.output(o);
    TensorView& cut = s.outs[o];
    cut = full;
    for (const auto& [j, axis] : s.out_axes)
      if (static_cast<size_t>(j) == o) cut.dims[axis] = actual;
    cut.data = s.out_bufs[o].data();
    copy_corner(static_cast<const uint8_t*>(full.data), full.dims, static_cast<uint8_t*>(cut.data), cut.dims, cut.dims,
                cut.rank, dtype_size(cut.dtype));
  }
  return ok_status();
}

size_t BucketedMethod::num_outputs() const { return impl_->outs.size(); }
const TensorView& BucketedMethod::output(size_t i) const {
  static const TensorView kNone{};
  return i < impl_->outs.size() ? impl_->outs[i] : kNone;
}
const std::string& BucketedMethod::dim() const { return impl_->dim; }
const std::vector<int64_t>& BucketedMethod::sizes() const { return impl_->sizes; }
const std::string& BucketedMethod::last_bucket() const { return impl_->last; }
Method* BucketedMethod::bucket(size_t i) { return i < impl_->methods.size() ? impl_->methods[i].get() : nullptr; }

}  // namespace kiln
