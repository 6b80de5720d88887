// Fuzz target (f, second half): cluster.yaml text -> ParseClusterConfig (common/cluster_config.h).
// Any text must parse or be an error naming the file; never crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/cluster_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = llm::ParseClusterConfig(text, "cluster.yaml");
  (void)config;
  return 0;
}
