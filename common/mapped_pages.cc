#include "common/mapped_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace llm {

bool ReleaseMappedPages(const void* map, size_t map_size, const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  const auto* base = static_cast<const char*>(map);
  if (map == nullptr || p < base || bytes > map_size ||
      p - base > static_cast<ptrdiff_t>(map_size - bytes)) {
    return false;
  }
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto begin = reinterpret_cast<uintptr_t>(p);
  auto end = begin + bytes;
  begin = (begin + page - 1) / page * page;  // only whole pages inside the range
  end = end / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  return true;
}

}  // namespace llm
