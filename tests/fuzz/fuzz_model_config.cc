// Fuzz target (f, first half): config.json text -> ParseModelConfig (common/model_config.h).
// Any text must parse or be an error naming config.json and the key; never crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = llm::ParseModelConfig(text, "config.json");
  (void)config;
  return 0;
}
