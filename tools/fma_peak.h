// The F32 FMA peak of the compute threads, measured (llm-bench prints it beside the read
// bandwidth): batched decode of float weights (F16, BF16, F32) cannot compute faster, so batch b
// over batch 1 is at most this peak over the read bandwidth (batch 1 reads each weight once per
// token, two FLOPs a weight) where batch 1 is memory-bound.
#pragma once

namespace llm_bench {

// GFLOP/s of the OpenMP threads (omp_get_max_threads) each running independent chains of
// 512-bit FMAs (AVX-512F) or 256-bit ones (AVX2 + FMA), best of 3 passes (~70 ms in all);
// 0 where the CPU has neither (or is not x86).
double FmaPeakGflops();

}  // namespace llm_bench
