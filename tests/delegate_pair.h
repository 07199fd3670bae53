#pragma once
// One program run twice, delegated and portable, on the same inputs: what the
// delegate-against-portable tests of a fused or in-place step share.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "aligned_bytes.h"
#include "random_graph.h"
#include "format/program_desc.h"
#include "kiln/method.h"
#include "kiln/program.h"
#include "runtime/program_impl.h"

namespace kiln::testing {

struct DelegatePair {
  explicit DelegatePair(const format::ProgramDesc& desc) : image(*format::serialize_program(desc)) {}

  /// Loads the program and makes both methods (the delegated one takes NaN inputs:
  /// check_finite_inputs off, and runs on `threads`); "" when both are made and the delegate took the method.
  std::string make(int threads = 1) {
    auto p = image.load();
    if (!p.ok()) return p.status().message();
    program = std::move(*p);
    MethodOptions off;
    off.use_delegate = false;
    MethodOptions on;
    on.check_finite_inputs = false;
    on.cpu_threads = threads;
    auto d = Method::create(*program, "forward", on);
    auto r = Method::create(*program, "forward", off);
    if (!d.ok() || !r.ok()) return "Method::create failed";
    delegated = std::move(*d);
    portable = std::move(*r);
    return delegated->delegated() ? "" : "not delegated: " + delegated->delegate_warning();
  }

  /// Binds both to `shape`, fills the delegated arena with 0xFF bytes (NaN floats: what no step
  /// wrote shows), both inputs from N(0, 1.5) with `seed`, a NaN at float `nan_at` when it is
  /// not negative, and executes both; "" or what failed.
  std::string run(const std::vector<int64_t>& shape, uint32_t seed, int64_t nan_at) {
    if (!delegated->bind_shapes({shape}).ok() || !portable->bind_shapes({shape}).ok()) return "bind failed";
    MethodAccess::fill_arena(*delegated, 0xFF);
    fill_normal(delegated->input(0), seed);
    fill_normal(portable->input(0), seed);
    if (nan_at >= 0) {
      TensorView di = delegated->input(0), pi = portable->input(0);
      di.as<float>()[nan_at] = pi.as<float>()[nan_at] = NAN;
    }
    Status ds = delegated->execute();
    if (!ds.ok()) return "delegated: " + ds.message();
    Status ps = portable->execute();
    return ps.ok() ? "" : "portable: " + ps.message();
  }

  AlignedBytes image;
  std::unique_ptr<Program> program;
  std::unique_ptr<Method> delegated, portable;
};

}  // namespace kiln::testing
