// Every class of bad input to the tools, one table row each: the command, its exit status
// and the one line it must print. Found by a hostile pass over the tools (issue 8); none may
// abort, hang or succeed silently.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include "e2e_util.h"
#include "export/graph.h"
#include "format/program_desc.h"
#include "onnx_model_util.h"
#include "tooling/file_io.h"
#include "tooling/examples.h"

namespace kiln::testing {
namespace {

struct Row {
  std::string what, cmd, expect;  // expect: a piece of the output (stdout + stderr)
  int exit_code = 1;
};

TEST(BadInput, EveryClassGetsOneClearLine) {
  const std::string dir = scratch_dir() + "/bad_input";
  std::filesystem::create_directories(dir + "/a_directory");
  auto mlp = tooling::make_mlp_example();
  ASSERT_TRUE(mlp.ok());
  const std::string model = dir + "/mlp.kiln";
  ASSERT_TRUE(tooling::write_program_file(mlp->program, model).ok());
  std::fclose(std::fopen((dir + "/empty.onnx").c_str(), "wb"));
  {
    std::ofstream(dir + "/garbage.onnx") << "not a protobuf at all";
  }
  // An ONNX model whose input name is not UTF-8 (it used to export, then abort inspect --json).
  OnnxModel bad_name;
  bad_name.input("x\xff", {"N", "4"}).output("y");
  bad_name.node("Relu", "relu", {"x\xff"}, {"y"});
  const std::string bad_name_path = bad_name.save("bad_name.onnx");
  // A valid model with 4 KB of weights, for writes that run out of disk.
  OnnxModel weighty;
  weighty.input("x", {"N", "32"}).output("y");
  weighty.floats("w", {32, 32}, std::vector<float>(32 * 32, 0.5f));
  weighty.node("MatMul", "mm", {"x", "w"}, {"y"});
  const std::string weighty_path = weighty.save("weighty.onnx");
  // A program with one weight byte changed on disk.
  std::vector<char> bytes;
  {
    std::ifstream f(model, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  bytes[bytes.size() - 1] ^= 1;  // the last byte is a constant
  {
    std::ofstream(dir + "/damaged.kiln", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const std::string kiln = bin("kiln"), runner = bin("kiln_runner") + " --model_path=" + model;
  // A full disk, part-way through a write: the file size limit (ulimit -f, 512-byte blocks in
  // sh) makes write() fail with EFBIG as a full disk fails with ENOSPC; SIGXFSZ is ignored,
  // and an ignored signal stays ignored across exec.
  const std::string disk_full = "trap '' XFSZ; ulimit -f 2; exec ";
  const std::vector<Row> rows = {
      {"empty ONNX file", kiln + " export " + dir + "/empty.onnx -o " + dir + "/o.kiln", "is empty, not an ONNX model"},
      {"not protobuf", kiln + " export " + dir + "/garbage.onnx -o " + dir + "/o.kiln", "is not a readable ONNX model"},
      {"directory as ONNX", kiln + " export " + dir + "/a_directory -o " + dir + "/o.kiln", "it is a directory"},
      {"missing ONNX", kiln + " export " + dir + "/nope.onnx -o " + dir + "/o.kiln", "no such file"},
      {"non-UTF-8 name", kiln + " export " + bad_name_path + " -o " + dir + "/o.kiln --dim N=1..4",
       "name is not valid UTF-8 (byte 1)"},
      {"max off the step grid", kiln + " export " + bad_name_path + " -o " + dir + "/o.kiln --dim N=8..100:8",
       "bounds [8, 100] are not on the grid of its step 8 (max 100 is not a multiple of 8); use N=8..96:8 or N=8..104:8"},
      {"min off the step grid", kiln + " export " + bad_name_path + " -o " + dir + "/o.kiln --dim N=10..128:8",
       "(min 10 is not a multiple of 8); use N=16..128:8 or N=8..128:8"},
      {"directory as program", bin("kiln_runner") + " --model_path=" + dir + "/a_directory",
       "it is a directory, not a .kiln program file"},
      {"damaged weights", bin("kiln_runner") + " --model_path=" + dir + "/damaged.kiln",
       "the constant segment's checksum does not match"},
      {"damaged weights, inspect --json", kiln + " inspect --json " + dir + "/damaged.kiln", "checksum does not match"},
      {"directory as input", runner + " --inputs=" + dir + "/a_directory", "it is a directory"},
      {"missing input", runner + " --inputs=" + dir + "/nope.npy", "cannot open '" + dir + "/nope.npy'"},
      {"zero threads", runner + " --cpu_threads=0", "--cpu_threads must be between 1 and 1024, got 0"},
      {"negative threads", runner + " --cpu_threads=-3", "--cpu_threads must be between 1 and 1024, got -3"},
      {"flag as a value", runner + " --input_shapes --inputs=x.npy", "--input_shapes needs a value, got '--inputs=x.npy'"},
      {"bad print mode", runner + " --print_output=xyz", "--print_output must be none, summary or all, got 'xyz'"},
      {"shape above the bound", runner + " --input_shapes=65x16", "65"},
      {"unparsable shape", runner + " --input_shapes=1x,16", "error:"},
      {"disk full writing outputs", disk_full + runner + " --output_file=" + dir + "/full_out --output_format=npy",
       "bytes written): File too large; the partial file was removed"},
      {"disk full writing a program", disk_full + kiln + " export " + weighty_path + " -o " + dir + "/full.kiln --dim N=1..8",
       "bytes written): File too large; the partial file was removed"},
  };
  for (const Row& r : rows) {
    CommandResult c = run_command(r.cmd);
    EXPECT_EQ(c.exit_code, r.exit_code) << r.what << ": " << c.output;
    EXPECT_NE(c.output.find(r.expect), std::string::npos) << r.what << ": " << c.output;
    EXPECT_EQ(c.output.find("terminate called"), std::string::npos) << r.what << ": " << c.output;
    EXPECT_EQ(c.output.find("Aborted"), std::string::npos) << r.what << ": " << c.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/full_out-0.npy"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/full.kiln"));
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// `kiln sweep` on a model that computes NaN by itself (0 / 0, as a softmax over a fully masked
// row does): every sample passes with a note, and memory is not blamed.
TEST(SweepNotes, ANaNTheModelComputesIsNotBlamedOnMemory) {
  exporter::GraphBuilder g("forward");
  ASSERT_TRUE(g.add_dim("n", 1, 8).ok());
  int x = *g.add_input("x", DType::kF32, {"n", 4});
  int z = *g.add("Sub", "zero", {x, x});
  int nan = *g.add("Div", "nan", {z, z});
  ASSERT_TRUE(g.mark_output(nan, "y").ok());
  format::ProgramDesc d;
  ASSERT_TRUE(g.emit(&d).ok());
  const std::string path = scratch_dir() + "/nan_model.kiln";
  ASSERT_TRUE(tooling::write_program_file(d, path).ok());
  CommandResult r = run_command(bin("kiln") + " sweep " + path + " --samples=3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("with a clean arena too: the model computes it"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("never wrote"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("5 passed, 0 failed"), std::string::npos) << r.output;
}

// A 1x3x64x64 float32 .npy of ones with one NaN (element 4100).
std::string nan_image_npy() {
  const std::string npy = scratch_dir() + "/nonfinite_x.npy";
  {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 64, 64), }";
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header += '\n';
    std::ofstream f(npy, std::ios::binary);
    f.write("\x93NUMPY\x01\x00", 8);
    const uint16_t len = static_cast<uint16_t>(header.size());
    f.write(reinterpret_cast<const char*>(&len), 2);
    f << header;
    std::vector<float> x(3 * 64 * 64, 1.f);
    x[4100] = std::numeric_limits<float>::quiet_NaN();
    f.write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size() * 4));
  }
  return npy;
}

// A NaN input on the delegated path (the non-finite rule). mobilenet_v2's strided depthwise
// layers run on XNNPACK's operator (every CPU: its unipass 3x3/2 microkernel, or all layers
// where Kiln's kernels do not run), whose fused Relu6 turns a NaN into a number: kiln_runner
// refuses the input with the element named, and `kiln sweep` (which also runs each sample with
// a NaN input) passes with execute's check and fails with it off.
TEST(NonFinite, DelegateRefusesNanInputsAndSweepFailsWhenItWouldHideOne) {
  const std::string kiln = scratch_dir() + "/nonfinite_mobilenet.kiln";
  CommandResult e = run_command(bin("kiln") + " export " + std::string(KILN_SOURCE_DIR) +
                                "/zoo/models/mobilenet_v2.onnx -o " + kiln + " --dim batch=1..2 --dim H=32..64 --dim W=32..64");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const std::string npy = nan_image_npy();
  CommandResult r = run_command(bin("kiln_runner") + " --model_path=" + kiln + " --inputs=" + npy + " --print_output=none");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("holds NaN at element 4100 (index [0, 1, 0, 4] of 1x3x64x64)"), std::string::npos) << r.output;
  CommandResult p = run_command(bin("kiln_runner") + " --model_path=" + kiln + " --inputs=" + npy +
                                " --print_output=summary --delegate=none");
  EXPECT_EQ(p.exit_code, 0) << p.output;
  EXPECT_NE(p.output.find("nan"), std::string::npos) << p.output;
  CommandResult ok = run_command(bin("kiln") + " sweep " + kiln + " --samples=1");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  CommandResult hidden = run_command(bin("kiln") + " sweep " + kiln + " --samples=1 --no_finite_check");
  EXPECT_EQ(hidden.exit_code, 1) << hidden.output;
  EXPECT_NE(hidden.output.find("delegate vs portable with a NaN input: output 0 element"), std::string::npos) << hidden.output;
  EXPECT_NE(hidden.output.find("but nan portable"), std::string::npos) << hidden.output;
}

// resnet_small where its convolutions run on Kiln's kernels (x86-64 with AVX2): every delegated
// step keeps NaN, so execute does not check and the NaN reaches the outputs, as on the portable
// path; elsewhere (XNNPACK's convolutions) the input is refused. Either way no number comes out.
TEST(NonFinite, DelegateThatKeepsNanCarriesItToTheOutputs) {
  const std::string kiln = scratch_dir() + "/nonfinite_resnet.kiln";
  CommandResult e = run_command(bin("kiln") + " export " + std::string(KILN_SOURCE_DIR) +
                                "/zoo/models/resnet_small.onnx -o " + kiln + " --dim batch=1..8");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  CommandResult r = run_command(bin("kiln_runner") + " --model_path=" + kiln + " --inputs=" + nan_image_npy() +
                                " --print_output=all");
  if (r.exit_code == 0) {
    EXPECT_NE(r.output.find("nan"), std::string::npos) << r.output;
  } else {
    EXPECT_NE(r.output.find("holds NaN at element 4100"), std::string::npos) << r.output;
  }
  CommandResult sweep = run_command(bin("kiln") + " sweep " + kiln + " --samples=1 --no_finite_check");
  EXPECT_EQ(sweep.exit_code, r.exit_code == 0 ? 0 : 1) << sweep.output;
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// `kiln sweep` runs the contract's real corners: here a guard seq == W (broadcasting) refuses
// the all-min shape seq = 1, W = 2, and the sweep runs the nearest admissible one instead.
TEST(SweepCorners, AGuardedCornerMovesToTheNearestAdmissibleShape) {
  exporter::GraphBuilder g("forward");
  ASSERT_TRUE(g.add_dim("seq", 1, 16).ok());
  ASSERT_TRUE(g.add_dim("W", 2, 16, 2).ok());
  int a = *g.add_input("a", DType::kF32, {"seq"});
  int b = *g.add_input("b", DType::kF32, {"W"});
  int y = *g.add("Add", "Add_57", {a, b});
  ASSERT_TRUE(g.mark_output(y, "y").ok());
  ASSERT_EQ(g.guards().size(), 1u);
  format::ProgramDesc d;
  ASSERT_TRUE(g.emit(&d).ok());
  const std::string path = scratch_dir() + "/guarded_corner.kiln";
  ASSERT_TRUE(tooling::write_program_file(d, path).ok());
  CommandResult r = run_command(bin("kiln") + " sweep " + path + " --samples=2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("corner all-min 1,2 -> 2,2 (the nearest shape the contract admits)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("ok    2,2 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ok    16,16 "), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::testing
