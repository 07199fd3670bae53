#include "tooling/sweep.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <cstring>
#include <deque>
#include <functional>
#include <random>
#include <set>
#include <sstream>

#include "kiln/bucketed.h"
#include "kiln/method.h"
#include "runtime/program_impl.h"
#include "tooling/program_report.h"
#include "tooling/runner.h"
#include "core/status.h"

namespace kiln::tooling {

namespace {

// Deterministic input data: floats in [-1, 1), integers and bools 0 or 1 (valid indices
// and masks for any model).
void fill_input(TensorView t, std::mt19937_64& rng) {
  int64_t n = t.numel();
  std::uniform_real_distribution<float> real(-1.f, 1.f);
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::kF32: t.as<float>()[i] = real(rng); break;
      case DType::kI64: t.as<int64_t>()[i] = static_cast<int64_t>(rng() & 1); break;
      case DType::kI32: t.as<int32_t>()[i] = static_cast<int32_t>(rng() & 1); break;
      case DType::kBool: static_cast<uint8_t*>(t.data)[i] = static_cast<uint8_t>(rng() & 1); break;
      case DType::kI8:
      case DType::kU8: static_cast<uint8_t*>(t.data)[i] = static_cast<uint8_t>(rng()); break;  // any quantized value
    }
  }
}

std::vector<std::vector<uint8_t>> snapshot(const Method& m) {
  std::vector<std::vector<uint8_t>> out;
  for (size_t i = 0; i < m.num_outputs(); ++i) {
    const TensorView& t = m.output(i);
    const uint8_t* p = static_cast<const uint8_t*>(t.data);
    out.emplace_back(p, p + t.nbytes());
  }
  return out;
}

std::string non_finite(const Method& m) {
  for (size_t i = 0; i < m.num_outputs(); ++i) {
    const TensorView& t = m.output(i);
    if (t.dtype != DType::kF32) continue;
    for (int64_t k = 0; k < t.numel(); ++k)
      if (!std::isfinite(t.as<float>()[k]))
        return "output " + std::to_string(i) + " element " + std::to_string(k) + " is not finite";
  }
  return "";
}

// NaN, +Inf, -Inf or finite: two paths must agree on it element by element.
int finite_class(double v) { return std::isnan(v) ? 0 : v == INFINITY ? 1 : v == -INFINITY ? 2 : 3; }

// The portable path a delegated method is compared with, and how close they must agree:
// `tolerance` times the largest finite portable magnitude per output.
struct PortablePath {
  Method* method = nullptr;  ///< null: the method is not delegated (nothing to compare)
  double tolerance = 1e-4;
};

// The agreement two paths can keep: 1e-4 of the output's scale, or 1e-2 where activations are
// quantized at run time (DynamicQuantizeLinear, alone or folded into its consumer). There an
// ulp of difference in the float work upstream (XNNPACK's operator against Kiln's kernel) can
// move a value across a rounding boundary and shift it by a whole quantum, 1/255 of its row's
// range, which the int8 weights then carry on.
double path_tolerance(const Program& program, const std::string& method) {
  static const std::set<std::string> kRuntimeQuantized = {"DynamicQuantizeLinear", "PackedMatMulIntegerToFloat",
                                                           "PackedConvIntegerToFloat"};
  Result<MethodReport> report = method_report(program, method);
  if (report.ok())
    for (const InstructionReport& in : report->instructions)
      if (kRuntimeQuantized.count(in.op)) return 1e-2;
  return 1e-4;
}

// The delegated outputs against the portable path's at the same inputs: "" when every element
// has the same non-finite class (NaN, +Inf, -Inf, finite) and finite ones agree within
// `tolerance` of the largest finite portable magnitude per output.
std::string delegate_mismatch(const Method& d, const Method& p, double tolerance) {
  for (size_t i = 0; i < p.num_outputs(); ++i) {
    const TensorView& a = d.output(i);
    const TensorView& b = p.output(i);
    if (a.numel() != b.numel()) return "output " + std::to_string(i) + " has another size on the delegated path";
    if (b.dtype != DType::kF32) {
      if (std::memcmp(a.data, b.data, b.nbytes()) != 0) return "output " + std::to_string(i) + " differs from the portable path";
      continue;
    }
    double scale = 1;
    for (int64_t k = 0; k < b.numel(); ++k)
      if (std::isfinite(b.as<float>()[k])) scale = std::max(scale, std::fabs(static_cast<double>(b.as<float>()[k])));
    for (int64_t k = 0; k < b.numel(); ++k) {
      const double x = a.as<float>()[k], y = b.as<float>()[k];
      if (finite_class(x) != finite_class(y) || (finite_class(x) == 3 && std::fabs(x - y) > tolerance * scale)) {
        std::ostringstream o;
        o << "output " << i << " element " << k << " is " << x << " delegated but " << y << " portable";
        return o.str();
      }
    }
  }
  return "";
}

// Binds `m` to `shapes` and fills its inputs from `seed` (the same data on every path), float
// inputs driven by `drive`.
Status bind_seeded(Method& m, const std::vector<std::vector<int64_t>>& shapes, uint64_t seed, InputDrive drive) {
  KILN_TRY(m.bind_shapes(shapes));
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    TensorView t = m.input(i);
    fill_input(t, rng);
    if (t.dtype != DType::kF32 || drive.identity()) continue;
    for (int64_t k = 0; k < t.numel(); ++k) t.as<float>()[k] = t.as<float>()[k] * drive.scale + drive.offset;
  }
  return ok_status();
}

// The sample on both paths, each over an arena of NaN bytes: "" when the delegated outputs
// match the portable ones, with clean inputs and with a NaN input; else the difference.
std::string compare_paths(Method& m, const PortablePath& portable, const std::vector<std::vector<int64_t>>& shapes,
                          uint64_t seed, InputDrive drive);

// The sample's inputs with the middle element of the first float input set to NaN, on both
// paths: the delegated one must refuse it (Reason::kNonFiniteInput, check_finite_inputs) or
// give what the portable kernels give, non-finite classes included. "" when it does.
std::string nan_mismatch(Method& d, const PortablePath& portable, const std::vector<std::vector<int64_t>>& shapes,
                         uint64_t seed, InputDrive drive) {
  Method& p = *portable.method;
  Status st[2];
  for (int k = 0; k < 2; ++k) {
    Method& m = k ? p : d;
    st[k] = bind_seeded(m, shapes, seed, drive);
    for (size_t i = 0; st[k].ok() && i < m.num_inputs(); ++i)
      if (m.input(i).dtype == DType::kF32 && m.input(i).numel() > 0) {
        m.input_data<float>(i)[m.input(i).numel() / 2] = std::numeric_limits<float>::quiet_NaN();
        break;
      }
    if (st[k].ok()) st[k] = m.execute();
  }
  if (!st[1].ok()) return "";  // the portable path refused the data (a count above its bound): nothing to compare
  if (!st[0].ok()) return st[0].reason() == Reason::kNonFiniteInput ? "" : st[0].message();
  return delegate_mismatch(d, p, portable.tolerance);
}

std::string compare_paths(Method& m, const PortablePath& path, const std::vector<std::vector<int64_t>>& shapes,
                          uint64_t seed, InputDrive drive) {
  Method& portable = *path.method;
  MethodAccess::fill_arena(portable, 0xFF);
  Status st = bind_seeded(portable, shapes, seed, drive);
  if (st.ok()) st = portable.execute();
  if (!st.ok()) return "portable path: " + st.message();
  MethodAccess::fill_arena(m, 0xFF);  // the delegated outputs again, over the first poison
  st = bind_seeded(m, shapes, seed, drive);
  if (st.ok()) st = m.execute();
  const std::string diff = st.ok() ? delegate_mismatch(m, portable, path.tolerance) : st.message();
  if (!diff.empty()) return "delegate vs portable: " + diff;
  const std::string nan = nan_mismatch(m, path, shapes, seed, drive);
  if (!nan.empty()) return "delegate vs portable with a NaN input: " + nan;
  return "";
}

// A refusal the contract states (a note, not a failure): the random inputs chose a block whose
// own guard refuses these shapes (checked when the block runs), made a data-dependent count
// larger than the contract's bound on it (--dim nonzero=..K), or hold a value an op refuses
// (an index of 1 into an axis of size 1: the sweep's integers are 0 or 1).
std::string stated_refusal(const Status& st) {
  if (st.reason() == Reason::kBlockRefused) return "refused where the inputs chose a branch's block: " + st.message();
  if (st.reason() == Reason::kDataAboveBound) return "refused: " + st.message();
  if (st.reason() == Reason::kDataRefused) return "the random inputs hold a value an op refuses: " + st.message();
  return "";
}

// Runs one sample twice over differently poisoned arenas; with a portable path, also compares
// the delegated outputs with its.
SweepSample run_sample(Method& m, const PortablePath& portable, const std::vector<std::vector<int64_t>>& shapes,
                       uint64_t seed, InputDrive drive = {}) {
  SweepSample s;
  s.drive = drive;
  for (size_t i = 0; i < shapes.size(); ++i) s.shapes += (i ? "," : "") + shape_string(shapes[i]);
  // A clean (zero) arena first, then one of NaN bytes: outputs that differ betray a read of
  // memory nobody wrote; a non-finite value the clean run computes too is the model's own.
  std::vector<std::vector<uint8_t>> first;
  std::string clean_non_finite;
  for (uint8_t poison : {uint8_t{0x00}, uint8_t{0xFF}}) {
    MethodAccess::fill_arena(m, poison);
    Status st = bind_seeded(m, shapes, seed, drive);
    if (!st.ok()) {
      s.problem = st.message();
      return s;
    }
    auto t0 = std::chrono::steady_clock::now();
    st = m.execute();
    s.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!st.ok()) {
      s.note = stated_refusal(st);
      s.ok = !s.note.empty();
      if (!s.ok) s.problem = st.message();
      return s;
    }
    const std::string bad = non_finite(m);
    if (poison == 0x00) {
      first = snapshot(m);
      clean_non_finite = bad;
      for (const DimSpec& d : m.meta().dims)  // -1: its instruction did not run (a block not taken)
        if (d.data) s.counts.push_back(MethodAccess::data_dim_found(m, d.name) ? m.dim_value(d.name) : -1);
      continue;
    }
    if (snapshot(m) != first) {
      s.problem = bad.empty() || !clean_non_finite.empty()
                      ? "outputs differ between two runs over different arena contents: a kernel reads memory it did not write"
                      : bad + " only over an arena of NaN bytes (finite with a clean arena): a kernel reads memory it never wrote";
      return s;
    }
  }
  if (!clean_non_finite.empty())
    s.note = clean_non_finite + " with a clean arena too: the model computes it at these inputs (e.g. a softmax over a "
             "fully masked row)";
  if (portable.method) s.problem = compare_paths(m, portable, shapes, seed, drive);
  s.ok = s.problem.empty();
  return s;
}

// The admissible dim values nearest `start`, moving dims one grid step at a time toward the
// other end (dir +1 from the minimum, -1 from the maximum), fewest steps first; empty when
// none is found within `budget` binds.
std::vector<int64_t> nearest_corner(Method& m, const std::vector<int64_t>& start, int dir, int budget,
                                    const std::function<std::vector<std::vector<int64_t>>(const std::vector<int64_t>&)>& shapes_for) {
  const std::vector<DimSpec>& dims = m.meta().dims;
  std::deque<std::vector<int64_t>> queue = {start};
  std::set<std::vector<int64_t>> seen = {start};
  for (int binds = 0; !queue.empty() && binds < budget; ++binds) {
    std::vector<int64_t> v = std::move(queue.front());
    queue.pop_front();
    if (m.bind_shapes(shapes_for(v)).ok()) return v;
    for (size_t d = 0; d < dims.size(); ++d) {
      std::vector<int64_t> next = v;
      next[d] += dir * dims[d].step;
      if (next[d] < dims[d].min || next[d] > dims[d].max || !seen.insert(next).second) continue;
      queue.push_back(std::move(next));
    }
  }
  return {};
}

// A draw a guard refuses, repaired by moving one dim alone to its admissible value nearest
// the draw (an equality guard such as total == past + T fixes one dim from the others, which
// a random redraw rarely hits); empty when no single dim's move makes it admissible.
std::vector<int64_t> repair_draw(Method& m, const std::vector<int64_t>& draw,
                                 const std::function<std::vector<std::vector<int64_t>>(const std::vector<int64_t>&)>& shapes_for) {
  const std::vector<DimSpec>& dims = m.meta().dims;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d].data) continue;  // set while executing, not by the input shapes
    const int64_t lo = (dims[d].min + dims[d].step - 1) / dims[d].step * dims[d].step, hi = dims[d].max / dims[d].step * dims[d].step;
    for (int64_t dist = 1, tries = 0; tries < 1024; ++dist) {
      const int64_t below = draw[d] - dist * dims[d].step, above = draw[d] + dist * dims[d].step;
      if (below < lo && above > hi) break;
      for (int64_t value : {below, above}) {
        if (value < lo || value > hi) continue;
        std::vector<int64_t> v = draw;
        v[d] = value;
        ++tries;
        if (m.bind_shapes(shapes_for(v)).ok()) return v;
      }
    }
  }
  return {};
}

// The first data-dependent dim's value after one run at these inputs (a cheap probe: one
// path, no checks); -1 when the run fails.
int64_t probe_count(Method& m, const std::vector<std::vector<int64_t>>& shapes, uint64_t seed, InputDrive drive,
                    const std::string& dim) {
  if (!bind_seeded(m, shapes, seed, drive).ok() || !m.execute().ok() || !MethodAccess::data_dim_found(m, dim)) return -1;
  return m.dim_value(dim);
}

// The inputs shifted down and up and spread out, to drive the data-dependent counts. Never
// (nearly) constant: a constant image gives nearly equal scores at many places, ties that one
// ulp decides, differently on the delegated and the portable path.
const InputDrive kDrives[] = {{1.f, -8.f}, {1.f, -2.f}, {1.f, -0.5f}, {1.f, 0.5f}, {1.f, 2.f},
                              {1.f, 8.f},  {4.f, 0.f},  {16.f, 0.f},  {16.f, 16.f}};

// A shift of the inputs (scale 1) that gives the first data-dependent dim a count in
// [lo, hi], found by bisecting between two shifts whose counts lie below and above it
// (counts that grow or shrink with the shift); nullopt when none brackets it.
bool find_drive(Method& m, const std::vector<std::vector<int64_t>>& shapes, uint64_t seed, const std::string& dim,
                int64_t lo, int64_t hi, InputDrive* found) {
  std::vector<std::pair<float, int64_t>> at;
  for (float off : {-8.f, -4.f, -2.f, -1.f, -0.5f, 0.f, 0.5f, 1.f, 2.f, 4.f, 8.f}) {
    const int64_t c = probe_count(m, shapes, seed, {1.f, off}, dim);
    if (c >= lo && c <= hi) return *found = {1.f, off}, true;
    if (c >= 0) at.emplace_back(off, c);
  }
  for (size_t k = 0; k + 1 < at.size(); ++k) {
    float below = at[k].first, above = at[k + 1].first;
    if ((at[k].second < lo) == (at[k + 1].second < lo)) continue;  // no crossing between them
    if (at[k].second > hi) std::swap(below, above);                 // counts shrink with the shift
    for (int step = 0; step < 24; ++step) {
      const float mid = (below + above) / 2;
      const int64_t c = probe_count(m, shapes, seed, {1.f, mid}, dim);
      if (c < 0) break;
      if (c >= lo && c <= hi) return *found = {1.f, mid}, true;
      (c < lo ? below : above) = mid;
    }
  }
  return false;
}

// The all-max and all-min shapes again with driven inputs, until each data-dependent count has
// been none, one, some and its bound where the inputs can make it so.
void drive_counts(Method& m, const PortablePath& portable, const std::vector<std::vector<std::vector<int64_t>>>& corners,
                  uint64_t seed, SweepResult* result) {
  const std::vector<DimSpec>& dims = m.meta().dims;
  std::vector<size_t> data;
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d].data) data.push_back(d);
  if (data.empty()) return;
  for (const auto& shapes : corners)
    for (const InputDrive& drive : kDrives) result->samples.push_back(run_sample(m, portable, shapes, seed, drive));
  auto seen = [&](int64_t lo, int64_t hi) {
    for (const SweepSample& s : result->samples)
      if (!s.counts.empty() && s.counts[0] >= lo && s.counts[0] <= hi) return true;
    return false;
  };
  // One, and some (2 up to one below the bound), for the first count by bisecting a shift.
  const DimSpec& first = dims[data[0]];
  for (auto [lo, hi] : {std::pair<int64_t, int64_t>{1, 1}, {2, first.max - 1}}) {
    if (lo > hi || seen(lo, hi)) continue;
    InputDrive drive;
    for (const auto& shapes : corners)
      if (find_drive(m, shapes, seed, first.name, lo, hi, &drive)) {
        result->samples.push_back(run_sample(m, portable, shapes, seed, drive));
        break;
      }
  }
}

// Per data-dependent dim, the counts the samples reached.
std::vector<CountCoverage> count_coverage(const MethodMeta& meta, const std::vector<SweepSample>& samples) {
  std::vector<CountCoverage> out;
  for (const DimSpec& d : meta.dims)
    if (d.data) out.push_back({d.name, d.max, {}});
  for (const SweepSample& s : samples)
    for (size_t k = 0; k < s.counts.size() && k < out.size(); ++k)
      if (s.counts[k] >= 0) out[k].seen.insert(s.counts[k]);
  return out;
}

int64_t lowest(const DimSpec& d) { return (d.min + d.step - 1) / d.step * d.step; }
int64_t highest(const DimSpec& d) { return d.max / d.step * d.step; }

// Dim values to sample: every dim at its lowest, at its highest, then `samples` random draws
// on the step grid, half of each dim's draws from the lowest eighth of its range (small
// values find more bugs).
std::vector<std::vector<int64_t>> dim_draws(const std::vector<DimSpec>& dims, int samples, std::mt19937_64& rng) {
  std::vector<int64_t> lo, hi;
  for (const DimSpec& d : dims) lo.push_back(lowest(d)), hi.push_back(highest(d));
  std::vector<std::vector<int64_t>> draws = {lo, hi};
  for (int k = 0; k < samples; ++k) {
    std::vector<int64_t> v;
    for (const DimSpec& d : dims) {
      const int64_t count = (highest(d) - lowest(d)) / d.step + 1;
      const int64_t span = (rng() & 1) ? std::max<int64_t>(1, count / 8) : count;
      v.push_back(lowest(d) + static_cast<int64_t>(rng() % static_cast<uint64_t>(span)) * d.step);
    }
    draws.push_back(v);
  }
  return draws;
}

// The sizes of the bucketed dim a dispatch sweep runs: 1, each bucket's size and one above it
// (the next bucket's smallest), and random sizes up to the largest.
std::vector<int64_t> dispatch_sizes(const std::vector<int64_t>& sizes, int samples, std::mt19937_64& rng) {
  std::set<int64_t> v = {1};
  for (int64_t s : sizes) v.insert({s, s + 1});
  for (int k = 0; k < samples; ++k) v.insert(1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(sizes.back())));
  return {v.begin(), v.end()};  // the largest + 1 is in: it must be refused
}

// One dispatch sample: the bucketed method at `shapes` (the dim at `size`) must run the
// smallest bucket that fits, give outputs cut back to `size`, finite and the same over two
// differently poisoned arenas; above the largest bucket it must refuse.
SweepSample run_dispatch(BucketedMethod& b, const std::vector<std::vector<int64_t>>& shapes, int64_t size, uint64_t seed) {
  const BucketSpec& spec = b.spec();
  SweepSample s;
  for (size_t i = 0; i < shapes.size(); ++i) s.shapes += (i ? "," : "") + shape_string(shapes[i]);
  auto it = std::lower_bound(spec.sizes.begin(), spec.sizes.end(), size);
  const std::string want = it == spec.sizes.end() ? "" : spec.bucket_methods[static_cast<size_t>(it - spec.sizes.begin())];
  s.shapes += " -> " + (want.empty() ? "refused" : want);
  std::vector<std::vector<uint8_t>> host(shapes.size()), first;
  std::vector<TensorView> in(shapes.size());
  std::mt19937_64 rng(seed);
  const MethodMeta& meta = b.bucket(0)->meta();
  for (size_t i = 0; i < shapes.size(); ++i) {
    in[i].dtype = meta.inputs[i].dtype;
    in[i].rank = static_cast<int32_t>(shapes[i].size());
    std::copy(shapes[i].begin(), shapes[i].end(), in[i].dims);
    host[i].resize(in[i].nbytes() + 1);
    in[i].data = host[i].data();
    fill_input(in[i], rng);
  }
  for (uint8_t poison : {uint8_t{0x00}, uint8_t{0xFF}}) {
    for (size_t k = 0; k < spec.sizes.size(); ++k) MethodAccess::fill_arena(*b.bucket(k), poison);
    auto t0 = std::chrono::steady_clock::now();
    Status st = b.run(in.data(), in.size());
    s.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (want.empty()) {
      s.ok = st.code() == Code::kOutOfRange;
      if (!s.ok) s.problem = "above the largest bucket, expected a refusal; got " + (st.ok() ? "a run" : st.message());
      return s;
    }
    if (!st.ok()) return s.problem = st.message(), s;
    if (b.last_bucket() != want) return s.problem = "ran bucket '" + b.last_bucket() + "', not the smallest that fits", s;
    std::vector<std::vector<uint8_t>> outs;
    for (size_t o = 0; o < b.num_outputs(); ++o) {
      const TensorView& t = b.output(o);
      for (const BucketSpec::Axis& a : spec.outputs)
        if (static_cast<size_t>(a.index) == o && t.dims[a.axis] != size)
          return s.problem = "output '" + a.tensor + "' axis " + std::to_string(a.axis) + " is " + std::to_string(t.dims[a.axis]) +
                             ", not cut back to " + std::to_string(size), s;
      if (t.dtype == DType::kF32)
        for (int64_t k = 0; k < t.numel(); ++k)
          if (!std::isfinite(t.as<float>()[k])) s.note = "output " + std::to_string(o) + " is not finite (the padded rows?)";
      outs.emplace_back(static_cast<const uint8_t*>(t.data), static_cast<const uint8_t*>(t.data) + t.nbytes());
    }
    if (poison == 0x00) first = std::move(outs);
    else if (outs != first) s.problem = "outputs differ between two runs over different arena contents: a bucket reads memory it did not write";
  }
  s.ok = s.problem.empty();
  return s;
}

// kiln sweep of a bucketed method: every bucket swept as a method of its own, then the
// dispatch between them (each bucket's size, one above it, random sizes, and above the largest).
Result<SweepResult> sweep_buckets(const Program& program, const SweepOptions& opts) {
  MethodOptions on;
  on.check_finite_inputs = opts.check_finite_inputs;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<BucketedMethod> b, BucketedMethod::create(program, opts.method_name, on));
  const BucketSpec spec = b->spec();
  SweepResult result;
  for (const std::string& name : spec.bucket_methods) {
    SweepOptions one = opts;
    one.method_name = name;
    KILN_ASSIGN_OR_RETURN(SweepResult r, sweep(program, one));
    for (SweepSample& s : r.samples) s.shapes = name + ": " + s.shapes, result.samples.push_back(std::move(s));
    for (const std::string& c : r.corners_moved) result.corners_moved.push_back(name + ": " + c);
    result.skipped_by_guards += r.skipped_by_guards;
  }
  std::mt19937_64 rng(opts.seed);
  const MethodMeta& meta = b->bucket(spec.sizes.size() - 1)->meta();
  for (int64_t size : dispatch_sizes(spec.sizes, opts.samples / 2, rng)) {
    std::vector<int64_t> values;  // the bucket's other dims, each at a random value of its grid
    for (const DimSpec& d : meta.dims)
      values.push_back(lowest(d) + static_cast<int64_t>(rng() % static_cast<uint64_t>((highest(d) - lowest(d)) / d.step + 1)) * d.step);
    std::vector<std::vector<int64_t>> shapes;
    for (const TensorSpec& t : meta.inputs) {
      std::vector<int64_t> s;
      for (const AxisSpec& a : t.axes) s.push_back(a.dim >= 0 ? values[static_cast<size_t>(a.dim)] : a.size);
      shapes.push_back(s);
    }
    for (const BucketSpec::Axis& a : spec.inputs) shapes[static_cast<size_t>(a.index)][static_cast<size_t>(a.axis)] = size;
    SweepSample s = run_dispatch(*b, shapes, size, opts.seed + static_cast<uint64_t>(size));
    s.shapes = "dispatch " + spec.dim + "=" + std::to_string(size) + ": " + s.shapes;
    result.samples.push_back(std::move(s));
  }
  return result;
}

}  // namespace

Result<SweepResult> sweep(const Program& program, const SweepOptions& opts) {
  if (!program.method_meta(opts.method_name).ok() && BucketedMethod::has_buckets(program, opts.method_name))
    return sweep_buckets(program, opts);
  MethodOptions on;
  on.check_finite_inputs = opts.check_finite_inputs;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Method> m, Method::create(program, opts.method_name, on));
  std::unique_ptr<Method> portable;
  PortablePath path;
  if (m->delegated()) {
    MethodOptions off;
    off.use_delegate = false;
    KILN_ASSIGN_OR_RETURN(portable, Method::create(program, opts.method_name, off));
    path = {portable.get(), path_tolerance(program, opts.method_name)};
  }
  const MethodMeta& meta = m->meta();
  std::mt19937_64 rng(opts.seed);
  auto shapes_for = [&](const std::vector<int64_t>& dim_values) {
    std::vector<std::vector<int64_t>> shapes;
    for (const TensorSpec& t : meta.inputs) {
      std::vector<int64_t> s;
      for (const AxisSpec& a : t.axes) s.push_back(a.dim >= 0 ? dim_values[a.dim] : a.size);
      shapes.push_back(s);
    }
    return shapes;
  };
  SweepResult result;
  // Random draws that fail a guard are redrawn; a corner (all-min, all-max) that fails
  // one is skipped and counted.
  std::vector<std::vector<int64_t>> draws = dim_draws(meta.dims, opts.samples, rng);
  for (size_t k = 0; k < 2; ++k) {  // corners: the nearest admissible shape inward
    if (m->bind_shapes(shapes_for(draws[k])).ok()) continue;
    std::vector<int64_t> moved = nearest_corner(*m, draws[k], k == 0 ? 1 : -1, 4096, shapes_for);
    if (moved.empty()) continue;  // skipped and counted below
    std::string from, to;
    for (const auto& s : shapes_for(draws[k])) from += (from.empty() ? "" : ",") + shape_string(s);
    for (const auto& s : shapes_for(moved)) to += (to.empty() ? "" : ",") + shape_string(s);
    result.corners_moved.push_back(std::string(k == 0 ? "all-min " : "all-max ") + from + " -> " + to);
    draws[k] = moved;
  }
  for (size_t k = 0; k < draws.size(); ++k) {
    std::vector<std::vector<int64_t>> shapes = shapes_for(draws[k]);
    Status contract = m->bind_shapes(shapes);
    int attempts = 0;
    while (!contract.ok() && contract.reason() == Reason::kGuardFailed && attempts < 50 && k >= 2) {
      std::vector<int64_t> repaired = repair_draw(*m, draws[k], shapes_for);
      if (!repaired.empty()) {
        draws[k] = repaired;
        shapes = shapes_for(draws[k]);
        contract = m->bind_shapes(shapes);
        break;
      }
      ++result.skipped_by_guards;
      for (size_t d = 0; d < meta.dims.size(); ++d) {
        const DimSpec& ds = meta.dims[d];
        int64_t count = (highest(ds) - lowest(ds)) / ds.step + 1;
        draws[k][d] = lowest(ds) + static_cast<int64_t>(rng() % static_cast<uint64_t>(count)) * ds.step;
      }
      shapes = shapes_for(draws[k]);
      contract = m->bind_shapes(shapes);
      ++attempts;
    }
    if (!contract.ok() && contract.reason() == Reason::kGuardFailed) {
      ++result.skipped_by_guards;
      continue;  // no admissible shape near this draw (e.g. the all-min corner)
    }
    result.samples.push_back(run_sample(*m, path, shapes, opts.seed + k));
  }
  std::vector<std::vector<std::vector<int64_t>>> corners;
  for (size_t k : {1, 0})  // the bound is reachable at the largest shapes
    if (m->bind_shapes(shapes_for(draws[k])).ok()) corners.push_back(shapes_for(draws[k]));
  drive_counts(*m, path, corners, opts.seed + 1000, &result);
  result.counts = count_coverage(meta, result.samples);
  return result;
}

nlohmann::json sweep_json(const SweepResult& r) {
  nlohmann::json j;
  j["samples"] = nlohmann::json::array();
  for (const SweepSample& s : r.samples)
    j["samples"].push_back({{"input_shapes", s.shapes}, {"ok", s.ok}, {"problem", s.problem}, {"note", s.note}, {"ms", s.ms},
                            {"input_scale", s.drive.scale}, {"input_offset", s.drive.offset}, {"counts", s.counts}});
  j["failures"] = r.failures();
  j["counts"] = nlohmann::json::array();
  for (const CountCoverage& c : r.counts)
    j["counts"].push_back({{"dim", c.dim}, {"bound", c.bound}, {"seen", std::vector<int64_t>(c.seen.begin(), c.seen.end())},
                           {"zero", c.zero()}, {"one", c.one()}, {"some", c.some()}, {"bound_reached", c.at_bound()}});
  j["skipped_by_guards"] = r.skipped_by_guards;
  j["corners_moved"] = r.corners_moved;
  return j;
}

std::string sweep_text(const SweepResult& r) {
  std::ostringstream o;
  for (const std::string& c : r.corners_moved) o << "corner " << c << " (the nearest shape the contract admits)\n";
  for (const SweepSample& s : r.samples) {
    o << (s.ok ? "ok    " : "FAIL  ") << s.shapes;
    if (!s.drive.identity()) o << " [inputs x*" << s.drive.scale << (s.drive.offset < 0 ? "" : "+") << s.drive.offset << "]";
    if (s.ok) o << "  " << s.ms << " ms" << (s.note.empty() ? "" : "  note: " + s.note);
    else o << "  " << s.problem;
    if (!s.counts.empty()) {
      o << "  counts";
      for (int64_t c : s.counts) o << " " << c;
    }
    o << "\n";
  }
  for (const CountCoverage& c : r.counts) {
    o << "count " << c.dim << " (at most " << c.bound << "): seen";
    size_t shown = 0;
    for (int64_t v : c.seen) o << (shown++ < 12 ? " " + std::to_string(v) : shown == 13 ? " ..." : "");
    std::string missing;
    if (!c.zero()) missing += " none";
    if (!c.one()) missing += " one";
    if (!c.some()) missing += " some";
    if (!c.at_bound()) missing += " the bound";
    o << (missing.empty() ? "; none, one, some and the bound all ran" : ";  never reached:" + missing) << "\n";
  }
  o << r.samples.size() - static_cast<size_t>(r.failures()) << " passed, " << r.failures() << " failed";
  if (r.skipped_by_guards) o << " (" << r.skipped_by_guards << " random draws redrawn because a guard refused them)";
  o << "\n";
  return o.str();
}

}  // namespace kiln::tooling
