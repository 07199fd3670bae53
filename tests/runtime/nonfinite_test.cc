// The non-finite rule (README "Non-finite values"): a NaN or Inf in an input never becomes a
// finite output in silence. For every zoo model and op-zoo model, at its smallest and its
// largest reference case, one element of each float input is set to NaN, +Inf and -Inf in
// turn, and the program runs on the delegated path (XNNPACK + Kiln's own kernels) and on the
// portable kernels:
// - both paths agree element by element, non-finite classes included (NaN, +Inf, -Inf, finite;
//   finite values within the usual tolerance);
// - with NaN injected, a float output element that stays finite must not depend on the
//   poisoned element: it equals the outputs with +8 and with -8 in its place (a NaN that a
//   clamp or a max dropped gives a finite value that differs between those two).
// - where every delegated step keeps NaN (Method::checks_finite_inputs() false: execute does not
//   check), the delegated path meets the value, and both rules above hold for it too; the same
//   delegated Method with the check switched off runs in every case (it must not fail).
// Integer and bool outputs (comparisons, ArgMax, TopK's indices, casts) follow IEEE comparisons
// and are compared between the paths only. A fully masked attention mask (all zeros) gives
// the same outputs on both paths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "aligned_bytes.h"
#include "export/onnx/onnx_import.h"
#include "format/program_desc.h"
#include "kiln/method.h"
#include "kiln/program.h"
#include "tooling/npy.h"
#include "zoo_manifest.h"
#include "tooling/program_report.h"

namespace kiln::testing {
namespace {

using Inputs = std::vector<tooling::NpyArray>;
struct Output {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

std::unique_ptr<AlignedBytes> export_zoo(const nlohmann::json& model) {
  format::ProgramDesc desc;
  auto report = exporter::export_onnx(zoo_dir() + "/" + model["onnx"].get<std::string>(), zoo_export_options(model), &desc);
  EXPECT_TRUE(report.ok()) << model["name"] << ": " << report.status().message();
  if (!report.ok()) return nullptr;
  auto bytes = format::serialize_program(desc);
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? std::make_unique<AlignedBytes>(*bytes) : nullptr;
}

// Runs `m` on `in`; false (with a failure added) when it does not bind or execute. With
// `refused`, execute may refuse instead: a non-finite input on the delegated path
// (Reason::kNonFiniteInput, whose message must name the input and the element), or a count the
// NaN made data-dependent exceeding its bound or choosing a branch that cannot run
// (kDataAboveBound, kBlockRefused); *refused then holds the reason.
bool run(Method& m, const Inputs& in, std::vector<Output>* out, const std::string& what, Reason* refused = nullptr) {
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& a : in) shapes.push_back(a.shape);
  Status s = m.bind_shapes(shapes);
  if (!s.ok()) return ADD_FAILURE() << what << ": bind: " << s.message(), false;
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i].data.empty()) std::memcpy(m.input_data(i), in[i].data.data(), in[i].data.size());
  s = m.execute();
  if (refused) {
    *refused = s.ok() ? Reason::kNone : s.reason();
    if (*refused == Reason::kNonFiniteInput) {
      EXPECT_NE(s.message().find("holds "), std::string::npos) << s.message();
      EXPECT_NE(s.message().find(" at element "), std::string::npos) << s.message();
      return true;
    }
    // (kDataRefused: QuantizeLinear refuses a NaN or Inf it cannot carry in int8.)
    if (*refused == Reason::kDataAboveBound || *refused == Reason::kBlockRefused || *refused == Reason::kDataRefused)
      return true;
  }
  if (!s.ok()) return ADD_FAILURE() << what << ": execute: " << s.message(), false;
  out->clear();
  for (size_t o = 0; o < m.num_outputs(); ++o) {
    const TensorView& t = m.output(o);
    Output r{t.dtype, std::vector<int64_t>(t.dims, t.dims + t.rank), {}};
    r.data.assign(static_cast<const uint8_t*>(t.data), static_cast<const uint8_t*>(t.data) + t.nbytes());
    out->push_back(std::move(r));
  }
  return true;
}

int cls(float v) { return std::isnan(v) ? 0 : v == INFINITY ? 1 : v == -INFINITY ? 2 : 3; }
const char* cls_name(float v) { return std::isnan(v) ? "nan" : std::isinf(v) ? (v > 0 ? "+inf" : "-inf") : "finite"; }

double scale_of(const Output& o) {
  double m = 1.0;
  const float* f = reinterpret_cast<const float*>(o.data.data());
  for (size_t i = 0; i < o.data.size() / 4; ++i)
    if (std::isfinite(f[i])) m = std::max(m, std::fabs(static_cast<double>(f[i])));
  return m;
}

// NaN-aware equality of two runs' outputs: shapes, bytes of non-float outputs, classes and
// values (1e-4 of the largest finite magnitude) of float ones. Empty when equal.
std::string mismatch(const std::vector<Output>& a, const std::vector<Output>& b) {
  for (size_t o = 0; o < a.size(); ++o) {
    if (a[o].shape != b[o].shape || a[o].dtype != b[o].dtype) return "output " + std::to_string(o) + ": shapes differ";
    if (a[o].dtype != DType::kF32) {
      if (a[o].data != b[o].data) return "output " + std::to_string(o) + ": values differ";
      continue;
    }
    const float* x = reinterpret_cast<const float*>(a[o].data.data());
    const float* y = reinterpret_cast<const float*>(b[o].data.data());
    const double tol = 1e-4 * scale_of(b[o]);
    for (size_t i = 0; i < a[o].data.size() / 4; ++i)
      if (cls(x[i]) != cls(y[i]) || (cls(x[i]) == 3 && std::fabs(double(x[i]) - y[i]) > tol))
        return "output " + std::to_string(o) + " element " + std::to_string(i) + ": " + std::to_string(x[i]) + " (" +
               cls_name(x[i]) + ") vs " + std::to_string(y[i]) + " (" + cls_name(y[i]) + ")";
  }
  return "";
}

// Float elements finite with NaN injected but dependent on the poisoned element: `nan` against
// the probes `hi` and `lo`. Empty when the rule holds.
std::string dropped_nan(const std::vector<Output>& nan, const std::vector<Output>& hi, const std::vector<Output>& lo) {
  for (size_t o = 0; o < nan.size(); ++o) {
    if (nan[o].dtype != DType::kF32 || nan[o].shape != hi[o].shape || nan[o].shape != lo[o].shape) continue;
    const float* n = reinterpret_cast<const float*>(nan[o].data.data());
    const float* h = reinterpret_cast<const float*>(hi[o].data.data());
    const float* l = reinterpret_cast<const float*>(lo[o].data.data());
    const double tol = 1e-4 * std::max(scale_of(hi[o]), scale_of(lo[o]));
    for (size_t i = 0; i < nan[o].data.size() / 4; ++i) {
      if (!std::isfinite(n[i])) continue;
      const bool depends = cls(h[i]) != cls(l[i]) || std::fabs(double(h[i]) - l[i]) > tol;
      const bool equal = cls(h[i]) == 3 && std::fabs(double(n[i]) - h[i]) <= tol && std::fabs(double(n[i]) - l[i]) <= tol;
      if (depends || !equal)
        return "output " + std::to_string(o) + " element " + std::to_string(i) + " is " + std::to_string(n[i]) +
               " with the NaN but " + std::to_string(h[i]) + " / " + std::to_string(l[i]) + " with +8 / -8 there";
    }
  }
  return "";
}

void set(tooling::NpyArray& a, size_t at, float v) { std::memcpy(a.data.data() + 4 * at, &v, 4); }

void check_model(const nlohmann::json& model, const std::string& manifest_dir) {
  const std::string name = model["name"];
  std::unique_ptr<AlignedBytes> image = export_zoo(model);
  if (!image) return;
  auto program = image->load();
  ASSERT_TRUE(program.ok()) << program.status().message();
  MethodOptions on, off;
  off.use_delegate = false;
  MethodOptions no_check;
  no_check.check_finite_inputs = false;
  auto d = Method::create(**program, "forward", on);
  auto p = Method::create(**program, "forward", off);
  auto unchecked = Method::create(**program, "forward", no_check);
  ASSERT_TRUE(d.ok() && p.ok() && unchecked.ok());
  EXPECT_TRUE((*d)->delegate_warning().empty()) << (*d)->delegate_warning();
  // Programs whose outputs comparisons decide (Where, If, a loop's condition, TopK, NonZero...):
  // there a NaN legitimately selects finite values, so only the paths are compared.
  bool decided_by_comparisons = false;
  auto report = tooling::method_report(**program, "forward");
  ASSERT_TRUE(report.ok());
  for (const tooling::InstructionReport& in : report->instructions)
    for (const char* c : {"Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal", "Where", "KilnIf", "KilnSelect",
                          "KilnLoop", "KilnEndLoop", "TopK", "ArgMax", "ArgMin", "NonZero", "Compress", "Unique", "Cast"})
      decided_by_comparisons = decided_by_comparisons || in.op == c;
  const auto& cases = model["cases"];
  ASSERT_FALSE(cases.empty()) << name;
  std::vector<size_t> picks = {0};
  if (cases.size() > 1) picks.push_back(cases.size() - 1);
  const std::vector<std::string> masks = [&] {
    std::vector<std::string> m;
    for (const auto& g : model.value("input_generators", nlohmann::json::array()))
      m.push_back(g.is_object() ? g.value("kind", "") : "");
    return m;
  }();
  int checked = 0;
  for (size_t pick : picks) {
    const auto& c = cases[pick];
    Inputs clean;
    for (const auto& path : c["inputs"]) {
      auto a = tooling::read_npy(manifest_dir + "/" + path.get<std::string>());
      ASSERT_TRUE(a.ok()) << a.status().message();
      clean.push_back(std::move(*a));
    }
    const std::string where = name + " case " + c["name"].get<std::string>();
    for (size_t i = 0; i < clean.size(); ++i) {
      if (clean[i].dtype != DType::kF32 || clean[i].data.empty()) continue;
      const size_t at = clean[i].data.size() / 4 / 2;  // the middle element
      for (float v : {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY}) {
        Inputs in = clean;
        set(in[i], at, v);
        const std::string what = where + ", input " + std::to_string(i) + " element " + std::to_string(at) + " = " + cls_name(v);
        std::vector<Output> od, op;
        Reason refused = Reason::kNone, p_refused = Reason::kNone;
        if (!run(**d, in, &od, what + " (delegated)", &refused) || !run(**p, in, &op, what + " (portable)", &p_refused)) return;
        if (p_refused != Reason::kNone) {  // the contract refused the data: the delegated path must too
          EXPECT_TRUE(refused == p_refused || refused == Reason::kNonFiniteInput) << what;
          ++checked;
          continue;
        }
        if (refused == Reason::kNone) {
          const std::string diff = mismatch(od, op);
          EXPECT_TRUE(diff.empty()) << what << ": delegated vs portable: " << diff;
        }
        ++checked;
        // check_finite_inputs = false: the delegate's kernels meet the value. Where the checked
        // Method does not check (every step keeps NaN), they must carry it as the portable path.
        std::vector<Output> ou;
        const bool unchecked_keeps = (*unchecked)->delegated() && !(*d)->checks_finite_inputs();
        if ((*unchecked)->delegated()) {
          if (!run(**unchecked, in, &ou, what + " (delegated, unchecked)")) return;
          if (unchecked_keeps) {
            const std::string diff = mismatch(ou, op);
            EXPECT_TRUE(diff.empty()) << what << ": delegated without the input check vs portable: " << diff;
          }
        }
        if (!std::isnan(v)) continue;
        if (decided_by_comparisons) continue;  // IEEE: NaN compares false, and what it selects is finite
        std::vector<Output> hi, lo;
        set(in[i], at, 8.f);
        if (!run(**p, in, &hi, what + " probe +8")) return;
        set(in[i], at, -8.f);
        if (!run(**p, in, &lo, what + " probe -8")) return;
        for (const auto* path : {&od, &op, &ou}) {
          if (path == &od && refused != Reason::kNone) continue;
          if (path == &ou && !unchecked_keeps) continue;
          const std::string dropped = dropped_nan(*path, hi, lo);
          EXPECT_TRUE(dropped.empty()) << what << " ("
                                       << (path == &od ? "delegated" : path == &op ? "portable" : "delegated, unchecked")
                                       << "): " << dropped;
        }
      }
    }
    // A fully masked batch: every attention score masked.
    for (size_t i = 0; i < clean.size() && i < masks.size(); ++i) {
      if (masks[i] != "mask" && masks[i] != "left_mask") continue;
      Inputs in = clean;
      std::fill(in[i].data.begin(), in[i].data.end(), 0);
      std::vector<Output> od, op;
      const std::string what = where + ", input " + std::to_string(i) + " all masked";
      if (!run(**d, in, &od, what) || !run(**p, in, &op, what)) return;
      const std::string diff = mismatch(od, op);
      EXPECT_TRUE(diff.empty()) << what << ": delegated vs portable: " << diff;
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << name << " has no float input to poison";
}

class NonFiniteZoo : public ::testing::TestWithParam<std::string> {};
TEST_P(NonFiniteZoo, NanAndInfKeepTheRuleOnBothPaths) { check_model(zoo_model(GetParam()), zoo_dir()); }
INSTANTIATE_TEST_SUITE_P(Models, NonFiniteZoo, ::testing::ValuesIn(zoo_model_names()),
                         [](const auto& info) { return info.param; });

nlohmann::json op_model(const std::string& name) {
  const nlohmann::json all = zoo_manifest("ops/manifest.json");
  for (const auto& x : all["models"])
    if (x["name"] == name) return x;
  return nullptr;
}
class NonFiniteOps : public ::testing::TestWithParam<std::string> {};
TEST_P(NonFiniteOps, NanAndInfKeepTheRuleOnBothPaths) { check_model(op_model(GetParam()), zoo_dir()); }
INSTANTIATE_TEST_SUITE_P(Ops, NonFiniteOps, ::testing::ValuesIn(op_zoo_names()), [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kiln::testing
