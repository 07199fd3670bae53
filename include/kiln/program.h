#pragma once
// Loading a .kiln program and reading its shape contract. No FlatBuffers types leak out.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/dim.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln {

/// One axis of a signature: static (size >= 0, dim == -1), a Dim (dim >= 0), or for
/// outputs possibly an expression over dims (size == -1, dim == -1). `text` reads "224",
/// "H" or "ceildiv(H,2)".
struct AxisSpec {
  int64_t size = -1;
  int dim = -1;
  std::string text;
};

/// Name, dtype and per-axis contract of an input or output.
struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<AxisSpec> axes;
  std::vector<int64_t> example_shape;  ///< inputs: the shape the program was exported from
  /// "[batch, 3, H, W]"
  std::string shape_text() const;
};

/// A shape relation checked at bind, with the node that needed it.
struct GuardSpec {
  std::string text;  ///< "H % 32 == 0"
  std::string node_name;
  std::string op_type;
  std::string context;
};

/// The delegated schedule of a method, as export planned it: the coverage summary. Which
/// instructions it declined, and why, is in tooling's method report (kiln inspect).
struct DelegateMeta {
  std::string backend;            ///< "xnnpack"; empty when the method has no delegate
  size_t regions = 0;
  size_t delegated_instructions = 0;  ///< of MethodMeta::num_instructions
  size_t declined_instructions = 0;   ///< the delegate could take their kind of op, not these
  uint64_t flops = 0;                 ///< all instructions, at the bound
  uint64_t delegated_flops = 0;
  uint32_t layout_changes = 0;
  uint64_t integer_flops = 0;      ///< instructions computing in integers (int8 kernels), at the bound
  uint64_t arena_bytes = 0;        ///< the arena when the delegate runs
  uint64_t lower_bound_bytes = 0;
};

/// A method's contract and what running it takes: dims, inputs, outputs, guards, memory and
/// delegate coverage. Instruction-level detail (ops, nodes, fusions, branches) is for tools:
/// tooling::method_report (kiln inspect --instructions, Python's Method.report()).
struct MethodMeta {
  std::string name;
  std::vector<DimSpec> dims;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<GuardSpec> guards;
  uint64_t arena_bytes = 0;        ///< planned arena at the bound
  uint64_t lower_bound_bytes = 0;  ///< max live bytes over instructions
  uint64_t constant_bytes = 0;     ///< bytes of constants this method references
  size_t num_instructions = 0;
  DelegateMeta delegate;
};

/// How much of a file load checks. The header and program section are always checked
/// (structure and CRC-32C checksums: small); the constant segment's checksum costs a pass over
/// the weights (0.14-0.18 ms per MB here, bench/crc_bench.cc), so an app that maps a large file
/// and wants to start at once may defer it to Program::verify_constants().
struct LoadOptions {
  bool verify_constants = true;
};

/// A loaded, verified program. Owns its mapping (load) or borrows the caller's buffer
/// (load_buffer). Constants are never copied.
///
/// Threads: a Program is immutable after load. Every const member may be called from any
/// number of threads at once, and any number of Methods, on any threads, may be created from
/// one Program and run concurrently (each Method has its own arena and state; they share the
/// read-only weights). A Program must outlive every Method created from it.
class Program {
 public:
  /// Maps the file read-only and verifies it. Errors: kIoError (cannot open or map), kDataLoss
  /// (not a .kiln program, damaged, or a format version this runtime does not read).
  static Result<std::unique_ptr<Program>> load(const std::string& path, const LoadOptions& options = {});
  /// Verifies `size` bytes at `data` (8-byte aligned); the caller keeps them alive and
  /// unchanged for the Program's lifetime.
  static Result<std::unique_ptr<Program>> load_buffer(const void* data, size_t size, const LoadOptions& options = {});
  /// Checks the constant segment against the checksum export stored (the check load skipped
  /// with LoadOptions::verify_constants = false). kDataLoss when the weights changed.
  Status verify_constants() const;
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  size_t num_methods() const;
  /// Name of method i; "" when i >= num_methods().
  std::string method_name(size_t i) const;
  /// Metadata of the named method; kNotFound lists the available names.
  Result<MethodMeta> method_meta(const std::string& name) const;
  /// Size of the constant segment.
  uint64_t constant_bytes() const;
  /// The file's format version (KILN_FORMAT_VERSION: load refuses any other).
  uint32_t format_version() const;

 private:
  friend struct ProgramAccess;  // the runtime's own access (src/runtime/program_impl.h)
  struct Impl;
  explicit Program(std::unique_ptr<Impl> impl);
  static Result<std::unique_ptr<Program>> load_file(const std::string& path, const LoadOptions& options);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
