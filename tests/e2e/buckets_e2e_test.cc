// A bucketed method (kiln export --bucket) is a method in every tool: kiln_runner calls it,
// kiln check names the bucket that runs, kiln inspect shows the buckets and the dispatch rule,
// kiln sweep sweeps every bucket and the dispatch between them, check --explain gives the
// ways out above the largest bucket.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "e2e/e2e_util.h"
#include "export/onnx_model_util.h"
#include "scratch_dir.h"

namespace kiln::testing {
namespace {

// x [b, seq, 4] @ w, with a mask [b, seq] beside it; buckets seq = 4, 8.
std::string bucketed_program(const std::string& name) {
  OnnxModel m;
  m.input("x", {"b", "seq", "4"}).input("mask", {"b", "seq"}).output("y");
  m.floats("w", {4, 4}, std::vector<float>(16, 0.5f));
  m.node("MatMul", "mm", {"x", "w"}, {"y"});
  const std::string onnx = m.save(name + ".onnx"), out = scratch_dir() + "/" + name + ".kiln";
  CommandResult r = run_command(bin("kiln") + " export " + onnx + " -o " + out + " --dim b=1..2 --bucket seq=4,8 --pad mask=0");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return out;
}

// The command line: kiln export --bucket, then kiln_runner calls 'forward' as the buckets.
TEST(BucketsE2E, RunnerCallsBucketsAsOneMethod) {
  OnnxModel m;
  m.input("x", {"b", "seq", "4"}).input("mask", {"b", "seq"}).output("y");
  m.floats("w", {4, 4}, std::vector<float>(16, 0.5f));
  m.node("MatMul", "mm", {"x", "w"}, {"y"});
  const std::string onnx = m.save("runner_buckets.onnx"), out = scratch_dir() + "/runner_buckets.kiln";
  CommandResult r = run_command(bin("kiln") + " export " + onnx + " -o " + out + " --dim b=1..2 --bucket seq=4,8 --pad mask=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("buckets of 'forward' over seq: forward@seq=4, forward@seq=8"), std::string::npos) << r.output;
  r = run_command(bin("kiln_runner") + " --model_path=" + out + " --input_shapes=2x3x4,2x3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"Input 0 'x': f32 2x3x4 (ones, bucketed over 'seq')", "Bucket: forward@seq=4",
                           "Output 0 'y': f32 2x3x4 min 2 max 2 mean 2"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << " not in\n" << r.output;
  r = run_command(bin("kiln_runner") + " --model_path=" + out + " --input_shapes=2x9x4,2x9");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("'seq' is 9, above the largest bucket 8 (buckets: 4, 8)"), std::string::npos) << r.output;
}

TEST(BucketsE2E, CheckNamesTheBucketAndExitCodesTellRefusalFromError) {
  const std::string path = bucketed_program("check_buckets");
  CommandResult r = run_command(bin("kiln") + " check " + path + " --input_shapes=2x3x4,2x3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok: 2x3x4,2x3 satisfies the contract of method 'forward': bucket 'forward@seq=4' runs (seq 3 padded "
                          "to 4)"),
            std::string::npos) << r.output;
  r = run_command(bin("kiln") + " check " + path + " --input_shapes=1x8x4,1x8");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("bucket 'forward@seq=8' runs (seq 8)"), std::string::npos) << r.output;
  // Refused by the contract: 1. Above the largest bucket, another dim out of range, inputs that disagree.
  for (const char* shapes : {"2x9x4,2x9", "3x3x4,3x3", "2x3x4,2x5"}) {
    r = run_command(bin("kiln") + " check " + path + " --input_shapes=" + shapes);
    EXPECT_EQ(r.exit_code, 1) << shapes << ": " << r.output;
    EXPECT_EQ(r.output.rfind("no: ", 0), 0u) << r.output;
  }
  // The check could not be made: 2. No such file, no such method, shapes that do not parse.
  for (const std::string& args : {std::string(" check /nonexistent.kiln --input_shapes=1x3x4,1x3"),
                                  " check " + path + " --input_shapes=1x3x4,1x3 --method_name=nope",
                                  " check " + path + " --input_shapes=1xAx4,1x3"}) {
    r = run_command(bin("kiln") + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_NE(r.output.find("error: "), std::string::npos) << r.output;
  }
}

TEST(BucketsE2E, ExplainAboveTheLargestBucketGivesTheWaysOut) {
  const std::string path = bucketed_program("explain_buckets");
  CommandResult r = run_command(bin("kiln") + " check " + path + " --input_shapes=1x20x4,1x20 --explain");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  for (const char* line : {"no: 'seq' is 20, above the largest bucket 8 (buckets: 4, 8)",
                           "1. on the host: truncate input 'x' axis 1 to 8", "--bucket seq=4,8,20", "--dim seq=1..20"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << " not in\n" << r.output;
  r = run_command(bin("kiln") + " check " + path + " --input_shapes=1x5x4,1x5 --explain");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok: bucket 'forward@seq=8' of method 'forward' runs"), std::string::npos) << r.output;
}

TEST(BucketsE2E, InspectShowsTheBucketsAndTheDispatchRule) {
  const std::string path = bucketed_program("inspect_buckets");
  CommandResult r = run_command(bin("kiln") + " inspect " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"method 'forward': buckets over seq: 4, 8",
                           "dispatch: the smallest bucket with seq >= the inputs' seq; input 'x' axis 1 padded with 0; input "
                           "'mask' axis 1 padded with 0; output 'y' axis 1 cut back; above 8 refused",
                           "bucket methods: 'forward@seq=4' 'forward@seq=8'"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << " not in\n" << r.output;
  r = run_command(bin("kiln") + " inspect " + path + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["bucketed_methods"].size(), 1u);
  const auto& b = j["bucketed_methods"][0];
  EXPECT_EQ(b["name"], "forward");
  EXPECT_EQ(b["dim"], "seq");
  EXPECT_EQ(b["sizes"], nlohmann::json::array({4, 8}));
  EXPECT_EQ(b["padded_inputs"][1]["input"], "mask");
  EXPECT_EQ(b["cut_outputs"][0]["axis"], 1);
}

TEST(BucketsE2E, SweepRunsEveryBucketAndTheDispatch) {
  const std::string path = bucketed_program("sweep_buckets");
  CommandResult r = run_command(bin("kiln") + " sweep " + path + " --samples=4");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"ok    forward@seq=4: 1x4x4,1x4", "ok    forward@seq=8: 2x8x4,2x8",
                           "ok    dispatch seq=1: ", "x1x4,", "-> forward@seq=4", "ok    dispatch seq=5: ",
                           "-> forward@seq=8", "ok    dispatch seq=9: ", "-> refused", " 0 failed"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << " not in\n" << r.output;
}

}  // namespace
}  // namespace kiln::testing
