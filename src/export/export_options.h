#pragma once
// kiln export's options: one struct, and one parser from (flag, text) pairs that `kiln export`
// (tools/kiln_main.cc) and Python's kiln.export_onnx (python/src/export_ext.cc) both call, so
// an option means the same from either and a file exported with the same options is the same.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kiln/dim.h"
#include "kiln/status.h"

namespace kiln::exporter {

/// `--dim NAME=MIN..MAX[:STEP]` or `--dim NAME=V` (pinned: min == max, the axis becomes static).
struct DimArg : DimSpec {
  bool pinned = false;  ///< written `--dim NAME=V`: the axes become static
};
/// A DimArg from its parts (not a brace list: DimSpec's `data` comes before `pinned`).
inline DimArg dim_arg(std::string name, int64_t min, int64_t max, int64_t step = 1, bool pinned = false) {
  DimArg d;
  d.name = std::move(name);
  d.min = min;
  d.max = max;
  d.step = step;
  d.pinned = pinned;
  return d;
}

struct ExportOptions {
  /// `--input NAME=D0,D1,...`: each Di an integer (static) or a dim name.
  std::vector<std::pair<std::string, std::vector<std::string>>> inputs;
  std::vector<DimArg> dims;
  /// `--const NAME=VALUE`: a scalar input pinned as a constant.
  std::vector<std::pair<std::string, std::string>> consts;
  std::string method_name = "forward";
  /// `--delegate xnnpack|none`: partition for the XNNPACK delegate (the portable path stays).
  std::string delegate = "xnnpack";
  /// `--require-coverage=F`: fail unless the delegate takes at least this share of FLOPs.
  double require_coverage = 0;
  /// Fuse LayerNorm and GELU chains into one instruction each (fuse_patterns.h); `--no-fusion`
  /// turns it off (the unfused reference).
  bool fuse = true;
  /// `--explain-fusion`: the summary names each fusion near-miss and where its match stopped.
  bool explain_fusion = false;
  /// `--bucket DIM=S1,S2,...`: one static method per size ("forward@seq=32"), each marked as a
  /// bucket of `method_name` with the input axes to pad and the output axes to cut back.
  std::string bucket_dim;
  std::vector<int64_t> bucket_sizes;
  /// `--pad INPUT=VALUE`: what padding fills for a bucket (default 0).
  std::map<std::string, double> pads;
  /// `--max-arena=SIZE`: refuse a contract whose arena at the bound (the larger of the portable
  /// and the delegated plan) is above this many bytes, naming the dims responsible and a smaller
  /// bound that fits; 0: no limit.
  uint64_t max_arena_bytes = kDefaultMaxArena;
  /// `--warn-arena=SIZE`: above this (and within max_arena_bytes), export succeeds with a warning
  /// of the same form; 0: never.
  uint64_t warn_arena_bytes = kDefaultWarnArena;
  static constexpr uint64_t kDefaultMaxArena = uint64_t{64} << 30;  ///< 64 GiB
  static constexpr uint64_t kDefaultWarnArena = uint64_t{1} << 30;  ///< 1 GiB
};

/// One option as a front end spells it: `name` is a flag of `kiln export` ("--dim",
/// "--max-arena") or the same name in Python's spelling ("dim", "max_arena"): leading dashes
/// are dropped and '-' reads as '_'. Messages name the option as `name` gives it. `value` is
/// the flag's text ("N=1..8"); a switch (--no-fusion) takes "".
struct ExportFlag {
  std::string name;
  std::string value;
};

/// How an option behaves when given more than once.
enum class FlagRepeat {
  kAdds,      ///< each one adds an item: --input, --dim, --const, --pad
  kCombines,  ///< --bucket: flags over one dim combine their sizes; two dims are refused
  kOnce,      ///< a second one is refused
  kSwitch,    ///< takes no value; saying it twice says it once
};

/// An option of `kiln export`, as its --help shows it.
struct ExportFlagSpec {
  const char* flag;           ///< "--max-arena"
  FlagRepeat repeat;
  const char* default_text;   ///< what the option is when not given ("64GiB"); "" for none
  const char* help;
};

/// Every option parse_export_flags knows, in --help order.
const std::vector<ExportFlagSpec>& export_flag_specs();

/// The options `flags` state, the rest at their defaults. Errors (an unknown name, a value
/// that does not parse, a repeat export_flag_specs() does not allow) are invalid_argument and
/// name the option as given.
Result<ExportOptions> parse_export_flags(const std::vector<ExportFlag>& flags);

/// Parses "NAME=MIN..MAX[:STEP]" / "NAME=V".
Result<DimArg> parse_dim_arg(const std::string& text);
/// Parses a byte size: "4096", "512K", "512M", "2G", "1.5GiB", "64GB" (K, M, G, T and KiB...
/// are powers of 1024; KB, MB, GB, TB powers of 1000).
Result<uint64_t> parse_byte_size(const std::string& text);
/// Parses "NAME=D0,D1,...".
Result<std::pair<std::string, std::vector<std::string>>> parse_input_arg(const std::string& text);
/// The number `text` that `--const NAME=TEXT` pins input `name` to.
Result<double> parse_const_value(const std::string& name, const std::string& text);

/// A size as the flags and the model spell it: decimal digits, at most 15 of them.
bool is_size_text(const std::string& s);
/// `--input` axes given as one token in the runtime's syntax, "1x3xHxW": its parts when it
/// splits at 'x's into sizes and names `is_dim` accepts (a name may hold an 'x' itself,
/// "max_len": each split is tried); otherwise `axes` as given.
std::vector<std::string> split_x_axes(const std::vector<std::string>& axes,
                                      const std::function<bool(const std::string&)>& is_dim);

}  // namespace kiln::exporter
