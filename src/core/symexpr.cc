#include "core/symexpr.h"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

namespace kiln::core {

namespace {
constexpr int64_t kBig = std::numeric_limits<int64_t>::max() / 4;

int64_t clamp_big(__int128 v) {
  if (v > kBig) return kBig;
  if (v < -kBig) return -kBig;
  return static_cast<int64_t>(v);
}

bool commutative(ExprOp op) {
  return op == ExprOp::kAdd || op == ExprOp::kMul || op == ExprOp::kMin || op == ExprOp::kMax;
}
}  // namespace

// No intermediate overflows (values may come from a file): only b == 0 and INT64_MIN / -1
// are undefined, and callers rule those out.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t ceil_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) == (b < 0))) ++q;
  return q;
}
int64_t floor_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

namespace {
// One node's value from its operands' values (kDim reads `dim_value`); false on division by
// zero or int64 overflow. The one evaluation rule bind and export's census share.
bool eval_node(const ExprNode& e, int64_t a, int64_t b, int64_t dim_value, int64_t* out) {
  switch (e.op) {
    case ExprOp::kConst: *out = e.value; return true;
    case ExprOp::kDim: *out = dim_value; return true;
    case ExprOp::kAdd: return !__builtin_add_overflow(a, b, out);
    case ExprOp::kSub: return !__builtin_sub_overflow(a, b, out);
    case ExprOp::kMul: return !__builtin_mul_overflow(a, b, out);
    case ExprOp::kFloorDiv:
    case ExprOp::kCeilDiv:
    case ExprOp::kMod:
      if (b == 0 || (b == -1 && a == std::numeric_limits<int64_t>::min())) return false;
      *out = e.op == ExprOp::kFloorDiv ? floor_div(a, b) : e.op == ExprOp::kCeilDiv ? ceil_div(a, b) : floor_mod(a, b);
      return true;
    case ExprOp::kMin: *out = std::min(a, b); return true;
    case ExprOp::kMax: *out = std::max(a, b); return true;
  }
  return false;
}
}  // namespace

bool eval_exprs(const ExprNode* nodes, size_t n, const int64_t* dim_values, int64_t* out,
                size_t* bad_node) {
  for (size_t i = 0; i < n; ++i) {
    const ExprNode& e = nodes[i];
    const bool binary = e.op != ExprOp::kConst && e.op != ExprOp::kDim;
    if (!eval_node(e, binary ? out[e.a] : 0, binary ? out[e.b] : 0, e.op == ExprOp::kDim ? dim_values[e.a] : 0, &out[i])) {
      if (bad_node) *bad_node = i;
      return false;
    }
  }
  return true;
}

namespace {
// Precedence: 3 atoms/calls, 2 products, 1 sums.
std::string fmt(const ExprNode* nodes, const std::vector<std::string>& names, ExprId id, int* prec) {
  const ExprNode& e = nodes[id];
  auto sub = [&](ExprId c, int need) {
    int p = 0;
    std::string s = fmt(nodes, names, c, &p);
    return p < need ? "(" + s + ")" : s;
  };
  switch (e.op) {
    case ExprOp::kConst: *prec = e.value < 0 ? 1 : 3; return std::to_string(e.value);
    case ExprOp::kDim:
      *prec = 3;
      return e.a >= 0 && static_cast<size_t>(e.a) < names.size() ? names[e.a] : "d" + std::to_string(e.a);
    case ExprOp::kAdd: {
      *prec = 1;
      ExprId x = e.a, c = e.b;  // constants are stored first; print them last
      if (nodes[x].op == ExprOp::kConst) std::swap(x, c);
      const ExprNode& rc = nodes[c];
      if (rc.op == ExprOp::kConst && rc.value < 0) return sub(x, 1) + " - " + std::to_string(-rc.value);
      return sub(x, 1) + " + " + sub(c, 2);
    }
    case ExprOp::kSub: *prec = 1; return sub(e.a, 1) + " - " + sub(e.b, 2);
    case ExprOp::kMul: *prec = 2; return sub(e.a, 2) + "*" + sub(e.b, 2);  // associative
    case ExprOp::kMod: *prec = 2; return sub(e.a, 3) + " % " + sub(e.b, 3);
    case ExprOp::kFloorDiv: *prec = 3; return "floordiv(" + sub(e.a, 0) + "," + sub(e.b, 0) + ")";
    case ExprOp::kCeilDiv: *prec = 3; return "ceildiv(" + sub(e.a, 0) + "," + sub(e.b, 0) + ")";
    case ExprOp::kMin: *prec = 3; return "min(" + sub(e.a, 0) + "," + sub(e.b, 0) + ")";
    case ExprOp::kMax: *prec = 3; return "max(" + sub(e.a, 0) + "," + sub(e.b, 0) + ")";
  }
  return "?";
}
}  // namespace

std::string format_expr(const ExprNode* nodes, size_t n, const std::vector<std::string>& dim_names,
                        ExprId id) {
  if (id < 0 || static_cast<size_t>(id) >= n) return "?";
  int prec = 0;
  return fmt(nodes, dim_names, id, &prec);
}

int ExprPool::add_dim(const DimSpec& dim) {
  int existing = find_dim(dim.name);
  if (existing >= 0) return existing;
  dims_.push_back(dim);
  return static_cast<int>(dims_.size()) - 1;
}

void ExprPool::narrow_dim(int index, int64_t min, int64_t max, int64_t step) {
  DimSpec& d = dims_[static_cast<size_t>(index)];
  d.min = min;
  d.max = max;
  d.step = step;
  for (size_t i = 0; i < nodes_.size(); ++i)  // operands precede their users
    ranges_[i] = compute_range(nodes_[i].op, nodes_[i].a, nodes_[i].b, nodes_[i].value);
}

int ExprPool::find_dim(const std::string& name) const {
  for (size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i].name == name) return static_cast<int>(i);
  return -1;
}

std::vector<std::string> ExprPool::dim_names() const {
  std::vector<std::string> names;
  for (const DimSpec& d : dims_) names.push_back(d.name);
  return names;
}

std::string ExprPool::to_string(ExprId id) const {
  return format_expr(nodes_.data(), nodes_.size(), dim_names(), id);
}

std::string ExprPool::shape_to_string(const std::vector<ExprId>& shape) const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += to_string(shape[i]);
  }
  return s + "]";
}

Interval node_range(ExprOp op, Interval ra, Interval rb, int64_t value) {
  switch (op) {
    case ExprOp::kConst: return {value, value};
    case ExprOp::kDim: return ra;
    case ExprOp::kAdd: return {clamp_big(static_cast<__int128>(ra.lo) + rb.lo), clamp_big(static_cast<__int128>(ra.hi) + rb.hi)};
    case ExprOp::kSub: return {clamp_big(static_cast<__int128>(ra.lo) - rb.hi), clamp_big(static_cast<__int128>(ra.hi) - rb.lo)};
    case ExprOp::kMul: {
      __int128 c[4] = {static_cast<__int128>(ra.lo) * rb.lo, static_cast<__int128>(ra.lo) * rb.hi,
                       static_cast<__int128>(ra.hi) * rb.lo, static_cast<__int128>(ra.hi) * rb.hi};
      return {clamp_big(*std::min_element(c, c + 4)), clamp_big(*std::max_element(c, c + 4))};
    }
    case ExprOp::kFloorDiv:
    case ExprOp::kCeilDiv: {
      if (rb.lo <= 0) return {-kBig, kBig};
      auto f = op == ExprOp::kFloorDiv ? floor_div : ceil_div;
      int64_t c[4] = {f(ra.lo, rb.lo), f(ra.lo, rb.hi), f(ra.hi, rb.lo), f(ra.hi, rb.hi)};
      return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
    }
    case ExprOp::kMod:
      if (rb.lo <= 0) return {-kBig, kBig};
      if (ra.lo >= 0 && ra.hi < rb.lo) return ra;
      return {0, rb.hi - 1};
    case ExprOp::kMin: return {std::min(ra.lo, rb.lo), std::min(ra.hi, rb.hi)};
    case ExprOp::kMax: return {std::max(ra.lo, rb.lo), std::max(ra.hi, rb.hi)};
  }
  return {-kBig, kBig};
}

Interval ExprPool::compute_range(ExprOp op, int32_t a, int32_t b, int64_t value) const {
  const bool binary = op != ExprOp::kConst && op != ExprOp::kDim;
  Interval ra = op == ExprOp::kDim ? Interval{dims_[a].min, dims_[a].max} : binary ? ranges_[a] : Interval{};
  Interval rb = binary ? ranges_[b] : Interval{};
  return node_range(op, ra, rb, value);
}

std::string ExprPool::node_key(ExprOp op, int32_t a, int32_t b, int64_t value) {
  return std::to_string(static_cast<int>(op)) + ":" + std::to_string(a) + ":" + std::to_string(b) + ":" +
         std::to_string(value);
}

ExprId ExprPool::append(const ExprNode& n) {
  nodes_.push_back(n);
  ranges_.push_back(compute_range(n.op, n.a, n.b, n.value));
  ExprId id = static_cast<ExprId>(nodes_.size()) - 1;
  dedup_.emplace(node_key(n.op, n.a, n.b, n.value), id);
  return id;
}

ExprId ExprPool::make(ExprOp op, int32_t a, int32_t b, int64_t value) {
  if (commutative(op)) {  // canonical operand order: constants first, then by id
    bool ca = a >= 0 && nodes_[a].op == ExprOp::kConst, cb = b >= 0 && nodes_[b].op == ExprOp::kConst;
    if ((cb && !ca) || (ca == cb && a > b)) std::swap(a, b);
  }
  std::string key = node_key(op, a, b, value);
  auto it = dedup_.find(key);
  if (it != dedup_.end()) return it->second;
  Interval r = compute_range(op, a, b, value);
  // Provably constant; a range pinned at a saturated end says only "at least that far out".
  if (op != ExprOp::kConst && r.lo == r.hi && r.lo > -kBig && r.lo < kBig) return constant(r.lo);
  ExprNode n{op, a, b, value};
  nodes_.push_back(n);
  ranges_.push_back(r);
  ExprId id = static_cast<ExprId>(nodes_.size()) - 1;
  dedup_.emplace(std::move(key), id);
  return id;
}

ExprId ExprPool::constant(int64_t v) { return make(ExprOp::kConst, -1, -1, v); }
ExprId ExprPool::dim(int dim_index) { return make(ExprOp::kDim, dim_index, -1, 0); }

int64_t ExprPool::add_i64(int64_t a, int64_t b) const {
  int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  overflowed_ = true;
  return a < 0 ? -kBig : kBig;
}

int64_t ExprPool::mul_i64(int64_t a, int64_t b) const {
  int64_t r;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  overflowed_ = true;
  return (a < 0) != (b < 0) ? -kBig : kBig;
}

void ExprPool::linearize_into(ExprId id, int64_t scale, Linear* out) const {
  const ExprNode& e = nodes_[id];
  switch (e.op) {
    case ExprOp::kConst: out->constant = add_i64(out->constant, mul_i64(scale, e.value)); return;
    case ExprOp::kAdd: linearize_into(e.a, scale, out); linearize_into(e.b, scale, out); return;
    case ExprOp::kSub: linearize_into(e.a, scale, out); linearize_into(e.b, neg_i64(scale), out); return;
    case ExprOp::kMul:
      if (is_const(e.a)) return linearize_into(e.b, mul_i64(scale, const_value(e.a)), out);
      if (is_const(e.b)) return linearize_into(e.a, mul_i64(scale, const_value(e.b)), out);
      break;
    case ExprOp::kFloorDiv:
      // d*k*floordiv(x, d) == k*x when d divides x for every admissible dim value.
      if (is_const(e.b) && const_value(e.b) > 0 && scale % const_value(e.b) == 0 &&
          provably_divisible(e.a, const_value(e.b)))
        return linearize_into(e.a, scale / const_value(e.b), out);
      break;
    default: break;
  }
  for (auto& t : out->terms) {
    if (t.first == id) {
      t.second = add_i64(t.second, scale);
      return;
    }
  }
  out->terms.emplace_back(id, scale);
}

ExprPool::Linear ExprPool::linearize(ExprId id) const {
  Linear l;
  linearize_into(id, 1, &l);
  l.terms.erase(std::remove_if(l.terms.begin(), l.terms.end(), [](auto& t) { return t.second == 0; }),
                l.terms.end());
  std::sort(l.terms.begin(), l.terms.end());
  return l;
}

ExprId ExprPool::build_linear(const Linear& l) {
  ExprId acc = kNoExpr;
  auto term = [&](ExprId atom, int64_t c) {
    return c == 1 ? atom : make(ExprOp::kMul, constant(c), atom, 0);
  };
  for (const auto& t : l.terms) {  // positive terms first
    if (t.second <= 0) continue;
    ExprId x = term(t.first, t.second);
    acc = acc == kNoExpr ? x : make(ExprOp::kAdd, acc, x, 0);
  }
  for (const auto& t : l.terms) {
    if (t.second >= 0) continue;
    if (acc == kNoExpr) {
      acc = term(t.first, t.second);
    } else {
      acc = make(ExprOp::kSub, acc, term(t.first, neg_i64(t.second)), 0);
    }
  }
  if (acc == kNoExpr) return constant(l.constant);
  if (l.constant > 0) acc = make(ExprOp::kAdd, acc, constant(l.constant), 0);
  if (l.constant < 0) acc = make(ExprOp::kAdd, acc, constant(l.constant), 0);
  return acc;
}

namespace {

/// Drops zero coefficients and sorts the terms by atom id (the canonical order).
void tidy(std::vector<std::pair<ExprId, int64_t>>* terms) {
  terms->erase(std::remove_if(terms->begin(), terms->end(), [](auto& t) { return t.second == 0; }), terms->end());
  std::sort(terms->begin(), terms->end());
}

}  // namespace

bool ExprPool::fold_round_up(Linear* l) {
  auto coef = [&](ExprId atom) -> int64_t* {
    for (auto& t : l->terms)
      if (t.first == atom) return &t.second;
    return nullptr;
  };
  for (size_t i = 0; i < l->terms.size(); ++i) {
    const ExprId m = l->terms[i].first;
    const int64_t k = l->terms[i].second;
    const ExprNode mn = nodes_[m];
    if (mn.op != ExprOp::kMod || k <= 0 || !is_const(mn.b) || const_value(mn.b) <= 1) continue;
    const int64_t d = const_value(mn.b);
    // mod(y, d) with y == -x (mod d) term by term, and k*x among l's other terms.
    const Linear y = linearize(mn.a);
    Linear x;
    bool ok = !y.terms.empty();
    for (const auto& [atom, cy] : y.terms) {
      const int64_t* cl = coef(atom);
      if (!cl || *cl % k != 0 || floor_mod(add_i64(*cl / k, cy), d) != 0) {
        ok = false;
        break;
      }
      x.terms.emplace_back(atom, *cl / k);
    }
    if (!ok) continue;
    x.constant = floor_mod(-y.constant, d);
    for (const auto& [atom, cx] : x.terms) *coef(atom) = add_i64(*coef(atom), neg_i64(mul_i64(k, cx)));
    l->constant = add_i64(l->constant, neg_i64(mul_i64(k, x.constant)));
    l->terms[i].second = 0;  // the mod term
    const ExprId up = ceildiv(build_linear(x), constant(d));
    if (int64_t* c = coef(up)) {
      *c = add_i64(*c, mul_i64(k, d));
    } else {
      l->terms.emplace_back(up, mul_i64(k, d));
    }
    tidy(&l->terms);
    return true;
  }
  return false;
}

ExprId ExprPool::add(ExprId a, ExprId b) {
  Linear la = linearize(a), lb = linearize(b);
  for (auto& t : lb.terms) la.terms.push_back(t);
  la.constant = add_i64(la.constant, lb.constant);
  Linear merged;
  for (auto& t : la.terms) linearize_into(t.first, t.second, &merged);
  merged.constant = add_i64(merged.constant, la.constant);
  tidy(&merged.terms);
  while (fold_round_up(&merged)) {
  }
  return build_linear(merged);
}

ExprId ExprPool::sub(ExprId a, ExprId b) { return add(a, mul(constant(-1), b)); }

void ExprPool::collect_factors(ExprId id, std::vector<ExprId>* out) const {
  const ExprNode& e = nodes_[id];
  if (e.op == ExprOp::kMul && !is_const(e.a) && !is_const(e.b)) {
    collect_factors(e.a, out);
    collect_factors(e.b, out);
  } else {
    out->push_back(id);
  }
}

ExprId ExprPool::build_product(std::vector<ExprId> factors) {
  std::sort(factors.begin(), factors.end());
  ExprId acc = kNoExpr;
  for (ExprId f : factors) acc = acc == kNoExpr ? f : make(ExprOp::kMul, acc, f, 0);
  return acc == kNoExpr ? constant(1) : acc;
}

ExprId ExprPool::mul(ExprId a, ExprId b) {
  if (is_const(a) && is_const(b)) return constant(mul_i64(const_value(a), const_value(b)));
  if (is_const(b)) std::swap(a, b);
  if (is_const(a)) {
    int64_t k = const_value(a);
    if (k == 0) return constant(0);
    Linear l;
    linearize_into(b, k, &l);  // scaling first lets k*floordiv(x, k) collapse to x
    l.terms.erase(std::remove_if(l.terms.begin(), l.terms.end(), [](auto& t) { return t.second == 0; }), l.terms.end());
    std::sort(l.terms.begin(), l.terms.end());
    return build_linear(l);
  }
  // Both symbolic: pull constant coefficients out of single-term operands, then form a
  // sorted monomial so that equal products share one node.
  Linear la = linearize(a), lb = linearize(b);
  if (la.constant == 0 && la.terms.size() == 1 && lb.constant == 0 && lb.terms.size() == 1) {
    std::vector<ExprId> f;
    collect_factors(la.terms[0].first, &f);
    collect_factors(lb.terms[0].first, &f);
    ExprId m = build_product(f);
    return mul(constant(mul_i64(la.terms[0].second, lb.terms[0].second)), m);
  }
  return make(ExprOp::kMul, a, b, 0);
}

ExprId ExprPool::divide_exact(ExprId a, ExprId b) {
  // a = k * m, b = m' with factors(m') a sub-multiset of factors(m)  ->  k * (m / m')
  Linear la = linearize(a), lb = linearize(b);
  if (la.constant != 0 || la.terms.size() != 1 || lb.constant != 0 || lb.terms.size() != 1) return kNoExpr;
  int64_t ka = la.terms[0].second, kb = lb.terms[0].second;
  if (kb <= 0 || ka % kb != 0) return kNoExpr;
  std::vector<ExprId> fa, fb;
  collect_factors(la.terms[0].first, &fa);
  collect_factors(lb.terms[0].first, &fb);
  for (ExprId f : fb) {
    auto it = std::find(fa.begin(), fa.end(), f);
    if (it == fa.end()) return kNoExpr;
    fa.erase(it);
  }
  return mul(constant(ka / kb), build_product(fa));
}

ExprId ExprPool::floordiv_const(ExprId a, int64_t d) {
  if (d == 1) return a;
  if (is_const(a)) return constant(floor_div(const_value(a), d));
  // Split a = d*q + r term by term; q leaves the division exactly.
  Linear l = linearize(a), q, r;
  for (auto& t : l.terms) {
    int64_t qc = floor_div(t.second, d), rc = floor_mod(t.second, d);
    if (qc) q.terms.emplace_back(t.first, qc);
    if (rc) r.terms.emplace_back(t.first, rc);
  }
  q.constant = floor_div(l.constant, d);
  r.constant = floor_mod(l.constant, d);
  ExprId quotient = build_linear(q);
  if (r.terms.empty()) return quotient;  // 0 <= r.constant < d contributes nothing
  ExprId rest;
  if (r.terms.size() == 1 && r.terms[0].second == 1 && (r.constant == 0 || r.constant == d - 1)) {
    ExprId x = r.terms[0].first;
    const ExprNode xn = nodes_[x];  // a copy: constant() below may grow nodes_
    // floordiv(x + d-1, d) is ceildiv(x, d), which is floordiv(x, d) when d divides x.
    ExprOp op = r.constant == 0 || provably_divisible(x, d) ? ExprOp::kFloorDiv : ExprOp::kCeilDiv;
    // floordiv(floordiv(y,e),d) = floordiv(y,e*d); the same holds for ceildiv.
    if (xn.op == op && is_const(xn.b) && const_value(xn.b) > 0 && range(xn.a).lo >= 0) {
      rest = make(op, xn.a, constant(mul_i64(const_value(xn.b), d)), 0);
    } else {
      rest = make(op, x, constant(d), 0);
    }
  } else {
    Interval rr = range(build_linear(r));
    if (rr.lo >= 0 && rr.hi < d) return quotient;
    rest = make(ExprOp::kFloorDiv, build_linear(r), constant(d), 0);
  }
  return add(quotient, rest);
}

bool ExprPool::cancel_common(ExprId a, ExprId b, ExprId* a2, ExprId* b2) {
  // k*m and k'*m' (monomials): divide both by their positive common factors and gcd(k, k').
  Linear la = linearize(a), lb = linearize(b);
  if (la.constant != 0 || la.terms.size() != 1 || lb.constant != 0 || lb.terms.size() != 1) return false;
  int64_t ka = la.terms[0].second, kb = lb.terms[0].second;
  std::vector<ExprId> fa, fb, common;
  collect_factors(la.terms[0].first, &fa);
  collect_factors(lb.terms[0].first, &fb);
  for (auto it = fb.begin(); it != fb.end();) {
    auto hit = std::find(fa.begin(), fa.end(), *it);
    if (hit != fa.end() && range(*it).lo >= 1) {
      common.push_back(*it);
      fa.erase(hit);
      it = fb.erase(it);
    } else {
      ++it;
    }
  }
  int64_t g = std::gcd(ka < 0 ? neg_i64(ka) : ka, kb < 0 ? neg_i64(kb) : kb);
  if (common.empty() && g <= 1) return false;
  *a2 = mul(constant(ka / g), build_product(fa));
  *b2 = mul(constant(kb / g), build_product(fb));
  return true;
}

ExprId ExprPool::floordiv(ExprId a, ExprId b) {
  if (is_const(b) && const_value(b) > 0) return floordiv_const(a, const_value(b));
  if (a == b && range(b).lo > 0) return constant(1);
  ExprId exact = divide_exact(a, b);
  if (exact != kNoExpr) return exact;
  ExprId a2, b2;
  if (range(b).lo >= 1 && cancel_common(a, b, &a2, &b2) && range(b2).lo >= 1) return floordiv(a2, b2);
  return make(ExprOp::kFloorDiv, a, b, 0);
}

bool ExprPool::provably_divisible(ExprId x, int64_t d) const {
  if (d == 1) return true;
  Linear l;
  linearize_into(x, 1, &l);
  if (floor_mod(l.constant, d) != 0) return false;
  for (const auto& t : l.terms) {
    int64_t need = d / std::gcd(t.second < 0 ? neg_i64(t.second) : t.second, d);  // atom must be a multiple of this
    if (need == 1) continue;
    const ExprNode& n = nodes_[t.first];
    if (n.op == ExprOp::kDim && dims_[n.a].step % need == 0) continue;
    // floordiv(y, c) is a multiple of m when y is a multiple of c*m.
    if (n.op == ExprOp::kFloorDiv && is_const(n.b) && const_value(n.b) > 0 &&
        provably_divisible(n.a, mul_i64(const_value(n.b), need)))
      continue;
    return false;
  }
  return true;
}

ExprId ExprPool::ceildiv(ExprId a, ExprId b) {
  if (is_const(b) && const_value(b) > 0 && provably_divisible(a, const_value(b))) return floordiv_const(a, const_value(b));
  if (is_const(b) && const_value(b) > 0) return floordiv_const(add(a, constant(const_value(b) - 1)), const_value(b));
  if (a == b && range(b).lo > 0) return constant(1);
  ExprId exact = divide_exact(a, b);
  if (exact != kNoExpr) return exact;
  return make(ExprOp::kCeilDiv, a, b, 0);
}

ExprId ExprPool::mod(ExprId a, ExprId b) {
  if (is_const(a) && is_const(b) && const_value(b) != 0) return constant(floor_mod(const_value(a), const_value(b)));
  if (is_const(b) && const_value(b) > 0) {
    int64_t d = const_value(b);
    if (d == 1) return constant(0);
    // (x % d) is x modulo d: c*(x % d) % d == c*x % d, so inner mods by d are looked through.
    Linear l0 = linearize(a), l;
    l.constant = l0.constant;
    for (auto& t : l0.terms) {
      const ExprNode& n = nodes_[t.first];
      if (n.op == ExprOp::kMod && is_const(n.b) && const_value(n.b) == d) {
        linearize_into(n.a, t.second, &l);
      } else {
        linearize_into(t.first, t.second, &l);
      }
    }
    tidy(&l.terms);
    Linear r;
    for (auto& t : l.terms) {
      int64_t rc = floor_mod(t.second, d);
      if (rc) r.terms.emplace_back(t.first, rc);
    }
    r.constant = floor_mod(l.constant, d);
    // A dim whose step is a multiple of d contributes nothing.
    r.terms.erase(std::remove_if(r.terms.begin(), r.terms.end(),
                                 [&](auto& t) {
                                   const ExprNode& n = nodes_[t.first];
                                   return n.op == ExprOp::kDim && dims_[n.a].step % d == 0;
                                 }),
                  r.terms.end());
    if (r.terms.empty()) return constant(r.constant);
    ExprId x = build_linear(r);
    Interval rr = range(x);
    if (rr.lo >= 0 && rr.hi < d) return x;
    return make(ExprOp::kMod, x, b, 0);
  }
  if (divide_exact(a, b) != kNoExpr) return constant(0);
  return make(ExprOp::kMod, a, b, 0);
}

bool ExprPool::always(ExprId lhs, Relation rel, ExprId rhs, int64_t limit) const {
  if (lhs == rhs && rel != Relation::kDivisible) return true;
  if (rel == Relation::kGe && range(lhs).lo >= range(rhs).hi) return true;
  const Census c = census(lhs, rel, rhs, limit);
  return c.complete && c.satisfied == c.assignments;
}

ExprPool::Census ExprPool::census(ExprId lhs, Relation rel, ExprId rhs, int64_t limit) const {
  Census c;
  // The sub-DAG both sides read, in id order (operands precede users).
  std::vector<bool> seen(nodes_.size(), false);
  std::vector<ExprId> stack = {lhs, rhs}, order;
  std::vector<bool> dim_used(dims_.size(), false);
  while (!stack.empty()) {
    ExprId e = stack.back();
    stack.pop_back();
    if (seen[e]) continue;
    seen[e] = true;
    order.push_back(e);
    const ExprNode& n = nodes_[e];
    if (n.op == ExprOp::kDim) dim_used[n.a] = true;
    else if (n.op != ExprOp::kConst) stack.push_back(n.a), stack.push_back(n.b);
  }
  std::sort(order.begin(), order.end());
  int64_t total = 1;
  for (size_t d = 0; d < dims_.size(); ++d) {
    if (!dim_used[d]) continue;
    c.dims.push_back(static_cast<int>(d));
    int64_t first = ceil_div(dims_[d].min, dims_[d].step) * dims_[d].step;
    int64_t count = first > dims_[d].max ? 0 : (dims_[d].max - first) / dims_[d].step + 1;
    if (__builtin_mul_overflow(total, count, &total) || total > limit) return c;
  }
  std::vector<int64_t> value(nodes_.size(), 0), assign(c.dims.size());
  for (size_t k = 0; k < c.dims.size(); ++k) {
    const DimSpec& d = dims_[c.dims[k]];
    assign[k] = ceil_div(d.min, d.step) * d.step;
  }
  for (int64_t it = 0; it < total; ++it) {
    bool ok = true;
    for (ExprId e : order) {
      const ExprNode& n = nodes_[e];
      const bool binary = n.op != ExprOp::kConst && n.op != ExprOp::kDim;
      int64_t dim_value = n.op == ExprOp::kDim ? assign[std::find(c.dims.begin(), c.dims.end(), n.a) - c.dims.begin()] : 0;
      ok = ok && eval_node(n, binary ? value[n.a] : 0, binary ? value[n.b] : 0, dim_value, &value[e]);
    }
    int64_t l = value[lhs], r = value[rhs];
    bool holds = ok && (rel == Relation::kEq ? l == r : rel == Relation::kGe ? l >= r : (r != 0 && floor_mod(l, r) == 0));
    ++c.assignments;
    if (holds) {
      ++c.satisfied;
      c.last_solution = assign;
      if (assign.size() == 1) c.solutions.push_back(assign[0]);
    } else if (c.satisfied + 1 == c.assignments) {  // the first failure
      c.first_failure = assign;
      c.failure_lhs = l;
    }
    for (size_t k = 0; k < assign.size(); ++k) {  // odometer over the dims' admissible values
      const DimSpec& d = dims_[c.dims[k]];
      if (!__builtin_add_overflow(assign[k], d.step, &assign[k]) && assign[k] <= d.max) break;
      assign[k] = ceil_div(d.min, d.step) * d.step;
    }
  }
  c.complete = true;
  return c;
}

std::string ExprPool::assignment_text(const std::vector<int>& dims, const std::vector<int64_t>& values) const {
  std::string s;
  for (size_t k = 0; k < dims.size() && k < values.size(); ++k)
    s += (k ? ", " : "") + dims_[dims[k]].name + " = " + std::to_string(values[k]);
  return s;
}

ExprId ExprPool::min(ExprId a, ExprId b) {
  if (a == b) return a;
  if (is_const(a) && is_const(b)) return constant(std::min(const_value(a), const_value(b)));
  Interval ra = range(a), rb = range(b);
  if (ra.hi <= rb.lo) return a;
  if (rb.hi <= ra.lo) return b;
  return make(ExprOp::kMin, a, b, 0);
}

ExprId ExprPool::max(ExprId a, ExprId b) {
  if (a == b) return a;
  if (is_const(a) && is_const(b)) return constant(std::max(const_value(a), const_value(b)));
  Interval ra = range(a), rb = range(b);
  if (ra.hi <= rb.lo) return b;
  if (rb.hi <= ra.lo) return a;
  return make(ExprOp::kMax, a, b, 0);
}

std::string relation_text(const std::string& lhs, ExprPool::Relation rel, const std::string& rhs) {
  switch (rel) {
    case ExprPool::Relation::kEq: return lhs + " == " + rhs;
    case ExprPool::Relation::kGe: return lhs + " >= " + rhs;
    case ExprPool::Relation::kDivisible: return lhs + " % " + rhs + " == 0";
  }
  return lhs + " ? " + rhs;
}

}  // namespace kiln::core
