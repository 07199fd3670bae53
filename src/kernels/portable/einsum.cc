// Einsum (ONNX opset 12+): Einstein summation over 1..16 operands of one dtype (f32, i64 or
// i32) written in the `equation` attribute, e.g. "bij,bjk->bik". Supports an explicit output
// ("ij->ji") or an implicit one ("ij,jk": the labels used exactly once, in ASCII order, after
// the "..." dims), a label repeated within one operand (a diagonal: "ii->i"), sums over the
// labels missing from the output, and "..." for leading dims that broadcast numpy-style
// (size 1 included) across operands. Spaces are ignored; labels are letters a-z and A-Z.
//
// Every occurrence of a label must have the same size (guarded when symbolic). The kernel
// parses the equation again without allocating and walks the whole index space of all labels
// (output labels outer, summed labels inner) with one stride per operand and label, so it is
// correct at every shape inside the bound; speed is not its aim.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "core/status.h"

namespace kiln::kernels {

namespace {

constexpr int kMaxOperands = 16;
constexpr int kMaxTermLabels = 16;  // letters plus one "..." in one term (ranks stop at kMaxRank)
constexpr int kMaxAxes = 12;        // distinct labels plus "..." dims over the whole equation
constexpr int kLetters = 52;        // 'A'..'Z' = 0..25, 'a'..'z' = 26..51: ASCII order
constexpr int kSymbols = kLetters + kMaxRank;  // letters, then the "..." dims (right-aligned)
constexpr uint8_t kEllipsis = 0xFF;

enum class ParseError : uint8_t {
  kOk,
  kBadChar,
  kBadDots,
  kTwoEllipses,
  kTooManyTerms,
  kTermTooLong,
  kBadArrow,
  kOutputRepeats,
  kOutputUnknown,
};

/// One operand's (or the output's) subscripts: letter codes, kEllipsis for "...".
struct Term {
  uint8_t labels[kMaxTermLabels] = {};
  int len = 0;
  int letters = 0;
  bool ellipsis = false;
};

/// A parsed equation; on failure `err` says why and `err_pos` where (index into the text).
struct Equation {
  Term in[kMaxOperands];
  int num_in = 1;
  Term out;
  bool explicit_out = false;
  ParseError err = ParseError::kOk;
  int err_pos = 0;
  uint8_t err_label = 0;
};

int letter_code(char ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return 26 + (ch - 'a');
  return -1;
}

char letter_of(int code) { return static_cast<char>(code < 26 ? 'A' + code : 'a' + (code - 26)); }

bool fail(Equation* e, ParseError err, int pos) {
  e->err = err;
  e->err_pos = pos;
  return false;
}

/// Parses `text` into `e` (which must be default-constructed). Never allocates.
bool parse(const char* text, Equation* e) {
  Term* t = &e->in[0];
  for (int i = 0; text[i] != '\0'; ++i) {
    char ch = text[i];
    if (ch == ' ' || ch == '\t') continue;
    if (ch == ',' && !e->explicit_out) {
      if (e->num_in == kMaxOperands) return fail(e, ParseError::kTooManyTerms, i);
      t = &e->in[e->num_in++];
      continue;
    }
    if (ch == '-') {
      if (text[i + 1] != '>' || e->explicit_out) return fail(e, ParseError::kBadArrow, i);
      e->explicit_out = true;
      t = &e->out;
      ++i;
      continue;
    }
    uint8_t label;
    if (ch == '.') {
      if (text[i + 1] != '.' || text[i + 2] != '.') return fail(e, ParseError::kBadDots, i);
      if (t->ellipsis) return fail(e, ParseError::kTwoEllipses, i);
      t->ellipsis = true;
      label = kEllipsis;
      i += 2;
    } else {
      int code = letter_code(ch);
      if (code < 0) return fail(e, ParseError::kBadChar, i);
      label = static_cast<uint8_t>(code);
      ++t->letters;
    }
    if (t->len == kMaxTermLabels) return fail(e, ParseError::kTermTooLong, i);
    t->labels[t->len++] = label;
  }
  if (e->explicit_out) {
    bool in_inputs[kLetters] = {}, in_output[kLetters] = {};
    for (int k = 0; k < e->num_in; ++k)
      for (int j = 0; j < e->in[k].len; ++j)
        if (e->in[k].labels[j] != kEllipsis) in_inputs[e->in[k].labels[j]] = true;
    for (int j = 0; j < e->out.len; ++j) {
      uint8_t l = e->out.labels[j];
      if (l == kEllipsis) continue;
      e->err_label = l;
      if (in_output[l]) return fail(e, ParseError::kOutputRepeats, 0);
      if (!in_inputs[l]) return fail(e, ParseError::kOutputUnknown, 0);
      in_output[l] = true;
    }
  }
  return true;
}

enum class PlanError : uint8_t { kOk, kRankMismatch, kMissingOutputEllipsis, kTooManyAxes, kOutputRankTooBig };

/// The loop nest for given operand ranks: axes [0, num_out) are the output's dims in order,
/// axes [num_out, num_axes) are summed.
struct Plan {
  int num_in = 0;
  int rank[kMaxOperands] = {};
  int8_t axis[kMaxOperands][kMaxRank] = {};  // the axis each operand dim indexes
  int num_axes = 0;
  int num_out = 0;
  int ell_rank = 0;                // dims under "..." after broadcasting
  int8_t axis_of[kSymbols] = {};   // symbol -> axis, -1 when unused
  bool broadcasts[kMaxAxes] = {};  // a "..." dim: size 1 broadcasts
  int bad_operand = 0;             // for kRankMismatch
  int used_axes = 0;               // for kTooManyAxes
  int out_rank = 0;                // for kOutputRankTooBig
};

/// Emits the symbols of term `t` for an operand whose "..." covers `ell_len` of `ell_rank` dims.
template <typename F>
void expand(const Term& t, int ell_len, int ell_rank, F emit) {
  for (int j = 0; j < t.len; ++j) {
    if (t.labels[j] != kEllipsis) {
      emit(t.labels[j]);
    } else {
      for (int k = 0; k < ell_len; ++k) emit(kLetters + ell_rank - ell_len + k);
    }
  }
}

/// Builds the loop nest for `e` over operands of the given ranks (each at most kMaxRank).
PlanError build_plan(const Equation& e, const int* ranks, Plan* p) {
  p->num_in = e.num_in;
  for (int i = 0; i < e.num_in; ++i) {
    const Term& t = e.in[i];
    p->rank[i] = ranks[i];
    if (t.ellipsis ? ranks[i] < t.letters : ranks[i] != t.letters) {
      p->bad_operand = i;
      return PlanError::kRankMismatch;
    }
    if (t.ellipsis && ranks[i] - t.letters > p->ell_rank) p->ell_rank = ranks[i] - t.letters;
  }
  const int er = p->ell_rank;
  if (e.explicit_out && !e.out.ellipsis && er > 0) return PlanError::kMissingOutputEllipsis;

  // Output symbols: explicit as written; implicit = the "..." dims, then once-used letters.
  int out_sym[kSymbols];
  int n_out = 0;
  bool overflow = false;
  auto push_out = [&](int s) {
    if (n_out == kSymbols) overflow = true;
    else out_sym[n_out++] = s;
  };
  if (e.explicit_out) {
    expand(e.out, er, er, push_out);
  } else {
    int count[kLetters] = {};
    for (int i = 0; i < e.num_in; ++i)
      for (int j = 0; j < e.in[i].len; ++j)
        if (e.in[i].labels[j] != kEllipsis) ++count[e.in[i].labels[j]];
    for (int k = 0; k < er; ++k) push_out(kLetters + k);
    for (int l = 0; l < kLetters; ++l)
      if (count[l] == 1) push_out(l);
  }
  p->out_rank = n_out;
  if (overflow || n_out > kMaxRank) return PlanError::kOutputRankTooBig;

  bool used[kSymbols] = {};
  for (int i = 0; i < e.num_in; ++i)
    expand(e.in[i], ranks[i] - e.in[i].letters, er, [&](int s) { used[s] = true; });
  for (int s = 0; s < kSymbols; ++s) p->used_axes += used[s] ? 1 : 0;
  if (p->used_axes > kMaxAxes) return PlanError::kTooManyAxes;

  for (int s = 0; s < kSymbols; ++s) p->axis_of[s] = -1;
  auto assign = [&](int s) {
    if (p->axis_of[s] >= 0) return;
    p->broadcasts[p->num_axes] = s >= kLetters;
    p->axis_of[s] = static_cast<int8_t>(p->num_axes++);
  };
  for (int k = 0; k < n_out; ++k) assign(out_sym[k]);
  p->num_out = p->num_axes;
  for (int i = 0; i < e.num_in; ++i) {
    int d = 0;
    expand(e.in[i], ranks[i] - e.in[i].letters, er, [&](int s) {
      assign(s);
      p->axis[i][d++] = p->axis_of[s];
    });
  }
  return PlanError::kOk;
}

std::string term_text(const Term& t) {
  std::string s;
  for (int j = 0; j < t.len; ++j)
    s += t.labels[j] == kEllipsis ? std::string("...") : std::string(1, letter_of(t.labels[j]));
  return s;
}

std::string parse_message(const Equation& e, const char* text) {
  const std::string at = " at position " + std::to_string(e.err_pos);
  switch (e.err) {
    case ParseError::kOk: break;
    case ParseError::kBadChar:
      return "unexpected character '" + std::string(1, text[e.err_pos]) + "'" + at +
             " (labels are letters a-z and A-Z, terms are separated by ',' before the '->')";
    case ParseError::kBadDots: return "'.'" + at + " does not begin an ellipsis '...'";
    case ParseError::kTwoEllipses: return "a term has a second '...'" + at;
    case ParseError::kTooManyTerms: return "more than " + std::to_string(kMaxOperands) + " operand terms";
    case ParseError::kTermTooLong: return "a term has more than " + std::to_string(kMaxTermLabels) + " labels" + at;
    case ParseError::kBadArrow: return "'-'" + at + " is not the one '->' of the equation";
    case ParseError::kOutputRepeats:
      return "output label '" + std::string(1, letter_of(e.err_label)) + "' appears more than once";
    case ParseError::kOutputUnknown:
      return "output label '" + std::string(1, letter_of(e.err_label)) + "' appears in no input term";
  }
  return "invalid equation";
}

/// Row-major walk of axes [lo, hi) as an odometer, keeping each operand's offset in step.
inline void advance(int lo, int hi, int n, int64_t* idx, const int64_t* size, const int64_t (*stride)[kMaxAxes],
                    int64_t* off) {
  for (int a = hi - 1; a >= lo; --a) {
    ++idx[a];
    for (int i = 0; i < n; ++i) off[i] += stride[i][a];
    if (idx[a] < size[a]) return;
    idx[a] = 0;
    for (int i = 0; i < n; ++i) off[i] -= size[a] * stride[i][a];
  }
}

/// Acc: float for f32; uint64_t for integers (wrapping, so overflow is defined).
template <typename T, typename Acc>
KernelStatus einsum_typed(const RunCtx& c, const Plan& p) {
  const int n = p.num_in;
  int64_t size[kMaxAxes], stride[kMaxOperands][kMaxAxes] = {};
  bool seen[kMaxAxes] = {};
  for (int a = 0; a < p.num_axes; ++a) size[a] = 1;
  // Sizes: every occurrence of a label agrees; a "..." dim of size 1 broadcasts.
  for (int i = 0; i < n; ++i)
    for (int d = 0; d < p.rank[i]; ++d) {
      int a = p.axis[i][d];
      int64_t dim = c.in(i).dims[d];
      if (!seen[a]) {
        size[a] = dim;
        seen[a] = true;
      } else if (dim != size[a]) {
        if (!p.broadcasts[a] || (dim != 1 && size[a] != 1)) return KernelStatus::kInvalidValue;
        if (size[a] == 1) size[a] = dim;
      }
    }
  // Strides: a repeated label (diagonal) adds its dims' strides; a broadcast dim has none.
  for (int i = 0; i < n; ++i) {
    int64_t s = 1;
    for (int d = p.rank[i] - 1; d >= 0; --d) {
      int64_t dim = c.in(i).dims[d];
      if (dim != 1) stride[i][p.axis[i][d]] += s;
      s *= dim;
    }
  }
  const TensorView& yv = c.out(0);
  if (yv.rank != p.num_out) return KernelStatus::kInvalidValue;
  int64_t out_numel = 1, sum_numel = 1;
  for (int a = 0; a < p.num_out; ++a) {
    if (yv.dims[a] != size[a]) return KernelStatus::kInvalidValue;
    out_numel *= size[a];
  }
  for (int a = p.num_out; a < p.num_axes; ++a) sum_numel *= size[a];

  const T* x[kMaxOperands];
  for (int i = 0; i < n; ++i) x[i] = c.in(i).as<T>();
  T* y = c.out(0).as<T>();
  int64_t idx[kMaxAxes] = {}, off[kMaxOperands] = {};
  for (int64_t o = 0; o < out_numel; ++o) {
    Acc acc = 0;
    // A full turn of the summed axes brings every offset back to this output element's base.
    for (int64_t s = 0; s < sum_numel; ++s) {
      Acc prod = 1;
      for (int i = 0; i < n; ++i) prod *= static_cast<Acc>(x[i][off[i]]);
      acc += prod;
      advance(p.num_out, p.num_axes, n, idx, size, stride, off);
    }
    y[o] = static_cast<T>(acc);
    advance(0, p.num_out, n, idx, size, stride, off);
  }
  return KernelStatus::kOk;
}

// Why the equation has no plan for these operands.
Status plan_error(ShapeCtx& c, const Equation& e, const Plan& p, PlanError err, const std::string& quoted) {
  switch (err) {
    case PlanError::kOk: break;
    case PlanError::kRankMismatch: {
      const Term& bad = e.in[p.bad_operand];
      std::string shape = c.pool.shape_to_string(c.in(p.bad_operand).shape);
      std::string want =
          bad.ellipsis ? "rank >= " + std::to_string(bad.letters) : "rank " + std::to_string(bad.letters);
      return c.error(quoted + ": term '" + term_text(bad) + "' needs " + want + " but input #" +
                     std::to_string(p.bad_operand) + " has shape " + shape);
    }
    case PlanError::kMissingOutputEllipsis:
      return c.error(quoted + ": the inputs have " + std::to_string(p.ell_rank) +
                     " dims under '...' but the output term has no '...'");
    case PlanError::kTooManyAxes:
      return c.error(quoted + " uses " + std::to_string(p.used_axes) +
                     " distinct labels (counting each dim under '...'); at most " + std::to_string(kMaxAxes) +
                     " are supported");
    case PlanError::kOutputRankTooBig:
      return c.error(quoted + " gives an output of rank " + std::to_string(p.out_rank) + ", above " +
                     std::to_string(kMaxRank));
  }
  return ok_status();
}

}  // namespace

Status einsum_shape(ShapeCtx& c) {
  KILN_TRY(c.expect_inputs(1, kMaxOperands));
  const char* text = c.attrs.get_str("equation", nullptr);
  if (!text) return c.error("needs the string attribute 'equation'");
  const std::string quoted = "equation '" + std::string(text) + "'";
  Equation e;
  if (!parse(text, &e)) return c.error(quoted + ": " + parse_message(e, text));
  if (static_cast<size_t>(e.num_in) != c.num_inputs())
    return c.error(quoted + " has " + std::to_string(e.num_in) + " operand terms but the node has " +
                   std::to_string(c.num_inputs()) + " inputs");
  const DType t = c.in(0).dtype;
  if (t == DType::kBool) return c.error("input #0 has dtype bool, expected f32, i64 or i32");
  int ranks[kMaxOperands];
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) return c.error("input #" + std::to_string(i) + " is required but missing");
    if (c.in(i).dtype != t)
      return c.error("input #" + std::to_string(i) + " has dtype " + dtype_name(c.in(i).dtype) + ", expected " +
                     dtype_name(t) + " like input #0");
    if (c.rank(i) > kMaxRank)
      return c.error("input #" + std::to_string(i) + " has rank " + std::to_string(c.rank(i)) + ", above " +
                     std::to_string(kMaxRank));
    ranks[i] = static_cast<int>(c.rank(i));
  }
  Plan p;
  if (const PlanError err = build_plan(e, ranks, &p); err != PlanError::kOk) return plan_error(c, e, p, err, quoted);

  // One size per label: all occurrences equal; the "..." dims broadcast across operands.
  core::ExprPool& pool = c.pool;
  std::vector<ExprId> size(p.num_axes, core::kNoExpr);
  std::vector<std::string> first(p.num_axes);  // "input #0 dim 1", for messages
  std::vector<ExprId> ell;                     // broadcast "..." dims so far
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const Term& term = e.in[i];
    const std::vector<ExprId>& shape = c.in(i).shape;
    int d = 0;
    for (int j = 0; j < term.len; ++j) {
      if (term.labels[j] == kEllipsis) {
        int len = ranks[i] - term.letters;
        std::vector<ExprId> sub(shape.begin() + d, shape.begin() + d + len);
        KILN_ASSIGN_OR_RETURN(ell, c.broadcast(ell, sub));
        d += len;
        continue;
      }
      int a = p.axis_of[term.labels[j]];
      std::string where = "input #" + std::to_string(i) + " dim " + std::to_string(d);
      ExprId dim = shape[d++];
      if (size[a] == core::kNoExpr) {
        size[a] = dim;
        first[a] = where;
        continue;
      }
      KILN_TRY(c.require_eq(size[a], dim,
                            "(label '" + std::string(1, letter_of(term.labels[j])) + "' at " + first[a] + " and " +
                                where + " of " + quoted + ")"));
      if (!pool.is_const(size[a]) && pool.is_const(dim)) size[a] = dim;
    }
  }
  for (int k = 0; k < p.ell_rank; ++k) size[p.axis_of[kLetters + k]] = ell[k];
  c.out(0).dtype = t;
  c.out(0).shape.assign(size.begin(), size.begin() + p.num_out);
  return ok_status();
}

KernelStatus einsum_run(const RunCtx& c) {
  const char* text = c.attrs.get_str("equation", nullptr);
  if (!text || c.num_inputs > kMaxOperands || c.num_outputs < 1) return KernelStatus::kInvalidValue;
  Equation e;
  if (!parse(text, &e) || static_cast<uint32_t>(e.num_in) != c.num_inputs) return KernelStatus::kInvalidValue;
  int ranks[kMaxOperands];
  for (uint32_t i = 0; i < c.num_inputs; ++i) {
    if (!c.has_input(i) || c.in(i).dtype != c.in(0).dtype) return KernelStatus::kInvalidValue;
    ranks[i] = c.in(i).rank;
  }
  Plan p;
  if (build_plan(e, ranks, &p) != PlanError::kOk) return KernelStatus::kInvalidValue;
  switch (c.in(0).dtype) {
    case DType::kF32: return einsum_typed<float, float>(c, p);
    case DType::kI64: return einsum_typed<int64_t, uint64_t>(c, p);
    case DType::kI32: return einsum_typed<int32_t, uint64_t>(c, p);
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: break;
  }
  return KernelStatus::kInvalidValue;
}

}  // namespace kiln::kernels
