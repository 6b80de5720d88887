// Fuzz target (e): bytes as a .safetensors file -> SafetensorsFile::Open (common/safetensors.h),
// which validates the header on open, then every tensor through Get(). There is no in-memory
// entry point: the input goes into a memfd opened as /proc/self/fd/N (no disk I/O). Every byte
// range Open accepts must lie inside the file: the target reads each tensor's first and last
// byte, so a range past the mapping is an ASan report or a SIGSEGV.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = [] {
    const int f = memfd_create("fuzz_safetensors", 0);
    if (f < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    return f;
  }();
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) {
    std::abort();
  }
  auto file = llm::SafetensorsFile::Open("/proc/self/fd/" + std::to_string(fd));
  if (!file.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const std::string& name : (*file)->TensorNames()) {
    auto view = (*file)->Get(name);
    if (!view.ok()) continue;
    (void)view->numel();
    (void)view->ShapeString();
    if (view->nbytes > 0) {
      const auto* bytes = static_cast<const uint8_t*>(view->data);
      sink = sink + bytes[0] + bytes[view->nbytes - 1];
    }
  }
  return 0;
}
