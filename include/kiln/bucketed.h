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

class BucketedMethod {
 public:
  /// kNotFound when the program has no buckets of `name`.
  static Result<std::unique_ptr<BucketedMethod>> create(const Program& program, const std::string& name,
                                                        const MethodOptions& options = {});
  /// True when `program` holds buckets of `name`.
  static bool has_buckets(const Program& program, const std::string& name);

  /// Picks the bucket, pads and copies the inputs in, executes, cuts the outputs back. Errors:
  /// the dim above the largest bucket, inputs that disagree on it, or the bucket's contract.
  Status run(const TensorView* inputs, size_t n);
  size_t num_outputs() const;
  /// Output i of the last run at its actual size (the method's own memory; valid until the next
  /// run); an empty view (rank 0, data null) when i >= num_outputs().
  const TensorView& output(size_t i) const;
  /// The bucketed dim, the bucket sizes (ascending), and the method the last run used.
  const std::string& dim() const;
  const std::vector<int64_t>& sizes() const;
  const std::string& last_bucket() const;
  /// The bucket methods (ascending size), e.g. for their metadata; nullptr when i >= sizes().size().
  Method* bucket(size_t i);
  ~BucketedMethod();

 private:
  struct Impl;
  explicit BucketedMethod(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
