#pragma once
// Importer tests' shared steps: a contract from `--dim` arguments, and an exported program
// loaded with its method created.

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "aligned_bytes.h"
#include "export/onnx/onnx_import.h"
#include "kiln/method.h"
#include "kiln/program.h"

namespace kiln::testing {

using exporter::ExportOptions;

inline ExportOptions dims(std::vector<std::string> args) {
  ExportOptions o;
  for (const auto& a : args) o.dims.push_back(*exporter::parse_dim_arg(a));
  return o;
}

struct Loaded {
  explicit Loaded(const std::vector<uint8_t>& bytes) : buf(bytes) {}
  AlignedBytes buf;  // declared first: destroyed after the program and method borrowing it
  std::unique_ptr<Program> program;
  std::unique_ptr<Method> method;
};

inline std::unique_ptr<Loaded> load(const format::ProgramDesc& d) {
  auto l = std::make_unique<Loaded>(*format::serialize_program(d));
  auto p = l->buf.load();
  if (!p.ok()) {
    ADD_FAILURE() << "the exported program does not load: " << p.status().message();
    std::abort();  // the caller cannot go on
  }
  l->program = std::move(*p);
  l->method = Method::create(*l->program, d.methods[0].name).value();
  return l;
}

}  // namespace kiln::testing
