#pragma once
// Resize's compute on channels-last buffers, for the delegate: the same coordinate rules and
// taps as resize_run, over a [N, H, W, C] input and output whose roi/scales/sizes operands
// keep their channels-first order.

#include "kernels/kernel.h"

namespace kiln::kernels {

KernelStatus resize_run_channels_last(const RunCtx& c);

}  // namespace kiln::kernels
