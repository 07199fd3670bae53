#pragma once
// Internals shared by Program and Method (not part of the public API).

#include <string>
#include <vector>

#include "core/symexpr.h"
#include "format/reader.h"
#include "kiln/method.h"
#include "kiln/program.h"

namespace kiln {

struct Program::Impl {
  void* map_base = nullptr;  ///< non-null when load() mapped the file
  size_t map_size = 0;
  format::ProgramFile file;
  std::string path;

  const fb::Method* find_method(const std::string& name) const;
  std::string method_names() const;
};

/// The runtime's (and tests') way to the file behind a Program: not part of the public API.
struct ProgramAccess {
  using Impl = Program::Impl;
  static const Impl& impl(const Program& p) { return *p.impl_; }
  /// Start of the constant segment (inside the mapping): tests check that nothing was copied.
  static const void* constant_data(const Program& p) { return p.impl_->file.constants; }
};

/// Tools' and tests' access to a Method beyond the public API.
struct MethodAccess {
  /// Overwrites every byte of the arena (inputs included) with `byte`: tools prove with it that
  /// a program never reads memory it did not write (kiln sweep); write the inputs afterwards.
  static void fill_arena(Method& m, uint8_t byte);
  /// The most bytes alive at one step at the bound-to shapes: no arena for them can be
  /// smaller. Allocates (for tools and reports, not for the hot path).
  static uint64_t live_lower_bound_bytes(const Method& m);
  /// Binds to `shapes` (bind_shapes) and returns the arena bytes the values take there
  /// (arena_bytes_in_use): what a program placing by shape needs at those shapes.
  static Result<uint64_t> arena_bytes_for(Method& m, const std::vector<std::vector<int64_t>>& shapes);
  /// Whether the last execute ran the instruction that finds data-dependent dim `name` (one in
  /// a branch's block not taken did not: its dim_value is then only its bound).
  static bool data_dim_found(const Method& m, const std::string& name);
};

namespace runtime {
/// Copies the expression table out of the FlatBuffer.
std::vector<core::ExprNode> load_exprs(const fb::Method* m);
std::vector<std::string> load_dim_names(const fb::Method* m);
/// Metadata for one verified method.
MethodMeta build_meta(const fb::Method* m, const format::ProgramFile& file);
/// "H % 32 == 0"
std::string guard_text(const fb::Guard* g, const std::vector<core::ExprNode>& exprs,
                       const std::vector<std::string>& dim_names);
}  // namespace runtime

}  // namespace kiln
