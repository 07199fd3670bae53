#pragma once
// SymExpr: integer expressions over named, bounded Dims. Export builds them in an ExprPool
// (hash-consed, simplified as they are made); the .kiln file stores the pool's flat node
// table; bind evaluates every node once, in order, with eval_exprs().

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/dim.h"
#include "kiln/status.h"

namespace kiln::core {

using ExprId = int32_t;
constexpr ExprId kNoExpr = -1;

enum class ExprOp : uint8_t {
  kConst = 0,  ///< value
  kDim = 1,    ///< a = index into the dim table
  kAdd = 2,
  kSub = 3,
  kMul = 4,
  kFloorDiv = 5,  ///< rounds toward negative infinity
  kCeilDiv = 6,
  kMod = 7,  ///< result has the sign of the divisor (Python semantics)
  kMin = 8,
  kMax = 9,
};

/// One node of the flat expression table. Operands always precede their users.
struct ExprNode {
  ExprOp op = ExprOp::kConst;
  int32_t a = -1;
  int32_t b = -1;
  int64_t value = 0;
};


/// Closed integer interval [lo, hi].
struct Interval {
  int64_t lo = 0;
  int64_t hi = 0;
};

int64_t floor_div(int64_t a, int64_t b);
int64_t ceil_div(int64_t a, int64_t b);
int64_t floor_mod(int64_t a, int64_t b);

/// Bounds of one node from its operands' bounds (for kDim, `a` is the dim's [min, max]; for
/// kConst, `value`). May be loose, never wrong; saturates at +-(int64 max / 4). The one rule
/// export (ExprPool::range) and the reader's semantic pass both use.
Interval node_range(ExprOp op, Interval a, Interval b, int64_t value);

/// Evaluates nodes[0..n) into out[0..n) given one value per dim. Never allocates.
/// Returns false (and the failing node index in *bad_node) on division by zero or int64
/// overflow.
bool eval_exprs(const ExprNode* nodes, size_t n, const int64_t* dim_values, int64_t* out,
                size_t* bad_node);

/// Renders node `id` as readable text ("ceildiv(H,2)", "2*batch + 1").
/// `dim_names[i]` names dim i.
std::string format_expr(const ExprNode* nodes, size_t n, const std::vector<std::string>& dim_names,
                        ExprId id);

/// Owns the expressions and dims of one method under construction.
class ExprPool {
 public:
  /// Registers a dim; names must be unique (returns the existing index for a known name).
  int add_dim(const DimSpec& dim);
  /// Narrows dim `index` to [min, max] at `step` (admitting no value it did not admit before)
  /// and recomputes every node's range from it.
  void narrow_dim(int index, int64_t min, int64_t max, int64_t step);
  int find_dim(const std::string& name) const;
  const std::vector<DimSpec>& dims() const { return dims_; }
  std::vector<std::string> dim_names() const;

  /// Appends `n` as stored in a program's node table (operands and dims already present),
  /// without simplifying it; later calls that build the same node return it. Lets the
  /// reader rebuild the exporter's pool with the same ids.
  ExprId append(const ExprNode& n);

  ExprId constant(int64_t v);
  ExprId dim(int dim_index);
  ExprId add(ExprId a, ExprId b);
  ExprId sub(ExprId a, ExprId b);
  ExprId mul(ExprId a, ExprId b);
  ExprId floordiv(ExprId a, ExprId b);
  ExprId ceildiv(ExprId a, ExprId b);
  ExprId mod(ExprId a, ExprId b);
  ExprId min(ExprId a, ExprId b);
  ExprId max(ExprId a, ExprId b);

  /// For monomials a = k*m and b = k'*m': divides both by their common factors whose range
  /// is positive and by gcd(k, k'). False when nothing cancels. Used to state a/b and
  /// a == b in their smallest terms.
  bool cancel_common(ExprId a, ExprId b, ExprId* a2, ExprId* b2);

  /// True when x % d == 0 for every admissible dim value (from coefficients and steps).
  bool provably_divisible(ExprId x, int64_t d) const;
  bool is_const(ExprId id) const { return nodes_[id].op == ExprOp::kConst; }
  /// Value of a constant node (precondition: is_const).
  int64_t const_value(ExprId id) const { return nodes_[id].value; }
  /// True when the expression is provably equal to v over every dim value.
  bool is_const_value(ExprId id, int64_t v) const { return is_const(id) && const_value(id) == v; }
  /// Bounds over every admissible dim value (may be loose, never wrong).
  Interval range(ExprId id) const { return ranges_[id]; }
  const ExprNode& node(ExprId id) const { return nodes_[id]; }
  const std::vector<ExprNode>& nodes() const { return nodes_; }
  size_t size() const { return nodes_.size(); }

  /// Relations a guard can state.
  enum class Relation : uint8_t { kEq = 0, kGe = 1, kDivisible = 2 };
  /// Outcome of checking `lhs rel rhs` over every admissible assignment of the dims it reads.
  struct Census {
    bool complete = false;     ///< false when there were more than `limit` assignments
    int64_t assignments = 0;   ///< admissible assignments checked
    int64_t satisfied = 0;
    std::vector<int> dims;     ///< the dims the relation reads
    std::vector<int64_t> last_solution;  ///< one satisfying assignment (values of `dims`)
    std::vector<int64_t> solutions;      ///< every satisfying value, ascending, when it reads one dim
    std::vector<int64_t> first_failure;  ///< the first assignment (values of `dims`) where it fails
    int64_t failure_lhs = 0;             ///< lhs there (meaningless when evaluation overflowed)
  };
  Census census(ExprId lhs, Relation rel, ExprId rhs, int64_t limit = 20000) const;
  /// True when lhs rel rhs provably holds for every admissible dim value: by the ranges, or
  /// by the census when there are at most `limit` assignments. False means "not proven".
  bool always(ExprId lhs, Relation rel, ExprId rhs, int64_t limit = 20000) const;
  /// "L = 3, B = 1": an assignment of `dims` (as in Census::dims) in words.
  std::string assignment_text(const std::vector<int>& dims, const std::vector<int64_t>& values) const;

  /// True once any arithmetic on this pool's constants or coefficients left int64 (shape
  /// constants come from files: a reshape to [2^40, 2^40] multiplies past it). The result
  /// saturated; the exporter turns this into an error naming the node.
  bool overflowed() const { return overflowed_; }

  std::string to_string(ExprId id) const;
  /// "[batch, 64, ceildiv(H,2)]"
  std::string shape_to_string(const std::vector<ExprId>& shape) const;

 private:
  struct Linear {  // sum(coef * atom) + constant; atoms sorted by id
    std::vector<std::pair<ExprId, int64_t>> terms;
    int64_t constant = 0;
  };
  /// Rewrites one pair k*x + k*((-x) mod d) in l into k*d*ceildiv(x, d) (padding x up to a
  /// multiple of d, as torch writes it); false when there is none.
  bool fold_round_up(Linear* l);
  static std::string node_key(ExprOp op, int32_t a, int32_t b, int64_t value);
  ExprId make(ExprOp op, int32_t a, int32_t b, int64_t value);
  Interval compute_range(ExprOp op, int32_t a, int32_t b, int64_t value) const;
  Linear linearize(ExprId id) const;
  void linearize_into(ExprId id, int64_t scale, Linear* out) const;
  ExprId build_linear(const Linear& l);
  ExprId build_product(std::vector<ExprId> factors);
  void collect_factors(ExprId id, std::vector<ExprId>* out) const;
  ExprId floordiv_const(ExprId a, int64_t d);
  ExprId divide_exact(ExprId a, ExprId b);  // kNoExpr when not provably exact
  // int64 arithmetic that saturates and sets overflowed_ instead of overflowing.
  int64_t add_i64(int64_t a, int64_t b) const;
  int64_t mul_i64(int64_t a, int64_t b) const;
  int64_t neg_i64(int64_t a) const { return mul_i64(a, -1); }

  std::vector<ExprNode> nodes_;
  std::vector<Interval> ranges_;
  std::vector<DimSpec> dims_;
  std::unordered_map<std::string, ExprId> dedup_;
  mutable bool overflowed_ = false;
};

/// "lhs == rhs", "lhs >= rhs" or "lhs % rhs == 0": how guards read everywhere.
std::string relation_text(const std::string& lhs, ExprPool::Relation rel, const std::string& rhs);

}  // namespace kiln::core
