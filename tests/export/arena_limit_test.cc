// What a contract costs (issue 21): the export summary gives the arena at the bound and at the
// minimum in human units; export warns above --warn-arena and refuses above --max-arena,
// naming the dims the arena grows with and a smaller bound that fits, found by a search that
// re-evaluates the plan (checked here by exporting again at the suggested bound).
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "e2e/e2e_util.h"
#include "export/onnx/onnx_import.h"
#include "export_test_util.h"
#include "onnx_model_util.h"
#include "tooling/export_report.h"

namespace kiln::testing {
namespace {

using exporter::parse_byte_size;

TEST(ArenaLimit, ParsesByteSizes) {
  const std::pair<const char*, uint64_t> ok[] = {
      {"4096", 4096},
      {"0", 0},
      {"512K", 512ull << 10},
      {"512M", 512ull << 20},
      {"2G", 2ull << 30},
      {"2g", 2ull << 30},
      {"1.5GiB", 3ull << 29},
      {"64GiB", 64ull << 30},
      {"1T", 1ull << 40},
      {"64GB", 64000000000ull},
      {"10kb", 10000},
      {"3 MiB", 3ull << 20},
      {"100B", 100},
  };
  for (const auto& [text, want] : ok) {
    auto got = parse_byte_size(text);
    ASSERT_TRUE(got.ok()) << text << ": " << got.status().message();
    EXPECT_EQ(*got, want) << text;
  }
  for (const char* bad : {"", "G", "2X", "1.2.3G", "-1", "2GX", "lots", "1e9", "99999999999999999999T"}) {
    auto got = parse_byte_size(bad);
    EXPECT_FALSE(got.ok()) << bad;
    if (!got.ok()) {
      EXPECT_EQ(got.status().message(), "cannot parse the size '" + std::string(bad) +
                                            "': write bytes, or a number with K, M, G or T (powers of 1024, also KiB, "
                                            "MiB, GiB, TiB) or KB, MB, GB, TB (powers of 1000), e.g. 512M, 2G, 1.5GiB");
    }
  }
}

// y = Relu(x) over x [batch, 3, H, W]: the arena holds x and y, 24 bytes per batch*H*W.
std::string relu_model(const std::string& file) {
  OnnxModel m;
  m.input("x", {"batch", "3", "H", "W"}).output("y");
  m.node("Relu", "relu", {"x"}, {"y"});
  return m.save(file);
}

struct Exported {
  Result<exporter::ExportReport> report = Status(Code::kInternal, "not run");
  format::ProgramDesc program;
};

Exported export_with(const std::string& model, const std::vector<std::string>& dim_args, uint64_t max_arena,
                     uint64_t warn_arena = ExportOptions::kDefaultWarnArena) {
  Exported e;
  ExportOptions o = dims(dim_args);
  o.delegate = "none";
  o.max_arena_bytes = max_arena;
  o.warn_arena_bytes = warn_arena;
  e.report = exporter::export_onnx(model, o, &e.program);
  return e;
}

// The "--dim NAME=A..B" flags of a message's suggestion.
std::vector<std::string> suggested_dims(const std::string& message) {
  std::vector<std::string> out;
  const std::regex flag("--dim ([A-Za-z_]+=[0-9]+\\.\\.[0-9]+(:[0-9]+)?)");
  for (std::sregex_iterator it(message.begin(), message.end(), flag), end; it != end; ++it) out.push_back((*it)[1]);
  return out;
}

// The suggestion keeps every --dim the message does not mention.
std::vector<std::string> with_suggestion(const std::vector<std::string>& original, const std::vector<std::string>& suggested) {
  std::vector<std::string> out;
  for (const std::string& d : original) {
    const std::string name = d.substr(0, d.find('='));
    std::string use = d;
    for (const std::string& s : suggested)
      if (s.substr(0, s.find('=')) == name) use = s;
    out.push_back(use);
  }
  return out;
}

TEST(ArenaLimit, RefusesAboveTheLimitWithTheDimsAndABoundThatFits) {
  const std::string model = relu_model("relu_huge.onnx");
  const std::vector<std::string> huge = {"batch=1..256", "H=1..4096", "W=1..4096"};
  Exported e = export_with(model, huge, ExportOptions::kDefaultMaxArena);
  ASSERT_FALSE(e.report.ok());
  const std::string& msg = e.report.status().message();
  // 2 x 256*3*4096*4096*4 bytes = 96 GiB.
  EXPECT_EQ(msg.rfind("arena at the bound is 96 GiB (batch=256, H=4096, W=4096), over the limit of 64 GiB (128 bytes at "
                      "the minimum); lower the bounds, e.g. --dim ",
                      0),
            0u)
      << msg;
  EXPECT_NE(msg.find(", or raise --max-arena"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  // The suggestion fits: exported at it, under the same limit, the arena is within it.
  const std::vector<std::string> smaller = suggested_dims(msg);
  ASSERT_FALSE(smaller.empty()) << msg;
  Exported again = export_with(model, with_suggestion(huge, smaller), ExportOptions::kDefaultMaxArena);
  ASSERT_TRUE(again.report.ok()) << again.report.status().message();
  EXPECT_LE(again.report->arena_bytes, ExportOptions::kDefaultMaxArena);
  EXPECT_GT(again.report->arena_bytes, ExportOptions::kDefaultMaxArena / 4) << "the suggestion shrank more than needed";
  // --max-arena raises the limit (0: none); the warning threshold still speaks.
  Exported raised = export_with(model, huge, 200ull << 30);
  ASSERT_TRUE(raised.report.ok()) << raised.report.status().message();
  ASSERT_EQ(raised.report->warnings.size(), 1u);
  EXPECT_NE(raised.report->warnings[0].find("over the warning threshold of 1 GiB"), std::string::npos);
  EXPECT_NE(raised.report->warnings[0].find("or raise --warn-arena"), std::string::npos);
  Exported unlimited = export_with(model, huge, 0, 0);
  ASSERT_TRUE(unlimited.report.ok()) << unlimited.report.status().message();
  EXPECT_TRUE(unlimited.report->warnings.empty());
  EXPECT_EQ(unlimited.report->arena_bytes, 96ull << 30);
}

TEST(ArenaLimit, WarnsAboveTheThresholdAndSuggestsABoundUnderIt) {
  const std::string model = relu_model("relu_warn.onnx");
  const std::vector<std::string> big = {"batch=1..8", "H=32..2048:32", "W=32..2048:32"};  // 8*3*2048*2048*4*2 = 768 MiB
  Exported quiet = export_with(model, big, ExportOptions::kDefaultMaxArena);
  ASSERT_TRUE(quiet.report.ok()) << quiet.report.status().message();
  EXPECT_TRUE(quiet.report->warnings.empty());
  Exported e = export_with(model, big, ExportOptions::kDefaultMaxArena, 256ull << 20);
  ASSERT_TRUE(e.report.ok()) << e.report.status().message();
  ASSERT_EQ(e.report->warnings.size(), 1u);
  const std::string& w = e.report->warnings[0];
  EXPECT_EQ(w.rfind("arena at the bound is 768 MiB (batch=8, H=2048, W=2048), over the warning threshold of 256 MiB", 0), 0u) << w;
  const std::vector<std::string> smaller = suggested_dims(w);
  ASSERT_FALSE(smaller.empty()) << w;
  for (const std::string& s : smaller) EXPECT_NE(s.find(":32"), std::string::npos) << "the step is kept: " << w;
  Exported again = export_with(model, with_suggestion(big, smaller), ExportOptions::kDefaultMaxArena, 256ull << 20);
  ASSERT_TRUE(again.report.ok()) << again.report.status().message();
  EXPECT_TRUE(again.report->warnings.empty()) << again.report->warnings[0];
  // The summary says both sizes in human units, and the warning.
  const std::string summary = tooling::format_report(*e.report);
  EXPECT_NE(summary.find("memory: arena 768 MiB at the bound (805306368 bytes), 24 KiB at the minimum"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("  warning: arena at the bound is 768 MiB"), std::string::npos) << summary;
}

TEST(ArenaLimit, NoSmallerBoundFitsAStaticModel) {
  OnnxModel m;
  m.input("x", {"1", "3", "8192", "8192"}).output("y");  // 768 MiB each, static
  m.node("Relu", "relu", {"x"}, {"y"});
  Exported e = export_with(m.save("relu_static.onnx"), {}, 1ull << 30);
  ASSERT_FALSE(e.report.ok());
  EXPECT_EQ(e.report.status().message(),
            "arena at the bound is 1.5 GiB, over the limit of 1 GiB (1.5 GiB at the minimum); no smaller --dim bounds fit "
            "(the arena at the minimum is over it too): raise --max-arena");
}

TEST(ArenaLimit, TheCliTakesMaxArenaAndWarnsOnStderr) {
  const std::string model = relu_model("relu_cli.onnx");
  const std::string out = ::kiln::testing::scratch_dir() + "/relu_cli.kiln";
  const std::string cmd = bin("kiln") + " export " + model + " -o " + out + " --delegate none --dim batch=1..256 --dim H=1..4096 --dim W=1..4096";
  CommandResult r = run_command(cmd);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: export " + model + ": arena at the bound is 96 GiB (batch=256, H=4096, W=4096), over the "
                          "limit of 64 GiB"),
            std::string::npos)
      << r.output;
  r = run_command(cmd + " --max-arena=lots");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: --max-arena: cannot parse the size 'lots'"), std::string::npos) << r.output;
  r = run_command(cmd + " --max-arena=100G");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: arena at the bound is 96 GiB (batch=256, H=4096, W=4096), over the warning threshold "
                          "of 1 GiB"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("memory: arena 96 GiB at the bound (103079215104 bytes), 128 bytes at the minimum"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace kiln::testing
