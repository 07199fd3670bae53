#include "tooling/examples.h"

#include "export/graph.h"

namespace kiln::tooling {

using exporter::GraphBuilder;

std::vector<float> example_weights(uint32_t seed, size_t n, float scale) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = (static_cast<float>(s >> 8) / 16777216.0f * 2.0f - 1.0f) * scale;
  }
  return v;
}

namespace {

Result<int> weight(GraphBuilder& g, ExampleModel& m, const std::string& name, std::vector<int64_t> shape,
                   uint32_t seed, float scale) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  m.weights[name] = example_weights(seed, n, scale);
  return g.add_constant(name, DType::kF32, shape, m.weights[name]);
}

}  // namespace

Result<ExampleModel> make_mlp_example() {
  ExampleModel m;
  GraphBuilder g;
  KILN_TRY(g.add_dim("batch", 1, 64));
  KILN_ASSIGN_OR_RETURN(int x, g.add_input("x", DType::kF32, {"batch", 16}, {8, 16}));
  KILN_ASSIGN_OR_RETURN(int w1, weight(g, m, "w1", {16, 32}, 1, 0.5f));
  KILN_ASSIGN_OR_RETURN(int b1, weight(g, m, "b1", {32}, 2, 0.1f));
  KILN_ASSIGN_OR_RETURN(int w2, weight(g, m, "w2", {32, 10}, 3, 0.5f));
  KILN_ASSIGN_OR_RETURN(int b2, weight(g, m, "b2", {10}, 4, 0.1f));
  KILN_ASSIGN_OR_RETURN(int h, g.add("MatMul", "fc1", {x, w1}));
  KILN_ASSIGN_OR_RETURN(h, g.add("Add", "fc1_bias", {h, b1}));
  KILN_ASSIGN_OR_RETURN(h, g.add("Relu", "relu1", {h}));
  KILN_ASSIGN_OR_RETURN(h, g.add("MatMul", "fc2", {h, w2}));
  KILN_ASSIGN_OR_RETURN(h, g.add("Add", "fc2_bias", {h, b2}));
  core::AttrStore axis;
  axis.set_int("axis", -1);
  KILN_ASSIGN_OR_RETURN(int y, g.add("Softmax", "softmax", {h}, axis));
  KILN_TRY(g.mark_output(y, "probs"));
  KILN_TRY(g.emit(&m.program).status());
  return m;
}

Result<ExampleModel> make_cnn_example() {
  ExampleModel m;
  GraphBuilder g;
  KILN_TRY(g.add_dim("batch", 1, 4));
  KILN_TRY(g.add_dim("H", 1, 64));
  KILN_TRY(g.add_dim("W", 1, 64));
  KILN_ASSIGN_OR_RETURN(int x, g.add_input("pixels", DType::kF32, {"batch", 3, "H", "W"}, {1, 3, 32, 32}));
  KILN_ASSIGN_OR_RETURN(int k1, weight(g, m, "conv1.weight", {8, 3, 3, 3}, 11, 0.4f));
  KILN_ASSIGN_OR_RETURN(int c1, weight(g, m, "conv1.bias", {8}, 12, 0.1f));
  KILN_ASSIGN_OR_RETURN(int k2, weight(g, m, "conv2.weight", {16, 8, 3, 3}, 13, 0.2f));
  KILN_ASSIGN_OR_RETURN(int c2, weight(g, m, "conv2.bias", {16}, 14, 0.1f));
  KILN_ASSIGN_OR_RETURN(int fw, weight(g, m, "fc.weight", {10, 16}, 15, 0.5f));
  KILN_ASSIGN_OR_RETURN(int fb, weight(g, m, "fc.bias", {10}, 16, 0.1f));
  core::AttrStore conv1;
  conv1.set_ints("kernel_shape", {3, 3}).set_ints("strides", {2, 2}).set_ints("pads", {1, 1, 1, 1});
  KILN_ASSIGN_OR_RETURN(int h, g.add("Conv", "conv1", {x, k1, c1}, conv1));
  KILN_ASSIGN_OR_RETURN(h, g.add("Relu", "relu1", {h}));
  core::AttrStore pool;
  pool.set_ints("kernel_shape", {2, 2}).set_ints("strides", {2, 2}).set_int("ceil_mode", 1);
  KILN_ASSIGN_OR_RETURN(h, g.add("MaxPool", "pool1", {h}, pool));
  core::AttrStore conv2;
  conv2.set_ints("kernel_shape", {3, 3}).set_ints("pads", {1, 1, 1, 1});
  KILN_ASSIGN_OR_RETURN(h, g.add("Conv", "conv2", {h, k2, c2}, conv2));
  KILN_ASSIGN_OR_RETURN(h, g.add("Relu", "relu2", {h}));
  KILN_ASSIGN_OR_RETURN(h, g.add("GlobalAveragePool", "gap", {h}));
  KILN_ASSIGN_OR_RETURN(h, g.add("Flatten", "flatten", {h}));
  core::AttrStore gemm;
  gemm.set_int("transB", 1);
  KILN_ASSIGN_OR_RETURN(int y, g.add("Gemm", "fc", {h, fw, fb}, gemm));
  KILN_TRY(g.mark_output(y, "logits"));
  KILN_TRY(g.emit(&m.program).status());
  return m;
}

}  // namespace kiln::tooling
