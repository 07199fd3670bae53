// kiln._kiln_export: `kiln export` from Python (kiln.export_onnx, kiln.export). A separate
// module from the runtime's kiln._kiln because it links the ONNX importer (protobuf, onnx):
// a runtime-only build leaves it out (KILN_PYTHON_EXPORT=OFF) and kiln still imports.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <tuple>
#include <vector>

#include "errors.h"
#include "export/onnx/onnx_import.h"
#include "format/program_desc.h"
#include "tooling/export_report.h"
#include "tooling/file_io.h"

namespace nb = nanobind;

namespace kiln::python {
namespace {

// `model` is a path or the bytes of a ModelProto; `dims` are "NAME=MIN..MAX[:STEP]" strings,
// `inputs` "NAME=D0,D1,..."; writes `path` (nothing is left there on failure) and returns
// export's summary.
std::string export_onnx(nb::object model, const std::string& path, const std::vector<std::string>& dims,
                        const std::vector<std::string>& inputs, const std::string& method, const std::string& delegate,
                        bool fuse, double require_coverage, const std::string& max_arena, const std::string& warn_arena) {
  exporter::ExportOptions opts;
  opts.method_name = method;
  opts.delegate = delegate;
  opts.fuse = fuse;
  opts.require_coverage = require_coverage;
  for (const auto& [name, text, out] : {std::tuple{"max_arena", &max_arena, &opts.max_arena_bytes},
                                        std::tuple{"warn_arena", &warn_arena, &opts.warn_arena_bytes}}) {
    auto bytes = exporter::parse_byte_size(*text);
    if (!bytes.ok()) throw nb::value_error((std::string(name) + ": " + bytes.status().message()).c_str());
    *out = *bytes;
  }
  for (const std::string& d : dims) {
    auto a = exporter::parse_dim_arg(d);
    if (!a.ok()) throw nb::value_error(a.status().message().c_str());
    opts.dims.push_back(*a);
  }
  for (const std::string& i : inputs) {
    auto a = exporter::parse_input_arg(i);
    if (!a.ok()) throw nb::value_error(a.status().message().c_str());
    opts.inputs.push_back(*a);
  }
  format::ProgramDesc program;
  Result<exporter::ExportReport> report = Status(Code::kInternal, "not run");
  if (nb::isinstance<nb::bytes>(model)) {
    nb::bytes b = nb::borrow<nb::bytes>(model);
    std::string data(b.c_str(), b.size());
    nb::gil_scoped_release release;
    report = exporter::export_onnx_bytes(data.data(), data.size(), opts, &program);
  } else {
    std::string model_path = nb::cast<std::string>(nb::str(model));
    nb::gil_scoped_release release;
    report = exporter::export_onnx(model_path, opts, &program);
  }
  if (!report.ok()) {
    if (report.status().code() == Code::kIoError) raise(Error::kProgram, "export: " + report.status().message());
    raise(Error::kExport, report.status().message());
  }
  Status w = tooling::write_program_file(program, path);
  if (!w.ok()) raise(Error::kProgram, w.message());
  for (const std::string& warning : report->warnings)  // as the CLI's "warning: " lines
    if (PyErr_WarnEx(PyExc_UserWarning, warning.c_str(), 1) != 0) throw nb::python_error();
  return tooling::format_report(*report);
}

}  // namespace
}  // namespace kiln::python

NB_MODULE(_kiln_export, m) {
  using namespace kiln::python;
  m.doc() = "Kiln's ONNX exporter (the C++ extension; use kiln.export_onnx / kiln.export)";
  def_set_error_types(m);
  m.def("export_onnx", &export_onnx, nb::arg("model"), nb::arg("path"), nb::arg("dims"), nb::arg("inputs"),
        nb::arg("method"), nb::arg("delegate"), nb::arg("fuse"), nb::arg("require_coverage"), nb::arg("max_arena"),
        nb::arg("warn_arena"));
}
