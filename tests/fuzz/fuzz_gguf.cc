// Fuzz target: bytes as a .gguf file -> GgufFile::FromMemory (common/gguf.h), which validates
// the header, metadata and tensor infos, then what the loaders build from a parsed file: the
// model config (ModelConfigFromGguf) and the tokenizer (Tokenizer::FromGguf, which encodes and
// decodes a short text). Every tensor range the reader accepts must lie inside the input: the
// target reads each tensor's first and last byte, so a range past it is an ASan report.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/gguf.h"
#include "common/model_config.h"
#include "common/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = llm::GgufFile::FromMemory(data, size, "fuzz.gguf");
  if (!file.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const auto& t : (*file)->tensors()) {
    (void)t.ShapeString();
    if (t.nbytes > 0) {
      const auto* bytes = static_cast<const uint8_t*>(t.data);
      sink = sink + bytes[0] + bytes[t.nbytes - 1];
    }
  }
  auto config = llm::ModelConfigFromGguf(**file);
  if (config.ok()) (void)llm::RopeInvFreq(*config);
  auto tok = llm::Tokenizer::FromGguf(**file);
  if (tok.ok()) {
    const auto ids = (*tok)->Encode("Hello <s> world\n\xe2\x96\x81 ab");
    (void)(*tok)->Decode(ids);
  }
  return 0;
}
