#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "core/oom.h"
#include "kiln/version.h"
#include "runtime/program_impl.h"
#include "core/status.h"

namespace kiln {
namespace {
struct Unmap {
  size_t size;
  void operator()(void* base) const { munmap(base, size); }
};
}  // namespace

std::string TensorSpec::shape_text() const {
  std::string s = "[";
  for (size_t k = 0; k < axes.size(); ++k) s += (k ? ", " : "") + axes[k].text;
  return s + "]";
}

const fb::Method* Program::Impl::find_method(const std::string& name) const {
  for (const fb::Method* m : *file.program->methods())
    if (m->name()->str() == name) return m;
  return nullptr;
}

std::string Program::Impl::method_names() const {
  std::string s;
  for (const fb::Method* m : *file.program->methods()) s += (s.empty() ? "'" : ", '") + m->name()->str() + "'";
  return s;
}

namespace runtime {

std::vector<core::ExprNode> load_exprs(const fb::Method* m) {
  std::vector<core::ExprNode> out;
  if (!m->exprs()) return out;
  for (const fb::ExprNode* e : *m->exprs())
    out.push_back(core::ExprNode{static_cast<core::ExprOp>(e->op()), e->a(), e->b(), e->value()});
  return out;
}

std::vector<std::string> load_dim_names(const fb::Method* m) {
  std::vector<std::string> names;
  if (m->dims())
    for (const fb::Dim* d : *m->dims()) names.push_back(d->name()->str());
  return names;
}

std::string guard_text(const fb::Guard* g, const std::vector<core::ExprNode>& exprs,
                       const std::vector<std::string>& names) {
  std::string l = core::format_expr(exprs.data(), exprs.size(), names, g->lhs());
  std::string r = core::format_expr(exprs.data(), exprs.size(), names, g->rhs());
  static_assert(static_cast<int>(fb::GuardOp::Eq) == static_cast<int>(core::ExprPool::Relation::kEq) &&
                    static_cast<int>(fb::GuardOp::Ge) == static_cast<int>(core::ExprPool::Relation::kGe) &&
                    static_cast<int>(fb::GuardOp::Divisible) == static_cast<int>(core::ExprPool::Relation::kDivisible),
                "the file's guard ops are the pool's relations");
  return core::relation_text(l, static_cast<core::ExprPool::Relation>(g->op()), r);
}

namespace {
TensorSpec tensor_spec(const fb::Method* m, int32_t value_id, const std::vector<core::ExprNode>& exprs,
                       const std::vector<std::string>& names) {
  const fb::Value* v = m->values()->Get(value_id);
  TensorSpec t;
  t.name = v->name() ? v->name()->str() : "";
  t.dtype = static_cast<DType>(v->dtype());
  if (v->shape()) {
    for (int32_t e : *v->shape()) {
      AxisSpec a;
      if (exprs[e].op == core::ExprOp::kConst) a.size = exprs[e].value;
      if (exprs[e].op == core::ExprOp::kDim) a.dim = exprs[e].a;
      a.text = core::format_expr(exprs.data(), exprs.size(), names, e);
      t.axes.push_back(a);
    }
  }
  if (v->example_shape()) t.example_shape.assign(v->example_shape()->begin(), v->example_shape()->end());
  return t;
}
}  // namespace

MethodMeta build_meta(const fb::Method* m, const format::ProgramFile& file) {
  MethodMeta meta;
  std::vector<core::ExprNode> exprs = load_exprs(m);
  std::vector<std::string> names = load_dim_names(m);
  meta.name = m->name()->str();
  if (m->dims())
    for (const fb::Dim* d : *m->dims()) meta.dims.push_back(DimSpec{d->name()->str(), d->min(), d->max(), d->step(), d->data()});
  if (m->inputs())
    for (int32_t id : *m->inputs()) meta.inputs.push_back(tensor_spec(m, id, exprs, names));
  if (m->outputs())
    for (int32_t id : *m->outputs()) meta.outputs.push_back(tensor_spec(m, id, exprs, names));
  if (m->guards()) {
    for (const fb::Guard* g : *m->guards()) {
      meta.guards.push_back(GuardSpec{guard_text(g, exprs, names), g->node_name() ? g->node_name()->str() : "",
                                      g->op_type() ? g->op_type()->str() : "", g->context() ? g->context()->str() : ""});
    }
  }
  meta.arena_bytes = m->plan()->arena_bytes();
  meta.lower_bound_bytes = m->plan()->lower_bound_bytes();
  if (m->values())
    for (const fb::Value* v : *m->values())
      if (v->storage() == fb::StorageKind::Constant) meta.constant_bytes += v->nbytes();
  meta.num_instructions = m->instructions() ? m->instructions()->size() : 0;
  (void)file;
  if (const fb::Delegate* d = m->delegate()) {
    DelegateMeta& dm = meta.delegate;
    dm.backend = d->backend()->str();
    dm.regions = d->regions() ? d->regions()->size() : 0;
    if (d->regions())
      for (const fb::DelegateRegion* r : *d->regions()) dm.delegated_instructions += static_cast<size_t>(r->count());
    dm.flops = d->flops();
    dm.delegated_flops = d->delegated_flops();
    dm.layout_changes = d->layout_changes();
    dm.integer_flops = d->integer_flops();
    dm.arena_bytes = d->plan()->arena_bytes();
    dm.lower_bound_bytes = d->plan()->lower_bound_bytes();
    dm.declined_instructions = d->declined() ? d->declined()->size() : 0;
  }
  return meta;
}

}  // namespace runtime

Program::Program(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Program::~Program() {
  if (impl_ && impl_->map_base) munmap(impl_->map_base, impl_->map_size);
}

Result<std::unique_ptr<Program>> Program::load(const std::string& path, const LoadOptions& options) {
  return core::returning_oom([&] { return load_file(path, options); });
}

Result<std::unique_ptr<Program>> Program::load_file(const std::string& path, const LoadOptions& options) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open program '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return io_error("cannot stat '" + path + "': " + std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return io_error("cannot load '" + path + "': it is a directory, not a .kiln program file");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error("cannot load '" + path + "': not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return data_loss("not a .kiln program: '" + path + "' is empty");
  }
  void* base = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (base == MAP_FAILED) return io_error("cannot map '" + path + "': " + std::strerror(err));
  // Owned from here on: unmapped on every way out, an allocation failure's unwinding included.
  std::unique_ptr<void, Unmap> mapping(base, Unmap{size});
  Result<format::ProgramFile> file = format::read_program(static_cast<const uint8_t*>(base), size, options.verify_constants);
  if (!file.ok()) return file.status().with_prefix("load '" + path + "': ");
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->file = *file;
  std::unique_ptr<Program> program(new Program(std::move(impl)));
  program->impl_->map_base = mapping.release();
  program->impl_->map_size = size;
  return program;
}

Result<std::unique_ptr<Program>> Program::load_buffer(const void* data, size_t size, const LoadOptions& options) {
  if (reinterpret_cast<uintptr_t>(data) % 8 != 0)
    return invalid_argument("load: program buffer must be 8-byte aligned");
  return core::returning_oom([&]() -> Result<std::unique_ptr<Program>> {
    KILN_ASSIGN_OR_RETURN(format::ProgramFile file,
                          format::read_program(static_cast<const uint8_t*>(data), size, options.verify_constants));
    auto impl = std::make_unique<Impl>();
    impl->file = file;
    return std::unique_ptr<Program>(new Program(std::move(impl)));
  });
}

Status Program::verify_constants() const { return format::verify_constants(impl_->file); }

size_t Program::num_methods() const { return impl_->file.program->methods()->size(); }

std::string Program::method_name(size_t i) const {
  return i < num_methods() ? impl_->file.program->methods()->Get(i)->name()->str() : std::string();
}

Result<MethodMeta> Program::method_meta(const std::string& name) const {
  const fb::Method* m = impl_->find_method(name);
  if (!m) return not_found("no method '" + name + "' in the program; it has " + impl_->method_names());
  return runtime::build_meta(m, impl_->file);
}

uint64_t Program::constant_bytes() const { return impl_->file.constants_size; }
uint32_t Program::format_version() const { return impl_->file.format_version; }

const char* version() { return KILN_VERSION_STRING; }
uint32_t format_version() { return KILN_FORMAT_VERSION; }

}  // namespace kiln
