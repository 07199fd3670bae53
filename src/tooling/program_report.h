#pragma once
// What a method holds beyond its contract, for tools (kiln inspect, Python's Method.report):
// every instruction with its node, what export fused into it and its output shapes; runtime
// branches and loops; the plan's strategy; what the delegate declined and why. Read from the
// file on demand: the runtime's MethodMeta keeps only the contract and the summary an app
// needs (dims, inputs, outputs, guards, arena, coverage), and Method::create builds nothing
// of this.
//
// Built into its own library (kiln_report: the runtime and nothing of export), so Python's
// runtime module links it without the exporter.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "kiln/program.h"
#include "kiln/status.h"

namespace kiln::tooling {

struct InstructionReport {
  std::string op;    ///< "Conv"
  std::string node;  ///< the model's node it computes
  std::vector<std::string> fused_from;  ///< the model's nodes export fused into it (empty for most)
  std::string outputs;  ///< its outputs' dtypes and symbolic shapes: "f32 [batch, 1280]"
};

/// A runtime branch (an ONNX If whose condition is read at execute) or, with `loop`, a runtime
/// loop (then_* is its body, else_* empty, `trip` its trip count as an expression of the dims).
struct BranchReport {
  std::string node;
  size_t then_begin = 0, then_end = 0, else_begin = 0, else_end = 0;  ///< instruction ranges [begin, end)
  bool loop = false;
  std::string trip;
};

/// A quantized value (an 8-bit operand of a quantized instruction) and its quantization:
/// "scale 0.0235", "scale per channel: 32 values in [0.001, 0.02]", "scale computed at run time".
struct QuantizedValueReport {
  std::string name, type;  ///< type: "i8 [batch, 32, H, W]"
  std::string scale, zero_point;
};

struct MethodReport {
  std::vector<InstructionReport> instructions;
  std::vector<BranchReport> branches;
  std::string plan_strategy;  ///< how the arena was planned
  size_t num_values = 0;
  /// Instructions the delegate declined: (instruction index, reason).
  std::vector<std::pair<size_t, std::string>> declined;
  /// Each quantized value once, in instruction order.
  std::vector<QuantizedValueReport> quantized;
};

/// The report of method `name`; kNotFound lists the methods there are.
Result<MethodReport> method_report(const Program& program, const std::string& name);

}  // namespace kiln::tooling
