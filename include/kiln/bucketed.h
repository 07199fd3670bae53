#pragma once
// Buckets: a program exported with `kiln export --bucket DIM=S1,S2,...` holds one static method
// per size ("forward@seq=32"). A BucketedMethod calls them as one method "forward": it runs the
// smallest bucket whose size fits the inputs, pads the inputs along the axes that carry the
// dim (with each input's declared pad value), and cuts the outputs back along the axes whose
// size is the dim. The buckets share one arena (the largest one needs); create allocates it
// and every output buffer, run allocates nothing.

#include <memory>
#include <string>
#include <vector>

#include "kiln/method.h"
#include "kiln/program.h"

namespace kiln {

/// What a program says about the buckets of one logical method (BucketedMethod::describe).
struct BucketSpec {
  std::string method;                       ///< the logical name, "forward"
  std::string dim;                          ///< the bucketed dim, "seq"
  std::vector<int64_t> sizes;               ///< ascending
  std::vector<std::string> bucket_methods;  ///< per size: "forward@seq=32"
  struct Axis {
    std::string tensor;  ///< input or output name
    int32_t index = 0;   ///< input or output index
    int32_t axis = 0;
    double pad = 0;      ///< inputs: the value padding fills
  };
  std::vector<Axis> inputs;   ///< input axes that carry the dim (padded up to the bucket)
  std::vector<Axis> outputs;  ///< output axes whose size is the dim (cut back)
  /// "the smallest bucket with seq >= the inputs' seq; input_ids axis 1 padded with 0, ...;
  /// embedding axis 1 cut back"
  std::string rule() const;
};

class BucketedMethod {
 public:
  /// kNotFound when the program has no buckets of `name`.
  static Result<std::unique_ptr<BucketedMethod>> create(const Program& program, const std::string& name,
                                                        const MethodOptions& options = {});
  /// True when `program` holds buckets of `name`.
  static bool has_buckets(const Program& program, const std::string& name);
  /// Every bucketed method of `program`, in file order (nothing is allocated).
  static std::vector<BucketSpec> describe(const Program& program);

  /// Index (in sizes()) of the bucket that inputs of `shapes` run: the smallest size that fits
  /// the dim. Errors: the dim above the largest bucket, inputs that disagree on it, a rank
  /// short of the axis. The bucket's own contract (other dims, guards) is bind_shapes's.
  Result<size_t> select(const std::vector<std::vector<int64_t>>& shapes) const;
  /// Picks the bucket for `shapes` and binds it at the bucket's size: every input is filled
  /// with its pad value; write the actual inputs into the top corner of bound_input(i) (the
  /// first shapes[i] elements of each axis) and call execute(). Nothing is allocated.
  Status bind_shapes(const std::vector<std::vector<int64_t>>& shapes);
  /// Input i of the bound bucket at the bucket's size (row-major; the actual input is its
  /// corner); an empty view before the first bind or when i is out of range.
  const TensorView& bound_input(size_t i) const;
  /// Runs the bound bucket on what its inputs hold and cuts the outputs back.
  Status execute();
  /// bind_shapes at the inputs' shapes, the inputs copied into their corners, then execute().
  Status run(const TensorView* inputs, size_t n);
  size_t num_inputs() const;
  size_t num_outputs() const;
  /// Output i of the last run at its actual size (the method's own memory; valid until the next
  /// run); an empty view (rank 0, data null) when i >= num_outputs().
  const TensorView& output(size_t i) const;
  /// The bucketed dim, the bucket sizes (ascending), and the method the last bind used.
  const std::string& dim() const;
  const std::vector<int64_t>& sizes() const;
  const std::string& last_bucket() const;
  const BucketSpec& spec() const;
  /// The bucket methods (ascending size), e.g. for their metadata; nullptr when i >= sizes().size().
  Method* bucket(size_t i);
  ~BucketedMethod();

 private:
  struct Impl;
  explicit BucketedMethod(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
