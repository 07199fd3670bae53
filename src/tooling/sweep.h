#pragma once
// kiln sweep: run a program at many shapes inside its contract, because bugs hide below the
// bound. Each sample runs twice over an arena filled with different garbage (0xFF, then
// 0x00); the outputs must be finite and bit-identical, which proves the kernels neither read
// memory they did not write nor depend on stale data from a larger earlier shape. A delegated
// method is also compared with the portable path of the same file at every sample. A method
// with data-dependent counts also runs with its float inputs scaled and shifted, to drive the
// post-processing through none, one, some and the bound.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/program.h"
#include "kiln/status.h"

namespace kiln::tooling {

struct SweepOptions {
  std::string method_name = "forward";
  int samples = 20;  ///< besides the all-min and all-max samples
  uint64_t seed = 1;
  /// The delegated Method's MethodOptions::check_finite_inputs. Each sample also runs with a
  /// NaN in its first float input; with the check the delegated path refuses it, without it
  /// the delegate runs and must give the portable path's outputs (NaN where they have NaN), so
  /// `false` shows what the delegate does to a NaN (and fails the sweep when it hides one).
  bool check_finite_inputs = true;
};

/// Float inputs as x * scale + offset: drives a model's data-dependent counts (scores over a
/// threshold, boxes NMS keeps) through none, one, some and the bound.
struct InputDrive {
  float scale = 1.f, offset = 0.f;
  bool identity() const { return scale == 1.f && offset == 0.f; }
};

struct SweepSample {
  std::string shapes;  ///< "1x3x24x40,..."
  InputDrive drive;
  bool ok = false;
  std::string problem;  ///< why not ok
  std::string note;     ///< ok, but worth saying (the model itself computes a NaN or inf here)
  double ms = 0;
  std::vector<int64_t> counts;  ///< the data-dependent dims' values after the run (MethodMeta::dims order)
};

/// What the sweep saw of one data-dependent dim over every sample.
struct CountCoverage {
  std::string dim;
  int64_t bound = 0;
  std::set<int64_t> seen;
  bool zero() const { return seen.count(0) > 0; }
  bool one() const { return seen.count(1) > 0; }
  bool some() const { return seen.lower_bound(2) != seen.end() && *seen.lower_bound(2) < bound; }
  bool at_bound() const { return seen.count(bound) > 0; }
};

struct SweepResult {
  std::vector<SweepSample> samples;
  int skipped_by_guards = 0;  ///< random draws that failed a guard (not admissible)
  /// Corners a guard refused, and the admissible shape run instead: "all-min 1x5,... -> 1x6,..."
  std::vector<std::string> corners_moved;
  /// Per data-dependent dim (NonZero, TopK's K from the data, NMS...), the counts reached.
  /// Besides the random samples, the all-min and all-max shapes run again with their float
  /// inputs scaled and shifted (InputDrive) to reach none, one, some and the bound.
  std::vector<CountCoverage> counts;
  int failures() const {
    int n = 0;
    for (const auto& s : samples) n += s.ok ? 0 : 1;
    return n;
  }
};

/// Samples admissible shapes (every dim at its min, at its max, then random values on its
/// step grid, redrawing those that fail a guard) and runs each one. A corner a guard (or an
/// empty size) refuses moves to the nearest admissible shape inward, fewest steps first: the
/// contract's real minimum and maximum.
Result<SweepResult> sweep(const Program& program, const SweepOptions& opts);
nlohmann::json sweep_json(const SweepResult& r);
std::string sweep_text(const SweepResult& r);

}  // namespace kiln::tooling
