#include "export/export_options.h"
#include "core/status.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace kiln::exporter {

bool is_size_text(const std::string& s) {
  return !s.empty() && s.size() < 16 && s.find_first_not_of("0123456789") == std::string::npos;
}

Result<DimArg> parse_dim_arg(const std::string& text) {
  auto bad = [&]() {
    return invalid_argument("cannot parse --dim '" + text + "': write NAME=MIN..MAX, NAME=MIN..MAX:STEP or NAME=VALUE "
                            "(NAME=..MAX: a bound on a data-dependent size)");
  };
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return bad();
  DimArg d;
  d.name = text.substr(0, eq);
  std::string rest = text.substr(eq + 1);
  auto num = [&](const std::string& s, int64_t* out) {
    if (!is_size_text(s)) return false;
    *out = std::stoll(s);
    return true;
  };
  size_t dots = rest.find("..");
  if (dots == std::string::npos) {
    if (!num(rest, &d.min)) return bad();
    d.max = d.min;
    d.pinned = true;
    return d;
  }
  std::string hi = rest.substr(dots + 2);
  size_t colon = hi.find(':');
  if (colon != std::string::npos) {
    if (!num(hi.substr(colon + 1), &d.step)) return bad();
    hi = hi.substr(0, colon);
  }
  if (dots == 0) d.min = 0;  // "..MAX": from 0 (a data-dependent size's bound)
  if ((dots > 0 && !num(rest.substr(0, dots), &d.min)) || !num(hi, &d.max)) return bad();
  return d;
}

Result<uint64_t> parse_byte_size(const std::string& text) {
  auto bad = [&]() {
    return invalid_argument("cannot parse the size '" + text + "': write bytes, or a number with K, M, G or T (powers "
                            "of 1024, also KiB, MiB, GiB, TiB) or KB, MB, GB, TB (powers of 1000), e.g. 512M, 2G, 1.5GiB");
  };
  size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
  const std::string number = text.substr(0, end);
  std::string unit = text.substr(end);
  if (!unit.empty() && unit[0] == ' ') unit = unit.substr(1);
  if (number.empty() || number == "." || std::count(number.begin(), number.end(), '.') > 1 || number.size() > 20) return bad();
  std::string u;
  for (char c : unit) u += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const char* const kPrefixes = "KMGT";
  double scale = 1;
  if (!u.empty() && u != "B") {
    const char* at = std::strchr(kPrefixes, u[0]);
    if (!at || !*at) return bad();
    const int power = static_cast<int>(at - kPrefixes) + 1;
    const std::string rest = u.substr(1);
    const double base = rest == "B" ? 1000.0 : (rest.empty() || rest == "IB") ? 1024.0 : 0.0;
    if (base == 0) return bad();
    scale = std::pow(base, power);
  }
  const double bytes = std::strtod(number.c_str(), nullptr) * scale;
  if (!(bytes < 1.8e19)) return bad();
  return static_cast<uint64_t>(std::llround(bytes));
}

Result<std::pair<std::string, std::vector<std::string>>> parse_input_arg(const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return invalid_argument("cannot parse --input '" + text +
                            "': write NAME=D0,D1,... with integers or dim names (NAME= for a scalar)");
  std::vector<std::string> axes;
  const std::string rest = text.substr(eq + 1);
  if (rest.empty() || rest == "[]" || rest == "scalar") return std::make_pair(text.substr(0, eq), axes);  // rank 0
  if (text.back() == ',') return invalid_argument("cannot parse --input '" + text + "': empty axis");
  std::stringstream ss(text.substr(eq + 1));
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    if (tok.empty()) return invalid_argument("cannot parse --input '" + text + "': empty axis");
    axes.push_back(tok);
  }
  return std::make_pair(text.substr(0, eq), axes);
}

Result<double> parse_const_value(const std::string& name, const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (...) {
  }
  return invalid_argument("--const " + name + "=" + text + ": the value is not a number");
}

namespace {

// At which 'x's to split `text`: each part a size or a dim name (`is_dim`); names may hold an
// 'x' themselves ("max_len"), so each split is tried.
bool split_x(const std::string& text, const std::function<bool(const std::string&)>& is_dim, std::vector<std::string>* out) {
  auto valid = [&](const std::string& part) { return is_size_text(part) || is_dim(part); };
  if (valid(text)) return out->push_back(text), true;
  for (size_t at = text.find('x'); at != std::string::npos; at = text.find('x', at + 1)) {
    if (!valid(text.substr(0, at))) continue;
    out->push_back(text.substr(0, at));
    if (split_x(text.substr(at + 1), is_dim, out)) return true;
    out->pop_back();
  }
  return false;
}

}  // namespace

std::vector<std::string> split_x_axes(const std::vector<std::string>& axes,
                                      const std::function<bool(const std::string&)>& is_dim) {
  if (axes.size() != 1 || is_dim(axes[0]) || axes[0].find('x') == std::string::npos) return axes;
  std::vector<std::string> parts;
  return split_x(axes[0], is_dim, &parts) ? parts : axes;
}

// ---- one option at a time ----------------------------------------------------------------
namespace {

/// Applies option `name` (as given, for messages) with text `v` to `o`.
using Apply = Status (*)(const std::string& name, const std::string& v, ExportOptions* o);

Status apply_input(const std::string&, const std::string& v, ExportOptions* o) {
  KILN_ASSIGN_OR_RETURN(auto input, parse_input_arg(v));
  o->inputs.push_back(std::move(input));
  return ok_status();
}

Status apply_dim(const std::string&, const std::string& v, ExportOptions* o) {
  KILN_ASSIGN_OR_RETURN(DimArg dim, parse_dim_arg(v));
  o->dims.push_back(std::move(dim));
  return ok_status();
}

Status apply_const(const std::string&, const std::string& v, ExportOptions* o) {
  const size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0) return invalid_argument("cannot parse --const '" + v + "': write NAME=VALUE");
  // The value is read at import (parse_const_value), as the input's dtype.
  o->consts.emplace_back(v.substr(0, eq), v.substr(eq + 1));
  return ok_status();
}

Status apply_method_name(const std::string&, const std::string& v, ExportOptions* o) {
  o->method_name = v;
  return ok_status();
}

Status apply_delegate(const std::string&, const std::string& v, ExportOptions* o) {
  o->delegate = v;  // the pipeline names the delegates there are when it knows none by this name
  return ok_status();
}

Status apply_require_coverage(const std::string& name, const std::string& v, ExportOptions* o) {
  char* end = nullptr;
  const double share = std::strtod(v.c_str(), &end);
  if (v.empty() || !end || *end || !(share >= 0 && share <= 1))
    return invalid_argument("cannot parse " + name + " '" + v +
                            "': write the share of FLOPs the delegate must take, from 0 to 1 (e.g. 0.9)");
  o->require_coverage = share;
  return ok_status();
}

// Several --bucket flags over one dim add their sizes (export_buckets refuses a size given twice).
Status apply_bucket(const std::string& name, const std::string& v, ExportOptions* o) {
  const size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
    return invalid_argument("cannot parse --bucket '" + v + "': write DIM=S1,S2,...");
  const std::string dim = v.substr(0, eq);
  if (!o->bucket_dim.empty() && o->bucket_dim != dim)
    return invalid_argument(name + " is given for dims '" + o->bucket_dim + "' and '" + dim +
                            "'; buckets go over one dim: give its sizes as --bucket " + o->bucket_dim +
                            "=S1,S2,... (flags over one dim combine their sizes)");
  std::stringstream ss(v.substr(eq + 1));
  std::vector<int64_t> sizes;
  for (std::string tok; std::getline(ss, tok, ',');) {
    if (!is_size_text(tok)) return invalid_argument("cannot parse --bucket '" + v + "': sizes are positive integers");
    sizes.push_back(std::stoll(tok));
  }
  o->bucket_dim = dim;
  o->bucket_sizes.insert(o->bucket_sizes.end(), sizes.begin(), sizes.end());
  return ok_status();
}

Status apply_pad(const std::string&, const std::string& v, ExportOptions* o) {
  const size_t eq = v.find('=');
  char* end = nullptr;
  const double pad = eq == std::string::npos ? 0 : std::strtod(v.c_str() + eq + 1, &end);
  if (eq == std::string::npos || eq == 0 || !end || *end || end == v.c_str() + eq + 1)
    return invalid_argument("cannot parse --pad '" + v + "': write INPUT=VALUE");
  o->pads[v.substr(0, eq)] = pad;
  return ok_status();
}

Status apply_byte_size(const std::string& name, const std::string& v, uint64_t* out) {
  Result<uint64_t> bytes = parse_byte_size(v);
  if (!bytes.ok()) return bytes.status().with_prefix(name + ": ");
  *out = *bytes;
  return ok_status();
}

Status apply_max_arena(const std::string& name, const std::string& v, ExportOptions* o) {
  return apply_byte_size(name, v, &o->max_arena_bytes);
}

Status apply_warn_arena(const std::string& name, const std::string& v, ExportOptions* o) {
  return apply_byte_size(name, v, &o->warn_arena_bytes);
}

Status apply_no_fusion(const std::string& name, const std::string& v, ExportOptions* o) {
  if (!v.empty()) return invalid_argument(name + " takes no value, got '" + v + "'");
  o->fuse = false;
  return ok_status();
}

Status apply_explain_fusion(const std::string& name, const std::string& v, ExportOptions* o) {
  if (!v.empty()) return invalid_argument(name + " takes no value, got '" + v + "'");
  o->explain_fusion = true;
  return ok_status();
}

struct Option {
  ExportFlagSpec spec;
  Apply apply;
};

// The one list of kiln export's options: --help, Python's keywords and the parser read it.
const Option kOptions[] = {
    {{"--input", FlagRepeat::kAdds, "", "NAME=D0,D1,... or NAME=D0xD1x... (integers static, names dynamic)"}, apply_input},
    {{"--dim", FlagRepeat::kAdds, "", "NAME=MIN..MAX[:STEP] bounds a dim, NAME=V pins it"}, apply_dim},
    {{"--const", FlagRepeat::kAdds, "", "NAME=VALUE pins a scalar input as a constant"}, apply_const},
    {{"--method_name", FlagRepeat::kOnce, "forward", "method name"}, apply_method_name},
    {{"--delegate", FlagRepeat::kOnce, "xnnpack", "xnnpack (partition for the XNNPACK delegate; the portable path stays) or none"},
     apply_delegate},
    {{"--require-coverage", FlagRepeat::kOnce, "", "fail unless the delegate takes this share of FLOPs (0..1)"},
     apply_require_coverage},
    {{"--bucket", FlagRepeat::kCombines, "",
      "DIM=S1,S2,...: one static method per size, dispatched to the smallest that fits (inputs padded, outputs cut "
      "back); several --bucket flags over one dim combine their sizes, flags over two dims are refused"},
     apply_bucket},
    {{"--pad", FlagRepeat::kAdds, "", "INPUT=VALUE: what a bucket pads that input with (default 0)"}, apply_pad},
    {{"--max-arena", FlagRepeat::kOnce, "64GiB",
      "refuse a contract whose arena at the bound is above SIZE (e.g. 512M, 2G, 1.5GiB; 0: no limit)"},
     apply_max_arena},
    {{"--warn-arena", FlagRepeat::kOnce, "1GiB", "warn when the arena at the bound is above SIZE (0: never)"}, apply_warn_arena},
    {{"--no-fusion", FlagRepeat::kSwitch, "", "keep LayerNorm and GELU chains as the model wrote them (no fused instructions)"},
     apply_no_fusion},
    {{"--explain-fusion", FlagRepeat::kSwitch, "",
      "name each LayerNorm, GELU or attention chain that did not fuse, the node where the match stopped and why"},
     apply_explain_fusion},
};

/// "--max-arena" and "max_arena" alike: "max_arena".
std::string canonical(const std::string& name) {
  std::string s = name.substr(std::min(name.find_first_not_of('-'), name.size()));
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

const Option* find_option(const std::string& name) {
  const std::string want = canonical(name);
  for (const Option& o : kOptions)
    if (canonical(o.spec.flag) == want) return &o;
  return nullptr;
}

Status unknown_option(const std::string& name) {
  std::string all;
  for (const Option& o : kOptions) all += (all.empty() ? "" : ", ") + std::string(o.spec.flag);
  return invalid_argument("unknown export option '" + name + "'; the options are " + all);
}

}  // namespace

const std::vector<ExportFlagSpec>& export_flag_specs() {
  static const std::vector<ExportFlagSpec> specs = [] {
    std::vector<ExportFlagSpec> v;
    for (const Option& o : kOptions) v.push_back(o.spec);
    return v;
  }();
  return specs;
}

Result<ExportOptions> parse_export_flags(const std::vector<ExportFlag>& flags) {
  ExportOptions opts;
  std::map<const Option*, std::string> given;  // each option's first value
  for (const ExportFlag& f : flags) {
    const Option* o = find_option(f.name);
    if (!o) return unknown_option(f.name);
    auto [first, fresh] = given.emplace(o, f.value);
    if (!fresh && o->spec.repeat == FlagRepeat::kOnce)
      return invalid_argument(f.name + " is given twice ('" + first->second + "', then '" + f.value + "'): give it once");
    KILN_TRY(o->apply(f.name, f.value, &opts));
  }
  return opts;
}

}  // namespace kiln::exporter
