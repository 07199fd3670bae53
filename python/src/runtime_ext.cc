// kiln._kiln: the runtime's Python extension (nanobind). A thin layer over the C++ API:
// Program and Method objects, the contract as plain Python values (kiln/__init__.py turns
// them into Dim and TensorInfo objects), numpy arrays in and out. Links the runtime only; the
// exporter is the separate kiln._kiln_export. Contract errors raise kiln.ContractError (a
// ValueError) with the runtime's message, word for word (errors.h).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/bucketed.h"
#include "kiln/method.h"
#include "kiln/program.h"
#include "runtime/program_impl.h"
#include "tooling/program_report.h"
#include "errors.h"

namespace nb = nanobind;

namespace kiln::python {
namespace {

const char* numpy_dtype(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kI64: return "int64";
    case DType::kI32: return "int32";
    case DType::kBool: return "bool";
    case DType::kI8: return "int8";
    case DType::kU8: return "uint8";
  }
  return "unknown";
}

bool dtype_matches(DType t, const nb::dlpack::dtype& d) {
  switch (t) {
    case DType::kF32: return d == nb::dtype<float>();
    case DType::kI64: return d == nb::dtype<int64_t>();
    case DType::kI32: return d == nb::dtype<int32_t>();
    case DType::kBool: return d == nb::dtype<bool>();
    case DType::kI8: return d == nb::dtype<int8_t>();
    case DType::kU8: return d == nb::dtype<uint8_t>();
  }
  return false;
}

using Array = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

nb::dict tensor_dict(const TensorSpec& t, const MethodMeta& meta) {
  nb::list axes;
  for (const AxisSpec& a : t.axes) {
    if (a.dim >= 0) {
      const DimSpec& d = meta.dims[static_cast<size_t>(a.dim)];
      axes.append(nb::make_tuple(d.name, d.min, d.max, d.step));
    } else if (a.size >= 0) {
      axes.append(a.size);
    } else {
      axes.append(a.text);  // an output axis computed from dims, e.g. "ceildiv(H,2)"
    }
  }
  nb::dict r;
  r["name"] = t.name;
  r["dtype"] = numpy_dtype(t.dtype);
  r["axes"] = axes;
  r["shape_text"] = t.shape_text();
  return r;
}

// One loaded program, shared by the Methods made from it (they must not outlive it).
class PyProgram {
 public:
  explicit PyProgram(std::unique_ptr<Program> p) : program_(std::move(p)) {}
  const Program& get() const { return *program_; }

 private:
  std::unique_ptr<Program> program_;
};

class PyMethod {
 public:
  PyMethod(std::shared_ptr<PyProgram> program, std::string name, int cpu_threads, bool use_delegate,
           std::vector<std::vector<int64_t>> max_shapes)
      : program_(std::move(program)), name_(std::move(name)) {
    options_.max_shapes = std::move(max_shapes);
    recreate(cpu_threads, use_delegate);
  }

  void recreate(int cpu_threads, bool use_delegate) {
    MethodOptions o = options_;
    o.cpu_threads = cpu_threads;
    o.use_delegate = use_delegate;
    auto m = Method::create(program_->get(), name_, o);
    if (!m.ok()) raise(m.status());
    method_ = std::shared_ptr<Method>(std::move(*m));
    options_ = o;
    bound_ = false;
  }

  int cpu_threads() const { return options_.cpu_threads; }
  void set_cpu_threads(int n) { recreate(n, options_.use_delegate); }
  bool use_delegate() const { return options_.use_delegate; }
  uint64_t arena_bytes_in_use() const { return method_->arena_bytes_in_use(); }
  uint64_t live_lower_bound_bytes() const { return MethodAccess::live_lower_bound_bytes(*method_); }

  nb::dict meta() const {
    const MethodMeta& m = method_->meta();
    nb::dict r;
    r["name"] = m.name;
    nb::list inputs, outputs, dims, guards, declined;
    for (const TensorSpec& t : m.inputs) inputs.append(tensor_dict(t, m));
    for (const TensorSpec& t : m.outputs) outputs.append(tensor_dict(t, m));
    for (const DimSpec& d : m.dims) dims.append(nb::make_tuple(d.name, d.min, d.max, d.step));
    for (const GuardSpec& g : m.guards) {
      nb::dict gd;
      gd["text"] = g.text;
      gd["node"] = g.node_name;
      gd["op"] = g.op_type;
      gd["context"] = g.context;
      guards.append(gd);
    }
    r["inputs"] = inputs;
    r["outputs"] = outputs;
    r["dims"] = dims;
    r["guards"] = guards;
    r["arena_bytes"] = method_->planned_arena_bytes();
    r["constant_bytes"] = m.constant_bytes;
    // The instruction list and what the delegate declined: tooling's report, read from the file.
    Result<tooling::MethodReport> report = tooling::method_report(program_->get(), name_);
    if (!report.ok()) raise(report.status());
    std::vector<std::string> ops;
    for (const tooling::InstructionReport& in : report->instructions) ops.push_back(in.op);
    r["instructions"] = ops;
    nb::dict del;
    del["backend"] = m.delegate.backend;
    del["delegated_instructions"] = m.delegate.delegated_instructions;
    del["instructions"] = m.num_instructions;
    del["flops"] = m.delegate.flops;
    del["delegated_flops"] = m.delegate.delegated_flops;
    for (const auto& [i, why] : report->declined) declined.append(nb::make_tuple(ops[i], why));
    del["declined"] = declined;
    del["running"] = method_->delegated();
    del["warning"] = method_->delegate_warning();
    r["delegate"] = del;
    return r;
  }

  // Checks the shapes against the contract (bind without data); raises ContractError.
  void check(const std::vector<std::vector<int64_t>>& shapes) {
    bound_ = false;
    Status s = method_->bind_shapes(shapes);
    if (!s.ok()) raise(s, /*contract=*/true);
  }

  // Binds to the arrays' shapes, copies them into the arena, executes with the GIL released,
  // and returns each output as a new numpy array (its own memory).
  nb::list run(const std::vector<Array>& arrays) {
    std::vector<TensorView> views = views_of(method_->meta(), arrays);
    bound_ = false;  // the call's inputs replace what bind's views held
    Status bound, s;
    {
      nb::gil_scoped_release release;
      bound = method_->set_inputs(views.data(), views.size());
      s = bound.ok() ? method_->execute() : bound;
    }
    if (!s.ok()) raise(s, /*contract=*/!bound.ok());  // bind's refusals are the contract's
    nb::list out;
    for (size_t o = 0; o < method_->num_outputs(); ++o) out.append(copy_out(method_->output(o)));
    return out;
  }

  // The arrays as views of `meta`'s inputs (count, rank and dtype checked; ContractError).
  static std::vector<TensorView> views_of(const MethodMeta& meta, const std::vector<Array>& arrays) {
    if (arrays.size() != meta.inputs.size())
      raise(Error::kContract, "method '" + meta.name + "' takes " + std::to_string(meta.inputs.size()) + " inputs (" +
                          input_list(meta) + "), got " + std::to_string(arrays.size()));
    std::vector<TensorView> views(arrays.size());
    for (size_t i = 0; i < arrays.size(); ++i) {
      const Array& a = arrays[i];
      if (a.ndim() > static_cast<size_t>(kMaxRank))
        raise(Error::kContract, "input '" + meta.inputs[i].name + "' has rank " + std::to_string(a.ndim()) +
                            "; the program takes " + meta.inputs[i].shape_text());
      if (!dtype_matches(meta.inputs[i].dtype, a.dtype()))
        raise(Error::kContract, "input '" + meta.inputs[i].name + "' must be " + numpy_dtype(meta.inputs[i].dtype) +
                            " (kiln converts only through numpy: pass np.asarray(x, np." + numpy_dtype(meta.inputs[i].dtype) + "))");
      views[i].dtype = meta.inputs[i].dtype;
      views[i].rank = static_cast<int32_t>(a.ndim());
      for (size_t k = 0; k < a.ndim(); ++k) views[i].dims[k] = static_cast<int64_t>(a.shape(k));
      views[i].data = const_cast<void*>(a.data());
    }
    return views;
  }

  // Binds to `shapes` and returns each input as a writable numpy view into the arena: what
  // the caller writes there is the input, no copy. A view keeps its Method alive; after the
  // next bind or call at other shapes it shows memory the program reuses.
  nb::list bind(const std::vector<std::vector<int64_t>>& shapes) {
    check(shapes);
    nb::list views;
    for (size_t i = 0; i < method_->num_inputs(); ++i) {
      const TensorView& t = method_->input(i);
      std::vector<size_t> shape(static_cast<size_t>(t.rank));
      for (int k = 0; k < t.rank; ++k) shape[static_cast<size_t>(k)] = static_cast<size_t>(t.dims[k]);
      auto* keep = new std::shared_ptr<Method>(method_);
      nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<Method>*>(p); });
      views.append(nb::cast(nb::ndarray<nb::numpy>(t.data, shape.size(), shape.data(), owner, nullptr, dlpack_dtype(t.dtype))));
    }
    bound_ = true;
    return views;
  }

  // execute() without a bind whose views are still the inputs.
  static constexpr const char* kExecuteNeedsBind =
      "execute() runs on what the views of the last bind() hold, and a call, check or cpu_threads change since then "
      "replaced them: bind() again and write the views it returns";

  // Executes at the shapes of the last bind (inputs as written into the views); outputs as in run().
  nb::list execute() {
    if (!bound_) raise(Error::kExecution, kExecuteNeedsBind);
    Status s;
    {
      nb::gil_scoped_release release;
      s = method_->execute();
    }
    if (!s.ok()) raise(s);
    nb::list out;
    for (size_t o = 0; o < method_->num_outputs(); ++o) out.append(copy_out(method_->output(o)));
    return out;
  }

  // The in-process time of bind + copy + execute, without Python: for the overhead figure.
  double time_execute_ns(int iterations) {
    nb::gil_scoped_release release;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i)
      if (!method_->execute().ok()) return -1;
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / iterations;
  }

 public:
  static nb::dlpack::dtype dlpack_dtype(DType t) {
    switch (t) {
      case DType::kF32: return nb::dtype<float>();
      case DType::kI64: return nb::dtype<int64_t>();
      case DType::kI32: return nb::dtype<int32_t>();
      case DType::kBool: return nb::dtype<bool>();
      case DType::kI8: return nb::dtype<int8_t>();
      case DType::kU8: return nb::dtype<uint8_t>();
    }
    return nb::dtype<float>();
  }

  static nb::object copy_out(const TensorView& t) {
    std::vector<size_t> shape(static_cast<size_t>(t.rank));
    for (int k = 0; k < t.rank; ++k) shape[static_cast<size_t>(k)] = static_cast<size_t>(t.dims[k]);
    const size_t n = t.nbytes();
    uint8_t* buf = new uint8_t[n ? n : 1];
    if (n) std::memcpy(buf, t.data, n);
    nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
    return nb::cast(nb::ndarray<nb::numpy>(buf, shape.size(), shape.data(), owner, nullptr, dlpack_dtype(t.dtype)));
  }

 private:
  static std::string input_list(const MethodMeta& meta) {
    std::string s;
    for (const TensorSpec& t : meta.inputs) s += (s.empty() ? "'" : ", '") + t.name + "' " + t.shape_text();
    return s;
  }

  std::shared_ptr<PyProgram> program_;
  std::string name_;
  MethodOptions options_;
  // Shared with the input views bind() hands out: a view keeps the Method (and its arena)
  // alive even after cpu_threads re-creates it here.
  std::shared_ptr<Method> method_;
  bool bound_ = false;  // a bind() whose views are still the inputs (no call, check or re-create since)
};

// The buckets of a method called as one (kiln::BucketedMethod): outputs are copies. The same
// calls as PyMethod: check, bind (views of the inputs' corners in the chosen bucket), execute.
class PyBucketed {
 public:
  PyBucketed(std::shared_ptr<PyProgram> program, const std::string& name, int cpu_threads, bool use_delegate)
      : program_(std::move(program)) {
    MethodOptions o;
    o.cpu_threads = cpu_threads;
    o.use_delegate = use_delegate;
    auto m = BucketedMethod::create(program_->get(), name, o);
    if (!m.ok()) raise(m.status());
    method_ = std::shared_ptr<BucketedMethod>(std::move(*m));
  }
  nb::list run(const std::vector<Array>& arrays) {
    std::vector<TensorView> views = PyMethod::views_of(largest().meta(), arrays);
    bound_ = false;
    Status s;
    {
      nb::gil_scoped_release release;
      s = method_->run(views.data(), views.size());
    }
    if (!s.ok()) raise(s, /*contract=*/true);
    return outputs();
  }
  // The bucket these shapes run; raises ContractError as a call would.
  std::string check(const std::vector<std::vector<int64_t>>& shapes) {
    bound_ = false;
    Status s = method_->bind_shapes(shapes);
    if (!s.ok()) raise(s, /*contract=*/true);
    return method_->last_bucket();
  }
  // Each input as a writable numpy view of its corner in the chosen bucket (strided: the
  // bucket's rows are longer); the rest holds the pad value.
  nb::list bind(const std::vector<std::vector<int64_t>>& shapes) {
    check(shapes);
    nb::list views;
    for (size_t i = 0; i < method_->num_inputs(); ++i) {
      const TensorView& t = method_->bound_input(i);
      std::vector<size_t> shape(shapes[i].begin(), shapes[i].end());
      std::vector<int64_t> strides(static_cast<size_t>(t.rank));
      int64_t step = 1;
      for (int k = t.rank - 1; k >= 0; --k) strides[static_cast<size_t>(k)] = step, step *= t.dims[k];
      auto* keep = new std::shared_ptr<BucketedMethod>(method_);
      nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<std::shared_ptr<BucketedMethod>*>(p); });
      views.append(nb::cast(nb::ndarray<nb::numpy>(t.data, shape.size(), shape.data(), owner, strides.data(),
                                                   PyMethod::dlpack_dtype(t.dtype))));
    }
    bound_ = true;
    return views;
  }
  nb::list execute() {
    if (!bound_) raise(Error::kExecution, PyMethod::kExecuteNeedsBind);
    Status s;
    {
      nb::gil_scoped_release release;
      s = method_->execute();
    }
    if (!s.ok()) raise(s);
    return outputs();
  }
  // The largest bucket's contract and the axes the bucketed dim is on (kiln/__init__.py shows
  // them as Dim(dim, 1, largest)); the arena the buckets share.
  nb::dict meta() const {
    const MethodMeta& m = largest().meta();
    nb::dict r;
    nb::list inputs, outputs, dims, guards, in_axes, out_axes;
    for (const TensorSpec& t : m.inputs) inputs.append(tensor_dict(t, m));
    for (const TensorSpec& t : m.outputs) outputs.append(tensor_dict(t, m));
    for (const DimSpec& d : m.dims) dims.append(nb::make_tuple(d.name, d.min, d.max, d.step));
    for (const GuardSpec& g : m.guards) guards.append(g.text);
    for (const BucketSpec::Axis& a : method_->spec().inputs) in_axes.append(nb::make_tuple(a.index, a.axis));
    for (const BucketSpec::Axis& a : method_->spec().outputs) out_axes.append(nb::make_tuple(a.index, a.axis));
    uint64_t arena = 0;
    for (size_t i = 0; i < method_->sizes().size(); ++i) arena = std::max(arena, method_->bucket(i)->planned_arena_bytes());
    r["inputs"] = inputs;
    r["outputs"] = outputs;
    r["dims"] = dims;
    r["guards"] = guards;
    r["input_axes"] = in_axes;
    r["output_axes"] = out_axes;
    r["arena_bytes"] = arena;
    r["dispatch"] = method_->spec().rule();
    return r;
  }
  std::vector<std::pair<std::string, std::string>> inputs() const {  // (name, numpy dtype)
    std::vector<std::pair<std::string, std::string>> r;
    for (const TensorSpec& t : largest().meta().inputs) r.emplace_back(t.name, numpy_dtype(t.dtype));
    return r;
  }
  std::string dim() const { return method_->dim(); }
  std::vector<int64_t> sizes() const { return method_->sizes(); }
  std::string last_bucket() const { return method_->last_bucket(); }
  std::vector<std::string> bucket_names() const { return method_->spec().bucket_methods; }

 private:
  const Method& largest() const { return *method_->bucket(method_->sizes().size() - 1); }
  nb::list outputs() const {
    nb::list out;
    for (size_t o = 0; o < method_->num_outputs(); ++o) out.append(PyMethod::copy_out(method_->output(o)));
    return out;
  }
  std::shared_ptr<PyProgram> program_;  // declared first: outlives the method
  // Shared with the views bind() hands out.
  std::shared_ptr<BucketedMethod> method_;
  bool bound_ = false;  // a bind() whose views are still the inputs (no call or check since)
};

// The logical names of the program's bucketed methods ("forward" for forward@seq=16, ...).
std::vector<std::string> bucketed_names(const PyProgram& p) {
  std::vector<std::string> names;
  for (const BucketSpec& b : BucketedMethod::describe(p.get())) names.push_back(b.method);
  return names;
}

bool has_buckets(const PyProgram& p, const std::string& name) { return BucketedMethod::has_buckets(p.get(), name); }

std::shared_ptr<PyProgram> load(const std::string& path, bool verify_constants) {
  LoadOptions o;
  o.verify_constants = verify_constants;
  auto p = Program::load(path, o);
  if (!p.ok()) raise(p.status());
  return std::make_shared<PyProgram>(std::move(*p));
}

std::vector<std::string> method_names(const PyProgram& p) {
  std::vector<std::string> names;
  for (size_t i = 0; i < p.get().num_methods(); ++i) names.push_back(p.get().method_name(i));
  return names;
}

}  // namespace

void def_image(nb::module_& m);  // image_ext.cc

}  // namespace kiln::python

NB_MODULE(_kiln, m) {
  using namespace kiln::python;
  m.doc() = "Kiln runtime bindings (the C++ extension; use the kiln package)";
  // Programs and Methods still referenced from module globals when the interpreter exits are
  // reported by nanobind as leaks; they are not (released, nothing is reported).
  nb::set_leak_warnings(false);
  def_set_error_types(m);
  def_image(m);

  nb::class_<PyProgram>(m, "Program");
  m.def("load", &load, nb::arg("path"), nb::arg("verify_constants") = true);
  m.def("method_names", &method_names);
  m.def("has_buckets", &has_buckets);
  m.def("bucketed_names", &bucketed_names);
  nb::class_<PyBucketed>(m, "Bucketed")
      .def(nb::init<std::shared_ptr<PyProgram>, std::string, int, bool>(), nb::arg("program"), nb::arg("name"),
           nb::arg("cpu_threads") = 1, nb::arg("use_delegate") = true)
      .def("run", &PyBucketed::run)
      .def("check", &PyBucketed::check)
      .def("bind", &PyBucketed::bind)
      .def("execute", &PyBucketed::execute)
      .def("meta", &PyBucketed::meta)
      .def("dim", &PyBucketed::dim)
      .def("inputs", &PyBucketed::inputs)
      .def("sizes", &PyBucketed::sizes)
      .def("last_bucket", &PyBucketed::last_bucket)
      .def("bucket_names", &PyBucketed::bucket_names);
  nb::class_<PyMethod>(m, "Method")
      .def(nb::init<std::shared_ptr<PyProgram>, std::string, int, bool, std::vector<std::vector<int64_t>>>(),
           nb::arg("program"), nb::arg("name"), nb::arg("cpu_threads") = 1, nb::arg("use_delegate") = true,
           nb::arg("max_shapes") = std::vector<std::vector<int64_t>>{})
      .def("meta", &PyMethod::meta)
      .def("check", &PyMethod::check)
      .def("arena_bytes_in_use", &PyMethod::arena_bytes_in_use)
      .def("live_lower_bound_bytes", &PyMethod::live_lower_bound_bytes)
      .def("run", &PyMethod::run)
      .def("bind", &PyMethod::bind)
      .def("execute", &PyMethod::execute)
      .def("time_execute_ns", &PyMethod::time_execute_ns)
      .def_prop_rw("cpu_threads", &PyMethod::cpu_threads, &PyMethod::set_cpu_threads)
      .def_prop_ro("use_delegate", &PyMethod::use_delegate);
}
