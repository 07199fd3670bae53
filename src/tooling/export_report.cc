#include "tooling/export_report.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "core/bytes.h"

namespace kiln::tooling {

std::string format_report(const exporter::ExportReport& r) {
  std::ostringstream o;
  o << "  opset " << r.opset << "; " << r.onnx_nodes << " ONNX nodes -> " << r.instructions << " instructions ("
    << r.folded_shape_nodes << " shape computations and " << r.folded_constant_nodes << " constant nodes folded, "
    << r.removed_nodes << " nodes removed, " << r.views << " views)\n";
  if (r.runtime_branches)
    o << "  runtime branches: " << r.runtime_branches << " If node" << (r.runtime_branches == 1 ? "" : "s")
      << " with both blocks kept, the condition evaluated at execute (KilnIf/KilnElse/KilnSelect)\n";
  if (r.runtime_loops)
    o << "  runtime loops: " << r.runtime_loops << " Loop/Scan node" << (r.runtime_loops == 1 ? "" : "s")
      << " with the body kept once and run per iteration at execute (KilnLoop/KilnEndLoop; scan outputs planned at the bound)\n";
  if (!r.fusions.empty()) {
    std::map<std::string, int> by_op;
    for (const std::string& f : r.fusions) ++by_op[f.substr(0, f.find(' '))];
    o << "  fused: " << r.fused_nodes << " nodes into " << r.fusions.size() << " instructions (";
    const char* sep = "";
    for (const auto& [op, n] : by_op) o << sep << op << " x" << n, sep = ", ";
    o << "; kiln inspect lists them)\n";
  }
  if (!r.fusion_misses.empty()) {
    std::map<std::string, int> by_op;
    for (const std::string& m : r.fusion_misses) ++by_op[m.substr(0, m.find(' '))];
    o << "  fusion near-misses: " << r.fusion_misses.size() << " (";
    const char* sep = "";
    for (const auto& [op, n] : by_op) o << sep << op << " x" << n, sep = ", ";
    o << (r.explain_fusion ? "):\n" : "; kiln export --explain-fusion names each and where its match stopped)\n");
    if (r.explain_fusion)
      for (const std::string& m : r.fusion_misses) o << "    " << m << "\n";
  }
  if (r.qdq_folded || r.retyped_u8) {
    o << "  quantized: " << r.qdq_folded << " DequantizeLinear -> Conv/MatMul -> QuantizeLinear chain"
      << (r.qdq_folded == 1 ? "" : "s") << " folded into integer instructions (QLinearConv, QLinearMatMul); "
      << r.retyped_u8 << " uint8 activation" << (r.retyped_u8 == 1 ? "" : "s")
      << " held as int8 (zero point - 128, the same values) for int8 weights' kernels\n";
  }
  if (r.dynamic_matmuls_folded)
    o << "  quantized: " << r.dynamic_matmuls_folded << " dynamically quantized MatMul/Conv"
      << (r.dynamic_matmuls_folded == 1 ? "" : "s")
      << " (MatMulInteger or ConvInteger -> Cast -> Mul [-> Add]) folded into PackedMatMulIntegerToFloat or "
      << "PackedConvIntegerToFloat, weights packed at export\n";
  if (r.int8_flop_share > 0) {
    char share[32];
    std::snprintf(share, sizeof(share), "%.1f%%", 100 * r.int8_flop_share);
    o << "  int8: " << share << " of FLOPs at the bound in integer instructions\n";
  }
  if (r.contrib_rewritten)
    o << "  contrib ops: " << r.contrib_rewritten << " com.microsoft op(s) rewritten into standard ONNX (DynamicQuantizeLSTM as an "
      << "LSTM with its weights dequantized at export; QLinear* as DequantizeLinear -> op -> QuantizeLinear)\n";
  o << "  inputs:\n";
  for (const auto& s : r.inputs) o << "    " << s << "\n";
  if (!r.dims.empty()) {
    o << "  dims:\n";
    for (const auto& s : r.dims) o << "    " << s << "\n";
  }
  if (!r.narrowed.empty()) {
    o << "  narrowed by the model's guards (the contract states these ranges):\n";
    for (const auto& s : r.narrowed) o << "    " << s << "\n";
  }
  o << "  outputs:\n";
  for (const auto& s : r.outputs) o << "    " << s << "\n";
  o << "  guards:" << (r.guards.empty() ? " none" : "") << "\n";
  for (const auto& s : r.guards) o << "    " << s << "\n";
  double ratio = r.lower_bound_bytes ? static_cast<double>(r.arena_bytes) / static_cast<double>(r.lower_bound_bytes) : 1.0;
  o.setf(std::ios::fixed);
  o.precision(3);
  o << "  memory: arena " << core::human_bytes(r.arena_bytes) << " at the bound (" << r.arena_bytes << " bytes), "
    << core::human_bytes(r.arena_min_bytes) << " at the minimum; lower bound " << r.lower_bound_bytes << " (" << ratio
    << "x); constants " << r.constant_bytes << " bytes of data, " << r.constant_segment_bytes
    << " in the file's constant segment (64-byte alignment included; kiln inspect's count)\n";
  o << "  ops:";
  for (const auto& [op, n] : r.ops) o << " " << op << " " << n;
  o << "\n";
  for (const auto& n : r.notes) o << "  " << n << "\n";
  for (const auto& w : r.warnings) o << "  warning: " << w << "\n";
  if (r.coverage.empty()) {
    o << "  delegate: none (portable kernels only)\n";
    return o.str();
  }
  double dratio = r.delegate_lower_bound_bytes ? static_cast<double>(r.delegate_arena_bytes) /
                                                     static_cast<double>(r.delegate_lower_bound_bytes) : 1.0;
  o << "  delegate " << r.coverage << "; arena " << core::human_bytes(r.delegate_arena_bytes) << " at the bound ("
    << r.delegate_arena_bytes << " bytes, " << dratio << "x lower bound), " << core::human_bytes(r.delegate_arena_min_bytes)
    << " at the minimum\n";
  if (!r.declined.empty()) o << "  declined:\n";
  for (const auto& s : r.declined) o << "    " << s << "\n";
  return o.str();
}

}  // namespace kiln::tooling
