// kiln export's one option parser (export/export_options.h): what `kiln export` and Python's
// kiln.export_onnx both call. Good flags in either spelling, each refusal's message, the
// --bucket repeat rule, and the command line that feeds it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "e2e/e2e_util.h"
#include "export/export_options.h"
#include "onnx_model_util.h"

namespace kiln::testing {
namespace {

using exporter::ExportFlag;
using exporter::ExportOptions;
using exporter::parse_export_flags;

ExportOptions parsed(const std::vector<ExportFlag>& flags) {
  auto o = parse_export_flags(flags);
  EXPECT_TRUE(o.ok()) << o.status().message();
  return o.ok() ? *o : ExportOptions{};
}

std::string refusal(const std::vector<ExportFlag>& flags) {
  auto o = parse_export_flags(flags);
  EXPECT_FALSE(o.ok());
  EXPECT_EQ(o.ok() ? Code::kOk : o.status().code(), Code::kInvalidArgument);
  return o.ok() ? "" : o.status().message();
}

TEST(ExportOptions, NoFlagsAreTheDefaults) {
  const ExportOptions o = parsed({});
  const ExportOptions d;
  EXPECT_EQ(o.method_name, d.method_name);
  EXPECT_EQ(o.delegate, "xnnpack");
  EXPECT_TRUE(o.fuse);
  EXPECT_EQ(o.require_coverage, 0);
  EXPECT_EQ(o.max_arena_bytes, ExportOptions::kDefaultMaxArena);
  EXPECT_EQ(o.warn_arena_bytes, ExportOptions::kDefaultWarnArena);
  EXPECT_TRUE(o.inputs.empty() && o.dims.empty() && o.consts.empty() && o.pads.empty() && o.bucket_sizes.empty());
}

// What --help shows as a default is what the option is when not given.
TEST(ExportOptions, EachSpecsDefaultTextParsesToTheDefault) {
  for (const exporter::ExportFlagSpec& s : exporter::export_flag_specs()) {
    if (!*s.default_text) continue;
    const ExportOptions given = parsed({{s.flag, s.default_text}});
    const ExportOptions d;
    EXPECT_EQ(given.method_name, d.method_name) << s.flag;
    EXPECT_EQ(given.delegate, d.delegate) << s.flag;
    EXPECT_EQ(given.max_arena_bytes, d.max_arena_bytes) << s.flag;
    EXPECT_EQ(given.warn_arena_bytes, d.warn_arena_bytes) << s.flag;
  }
}

TEST(ExportOptions, EveryFlagOfTheCommandLine) {
  const ExportOptions o = parsed({{"--input", "x=1,3,H,W"},
                                  {"--input", "sr="},
                                  {"--dim", "H=32..224:32"},
                                  {"--dim", "W=16"},
                                  {"--const", "sr=16000"},
                                  {"--method_name", "infer"},
                                  {"--delegate", "none"},
                                  {"--require-coverage", "0.9"},
                                  {"--bucket", "seq=32,16"},
                                  {"--pad", "mask=-1"},
                                  {"--pad", "ids=0.5"},
                                  {"--max-arena", "2G"},
                                  {"--warn-arena", "0"},
                                  {"--no-fusion", ""}});
  ASSERT_EQ(o.inputs.size(), 2u);
  EXPECT_EQ(o.inputs[0].first, "x");
  EXPECT_EQ(o.inputs[0].second, (std::vector<std::string>{"1", "3", "H", "W"}));
  EXPECT_EQ(o.inputs[1].first, "sr");
  EXPECT_TRUE(o.inputs[1].second.empty());
  ASSERT_EQ(o.dims.size(), 2u);
  EXPECT_EQ(o.dims[0].name, "H");
  EXPECT_EQ(o.dims[0].min, 32);
  EXPECT_EQ(o.dims[0].max, 224);
  EXPECT_EQ(o.dims[0].step, 32);
  EXPECT_TRUE(o.dims[1].pinned);
  EXPECT_EQ((o.consts), (std::vector<std::pair<std::string, std::string>>{{"sr", "16000"}}));
  EXPECT_EQ(o.method_name, "infer");
  EXPECT_EQ(o.delegate, "none");
  EXPECT_DOUBLE_EQ(o.require_coverage, 0.9);
  EXPECT_EQ(o.bucket_dim, "seq");
  EXPECT_EQ(o.bucket_sizes, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(o.pads, (std::map<std::string, double>{{"ids", 0.5}, {"mask", -1}}));
  EXPECT_EQ(o.max_arena_bytes, 2ull << 30);
  EXPECT_EQ(o.warn_arena_bytes, 0u);
  EXPECT_FALSE(o.fuse);
}

// Python's keywords name the same options: dashes dropped, '-' read as '_'.
TEST(ExportOptions, PythonSpellingIsTheSameOption) {
  const ExportOptions cli = parsed({{"--max-arena", "512M"}, {"--require-coverage", "0.5"}, {"--no-fusion", ""},
                                    {"--method_name", "m"}, {"--dim", "N=1..8"}});
  const ExportOptions py = parsed({{"max_arena", "512M"}, {"require_coverage", "0.5"}, {"no_fusion", ""},
                                   {"method_name", "m"}, {"dim", "N=1..8"}});
  EXPECT_EQ(cli.max_arena_bytes, py.max_arena_bytes);
  EXPECT_EQ(cli.require_coverage, py.require_coverage);
  EXPECT_EQ(cli.fuse, py.fuse);
  EXPECT_EQ(cli.method_name, py.method_name);
  ASSERT_EQ(py.dims.size(), 1u);
  EXPECT_EQ(py.dims[0].max, 8);
}

// Messages name the option as it was given.
TEST(ExportOptions, RefusalsNameTheOptionAsGiven) {
  EXPECT_EQ(refusal({{"--max-arena", "lots"}}).rfind("--max-arena: cannot parse the size 'lots': write bytes", 0), 0u);
  EXPECT_EQ(refusal({{"max_arena", "lots"}}).rfind("max_arena: cannot parse the size 'lots': write bytes", 0), 0u);
  EXPECT_EQ(refusal({{"--warn-arena", "1Q"}}).rfind("--warn-arena: cannot parse the size '1Q'", 0), 0u);
  EXPECT_EQ(refusal({{"--require-coverage", "1.5"}}),
            "cannot parse --require-coverage '1.5': write the share of FLOPs the delegate must take, from 0 to 1 (e.g. 0.9)");
  EXPECT_EQ(refusal({{"require_coverage", "most"}}),
            "cannot parse require_coverage 'most': write the share of FLOPs the delegate must take, from 0 to 1 (e.g. 0.9)");
  EXPECT_EQ(refusal({{"--no-fusion", "yes"}}), "--no-fusion takes no value, got 'yes'");
  EXPECT_EQ(refusal({{"--fusion", ""}}),
            "unknown export option '--fusion'; the options are --input, --dim, --const, --method_name, --delegate, "
            "--require-coverage, --bucket, --pad, --max-arena, --warn-arena, --no-fusion, --explain-fusion");
  EXPECT_EQ(refusal({{"--explain-fusion", "1"}}), "--explain-fusion takes no value, got '1'");
  EXPECT_EQ(refusal({{"--delegate", "xnnpack"}, {"--delegate", "none"}}),
            "--delegate is given twice ('xnnpack', then 'none'): give it once");
  EXPECT_EQ(refusal({{"--method_name", "a"}, {"method_name", "b"}}), "method_name is given twice ('a', then 'b'): give it once");
}

// The texts of the flags as they were before the one parser (tests and users read them).
TEST(ExportOptions, ValueSyntaxMessages) {
  EXPECT_EQ(refusal({{"--dim", "H=a..b"}}),
            "cannot parse --dim 'H=a..b': write NAME=MIN..MAX, NAME=MIN..MAX:STEP or NAME=VALUE (NAME=..MAX: a bound on "
            "a data-dependent size)");
  EXPECT_EQ(refusal({{"--input", "x=1,3,"}}), "cannot parse --input 'x=1,3,': empty axis");
  EXPECT_EQ(refusal({{"--input", "=1"}}),
            "cannot parse --input '=1': write NAME=D0,D1,... with integers or dim names (NAME= for a scalar)");
  EXPECT_EQ(refusal({{"--const", "sr"}}), "cannot parse --const 'sr': write NAME=VALUE");
  auto v = exporter::parse_const_value("sr", "abc");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), "--const sr=abc: the value is not a number");
  EXPECT_EQ(*exporter::parse_const_value("sr", "16000"), 16000.0);
  EXPECT_EQ(refusal({{"--bucket", "seq"}}), "cannot parse --bucket 'seq': write DIM=S1,S2,...");
  EXPECT_EQ(refusal({{"--bucket", "seq="}}), "cannot parse --bucket 'seq=': write DIM=S1,S2,...");
  EXPECT_EQ(refusal({{"--bucket", "seq=16,x"}}), "cannot parse --bucket 'seq=16,x': sizes are positive integers");
  EXPECT_EQ(refusal({{"--bucket", "seq=16,,32"}}), "cannot parse --bucket 'seq=16,,32': sizes are positive integers");
  EXPECT_EQ(refusal({{"--pad", "mask"}}), "cannot parse --pad 'mask': write INPUT=VALUE");
  EXPECT_EQ(refusal({{"--pad", "mask=x"}}), "cannot parse --pad 'mask=x': write INPUT=VALUE");
}

// Several --bucket flags over one dim combine their sizes; over two dims they are refused.
TEST(ExportOptions, BucketFlagsOverOneDimCombine) {
  const ExportOptions o = parsed({{"--bucket", "seq=16"}, {"--bucket", "seq=32,64"}});
  EXPECT_EQ(o.bucket_dim, "seq");
  EXPECT_EQ(o.bucket_sizes, (std::vector<int64_t>{16, 32, 64}));
  EXPECT_EQ(refusal({{"--bucket", "seq=16"}, {"--bucket", "batch=2"}}),
            "--bucket is given for dims 'seq' and 'batch'; buckets go over one dim: give its sizes as --bucket "
            "seq=S1,S2,... (flags over one dim combine their sizes)");
}

// Repeats that add are kept in order: --input, --dim, --const, --pad (the last pad per input).
TEST(ExportOptions, RepeatsThatAdd) {
  const ExportOptions o = parsed({{"--dim", "b=1..2"}, {"--dim", "a=1..3"}, {"--pad", "m=1"}, {"--pad", "m=2"},
                                  {"--const", "k=1"}, {"--const", "j=2"}, {"--no-fusion", ""}, {"--no-fusion", ""}});
  ASSERT_EQ(o.dims.size(), 2u);
  EXPECT_EQ(o.dims[0].name, "b");
  EXPECT_EQ(o.dims[1].name, "a");
  EXPECT_EQ(o.pads.at("m"), 2);
  EXPECT_EQ(o.consts.size(), 2u);
  EXPECT_FALSE(o.fuse);
}

TEST(ExportOptions, SplitsTheRuntimeShapeSyntax) {
  auto dims = [](const std::string& s) { return s == "H" || s == "W" || s == "max_len"; };
  using V = std::vector<std::string>;
  EXPECT_EQ(exporter::split_x_axes({"1x3xHxW"}, dims), (V{"1", "3", "H", "W"}));
  EXPECT_EQ(exporter::split_x_axes({"2xmax_lenx4"}, dims), (V{"2", "max_len", "4"}));
  EXPECT_EQ(exporter::split_x_axes({"max_len"}, dims), (V{"max_len"}));
  EXPECT_EQ(exporter::split_x_axes({"1xQ"}, dims), (V{"1xQ"}));  // Q is no dim: left as given
  EXPECT_EQ(exporter::split_x_axes({"1", "3"}, dims), (V{"1", "3"}));
}

// The command line reaches the same parser: its refusals, and --bucket given twice.
TEST(ExportOptions, CommandLineUsesTheParser) {
  OnnxModel m;
  m.input("x", {"b", "seq", "4"}).output("y");
  m.node("Relu", "relu", {"x"}, {"y"});
  const std::string onnx = m.save("cli_flags.onnx"), out = scratch_dir() + "/cli_flags.kiln";
  const std::string cmd = bin("kiln") + " export " + onnx + " -o " + out + " --dim b=1..2";
  CommandResult r = run_command(cmd + " --bucket seq=4 --bucket seq=8,2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("buckets of 'forward' over seq: forward@seq=2, forward@seq=4, forward@seq=8"), std::string::npos)
      << r.output;
  r = run_command(cmd + " --bucket seq=4 --bucket b=1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("error: --bucket is given for dims 'seq' and 'b'; buckets go over one dim"), std::string::npos)
      << r.output;
  r = run_command(cmd + " --dim seq=1..8 --delegate none --delegate xnnpack");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("error: --delegate is given twice ('none', then 'xnnpack'): give it once"), std::string::npos)
      << r.output;
  // One value per single-valued flag: the model after it stays the model.
  r = run_command(bin("kiln") + " export --delegate none " + onnx + " -o " + out + " --dim b=1..2 --dim seq=1..8");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_command(cmd + " --dim seq=1..8 --require-coverage 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("error: cannot parse --require-coverage '2'"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln::testing
