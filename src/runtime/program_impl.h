#pragma once
// Internals shared by Program and Method (not part of the public API).

#include <string>
#include <vector>

#include "core/symexpr.h"
#include "format/reader.h"
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
