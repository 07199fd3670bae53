// The op registry: expands ops.inc into declarations and one table.
#include <cstring>

#include "kernels/kernel.h"

namespace kiln::kernels {

#define KILN_OP(NAME, FN) \
  Status FN##_shape(ShapeCtx& c); \
  KernelStatus FN##_run(const RunCtx& c);
#define KILN_VIEW_OP(NAME, FN) Status FN##_shape(ShapeCtx& c);
#define KILN_OP_PREPARED(NAME, FN, PREP) \
  KILN_OP(NAME, FN)                      \
  void PREP##_prepare(const PrepareCtx& c, OpData* d);
#include "kernels/portable/ops.inc"
#undef KILN_OP
#undef KILN_VIEW_OP
#undef KILN_OP_PREPARED

namespace {
const OpDef kOps[] = {
#define KILN_OP(NAME, FN) {NAME, &FN##_shape, &FN##_run, false, nullptr},
#define KILN_VIEW_OP(NAME, FN) {NAME, &FN##_shape, nullptr, true, nullptr},
#define KILN_OP_PREPARED(NAME, FN, PREP) {NAME, &FN##_shape, &FN##_run, false, &PREP##_prepare},
#include "kernels/portable/ops.inc"
#undef KILN_OP
#undef KILN_VIEW_OP
#undef KILN_OP_PREPARED
};
}  // namespace

const OpDef* find_op(const char* name) {
  for (const OpDef& op : kOps)
    if (std::strcmp(op.name, name) == 0) return &op;
  return nullptr;
}

const OpDef* all_ops(size_t* count) {
  *count = sizeof(kOps) / sizeof(kOps[0]);
  return kOps;
}

}  // namespace kiln::kernels
