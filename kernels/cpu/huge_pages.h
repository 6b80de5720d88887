// Transparent huge pages (2 MiB) for the CPU backend's large buffers: the weights it copies out of
// a model file's mapping, the KV cache and the workspace.
//
// Why: a decode step streams every weight once, and with 4 KiB pages (a file mapping: GGUF and
// safetensors weights read in place) the core's stream prefetcher stops at every page boundary
// and each page costs a TLB walk. TinyLlama-1.1B Q4_K_M at 2 threads on the AMD EPYC (Zen 4)
// development host, batch-1 decode, five alternating runs: 35.4 tok/s (median) reading the file
// mapping, 33.7 from a copy in 4 KiB pages, 40.8 from the same copy in 2 MiB pages.
#pragma once

#include <cstddef>
#include <string>

namespace llm::kernels {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// The kernel's transparent-huge-page mode for anonymous memory
// (/sys/kernel/mm/transparent_hugepage/enabled: "always", "madvise" or "never"; "" when the file
// is absent or unreadable, as on kernels built without THP).
std::string TransparentHugePageMode();

// bytes (rounded up to whole small pages) of fresh anonymous memory, zero, starting on a 2 MiB
// boundary and advised MADV_HUGEPAGE before its first touch; nullptr when the mapping fails.
// *mapped gets the length to pass to FreeHugePageAligned.
void* AllocateHugePageAligned(size_t bytes, size_t* mapped);
void FreeHugePageAligned(void* data, size_t mapped);

// This process's anonymous memory in huge pages (AnonHugePages of /proc/self/smaps_rollup), in
// bytes; 0 when unknown.
size_t AnonHugePageBytes();

}  // namespace llm::kernels
