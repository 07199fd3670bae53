#pragma once
// Host-side description of a program, written by export and serialized by the writer.
// Plain C++ types: nothing here depends on FlatBuffers.

#include <map>
#include <string>
#include <vector>

#include "core/attr_store.h"
#include "core/symexpr.h"
#include "kernels/kernel.h"
#include "kiln/tensor.h"

namespace kiln::format {

enum class Storage : uint8_t { kConstant = 0, kArena = 1, kInput = 2, kOutput = 3, kAlias = 4, kDelegate = 5 };
const char* storage_name(Storage s);

struct ValueDesc {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<core::ExprId> shape;
  Storage storage = Storage::kArena;
  uint64_t offset = 0;  ///< arena offset or constant-segment offset
  uint64_t nbytes = 0;  ///< at the bound (planned) or exact (constant)
  int32_t alias_of = -1;
  std::vector<int64_t> example_shape;  ///< inputs only
  int32_t nhwc_of = -1;  ///< kDelegate: holds value nhwc_of channels-last
};

struct InstructionDesc {
  std::string op;
  std::string node_name;
  std::vector<int32_t> inputs;  ///< -1 for an omitted optional operand
  std::vector<int32_t> outputs;
  core::AttrStore attrs;
  int32_t scratch = -1;  ///< value id of the scratch slot, or -1
  std::vector<std::string> fused_from;  ///< the model's nodes a fused instruction replaces
};

/// See schema/program.fbs (DelegateOp, DelegateRegion, Delegate).
enum class DelegateOpKind : uint8_t { kKernel = 0, kToNhwc = 1, kToNchw = 2 };
struct DelegateOpDesc {
  DelegateOpKind kind = DelegateOpKind::kKernel;
  int32_t source = -1;
  int32_t fused = -1;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  int32_t gate = -1;  ///< a convolution's gate activation (fused is then the gate's Mul)
  int32_t into = -1;  ///< the Concat output whose channel slice the op may write (schema)
  int32_t clamp = -1; ///< a Relu/Clip after a fused bias Add, folded into the output clamp (schema)
};
struct DelegateRegionDesc {
  int32_t first = 0;
  int32_t count = 0;
  std::vector<DelegateOpDesc> ops;
};
struct DeclinedDesc {
  int32_t instruction = 0;
  std::string reason;
};
/// A plan's placement at any shape (see MemoryPlan in schema/program.fbs): per value, the
/// values it sits above. Empty: the plan's offsets are fixed.
struct PlacementDesc {
  std::vector<uint32_t> below_start;  ///< values + 1 entries
  std::vector<int32_t> below;
  std::vector<int32_t> order;  ///< the planned values, in (bound offset, index) order
};

struct DelegateDesc {
  std::string backend;  ///< empty: the method has no delegate
  std::vector<DelegateRegionDesc> regions;
  uint64_t arena_bytes = 0;
  uint64_t lower_bound_bytes = 0;
  std::string plan_strategy;
  std::vector<uint64_t> offsets;  ///< per value
  PlacementDesc placement;
  std::vector<DeclinedDesc> declined;
  uint64_t flops = 0;
  uint64_t delegated_flops = 0;
  uint32_t layout_changes = 0;
  uint64_t integer_flops = 0;  ///< instructions computing in integers (int8 kernels), at the bound
};

/// See Bucket in schema/program.fbs; empty `of`: not a bucket.
struct BucketDesc {
  std::string of;
  std::string dim;
  int64_t size = 0;
  std::vector<int32_t> input_axes;   ///< pairs (input, axis)
  std::vector<double> pads;          ///< per input
  std::vector<int32_t> output_axes;  ///< pairs (output, axis)
};

struct MethodDesc {
  std::string name = "forward";
  std::vector<DimSpec> dims;
  std::vector<core::ExprNode> exprs;
  std::vector<kernels::Guard> guards;
  std::vector<ValueDesc> values;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<InstructionDesc> instructions;
  uint64_t arena_bytes = 0;
  uint64_t lower_bound_bytes = 0;
  std::string plan_strategy;
  PlacementDesc placement;
  DelegateDesc delegate;
  BucketDesc bucket;
};

struct ProgramDesc {
  std::vector<MethodDesc> methods;
  /// The constant segment; each ValueDesc with kConstant storage points into it.
  std::vector<uint8_t> constants;
  std::string producer = "kiln";
  /// Where each constant blob already in `constants` starts, by (checksum, size): emit shares
  /// equal blobs (tied weights, the same weights in several buckets) instead of copying them.
  std::multimap<std::pair<uint32_t, uint64_t>, uint64_t> constant_index;
};

/// Serializes to the .kiln byte layout (header, FlatBuffer, aligned constant segment).
Result<std::vector<uint8_t>> serialize_program(const ProgramDesc& desc);
/// Recomputes the three checksums of the .kiln image [file, file + size) from where its header
/// says the segments are (a segment outside the image gets checksum 0). serialize_program
/// seals what it writes; tests and fuzzers seal images they damage on purpose, so the checks
/// behind the checksums are reached. Needs size >= kHeaderSize.
void seal_checksums(uint8_t* file, size_t size);

}  // namespace kiln::format
