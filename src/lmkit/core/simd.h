// Function multiversioning for the few elementwise CPU kernels lmkit writes itself
// (dropout, the fused AdamW update): the compiler builds each for AVX-512, AVX2 and
// baseline x86-64 and the loader picks the best the CPU has. Debian's LibTorch and
// lmkit are built for baseline x86-64, which would leave these loops at SSE2.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LMKIT_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LMKIT_MULTIVERSION
#endif
