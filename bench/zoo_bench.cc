// Zoo benchmarks: load time (verify + method init, constants never copied), execute latency
// of each zoo model at its smallest reference shape and at its bound, and the same shape
// run from a dynamic export and from a static export pinned to that shape (the budget says
// dynamic must be within 5% of static).
//
//   cmake -S . -B build-bench -G Ninja -DKILN_BUILD_BENCH=ON -DKILN_BUILD_TESTS=OFF
//   ninja -C build-bench zoo_bench && build-bench/zoo_bench
#include <benchmark/benchmark.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "export/onnx/onnx_import.h"
#include "kiln/method.h"
#include "kiln/program.h"
#include "tooling/runner.h"
#include "aligned_bytes.h"

namespace {

using namespace kiln;

using Image = testing::AlignedBytes;

std::shared_ptr<Image> export_image(const std::string& onnx, const std::vector<exporter::DimArg>& dims) {
  exporter::ExportOptions opts;
  opts.dims = dims;
  format::ProgramDesc desc;
  auto r = exporter::export_onnx(onnx, opts, &desc);
  if (!r.ok()) return nullptr;
  return std::make_shared<Image>(*format::serialize_program(desc));
}

void bm_load(benchmark::State& state, std::shared_ptr<Image> img) {
  for (auto _ : state) {
    auto p = img->load();
    auto m = Method::create(**p, "forward");
    benchmark::DoNotOptimize(m.ok());
  }
  state.counters["file_bytes"] = static_cast<double>(img->size());
}

void bm_execute(benchmark::State& state, std::shared_ptr<Image> img, std::vector<std::vector<int64_t>> shapes) {
  auto p = img->load().value();
  auto m = Method::create(*p, "forward").value();
  if (!m->bind_shapes(shapes).ok()) {
    state.SkipWithError("shape outside the contract");
    return;
  }
  for (size_t i = 0; i < m->num_inputs(); ++i) std::memset(m->input(i).data, 0, m->input(i).nbytes());
  for (auto _ : state) {
    if (!m->execute().ok()) state.SkipWithError("execute failed");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string zoo = std::string(KILN_SOURCE_DIR) + "/zoo";
  std::ifstream f(zoo + "/manifest.json");
  auto manifest = nlohmann::json::parse(f);
  for (const auto& model : manifest["models"]) {
    std::string name = model["name"];
    std::vector<exporter::DimArg> dims;
    for (size_t i = 1; i < model["export_args"].size(); i += 2)
      dims.push_back(*exporter::parse_dim_arg(model["export_args"][i].get<std::string>()));
    std::string onnx = zoo + "/" + model["onnx"].get<std::string>();
    auto dynamic = export_image(onnx, dims);
    if (!dynamic) continue;
    benchmark::RegisterBenchmark(("load/" + name).c_str(), bm_load, dynamic)->Unit(benchmark::kMicrosecond);
    const auto& cases = model["cases"];
    for (const auto& c : {cases[0], cases[cases.size() - 1]}) {  // smallest and largest reference shape
      auto shapes = tooling::parse_shapes(c["input_shapes"].get<std::string>()).value();
      benchmark::RegisterBenchmark(("execute/" + name + "/dynamic/" + c["name"].get<std::string>()).c_str(), bm_execute,
                                   dynamic, shapes)
          ->Unit(benchmark::kMillisecond);
      // The same shape from a static export: pin every dim to its value at this shape.
      std::vector<exporter::DimArg> pinned;
      for (const auto& [dname, spec] : model["dims"].items()) {
        exporter::DimArg d;
        d.name = dname;
        d.pinned = true;
        for (size_t i = 0; i < model["input_dims"].size(); ++i)
          for (size_t k = 0; k < model["input_dims"][i].size(); ++k)
            if (model["input_dims"][i][k] == dname) d.min = d.max = shapes[i][k];
        pinned.push_back(d);
      }
      auto fixed = export_image(onnx, pinned);
      if (fixed)
        benchmark::RegisterBenchmark(("execute/" + name + "/static/" + c["name"].get<std::string>()).c_str(), bm_execute,
                                     fixed, shapes)
            ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
