#include "delegates/backend.h"

#include "delegates/xnnpack/delegate.h"
#include "core/status.h"

namespace kiln::delegates {
namespace {

struct Entry {
  const char* name;
  BackendFactory make;
};

// Every backend linked into the runtime, by the name export writes into the file.
constexpr Entry kBackends[] = {
    {"xnnpack", &xnnpack::create_backend},
};

}  // namespace

Result<std::unique_ptr<Backend>> create_backend(const BackendContext& ctx) {
  const fb::Delegate* d = ctx.method ? ctx.method->delegate() : nullptr;
  if (!d) return failed_precondition("the method has no delegate");
  const std::string name = d->backend()->str();
  for (const Entry& e : kBackends)
    if (name == e.name) return e.make(ctx);
  std::string known;
  for (const Entry& e : kBackends) known += (known.empty() ? "" : ", ") + std::string(e.name);
  return unimplemented("unknown delegate backend '" + name + "' (this runtime has " + known + ")");
}

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const Entry& e : kBackends) names.push_back(e.name);
  return names;
}

}  // namespace kiln::delegates
