// kiln_runner end to end: the bundled MLP (dynamic batch) and CNN (dynamic batch, H, W) at
// the bound and far below it, against a double-precision reference written here; .bin
// inputs bound-sized and exact-sized; .npy; server mode with a bad request in the middle.
#include <gtest/gtest.h>
#include <unistd.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <stb/stb_image_write.h>

#include <sstream>

#include <filesystem>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "e2e_util.h"
#include "kiln/method.h"
#include "kiln/program.h"
#include "onnx_model_util.h"
#include "kiln/version.h"
#include "image/image.h"
#include "tooling/file_io.h"
#include "tooling/runner.h"
#include "tooling/examples.h"
#include "tooling/npy.h"
#include "tooling/runner.h"

#include <nlohmann/json.hpp>
#include "scratch_dir.h"

namespace kiln::testing {
namespace {

using tooling::ExampleModel;

std::string write_example(const ExampleModel& m, const std::string& name) {
  std::string path = ::kiln::testing::scratch_dir() + "/" + name;
  EXPECT_TRUE(tooling::write_program_file(m.program, path).ok());
  return path;
}

// ---- independent references (double precision) ----------------------------------------

std::vector<double> mlp_reference(const ExampleModel& m, const std::vector<float>& x, int64_t batch) {
  const auto& w1 = m.weights.at("w1");
  const auto& b1 = m.weights.at("b1");
  const auto& w2 = m.weights.at("w2");
  const auto& b2 = m.weights.at("b2");
  std::vector<double> out(batch * 10);
  for (int64_t n = 0; n < batch; ++n) {
    double h[32];
    for (int j = 0; j < 32; ++j) {
      double s = b1[j];
      for (int i = 0; i < 16; ++i) s += static_cast<double>(x[n * 16 + i]) * w1[i * 32 + j];
      h[j] = s > 0 ? s : 0;
    }
    double z[10], mx = -1e300, sum = 0;
    for (int j = 0; j < 10; ++j) {
      z[j] = b2[j];
      for (int i = 0; i < 32; ++i) z[j] += h[i] * w2[i * 10 + j];
      mx = std::max(mx, z[j]);
    }
    for (int j = 0; j < 10; ++j) sum += std::exp(z[j] - mx);
    for (int j = 0; j < 10; ++j) out[n * 10 + j] = std::exp(z[j] - mx) / sum;
  }
  return out;
}

// NCHW conv with zero padding, square kernel k, stride s, pad p.
std::vector<double> conv_ref(const std::vector<double>& x, int64_t n, int64_t c, int64_t h, int64_t w,
                             const std::vector<float>& wt, const std::vector<float>& bias, int64_t oc, int64_t k,
                             int64_t s, int64_t p, int64_t* oh, int64_t* ow) {
  *oh = (h + 2 * p - k) / s + 1;
  *ow = (w + 2 * p - k) / s + 1;
  std::vector<double> y(n * oc * *oh * *ow);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t i = 0; i < *oh; ++i)
        for (int64_t j = 0; j < *ow; ++j) {
          double acc = bias[o];
          for (int64_t ci = 0; ci < c; ++ci)
            for (int64_t u = 0; u < k; ++u)
              for (int64_t v = 0; v < k; ++v) {
                int64_t yy = i * s - p + u, xx = j * s - p + v;
                if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                acc += x[((b * c + ci) * h + yy) * w + xx] * wt[((o * c + ci) * k + u) * k + v];
              }
          y[((b * oc + o) * *oh + i) * *ow + j] = acc;
        }
  return y;
}

std::vector<double> cnn_reference(const ExampleModel& m, const std::vector<float>& xf, int64_t n, int64_t h, int64_t w) {
  std::vector<double> x(xf.begin(), xf.end());
  int64_t h1, w1;
  std::vector<double> a = conv_ref(x, n, 3, h, w, m.weights.at("conv1.weight"), m.weights.at("conv1.bias"), 8, 3, 2, 1, &h1, &w1);
  for (double& v : a) v = std::max(v, 0.0);
  // MaxPool 2x2 stride 2, ceil mode: windows clipped at the edge.
  int64_t h2 = (h1 - 2 + 1) / 2 + 1, w2 = (w1 - 2 + 1) / 2 + 1;
  if ((h2 - 1) * 2 >= h1) --h2;
  if ((w2 - 1) * 2 >= w1) --w2;
  std::vector<double> pooled(n * 8 * h2 * w2);
  for (int64_t b = 0; b < n * 8; ++b)
    for (int64_t i = 0; i < h2; ++i)
      for (int64_t j = 0; j < w2; ++j) {
        double mx = -1e300;
        for (int64_t u = 0; u < 2; ++u)
          for (int64_t v = 0; v < 2; ++v)
            if (i * 2 + u < h1 && j * 2 + v < w1) mx = std::max(mx, a[(b * h1 + i * 2 + u) * w1 + j * 2 + v]);
        pooled[(b * h2 + i) * w2 + j] = mx;
      }
  int64_t h3, w3;
  std::vector<double> c2 = conv_ref(pooled, n, 8, h2, w2, m.weights.at("conv2.weight"), m.weights.at("conv2.bias"), 16, 3, 1, 1, &h3, &w3);
  std::vector<double> out(n * 10);
  const auto& fw = m.weights.at("fc.weight");
  const auto& fb = m.weights.at("fc.bias");
  for (int64_t b = 0; b < n; ++b) {
    double g[16];
    for (int64_t ch = 0; ch < 16; ++ch) {
      double s = 0;
      for (int64_t k = 0; k < h3 * w3; ++k) s += std::max(c2[(b * 16 + ch) * h3 * w3 + k], 0.0);
      g[ch] = s / static_cast<double>(h3 * w3);
    }
    for (int64_t o = 0; o < 10; ++o) {
      double s = fb[o];
      for (int64_t ch = 0; ch < 16; ++ch) s += g[ch] * fw[o * 16 + ch];
      out[b * 10 + o] = s;
    }
  }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
}

std::vector<float> random_input(size_t n, uint32_t seed) { return tooling::example_weights(seed, n, 1.0f); }

// ---- MLP -----------------------------------------------------------------------------

class MlpE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = tooling::make_mlp_example();
    ASSERT_TRUE(m.ok());
    model_ = std::move(*m);
    path_ = write_example(model_, "mlp.kiln");
  }
  ExampleModel model_;
  std::string path_;
};

TEST_F(MlpE2E, NpyInputsAtTheBoundAndFarBelow) {
  for (int64_t batch : {64, 17, 3, 1}) {
    std::vector<float> x = random_input(batch * 16, static_cast<uint32_t>(batch));
    std::string in = ::kiln::testing::scratch_dir() + "/mlp_x.npy", out = ::kiln::testing::scratch_dir() + "/mlp_out";
    ASSERT_TRUE(tooling::write_npy(in, DType::kF32, {batch, 16}, x.data()).ok());
    CommandResult r = run_command(bin("kiln_runner") + " --model_path=" + path_ + " --inputs=" + in +
                                  " --output_file=" + out + " --output_format=npy --print_output=summary");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("Iteration 1 of 1: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("Output 0 'probs': f32 " + std::to_string(batch) + "x10"), std::string::npos) << r.output;
    auto y = tooling::read_npy(out + "-0.npy");
    ASSERT_TRUE(y.ok()) << y.status().message();
    EXPECT_EQ(y->shape, (std::vector<int64_t>{batch, 10}));
    std::vector<float> got(reinterpret_cast<float*>(y->data.data()), reinterpret_cast<float*>(y->data.data()) + batch * 10);
    expect_close(got, mlp_reference(model_, x, batch), 1e-5, "batch " + std::to_string(batch));
  }
}

TEST_F(MlpE2E, BinInputsBoundSizedAndExactSized) {
  std::vector<float> bound = random_input(64 * 16, 99);
  std::string bound_path = ::kiln::testing::scratch_dir() + "/x_bound.bin", out = ::kiln::testing::scratch_dir() + "/mlp_bin";
  write_floats(bound_path, bound);
  // Bound-sized file, smaller shape: read at the bound's layout, so the leading 5x16 values.
  CommandResult r = run_command(bin("kiln_runner") + " --model_path=" + path_ + " --inputs=" + bound_path +
                                " --input_shapes=5x16 --output_file=" + out + " --print_output=none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Input 0 'x': f32 5x16 (from '" + bound_path + "', read at its bound layout 64x16)"),
            std::string::npos) << r.output;
  std::vector<float> lead(bound.begin(), bound.begin() + 5 * 16);
  expect_close(read_floats(out + "-0.bin"), mlp_reference(model_, lead, 5), 1e-5, "bound-sized bin");
  // Exactly sized file.
  std::string exact_path = ::kiln::testing::scratch_dir() + "/x_exact.bin";
  write_floats(exact_path, lead);
  r = run_command(bin("kiln_runner") + " --model_path=" + path_ + " --inputs=" + exact_path +
                  " --input_shapes=5x16 --output_file=" + out + " --print_output=none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Input 0 'x': f32 5x16 (from '" + exact_path + "')"), std::string::npos) << r.output;
  expect_close(read_floats(out + "-0.bin"), mlp_reference(model_, lead, 5), 1e-5, "exact bin");
  // A file named 'ones' is a file: said as one, and read.
  write_floats(::kiln::testing::scratch_dir() + "/ones", lead);
  r = run_command("cd " + ::kiln::testing::scratch_dir() + " && " + bin("kiln_runner") + " --model_path=" + path_ +
                  " --inputs=ones --input_shapes=5x16 --output_file=" + out + " --print_output=none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Input 0 'x': f32 5x16 (from 'ones')"), std::string::npos) << r.output;
  expect_close(read_floats(out + "-0.bin"), mlp_reference(model_, lead, 5), 1e-5, "a file named ones");
  // Too small a file is a clear error.
  r = run_command(bin("kiln_runner") + " --model_path=" + path_ + " --inputs=" + exact_path + " --input_shapes=6x16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("error: input 'x' (#0): '" + exact_path + "' has 320 bytes but shape 6x16 needs 384 (or the bound "
                          "shape 64x16 4096); give an exactly sized or bound-sized file"),
            std::string::npos)
      << r.output;
  // Neither exactly sized nor bound-sized: refused too (it used to be accepted when larger).
  std::vector<float> odd(7 * 16, 1.f);
  std::string odd_path = ::kiln::testing::scratch_dir() + "/x_odd.bin";
  write_floats(odd_path, odd);
  r = run_command(bin("kiln_runner") + " --model_path=" + path_ + " --inputs=" + odd_path + " --input_shapes=5x16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("has 448 bytes but shape 5x16 needs 320"), std::string::npos) << r.output;
}

// The server protocol, one table row per request: every line gets exactly one reply line
// ("request N: ok" or "request N: error: ..."), whatever it holds, and the server keeps going.
TEST_F(MlpE2E, ServerAnswersEveryRequestOfTheTable) {
  std::string dir = ::kiln::testing::scratch_dir() + "/server_dir";
  std::filesystem::create_directories(dir);
  struct Row {
    std::string line, reply;  // reply: a piece of the one reply line expected
  };
  const std::vector<Row> rows = {
      {"--input_shapes=3x16", "ok"},
      {"", "error: empty request"},
      {"   \t ", "error: empty request"},
      {"--print_output=xyz", "error: --print_output must be none, summary or all, got 'xyz'"},
      {"--inputs=" + dir, "error: cannot read '" + dir + "': it is a directory"},
      {"--inputs=/nonexistent.npy", "error: cannot open '/nonexistent.npy'"},
      {"--input_shapes=65x16", "error:"},
      {"--input_shapes=2x16\r", "ok"},  // CRLF line endings
      {"--bogus=1", "error: unknown request field '--bogus'"},
      {"--input_shapes=" + std::string(70000, '1'), "error: request line of 70015 bytes is longer than the 65536-byte limit"},
      {"--input_shapes=1x16 --print_output=none", "ok"},
  };
  std::string in;
  for (const Row& r : rows) in += r.line + "\n";
  in += "quit\r\n--input_shapes=1x16\n";  // quit with CRLF stops: the request after it is not run
  tooling::RunnerOptions o;
  o.model_path = path_;
  o.server_mode = true;
  o.print_output = "none";
  std::istringstream is(in);
  std::ostringstream os, es;
  ASSERT_EQ(tooling::run_runner(o, is, os, es), 0) << es.str();
  std::vector<std::string> replies;
  std::istringstream lines(os.str());
  for (std::string l; std::getline(lines, l);)
    if (l.rfind("request ", 0) == 0) replies.push_back(l);
  ASSERT_EQ(replies.size(), rows.size()) << os.str();
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(replies[i].rfind("request " + std::to_string(i + 1) + ": ", 0), 0u) << replies[i];
    EXPECT_NE(replies[i].find(rows[i].reply), std::string::npos) << "row " << i << ": " << replies[i];
    EXPECT_LT(replies[i].size(), 2100u) << "row " << i << ": a reply is cut, not the whole bad line";
  }
}

TEST_F(MlpE2E, NoInputShapesMeansTheBound) {
  CommandResult a = run_command(bin("kiln_runner") + " --model_path=" + path_ + " --print_output=all");
  CommandResult b = run_command(bin("kiln_runner") + " --model_path=" + path_ + " --input_shapes=64x16 --print_output=all");
  ASSERT_EQ(a.exit_code, 0);
  auto strip = [](std::string s) { return s.substr(s.find("Output 0")); };
  EXPECT_EQ(strip(a.output), strip(b.output));
  EXPECT_NE(a.output.find("64x10"), std::string::npos);
  // The runner says what it runs: the bound, and that nobody asked for another shape.
  EXPECT_NE(a.output.find("Input 0 'x': f32 64x16 (ones, at the bound: no --input_shapes given)"), std::string::npos)
      << a.output;
  EXPECT_NE(b.output.find("Input 0 'x': f32 64x16 (ones, at --input_shapes)"), std::string::npos) << b.output;
}

TEST_F(MlpE2E, ContractErrorsExitNonZero) {
  CommandResult r = run_command(bin("kiln_runner") + " --model_path=" + path_ + " --input_shapes=65x16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("error: bind: input 'x' (#0) dim 0 ('batch') is 65, outside its range [1, 64]"), std::string::npos)
      << r.output;
  r = run_command(bin("kiln_runner") + " --model_path=" + path_ + " --input_shapes=2x17");
  EXPECT_NE(r.output.find("dim 1 is 17 but the program fixed it to 16 (exported from example shape 8x16)"), std::string::npos)
      << r.output;
  for (const char* bad : {"1x", "2x16x", ",,", "1,,2", "x16"}) {
    r = run_command(bin("kiln_runner") + " --model_path=" + path_ + " --input_shapes=" + bad);
    EXPECT_EQ(r.exit_code, 1) << bad;
    EXPECT_NE(r.output.find("error: cannot parse shape"), std::string::npos) << bad << ": " << r.output;
  }
  r = run_command(bin("kiln_runner") + " --model_path=" + path_ + " --num_executions=0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--num_executions must be at least 1"), std::string::npos) << r.output;
  r = run_command(bin("kiln_runner") + " --model_path=/nonexistent.kiln");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("cannot open program '/nonexistent.kiln'"), std::string::npos) << r.output;
}

// Both shape syntaxes everywhere: sizes joined by 'x' (shapes by ','), or by ',' (shapes by
// ';' or in brackets); a one-input method reads "2,16" as one shape.
TEST_F(MlpE2E, BothShapeSyntaxesAreAccepted) {
  for (const char* shapes : {"2x16", "2,16", "[2,16]", "2,16;"}) {
    CommandResult r = run_command(bin("kiln_runner") + " --model_path=" + path_ + " --input_shapes='" + shapes + "'");
    if (std::string(shapes) == "2,16;") {  // a trailing separator is refused
      EXPECT_NE(r.output.find("error: cannot parse shapes '2,16;'"), std::string::npos) << r.output;
      continue;
    }
    EXPECT_EQ(r.exit_code, 0) << shapes << ": " << r.output;
    EXPECT_NE(r.output.find("Output 0 'probs': f32 2x10"), std::string::npos) << shapes << ": " << r.output;
    r = run_command(bin("kiln") + " check " + path_ + " --input_shapes='" + shapes + "'");
    EXPECT_EQ(r.exit_code, 0) << shapes << ": " << r.output;
  }
  auto two = tooling::parse_shapes("1,3,224,224;1,4", 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<std::vector<int64_t>>{{1, 3, 224, 224}, {1, 4}}));
  two = tooling::parse_shapes("[1,3,224,224],[1,4]");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<std::vector<int64_t>>{{1, 3, 224, 224}, {1, 4}}));
  auto ranks1 = tooling::parse_shapes("5,7", 2);  // two inputs: one rank-1 shape each
  ASSERT_TRUE(ranks1.ok());
  EXPECT_EQ(*ranks1, (std::vector<std::vector<int64_t>>{{5}, {7}}));
  EXPECT_FALSE(tooling::parse_shapes("[1,2]x").ok());
  EXPECT_FALSE(tooling::parse_shapes("[1,2],").ok());
}

TEST_F(MlpE2E, ServerModeKeepsServingAfterABadRequest) {
  std::string p1 = ::kiln::testing::scratch_dir() + "/srv1", p3 = ::kiln::testing::scratch_dir() + "/srv3";
  std::string requests = "--input_shapes=1x16 --output_file=" + p1 + "\n" + "--input_shapes=100x16\n" +
                         "--bogus=1\n" + "--input_shapes=7x16 --output_file=" + p3 + "\nquit\n";
  CommandResult r = run_command(bin("kiln_runner") + " --model_path=" + path_ + " --server_mode --print_output=none", requests);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("request 1: ok"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("request 2: error: bind: input 'x' (#0) dim 0 ('batch') is 100, outside its range [1, 64]"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("request 3: error: unknown request field '--bogus'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("request 4: ok"), std::string::npos) << r.output;
  std::vector<float> ones(7 * 16, 1.0f);
  expect_close(read_floats(p1 + "-0.bin"), mlp_reference(model_, ones, 1), 1e-5, "server request 1");
  expect_close(read_floats(p3 + "-0.bin"), mlp_reference(model_, ones, 7), 1e-5, "server request 4");
}

// ---- CNN -----------------------------------------------------------------------------

TEST(CnnE2E, DynamicHeightAndWidthFarBelowTheBound) {
  auto m = tooling::make_cnn_example();
  ASSERT_TRUE(m.ok());
  std::string path = write_example(*m, "cnn.kiln");
  struct Case { int64_t n, h, w; };
  for (Case c : {Case{4, 64, 64}, Case{1, 1, 1}, Case{1, 3, 3}, Case{2, 17, 17}, Case{1, 17, 5}, Case{3, 64, 1}, Case{1, 2, 33}}) {
    std::vector<float> x = random_input(static_cast<size_t>(c.n * 3 * c.h * c.w), static_cast<uint32_t>(c.h * 100 + c.w));
    std::string in = ::kiln::testing::scratch_dir() + "/cnn_x.npy", out = ::kiln::testing::scratch_dir() + "/cnn_out";
    ASSERT_TRUE(tooling::write_npy(in, DType::kF32, {c.n, 3, c.h, c.w}, x.data()).ok());
    CommandResult r = run_command(bin("kiln_runner") + " --model_path=" + path + " --inputs=" + in + " --output_file=" + out +
                                  " --print_output=none");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::string what = std::to_string(c.n) + "x3x" + std::to_string(c.h) + "x" + std::to_string(c.w);
    expect_close(read_floats(out + "-0.bin"), cnn_reference(*m, x, c.n, c.h, c.w), 1e-4, what);
  }
}

// A bound-sized raw file holds the bound's layout: a smaller shape reads its block [0, shape)
// of every axis (the surplus rows and columns skipped), not the file's leading bytes.
TEST(CnnE2E, BoundSizedBinIsReadAtTheBoundLayout) {
  auto m = tooling::make_cnn_example();
  ASSERT_TRUE(m.ok());
  std::string path = write_example(*m, "cnn_bin.kiln");
  auto program = Program::load(path);
  ASSERT_TRUE(program.ok());
  auto method = Method::create(**program, "forward");
  ASSERT_TRUE(method.ok());
  const std::vector<int64_t> b = (*method)->bound_shapes()[0];
  ASSERT_EQ(b.size(), 4u);
  std::vector<float> bound = random_input(static_cast<size_t>(b[0] * b[1] * b[2] * b[3]), 7);
  const std::string in = ::kiln::testing::scratch_dir() + "/cnn_bound.bin", out = ::kiln::testing::scratch_dir() + "/cnn_bin_out";
  write_floats(in, bound);
  const int64_t n = 2, h = 17, w = 5;
  std::vector<float> block;  // [0, n) x [0, 3) x [0, h) x [0, w) of the bound-shaped array
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) block.push_back(bound[static_cast<size_t>(((i * b[1] + c) * b[2] + y) * b[3] + x)]);
  CommandResult r = run_command(bin("kiln_runner") + " --model_path=" + path + " --inputs=" + in +
                                " --input_shapes=2x3x17x5 --output_file=" + out + " --print_output=none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("read at its bound layout " + tooling::shape_string(b)), std::string::npos) << r.output;
  expect_close(read_floats(out + "-0.bin"), cnn_reference(*m, block, n, h, w), 1e-4, "bound-layout bin");
  // An exactly sized file is read as is.
  const std::string exact = ::kiln::testing::scratch_dir() + "/cnn_exact.bin";
  write_floats(exact, block);
  r = run_command(bin("kiln_runner") + " --model_path=" + path + " --inputs=" + exact +
                  " --input_shapes=2x3x17x5 --output_file=" + out + " --print_output=none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_close(read_floats(out + "-0.bin"), cnn_reference(*m, block, n, h, w), 1e-4, "exact bin");
}

// A damaged file or input gives one line of error and exit code 1, never a crash.
void expect_one_line_error(const CommandResult& r, const std::string& text) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(text), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST(CnnE2E, DamagedNpyInputsFailWithOneLine) {
  // Regression: an empty shape field threw out of read_npy (abort), dims whose product passed
  // 2^63 overflowed, and "(1x, 3, 4, 4)" or negative dims were accepted.
  auto m = tooling::make_cnn_example();
  ASSERT_TRUE(m.ok());
  std::string model = write_example(*m, "cnn_damaged_npy.kiln");
  struct Case { const char* shape; const char* error; };
  for (Case c : {Case{"", "shape  is not a tuple of non-negative integers"},
                 Case{"5", "shape 5 is not a tuple of non-negative integers"},
                 Case{"(1x, 3, 4, 4)", "shape (1x, 3, 4, 4) is not a tuple of non-negative integers"},
                 Case{"(-1, -3, 4, 4)", "shape (-1, -3, 4, 4) is not a tuple of non-negative integers"},
                 Case{"(1, , 4, 4)", "shape (1, , 4, 4) is not a tuple of non-negative integers"},
                 Case{"(4294967296, 4294967296, 4, 4)", "holds 192 data bytes but its shape needs more than 2^64"},
                 Case{"(1, 3, 4, 5)", "holds 192 data bytes but its shape needs 240"}}) {
    std::string header = std::string("{'descr': '<f4', 'fortran_order': False, 'shape': ") + c.shape + "}";
    std::string path = ::kiln::testing::scratch_dir() + "/damaged.npy";
    {
      std::ofstream f(path, std::ios::binary);
      f << "\x93NUMPY" << '\x01' << '\x00' << static_cast<char>(header.size()) << '\x00' << header;
      f << std::string(192, '\0');
    }
    expect_one_line_error(run_command(bin("kiln_runner") + " --model_path=" + model + " --inputs=" + path), c.error);
  }
}

TEST(CnnE2E, DamagedProgramsFailWithOneLine) {
  auto m = tooling::make_cnn_example();
  ASSERT_TRUE(m.ok());
  std::string model = write_example(*m, "cnn_damaged.kiln");
  std::ifstream in(model, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string cut = ::kiln::testing::scratch_dir() + "/cnn_cut.kiln";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, 500);
  expect_one_line_error(run_command(bin("kiln") + " inspect " + cut), "damaged program");
  expect_one_line_error(run_command(bin("kiln_runner") + " --model_path=" + cut), "damaged program");
}

// Both tools say which Kiln they are and which .kiln format it reads.
TEST(Tools, PrintTheirVersion) {
  const std::string expected = std::string(" ") + KILN_VERSION_STRING + " (.kiln format version " +
                               std::to_string(KILN_FORMAT_VERSION) + ")\n";
  for (const char* tool : {"kiln", "kiln_runner"}) {
    CommandResult r = run_command(bin(tool) + " --version");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, tool + expected);
  }
}

TEST(CnnE2E, InspectAndCheck) {
  auto m = tooling::make_cnn_example();
  ASSERT_TRUE(m.ok());
  std::string path = write_example(*m, "cnn_inspect.kiln");
  CommandResult r = run_command(bin("kiln") + " inspect " + path + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  auto& meth = j["methods"][0];
  EXPECT_EQ(meth["inputs"][0]["shape_text"], "[batch, 3, H, W]");
  EXPECT_EQ(meth["inputs"][0]["shape"][2]["dim"], "H");
  EXPECT_EQ(meth["inputs"][0]["shape"][2]["max"], 64);
  EXPECT_EQ(meth["outputs"][0]["shape_text"], "[batch, 10]");
  EXPECT_GE(meth["arena_bytes"].get<uint64_t>(), meth["lower_bound_bytes"].get<uint64_t>());
  EXPECT_EQ(meth["instructions_by_op"]["Conv"], 2);
  r = run_command(bin("kiln") + " check " + path + " --input_shapes=1x3x17x17");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_command(bin("kiln") + " check " + path + " --input_shapes=1x3x65x17");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("no: bind: input 'pixels' (#0) dim 2 ('H') is 65, outside its range [1, 64]"), std::string::npos)
      << r.output;
  r = run_command(bin("kiln") + " sweep " + path + " --samples=5");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ok    1x3x1x1"), std::string::npos) << r.output;    // every dim at its min
  EXPECT_NE(r.output.find("ok    4x3x64x64"), std::string::npos) << r.output;  // at the bound
  EXPECT_NE(r.output.find("7 passed, 0 failed"), std::string::npos) << r.output;
  r = run_command(bin("kiln") + " inspect " + path);
  EXPECT_NE(r.output.find("'pixels' f32 [batch, 3, H, W]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" constant bytes (the constant segment, 64-byte alignment included), .kiln format version " +
                          std::to_string(KILN_FORMAT_VERSION) + "\n"),
            std::string::npos) << r.output;
  EXPECT_EQ(j["format_version"], KILN_FORMAT_VERSION);
  // The arena at a shape: what the values take there against the bytes alive at once.
  r = run_command(bin("kiln") + " inspect " + path + " --arena-at=1x3x16x16");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("portable  at 1x3x16x16: 7168 bytes in use, live lower bound 7168 (1.000x)"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// --profile: one row per step of the run (every instruction accounted for), sorted by time,
// an aggregate by op type, the run summary, and the same rows as JSON.
TEST(RunnerProfile, PrintsEveryStepAndWritesJson) {
  const std::string path = scratch_dir() + "/profile_resnet.kiln", json = scratch_dir() + "/profile.json";
  CommandResult e = run_command(bin("kiln") + " export " + std::string(KILN_SOURCE_DIR) +
                                "/zoo/models/resnet_small.onnx -o " + path + " --dim batch=1..8");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  for (const char* delegate : {"xnnpack", "none"}) {
    CommandResult r = run_command(bin("kiln_runner") + " --model_path=" + path + " --input_shapes=2x3x64x64 " +
                                  "--num_executions=3 --print_output=none --profile --profile_json=" + json +
                                  " --delegate=" + delegate);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("Summary of 3 executions: first "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("Profile over 2 execution(s)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("By op type:"), std::string::npos) << r.output;
    std::ifstream f(json);
    auto j = nlohmann::json::parse(f, nullptr, false);
    ASSERT_TRUE(j.is_array()) << r.output;
    size_t convs = 0;
    for (const auto& row : j) {
      EXPECT_EQ(row["runs"], 2);
      EXPECT_EQ(row["path"], std::string(delegate) == "none" ? "portable" : "xnnpack");
      if (row["op"].get<std::string>().rfind("Conv", 0) != 0) continue;
      ++convs;
      EXPECT_EQ(row["shape"].get<std::string>().substr(0, 2), "2x");
    }
    EXPECT_EQ(convs, 12u) << "every Conv of resnet_small is one row (" << delegate << ")";
    EXPECT_NE(r.output.find("Threads: 1; the caller was on a core "), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("parallel jobs"), std::string::npos) << "one thread has no pool counts\n" << r.output;
  }
  // Two threads: what the pool did per execution (numbers depend on the machine's load).
  CommandResult r = run_command(bin("kiln_runner") + " --model_path=" + path + " --input_shapes=2x3x64x64 " +
                                "--num_executions=3 --print_output=none --profile --cpu_threads=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Threads: 2; the caller was on a core "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("; per execution "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("% of their items on the workers; the caller waited "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" jobs on the caller alone (the workers found no free core)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// --image: input 0 from a PNG on disk, fitted (letterbox) and normalized, gives what the same
// tensor gives as an .npy; the runner says where the pixels came from; bad uses are errors.
TEST(RunnerImage, FeedsAnImageFittedToTheInput) {
  auto m = tooling::make_cnn_example();
  ASSERT_TRUE(m.ok());
  const std::string dir = scratch_dir(), path = write_example(*m, "cnn_image.kiln"), png = dir + "/frame.png";
  image::Image frame{48, 30, 3, std::vector<uint8_t>(48 * 30 * 3)};
  for (size_t i = 0; i < frame.pixels.size(); ++i) frame.pixels[i] = static_cast<uint8_t>((i * 37) % 251);
  ASSERT_TRUE(stbi_write_png(png.c_str(), 48, 30, 3, frame.pixels.data(), 48 * 3));
  CommandResult r = run_command(bin("kiln_runner") + " --model_path=" + path + " --image=" + png +
                                " --preprocess=letterbox --pad=114 --mean=0.5 --std=0.25 --input_shapes=1x3x32x32 "
                                "--output_file=" + dir + "/img_out --print_output=none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Input 0 'pixels': f32 1x3x32x32 (image '" + png + "' 48x30, letterbox to 32x32: source = "
                          "(pixel - (0, 6)) / (0.666667, 0.666667))"),
            std::string::npos) << r.output;
  // The same pixels as an .npy.
  const image::Image fitted = image::fit(frame, 32, 32, image::Mode::kLetterbox, 114);
  std::vector<float> x(3 * 32 * 32);
  ASSERT_TRUE(image::to_tensor(fitted, {0.5f}, {0.25f}, true, x.data()).ok());
  ASSERT_TRUE(tooling::write_npy(dir + "/img_in.npy", DType::kF32, {1, 3, 32, 32}, x.data()).ok());
  r = run_command(bin("kiln_runner") + " --model_path=" + path + " --inputs=" + dir + "/img_in.npy --output_file=" + dir +
                  "/npy_out --print_output=none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_floats(dir + "/img_out-0.bin"), read_floats(dir + "/npy_out-0.bin"));
  // Errors: a model whose input 0 is no image, an unknown mode, a file that is no image.
  auto mlp = tooling::make_mlp_example();
  ASSERT_TRUE(mlp.ok());
  r = run_command(bin("kiln_runner") + " --model_path=" + write_example(*mlp, "mlp_image.kiln") + " --image=" + png);
  EXPECT_NE(r.output.find("error: --image feeds input 0, which must be f32 of rank 4 (NCHW or NHWC)"), std::string::npos) << r.output;
  r = run_command(bin("kiln_runner") + " --model_path=" + path + " --image=" + png + " --preprocess=squash --input_shapes=1x3x8x8");
  EXPECT_NE(r.output.find("error: unknown preprocessing 'squash'; use resize, crop or letterbox"), std::string::npos) << r.output;
  r = run_command(bin("kiln_runner") + " --model_path=" + path + " --image=" + path + " --input_shapes=1x3x8x8");
  EXPECT_NE(r.output.find("(PNG, JPEG and BMP are read)"), std::string::npos) << r.output;
  // No --input_shapes on a dynamic batch: the bound's batch of 4 is no single image; the error
  // gives the flag to add.
  r = run_command(bin("kiln_runner") + " --model_path=" + path + " --image=" + png);
  EXPECT_NE(r.output.find("it is 4x3x64x64 (without --input_shapes the runner takes the bound); one image is batch 1: add "
                          "--input_shapes=1x3x64x64"),
            std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// kiln check --explain: a static 224x224 export asked for 256x320 prints the three ways out as
// commands, each with its cost from a trial export of the model.
TEST(CheckExplain, PrintsTheThreeWaysOutWithTheirCosts) {
  const std::string model = std::string(KILN_SOURCE_DIR) + "/zoo/models/mobilenet_v2.onnx";
  const std::string path = scratch_dir() + "/mnv2_224.kiln";
  CommandResult r = run_command(bin("kiln") + " export " + model + " -o " + path + " --dim batch=1 --dim H=224 --dim W=224");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(bin("kiln") + " check " + path + " --input_shapes=1x3x256x320 --explain --model=" + model);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  for (const std::string& line :
       {std::string("no: bind: input 'pixels' (#0) dim 2 is 256 but the program fixed it to 224"),
        "kiln_runner --model_path=" + path + " --image=FRAME --preprocess=letterbox   (20% of the input is padding; the "
        "frame is scaled by 0.700)",
        std::string("... --preprocess=crop   (20% of the frame is cut away)"),
        "kiln export " + model + " -o OUT.kiln --input pixels=1,3,H,W --dim H=224..256 --dim W=224..320",
        std::string("(buckets go over one dim; these shapes differ from the program's on axes of different sizes"),
        std::string("   2. arena ")})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\nnot in:\n" << r.output;
  // One axis differs: buckets over it, as one kiln export --bucket command.
  r = run_command(bin("kiln") + " check " + path + " --input_shapes=1x3x224x320 --explain");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("kiln export MODEL.onnx -o OUT.kiln --input pixels=1,3,224,W --bucket W=224,320"), std::string::npos)
      << r.output;
  // Admitted shapes: nothing to explain; without the model: the commands, and how to get costs.
  r = run_command(bin("kiln") + " check " + path + " --input_shapes=1x3x224x224 --explain");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_command(bin("kiln") + " check " + path + " --input_shapes=1x3x256x320 --explain");
  EXPECT_NE(r.output.find("(costs: give --model=MODEL.onnx and each export is tried"), std::string::npos) << r.output;
}

// A dynamic H, W on a step of 32: a 100x100 frame is fitted to the nearest admissible 96x96,
// not scaled to the bound.
TEST(CheckExplain, HostNormalizationTargetsTheNearestAdmissibleSize) {
  const std::string model = std::string(KILN_SOURCE_DIR) + "/zoo/models/mobilenet_v2.onnx";
  const std::string path = scratch_dir() + "/mnv2_step32.kiln";
  CommandResult r = run_command(bin("kiln") + " export " + model + " -o " + path +
                                " --dim batch=1 --dim H=32..224:32 --dim W=32..224:32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command(bin("kiln") + " check " + path + " --input_shapes=1x3x100x100 --explain");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("kiln_runner --model_path=" + path + " --image=FRAME --input_shapes=1x3x96x96 --preprocess=letterbox"
                          "   (0% of the input is padding; the frame is scaled by 0.960)"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kiln.image.preprocess(FRAME, (96, 96), mode=...)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// Runs argv (stdout and stderr to `log`) and measures the child's peak resident memory.
struct Measured {
  int exit_code = -1;
  std::string output;
  long max_rss_kb = 0;
};

Measured run_measured(const std::vector<std::string>& argv) {
  Measured m;
  const std::string log = ::kiln::testing::scratch_dir() + "/measured.log";
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  if (pid > 0 && wait4(pid, &status, 0, &ru) == pid) {
    m.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    m.max_rss_kb = ru.ru_maxrss;
  }
  std::ifstream f(log);
  m.output.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return m;
}

// Conv(3->16, 3x3, pad 1) + Relu + Conv(16->16, 3x3, pad 1) over x [batch, 3, H, W]: at the bound
// 256x3x4096x4096 its arena is ~600 GB.
struct ConvModel {
  std::vector<float> w1, b1, w2, b2;
  std::string onnx;
};

ConvModel make_conv_model(const std::string& file) {
  ConvModel c;
  c.w1 = tooling::example_weights(11, 16 * 3 * 9, 0.3f);
  c.b1 = tooling::example_weights(12, 16, 0.1f);
  c.w2 = tooling::example_weights(13, 16 * 16 * 9, 0.2f);
  c.b2 = tooling::example_weights(14, 16, 0.1f);
  OnnxModel o(13);
  o.input("x", {"batch", "3", "H", "W"}).output("y");
  o.floats("w1", {16, 3, 3, 3}, c.w1).floats("b1", {16}, c.b1).floats("w2", {16, 16, 3, 3}, c.w2).floats("b2", {16}, c.b2);
  for (const char* conv : {"conv1", "conv2"}) {
    const bool first = std::string(conv) == "conv1";
    auto& n = o.node("Conv", conv, {first ? "x" : "r", first ? "w1" : "w2", first ? "b1" : "b2"}, {first ? "c" : "y"});
    OnnxModel::attr_ints(n, "kernel_shape", {3, 3});
    OnnxModel::attr_ints(n, "pads", {1, 1, 1, 1});
    if (first) o.node("Relu", "relu", {"c"}, {"r"});
  }
  c.onnx = o.save(file);
  return c;
}

std::vector<double> conv_model_reference(const ConvModel& c, const std::vector<float>& x, int64_t n, int64_t h, int64_t w) {
  int64_t oh, ow;
  std::vector<double> a = conv_ref(std::vector<double>(x.begin(), x.end()), n, 3, h, w, c.w1, c.b1, 16, 3, 1, 1, &oh, &ow);
  for (double& v : a) v = std::max(v, 0.0);
  return conv_ref(a, n, 16, oh, ow, c.w2, c.b2, 16, 3, 1, 1, &oh, &ow);
}

const char* const kHugeDims = " --dim batch=1..256 --dim H=1..4096 --dim W=1..4096";

// Peak RSS of a run at a small shape of that ~600 GB bound: 32 MiB, or 48 under AddressSanitizer,
// whose own shadow and the instrumented binary alone took ~32 MiB (33.0-33.4 MiB measured).
#if defined(__SANITIZE_ADDRESS__)
constexpr long kSmallRunRssKb = 48 * 1024;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr long kSmallRunRssKb = 48 * 1024;
#else
constexpr long kSmallRunRssKb = 32 * 1024;
#endif
#else
constexpr long kSmallRunRssKb = 32 * 1024;
#endif

// Issue 21: a ~600 GB bound, run at 1x3x32x32 with --max_shapes: right, and in a few MB.
TEST(RunnerActualShape, HugeBoundRunsSmallInAFewMegabytes) {
  const ConvModel c = make_conv_model("conv_huge.onnx");
  const std::string kiln_path = ::kiln::testing::scratch_dir() + "/conv_huge.kiln";
  CommandResult e = run_command(bin("kiln") + " export " + c.onnx + " -o " + kiln_path + kHugeDims + " --max-arena=0");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  auto program = Program::load(kiln_path);
  ASSERT_TRUE(program.ok());
  auto meta = (*program)->method_meta("forward");
  ASSERT_TRUE(meta.ok());
  ASSERT_GT(std::max(meta->arena_bytes, meta->delegate.arena_bytes), uint64_t{500} << 30) << e.output;
  // inspect creates its Method for the smallest shapes: the delegate is reported, not the arena's failure.
  Measured inspect = run_measured({bin("kiln"), "inspect", kiln_path});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("packed weights"), std::string::npos) << inspect.output;
  EXPECT_LT(inspect.max_rss_kb, kSmallRunRssKb) << inspect.output;

  const std::vector<float> x = random_input(3 * 32 * 32, 21);
  const std::string in = ::kiln::testing::scratch_dir() + "/conv_x.npy", out = ::kiln::testing::scratch_dir() + "/conv_out";
  ASSERT_TRUE(tooling::write_npy(in, DType::kF32, {1, 3, 32, 32}, x.data()).ok());
  const std::vector<double> want = conv_model_reference(c, x, 1, 32, 32);
  for (const std::string delegate : {"xnnpack", "none"}) {
    // With .npy input and without: ones at --input_shapes.
    Measured r = run_measured({bin("kiln_runner"), "--model_path=" + kiln_path, "--inputs=" + in, "--max_shapes=1x3x32x32",
                               "--output_file=" + out, "--print_output=summary", "--delegate=" + delegate});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("Arena: "), std::string::npos) << r.output;
    expect_close(read_floats(out + "-0.bin"), want, 1e-4, "conv at 1x3x32x32, " + delegate);
    EXPECT_LT(r.max_rss_kb, kSmallRunRssKb) << "peak RSS " << r.max_rss_kb << " KiB\n" << r.output;
    Measured ones = run_measured({bin("kiln_runner"), "--model_path=" + kiln_path, "--input_shapes=1x3x32x32",
                                  "--max_shapes=1x3x64x64", "--print_output=summary", "--delegate=" + delegate});
    ASSERT_EQ(ones.exit_code, 0) << ones.output;
    EXPECT_NE(ones.output.find("Input 0 'x': f32 1x3x32x32 (ones, at --input_shapes)"), std::string::npos) << ones.output;
    EXPECT_LT(ones.max_rss_kb, kSmallRunRssKb) << "peak RSS " << ones.max_rss_kb << " KiB\n" << ones.output;
  }
}

// The arena at the bound cannot be allocated: one line naming the arena, its size and the
// shapes it was planned for, never bad_alloc. The address space is capped (ulimit -v), so the
// failure does not depend on the machine's memory or its overcommit policy.
TEST(RunnerActualShape, AnArenaThatCannotBeAllocatedIsAOneLineError) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of shadow memory: it cannot start under ulimit -v";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of shadow memory: it cannot start under ulimit -v";
#endif
#endif
  const ConvModel c = make_conv_model("conv_huge_fail.onnx");
  const std::string kiln_path = ::kiln::testing::scratch_dir() + "/conv_huge_fail.kiln";
  CommandResult e = run_command(bin("kiln") + " export " + c.onnx + " -o " + kiln_path + kHugeDims + " --max-arena=0");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const std::string capped = "bash -c 'ulimit -v 4194304; exec " + bin("kiln_runner") + " --model_path=" + kiln_path;
  CommandResult r = run_command(capped + " --input_shapes=1x3x32x32'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.rfind("error: cannot allocate the arena for method 'forward': ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("GiB ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("planned at the bound 256x3x4096x4096); give max_shapes"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("bad_alloc"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  // --max_shapes that still do not fit say so, with the shapes asked for.
  r = run_command(capped + " --input_shapes=1x3x32x32 --max_shapes=64x3x2048x2048'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: cannot allocate the arena for method 'forward': "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("planned for max_shapes 64x3x2048x2048); give smaller max_shapes"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

}  // namespace
}  // namespace kiln::testing
