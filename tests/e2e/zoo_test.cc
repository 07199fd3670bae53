// The model zoo end to end: every zoo model exports with its stated contract through the
// real `kiln export`, and through the real `kiln_runner` matches ONNX Runtime's reference
// outputs at every reference shape (including each dim's minimum and shapes far below the
// bound); shapes the contract refuses are refused. Prints one summary line per model.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "e2e_util.h"
#include "tooling/npy.h"
#include "scratch_dir.h"
#include "tied_rows.h"
#include "zoo_manifest.h"

namespace kiln::testing {
namespace {

const std::string kZoo = zoo_dir();

class Zoo : public ::testing::TestWithParam<std::string> {};

double element(const tooling::NpyArray& a, size_t i) {
  switch (a.dtype) {
    case DType::kF32: return reinterpret_cast<const float*>(a.data.data())[i];
    case DType::kI64: return static_cast<double>(reinterpret_cast<const int64_t*>(a.data.data())[i]);
    case DType::kI32: return reinterpret_cast<const int32_t*>(a.data.data())[i];
    case DType::kBool: return a.data[i];
    case DType::kI8: return reinterpret_cast<const int8_t*>(a.data.data())[i];
    case DType::kU8: return a.data[i];
  }
  return 0;
}

nlohmann::json find_model(const std::string& manifest, const std::string& name) {
  nlohmann::json all = zoo_manifest(manifest);
  for (const auto& x : all["models"])
    if (x["name"] == name) return x;
  return nullptr;
}

/// A detector's rows in the order Kiln gave them (tied_rows.h): rows[i] is the reference row
/// Kiln's row i matches. The manifest's "ties" names the scores output. Empty: no "ties".
std::vector<size_t> detection_rows(const nlohmann::json& model, const std::vector<tooling::NpyArray>& wants,
                                   const std::vector<tooling::NpyArray>& gots) {
  if (!model.contains("ties")) return {};
  const auto& names = model["outputs"];
  size_t s = 0;
  while (s < names.size() && names[s] != model["ties"]) ++s;
  if (s == names.size() || wants[s].shape.size() != 1) return {};
  const size_t r = static_cast<size_t>(wants[s].shape[0]);
  std::vector<double> scores(r);
  for (size_t i = 0; i < r; ++i) scores[i] = element(wants[s], i);
  std::vector<RowOutput> outputs;
  for (size_t k = 0; k < wants.size(); ++k) {
    if (wants[k].shape.empty() || static_cast<size_t>(wants[k].shape[0]) != r || r == 0) continue;
    const tooling::NpyArray &w = wants[k], &g = gots[k];
    outputs.push_back({w.data.size() / dtype_size(w.dtype) / r, [&g](size_t i) { return element(g, i); },
                       [&w](size_t i) { return element(w, i); }});
  }
  return tied_rows(scores, outputs, model.value("tolerance", 1e-4));
}

/// Exports `model` with its contract and runs every reference case through kiln_runner,
/// delegated and portable, against ONNX Runtime's outputs. Adds the largest relative error.
void export_and_compare(const nlohmann::json& model, const std::string& kiln_path, double* max_err) {
  std::string name = model["name"];
  std::string cmd = bin("kiln") + " export " + kZoo + "/" + model["onnx"].get<std::string>() + " -o " + kiln_path;
  for (const auto& a : model["export_args"]) cmd += " " + a.get<std::string>();
  CommandResult exp = run_command(cmd);
  ASSERT_EQ(exp.exit_code, 0) << cmd << "\n" << exp.output;
  EXPECT_EQ(exp.output.find(" Shape "), std::string::npos) << "a Shape op survived export:\n" << exp.output;
  for (const std::string delegate : {"xnnpack", "none"})  // the delegated and the portable path of one file
  for (const auto& c : model["cases"]) {
    std::string inputs;
    for (const auto& p : c["inputs"]) inputs += (inputs.empty() ? "" : ",") + kZoo + "/" + p.get<std::string>();
    std::string out = ::kiln::testing::scratch_dir() + "/zoo_out_" + name;
    CommandResult r = run_command(bin("kiln_runner") + " --model_path=" + kiln_path + " --inputs=" + inputs +
                                  " --output_file=" + out + " --output_format=npy --print_output=none --delegate=" + delegate);
    std::string what = name + " case " + c["name"].get<std::string>() + " (" + c["input_shapes"].get<std::string>() +
                       ", --delegate=" + delegate + ")";
    ASSERT_EQ(r.exit_code, 0) << what << "\n" << r.output;
    EXPECT_EQ(r.output.find("delegate unavailable"), std::string::npos) << what << "\n" << r.output;
    std::vector<tooling::NpyArray> wants, gots;
    for (size_t k = 0; k < c["outputs"].size(); ++k) {
      auto want = tooling::read_npy(kZoo + "/" + c["outputs"][k].get<std::string>());
      auto got = tooling::read_npy(out + "-" + std::to_string(k) + ".npy");
      ASSERT_TRUE(want.ok() && got.ok()) << what;
      ASSERT_EQ(got->shape, want->shape) << what << " output " << k;
      ASSERT_EQ(got->dtype, want->dtype) << what << " output " << k;
      wants.push_back(std::move(*want));
      gots.push_back(std::move(*got));
    }
    const std::vector<size_t> rows = detection_rows(model, wants, gots);
    for (size_t k = 0; k < wants.size(); ++k) {
      const tooling::NpyArray &want = wants[k], &got = gots[k];
      const size_t n = want.data.size() / dtype_size(want.dtype);
      const size_t row = !rows.empty() && !want.shape.empty() && static_cast<size_t>(want.shape[0]) == rows.size()
                             ? n / rows.size()
                             : 0;  // the detections' outputs: row i of Kiln's is the reference's rows[i]
      for (size_t i = 0; i < n; ++i) {
        const size_t ref = row ? rows[i / row] * row + i % row : i;
        double g = element(got, i), w = element(want, ref);
        // Integer outputs of quantized ops may be held to a number of quanta (ONNX Runtime rounds
        // its own float math); everything else to a relative tolerance.
        const bool in_quanta = model.contains("quanta") && want.dtype != DType::kF32;
        double err = in_quanta ? std::abs(g - w) : std::abs(g - w) / (1.0 + std::abs(w));
        if (!in_quanta) *max_err = std::max(*max_err, err);
        ASSERT_LE(err, in_quanta ? model["quanta"].get<double>() : model.value("tolerance", 1e-4))
            << what << " output " << k << " element " << i << ": got " << g << ", ONNX Runtime " << w;
      }
    }
  }
}

TEST_P(Zoo, ExportsAndMatchesOnnxRuntimeAtEveryShape) {
  nlohmann::json model = find_model("manifest.json", GetParam());
  ASSERT_FALSE(model.is_null());
  std::string name = model["name"];
  std::string kiln_path = ::kiln::testing::scratch_dir() + "/zoo_" + name + ".kiln";
  auto t0 = std::chrono::steady_clock::now();
  double max_err = 0;
  export_and_compare(model, kiln_path, &max_err);
  if (HasFatalFailure()) return;
  double export_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& rej : model.value("rejects", nlohmann::json::array())) {
    CommandResult r = run_command(bin("kiln") + " check " + kiln_path + " --input_shapes=" + rej["input_shapes"].get<std::string>());
    EXPECT_EQ(r.exit_code, 1) << name << " accepted " << rej["input_shapes"] << ", expected: " << rej["reason"] << "\n" << r.output;
  }
  // Random admissible shapes, each run twice over differently poisoned arenas.
  CommandResult sw = run_command(bin("kiln") + " sweep " + kiln_path + " --samples=3 --json");
  EXPECT_EQ(sw.exit_code, 0) << sw.output;
  auto swj = nlohmann::json::parse(sw.output, nullptr, false);
  ASSERT_FALSE(swj.is_discarded()) << sw.output;
  EXPECT_EQ(swj["failures"], 0);
  EXPECT_GE(swj["samples"].size(), 4u);
  CommandResult ins = run_command(bin("kiln") + " inspect " + kiln_path + " --json");
  auto j = nlohmann::json::parse(ins.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << ins.output;
  const auto& m = j["methods"][0];
  if (name == "view_guard") {  // x.view(x.shape[0] * 4, -1): length % 4 == 0, folded into the contract's step
    EXPECT_EQ(m["guards"].size(), 0u);
    EXPECT_EQ(m["dims"][1]["name"], "length");
    EXPECT_EQ(m["dims"][1]["step"], 4);
    CommandResult bad = run_command(bin("kiln_runner") + " --model_path=" + kiln_path + " --input_shapes=2x10");
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.output.find("error: bind: input 'x' (#0) dim 1 ('length') is 10, not a multiple of its step 4 "
                              "(range [4, 256]); pad on the host to 12"),
              std::string::npos)
        << bad.output;
  }
  if (name == "mobilenet_v2") {  // symbolic shapes stay readable through 52 convolutions
    bool found = false;
    for (const auto& in : m["instructions"])
      found = found || in["outputs"] == "f32 [batch, 1280, ceildiv(H,32), ceildiv(W,32)]";
    EXPECT_TRUE(found) << ins.output;
    EXPECT_EQ(m["outputs"][0]["shape_text"], "[batch, 100]");
  }
  std::printf("zoo %-13s instructions %4d guards %zu arena %9llu lower bound %9llu (%.3fx) max rel err %.2e export and cases %.0f ms\n",
              name.c_str(), m["num_instructions"].get<int>(), m["guards"].size(),
              static_cast<unsigned long long>(m["arena_bytes"].get<uint64_t>()),
              static_cast<unsigned long long>(m["lower_bound_bytes"].get<uint64_t>()), m["arena_over_lower_bound"].get<double>(),
              max_err, export_ms);
  EXPECT_LE(m["arena_over_lower_bound"].get<double>(), 1.05) << "arena more than 5% above the lower bound";
}

INSTANTIATE_TEST_SUITE_P(Models, Zoo, ::testing::ValuesIn(zoo_model_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// The op zoo (zoo/ops/make_ops.py): one op per model, at zero extents, scalars, random shapes
// and the bound, against ONNX Runtime; then random admissible shapes through kiln sweep.
class OpZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(OpZoo, ExportsAndMatchesOnnxRuntimeAtEveryShape) {
  nlohmann::json model = find_model("ops/manifest.json", GetParam());
  ASSERT_FALSE(model.is_null());
  const std::string kiln_path = ::kiln::testing::scratch_dir() + "/ops_" + GetParam() + ".kiln";
  double max_err = 0;
  export_and_compare(model, kiln_path, &max_err);
  if (HasFatalFailure()) return;
  CommandResult sw = run_command(bin("kiln") + " sweep " + kiln_path + " --samples=3 --json");
  EXPECT_EQ(sw.exit_code, 0) << sw.output;
  auto swj = nlohmann::json::parse(sw.output, nullptr, false);
  ASSERT_FALSE(swj.is_discarded()) << sw.output;
  EXPECT_EQ(swj["failures"], 0) << sw.output;
  // Post-processing with data-dependent counts: the sweep's driven inputs (scaled, shifted)
  // take each count through none, one, some and its bound.
  static const std::set<std::string> kDriven = {"yolo_nms", "topk_data_k", "compress_boxes", "nonzero_postprocess"};
  if (kDriven.count(GetParam())) {
    ASSERT_FALSE(swj["counts"].empty()) << sw.output;
    for (const auto& c : swj["counts"])
      EXPECT_TRUE(c["zero"].get<bool>() && c["one"].get<bool>() && c["some"].get<bool>() && c["bound_reached"].get<bool>())
          << c.dump();
  }
  // The QDQ form: each chain around a Conv or MatMul is one integer instruction, and no float
  // Conv or MatMul is left; an op without an integer kernel stays float between Q and DQ.
  if (GetParam().rfind("qdq_", 0) == 0) {
    CommandResult ins = run_command(bin("kiln") + " inspect " + kiln_path + " --json");
    auto j = nlohmann::json::parse(ins.output, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << ins.output;
    const auto& by_op = j["methods"][0]["instructions_by_op"];
    const bool stays_float = GetParam().find("stays_float") != std::string::npos;
    EXPECT_EQ(by_op.contains("QLinearConv") || by_op.contains("QLinearMatMul"), !stays_float) << by_op.dump();
    EXPECT_FALSE(by_op.contains("Conv") || by_op.contains("MatMul") || by_op.contains("Relu") || by_op.contains("Clip"))
        << by_op.dump();
  }
  // Inputs the program refuses at execute (a branch's block whose guard fails where it runs).
  for (const auto& c : model.value("refused", nlohmann::json::array())) {
    std::string inputs;
    for (const auto& p : c["inputs"]) inputs += (inputs.empty() ? "" : ",") + kZoo + "/" + p.get<std::string>();
    CommandResult r = run_command(bin("kiln_runner") + " --model_path=" + kiln_path + " --inputs=" + inputs + " --print_output=none");
    EXPECT_EQ(r.exit_code, 1) << c["name"] << "\n" << r.output;
    EXPECT_NE(r.output.find(c["message"].get<std::string>()), std::string::npos) << c["name"] << "\n" << r.output;
  }
}

// The quantized zoo (zoo/quantized/make_quantized.py): the zoo's models quantized by ONNX
// Runtime's quantizer (static QDQ, dynamic), against ONNX Runtime on the same quantized ONNX at
// the float zoo's shapes; then random admissible shapes through kiln sweep.
class QuantizedZoo : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizedZoo, ExportsAndMatchesOnnxRuntimeAtEveryShape) {
  nlohmann::json model = find_model("quantized/manifest.json", GetParam());
  ASSERT_FALSE(model.is_null());
  const std::string kiln_path = ::kiln::testing::scratch_dir() + "/quantized_" + GetParam() + ".kiln";
  double max_err = 0;
  export_and_compare(model, kiln_path, &max_err);
  if (HasFatalFailure()) return;
  CommandResult sw = run_command(bin("kiln") + " sweep " + kiln_path + " --samples=2 --json");
  EXPECT_EQ(sw.exit_code, 0) << sw.output;
  auto swj = nlohmann::json::parse(sw.output, nullptr, false);
  ASSERT_FALSE(swj.is_discarded()) << sw.output;
  EXPECT_EQ(swj["failures"], 0) << sw.output;
  // The summary states the share of FLOPs in integer instructions: nearly all for a CNN
  // quantized statically (its convolutions), some for a dynamically quantized model.
  std::string cmd = bin("kiln") + " export " + kZoo + "/" + model["onnx"].get<std::string>() + " -o " + kiln_path;
  for (const auto& a : model["export_args"]) cmd += " " + a.get<std::string>();
  const CommandResult exp = run_command(cmd);
  const size_t at = exp.output.find("  int8: ");
  ASSERT_NE(at, std::string::npos) << exp.output;
  const double share = std::atof(exp.output.c_str() + at + 8);
  EXPECT_GE(share, model["kind"] == "static" ? 90.0 : 1.0) << exp.output;
  // kiln inspect reads the same share from the file, and lists each quantized value with its
  // dtype, scale and zero point (constants for a static model; the activations' computed at
  // run time for a dynamic one).
  const CommandResult ins = run_command(bin("kiln") + " inspect " + kiln_path);
  ASSERT_EQ(ins.exit_code, 0) << ins.output;
  const size_t ia = ins.output.find("  int8: ");
  ASSERT_NE(ia, std::string::npos) << ins.output;
  EXPECT_NEAR(std::atof(ins.output.c_str() + ia + 8), share, 0.11) << ins.output;
  const auto ij = nlohmann::json::parse(run_command(bin("kiln") + " inspect " + kiln_path + " --json").output, nullptr, false);
  ASSERT_FALSE(ij.is_discarded());
  const auto& qv = ij["methods"][0]["quantized_values"];
  ASSERT_GT(qv.size(), 0u) << ins.output;
  size_t constant_scales = 0, runtime_scales = 0;
  for (const auto& q : qv) {
    const std::string type = q["type"], scale = q["scale"];
    EXPECT_TRUE(type.rfind("i8 ", 0) == 0 || type.rfind("u8 ", 0) == 0) << type;
    constant_scales += scale.rfind("scale ", 0) == 0;
    runtime_scales += scale == "scale computed at run time";
  }
  EXPECT_GT(constant_scales, 0u) << ins.output;
  if (model["kind"] == "static") {
    EXPECT_EQ(runtime_scales, 0u) << ins.output;
  }
  std::printf("quantized zoo %-24s max |kiln - ort| / (1 + |ort|) %.2e (tolerance %.0e, reference: %s)\n", GetParam().c_str(),
              max_err, model["tolerance"].get<double>(), model["reference"].get<std::string>().c_str());
}

INSTANTIATE_TEST_SUITE_P(Quantized, QuantizedZoo, ::testing::ValuesIn(quantized_zoo_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

INSTANTIATE_TEST_SUITE_P(Ops, OpZoo, ::testing::ValuesIn(op_zoo_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace kiln::testing
