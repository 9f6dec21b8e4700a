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

namespace lmkit::nn {

/// Zeroes each element of `x` with probability `p` and scales the rest by 1/(1 - p')
/// — p' is p rounded to a multiple of 2^-16, the rate actually drawn, so the
/// expectation is exactly x. Identity when !training or p == 0; zeros when p == 1.
at::Tensor dropout(const at::Tensor& x, double p, bool training);

}  // namespace lmkit::nn
