#include "kernels/cpu/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>

namespace llm::kernels {

std::string TransparentHugePageMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(in, line)) return "";
  // The selected mode is the bracketed word: "always [madvise] never".
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return line.substr(open + 1, close - open - 1);
}

void* AllocateHugePageAligned(size_t bytes, size_t* mapped) {
  *mapped = 0;
  if (bytes == 0 || bytes > SIZE_MAX - 2 * kHugePageBytes) return nullptr;
  // Whole small pages only: the 2 MiB-aligned stretches inside get huge pages, the tail past the
  // last of them stays in small pages, so no memory is spent rounding up (a tensor of 2.25 MiB
  // is one huge page and 64 small ones, not two huge pages).
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t length = (bytes + page - 1) / page * page;
  // One extra huge page of address space to align in, then the unaligned ends are unmapped.
  const size_t span = length + kHugePageBytes;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > begin) ::munmap(raw, aligned - begin);
  const uintptr_t end = begin + span, used_end = aligned + length;
  if (end > used_end) ::munmap(reinterpret_cast<void*>(used_end), end - used_end);
  // Advice only: where THP is off (or the kernel has no huge page free) the pages stay 4 KiB.
  ::madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);
  *mapped = length;
  return reinterpret_cast<void*>(aligned);
}

void FreeHugePageAligned(void* data, size_t mapped) {
  if (data != nullptr && mapped > 0) ::munmap(data, mapped);
}

size_t AnonHugePageBytes() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("AnonHugePages:", 0) != 0) continue;
    std::istringstream fields(line.substr(14));
    size_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

}  // namespace llm::kernels
