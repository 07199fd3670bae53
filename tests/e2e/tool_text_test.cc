// What the tools print for a person: whole node names in --profile, one constant byte count
// that export's summary and kiln inspect agree on.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "e2e/e2e_util.h"
#include "export/onnx_model_util.h"
#include "scratch_dir.h"

namespace kiln::testing {
namespace {

TEST(ToolText, ProfileShowsWholeNodeNames) {
  OnnxModel m;
  m.input("x", {"N", "8"}).output("y");
  const std::string name = "/encoder/layers.11/self_attention/output_projection/Relu";  // 55 characters
  m.node("Relu", name, {"x"}, {"y"});
  const std::string path = scratch_dir() + "/long_names.kiln";
  CommandResult r = run_command(bin("kiln") + " export " + m.save("long_names.onnx") + " -o " + path + " --dim N=1..4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(bin("kiln_runner") + " --model_path=" + path + " --profile --num_executions=2 --print_output=none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("  " + name + "  "), std::string::npos) << r.output;  // was cut at 32 characters
}

TEST(ToolText, ExportAndInspectAgreeOnConstantBytes) {
  const std::string model = std::string(KILN_SOURCE_DIR) + "/zoo/models/resnet_small.onnx";
  const std::string path = scratch_dir() + "/constant_bytes.kiln";
  CommandResult r = run_command(bin("kiln") + " export " + model + " -o " + path + " --dim batch=1..2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(constants (\d+) bytes of data, (\d+) in the file's constant segment)")))
      << r.output;
  const std::string data_bytes = m[1].str(), segment_bytes = m[2].str();  // copied: r is reused below
  r = run_command(bin("kiln") + " inspect " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(method\(s\), (\d+) constant bytes \(the constant segment)"))) << r.output;
  EXPECT_EQ(segment_bytes, m[1].str());                            // the same count, named the same way
  EXPECT_LE(std::stoull(data_bytes), std::stoull(segment_bytes));  // data <= segment (alignment)
}

}  // namespace
}  // namespace kiln::testing
