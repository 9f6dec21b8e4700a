// Inverted dropout with a cheap, parallel mask on CPU.
//
// LibTorch's CPU dropout draws every element with the global Mersenne Twister,
// one thread at a time, and stores a float mask (measured: 15% of a gpt-mini
// training step). Here one 64-bit draw from LibTorch's generator seeds a
// counter-based stream (SplitMix64 of the element's block index), so the mask is
// made by all threads at once, is the same for any thread count, and follows
// torch::manual_seed. A 16-bit uniform decides each element; the mask is kept as
// one byte per element for the backward pass. On CUDA, at::dropout's fused kernel.
#pragma once

#include <ATen/core/Tensor.h>

#include "lmkit/nn/kernels.h"

namespace lmkit::nn {

/// Zeroes each element of `x` with probability `p` and scales the rest by 1/(1 - p')
/// — p' is p rounded to a multiple of 2^-16, the rate actually drawn, so the
/// expectation is exactly x. Identity when !training or p == 0; zeros when p == 1.
at::Tensor dropout(const at::Tensor& x, double p, bool training);

/// Whether dropout(x, p, true) of a float CPU tensor draws a counter-based mask: p rounds to a
/// rate strictly between 0 and 1 and LMKIT_DISABLE does not name "dropout".
bool counter_dropout_applies(double p);

/// The mask dropout(x, p, true) draws next on the CPU (where counter_dropout_applies(p)): its one
/// 64-bit draw from LibTorch's CPU generator, so that a fused op that drops with it (the residual
/// step's CPU path, nn/fused.h) drops the elements dropout would and leaves the generator as it would.
kernels::cpu::Dropout draw_counter_dropout(double p);

}  // namespace lmkit::nn
