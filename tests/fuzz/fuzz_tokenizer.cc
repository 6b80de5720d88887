// Fuzz target (c): encode and decode of arbitrary bytes with every tokenizer in
// ../shared/tokenizers (LLM_SHARED_DIR, or the LLM_FUZZ_TOKENIZERS folder) plus the demo model's
// tokenizer in deploy/ (always present). Without ../shared only the demo tokenizer is fuzzed and
// the target says so once. The first byte picks the tokenizer and the flags; the rest is text to
// Encode / EncodeWithPlainRanges / ContainsSpecialTokenText and, read as int32 ids, ids to
// Decode and to IncrementalDecoder, whose concatenated output must equal Decode (documented in
// common/tokenizer.h).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/tokenizer.h"

namespace {

std::vector<std::unique_ptr<llm::Tokenizer>>& Tokenizers() {
  static std::vector<std::unique_ptr<llm::Tokenizer>> tokenizers;
  return tokenizers;
}

void Load(const std::string& dir) {
  auto t = llm::Tokenizer::FromDir(dir);
  if (!t.ok()) {
    std::fprintf(stderr, "fuzz_tokenizer: %s: %s\n", dir.c_str(), t.status().message().c_str());
    std::abort();
  }
  std::fprintf(stderr, "fuzz_tokenizer: loaded %s (vocab %d)\n", dir.c_str(), (*t)->vocab_size());
  Tokenizers().push_back(std::move(*t));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  namespace fs = std::filesystem;
  Load(LLM_SOURCE_DIR "/deploy/models/demo-llama");
  const char* env = std::getenv("LLM_FUZZ_TOKENIZERS");
  const fs::path shared = env ? fs::path(env) : fs::path(LLM_SHARED_DIR) / "tokenizers";
  std::error_code ec;
  if (!fs::is_directory(shared, ec)) {
    std::fprintf(stderr,
                 "fuzz_tokenizer: SKIP the shared tokenizers: %s is absent; fuzzing only the "
                 "demo tokenizer\n",
                 shared.c_str());
    return 0;
  }
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(shared)) {
    if (fs::exists(entry.path() / "tokenizer.json")) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  for (const auto& d : dirs) Load(d.string());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto& tokenizers = Tokenizers();
  const uint8_t selector = data[0];
  const llm::Tokenizer& tok = *tokenizers[(selector & 0x0f) % tokenizers.size()];
  const bool add_special = selector & 0x10;
  const bool parse_special = selector & 0x20;
  const bool skip_special = selector & 0x40;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  if (selector & 0x80) {
    // Decode: the bytes as int32 ids (any value: out-of-range ids must render nothing).
    std::vector<int32_t> ids(text.size() / 4);
    if (!ids.empty()) std::memcpy(ids.data(), text.data(), ids.size() * 4);
    // Mostly valid ids: fold most into the vocabulary, keep every 8th raw.
    const int32_t vocab = tok.vocab_size();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i % 8 != 7 && vocab > 0)
        ids[i] = static_cast<int32_t>(static_cast<uint32_t>(ids[i]) % static_cast<uint32_t>(vocab));
    }
    const std::string whole = tok.Decode(ids, skip_special);
    llm::IncrementalDecoder decoder(tok, skip_special);
    std::string pieces;
    for (int32_t id : ids) pieces += decoder.Add(id);
    pieces += decoder.Flush();
    if (pieces != whole) {
      std::fprintf(stderr, "IncrementalDecoder != Decode\n");
      std::abort();
    }
    for (int32_t id : ids) {
      (void)tok.IdToToken(id);
      (void)tok.IsSpecial(id);
    }
    return 0;
  }
  const std::vector<int32_t> ids = tok.Encode(text, add_special, parse_special);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.vocab_size()) {
      std::fprintf(stderr, "Encode produced id %d outside [0, %d)\n", id, tok.vocab_size());
      std::abort();
    }
  }
  (void)tok.Decode(ids, skip_special);
  (void)tok.ContainsSpecialTokenText(text);
  // The middle third as a plain (user) range, as the router does for message contents.
  // Whole UTF-8 characters, as the router's ranges are.
  auto boundary = [&](size_t at) {
    while (at < text.size() && (static_cast<uint8_t>(text[at]) & 0xc0) == 0x80) ++at;
    return at;
  };
  const llm::TextRange plain[] = {{boundary(text.size() / 3), boundary(2 * text.size() / 3)}};
  (void)tok.EncodeWithPlainRanges(text, plain, add_special);
  return 0;
}
