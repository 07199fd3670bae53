#pragma once
// Random constants for graphs built in tests (exporter::GraphBuilder), and inputs drawn from a
// normal distribution: what the delegate-against-portable tests share.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "export/graph.h"
#include "kiln/tensor.h"

namespace kiln::testing {

/// Uniform constants in [-scale, scale], named w0, w1, ... in the order they are made.
class RandomConstants {
 public:
  RandomConstants(exporter::GraphBuilder& g, uint32_t seed, float scale) : g_(g), rng_(seed), u_(-scale, scale) {}
  int operator()(const std::vector<int64_t>& shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<float> v(n);
    for (float& f : v) f = u_(rng_);
    return *g_.add_constant<float>("w" + std::to_string(count_++), DType::kF32, shape, v);
  }

 private:
  exporter::GraphBuilder& g_;
  std::mt19937 rng_;
  std::uniform_real_distribution<float> u_;
  int count_ = 0;
};

/// t's floats from N(0, 1.5), the same for the same seed.
inline void fill_normal(TensorView t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.5f);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = n(rng);
}

}  // namespace kiln::testing
