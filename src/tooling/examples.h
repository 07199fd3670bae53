#pragma once
// The bundled example programs, built with the graph builder (examples/make_examples.cc
// writes them to examples/*.kiln; tests rebuild them and compare against their own reference).

#include <map>
#include <string>
#include <vector>

#include "format/program_desc.h"
#include "kiln/status.h"

namespace kiln::tooling {

struct ExampleModel {
  format::ProgramDesc program;
  std::map<std::string, std::vector<float>> weights;  ///< by constant name, row-major
};

/// Deterministic pseudo-random values in [-scale, scale) (portable LCG, not std::random).
std::vector<float> example_weights(uint32_t seed, size_t n, float scale);

/// MLP with dynamic batch in [1, 64]: x[batch,16] -> MatMul/Add/Relu -> MatMul/Add -> Softmax.
Result<ExampleModel> make_mlp_example();
/// CNN with dynamic batch [1, 4], H and W in [1, 64]: Conv s2 -> Relu -> MaxPool(ceil) ->
/// Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm, output [batch, 10].
Result<ExampleModel> make_cnn_example();

}  // namespace kiln::tooling
