// kiln._kiln_export: `kiln export` from Python (kiln.export_onnx, kiln.export). A separate
// module from the runtime's kiln._kiln because it links the ONNX importer (protobuf, onnx):
// a runtime-only build leaves it out (KILN_PYTHON_EXPORT=OFF) and kiln still imports.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <utility>
#include <vector>

#include "errors.h"
#include "export/export_options.h"
#include "export/onnx/onnx_import.h"
#include "format/program_desc.h"
#include "tooling/export_report.h"
#include "tooling/file_io.h"

namespace nb = nanobind;

namespace kiln::python {
namespace {

// `model` is a path or the bytes of a ModelProto; `flags` are (option, text) pairs as
// kiln/__init__.py spells them ("dim", "N=1..8"; "max_arena", "512M"), parsed by the parser
// `kiln export` uses; writes `path` (nothing is left there on failure) and returns export's
// summary.
std::string export_onnx(nb::object model, const std::string& path, const std::vector<std::pair<std::string, std::string>>& flags) {
  std::vector<exporter::ExportFlag> given;
  for (const auto& [name, value] : flags) given.push_back({name, value});
  Result<exporter::ExportOptions> opts = exporter::parse_export_flags(given);
  if (!opts.ok()) throw nb::value_error(opts.status().message().c_str());
  format::ProgramDesc program;
  Result<exporter::ExportReport> report = Status(Code::kInternal, "not run");
  if (nb::isinstance<nb::bytes>(model)) {
    nb::bytes b = nb::borrow<nb::bytes>(model);
    std::string data(b.c_str(), b.size());
    nb::gil_scoped_release release;
    report = exporter::export_onnx_bytes(data.data(), data.size(), *opts, &program);
  } else {
    std::string model_path = nb::cast<std::string>(nb::str(model));
    nb::gil_scoped_release release;
    report = exporter::export_onnx(model_path, *opts, &program);
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
  m.def("export_onnx", &export_onnx, nb::arg("model"), nb::arg("path"), nb::arg("flags"));
}
