// Unit tests of the tokenizer building blocks: UTF-8 helpers, clean-up, error paths, added-token
// flags, Metaspace, invalid ids, and streaming decode == full decode on random id sequences.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/tokenizer.h"
#include "common/tokenizer_decoder.h"
#include "common/utf8.h"

namespace llm {
namespace {

namespace fs = std::filesystem;
const std::string kShared = LLM_SHARED_DIR;

std::string Incremental(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip,
                        bool* all_valid) {
  IncrementalDecoder dec(tok, skip);
  std::string out;
  for (const int32_t id : ids) {
    const std::string piece = dec.Add(id);
    *all_valid = *all_valid && utf8::IsValid(piece);
    out += piece;
  }
  return out + dec.Flush();
}

// Writes a tokenizer folder into a fresh temporary directory.
std::string WriteTokenizer(const std::string& name, const std::string& tokenizer_json,
                           const std::string& config_json = "") {
  const fs::path dir = fs::temp_directory_path() / ("llm_tok_test_" + name);
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tokenizer_json;
  if (!config_json.empty()) std::ofstream(dir / "tokenizer_config.json") << config_json;
  return dir.string();
}

TEST(Utf8Test, LossyDecodingAndStablePrefix) {
  EXPECT_EQ(utf8::DecodeLossy("a\xE5\x8F"), "a\xEF\xBF\xBD");
  EXPECT_EQ(utf8::DecodeLossy("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8::DecodeLossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8::DecodeLossy("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(utf8::StablePrefixLen("ab\xF0\x9F"), 2u);
  EXPECT_EQ(utf8::StablePrefixLen("ab\x80"), 3u);
  EXPECT_EQ(utf8::StablePrefixLen("\xE5\x8F\xAB"), 3u);
}

TEST(CleanUpTest, PythonRules) {
  EXPECT_EQ(CleanUpTokenization("Hello , world ! don 't I 'm ok . yes ?"),
            "Hello, world! don 't I'm ok. yes?");
  EXPECT_EQ(CleanUpTokenization("a ' b n't"), "a'bn't");  // sequential, like Python
}

TEST(TokenizerErrorsTest, MissingAndBadFiles) {
  auto missing = Tokenizer::FromDir("/nonexistent/tokenizer/dir");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("tokenizer.json"), std::string::npos);
  auto bad = Tokenizer::FromDir(WriteTokenizer("badjson", "{not json"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  auto unigram = Tokenizer::FromDir(WriteTokenizer("unigram", R"({"model":{"type":"Unigram"}})"));
  ASSERT_FALSE(unigram.ok());
  EXPECT_EQ(unigram.status().code(), StatusCode::kUnimplemented);
  auto badmerge = Tokenizer::FromDir(
      WriteTokenizer("badmerge", R"({"model":{"type":"BPE","vocab":{"a":0},"merges":["a b"]}})"));
  ASSERT_FALSE(badmerge.ok());
  EXPECT_EQ(badmerge.status().code(), StatusCode::kInvalidArgument);
  auto badregex = Tokenizer::FromDir(
      WriteTokenizer("badregex", R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},
      "pre_tokenizer":{"type":"Split","pattern":{"Regex":"(("},"behavior":"Isolated","invert":false}})"));
  ASSERT_FALSE(badregex.ok());
  EXPECT_EQ(badregex.status().code(), StatusCode::kInvalidArgument);
  // Ids size the id -> token table: 2^31 - 1 must be an error, not a 16 GiB allocation.
  auto huge_id = Tokenizer::FromDir(WriteTokenizer(
      "hugeid", R"({"model":{"type":"BPE","vocab":{"a":0,"b":2147483647},"merges":[]}})"));
  ASSERT_FALSE(huge_id.ok());
  EXPECT_NE(huge_id.status().message().find("2147483647"), std::string::npos)
      << huge_id.status().ToString();
  auto huge_added = Tokenizer::FromDir(WriteTokenizer(
      "hugeadded", R"({"added_tokens":[{"id":2147483647,"content":"<x>","special":true}],
      "model":{"type":"BPE","vocab":{"a":0},"merges":[]}})"));
  ASSERT_FALSE(huge_added.ok());
  EXPECT_EQ(huge_added.status().code(), StatusCode::kInvalidArgument);
}

// A small SentencePiece-like tokenizer: Metaspace pre-tokenizer/decoder, added tokens with
// lstrip/rstrip/single_word, no post-processor.
constexpr const char* kToyJson = R"({
  "added_tokens": [
    {"id": 0, "content": "<unk>", "special": true, "normalized": false, "lstrip": false, "rstrip": false, "single_word": false},
    {"id": 10, "content": "<mask>", "special": true, "normalized": false, "lstrip": true, "rstrip": true, "single_word": false},
    {"id": 11, "content": "ab", "special": false, "normalized": false, "lstrip": false, "rstrip": false, "single_word": true}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true},
  "post_processor": null,
  "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true},
  "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": false,
            "vocab": {"<unk>": 0, "\u2581": 1, "a": 2, "b": 3, "\u2581a": 4, "\u2581ab": 5, "ab": 6},
            "merges": [["\u2581", "a"], "\u2581a b", "a b"]}
})";

TEST(ToyTokenizerTest, AddedTokenFlagsAndMetaspace) {
  auto tok_or = Tokenizer::FromDir(WriteTokenizer("toy", kToyJson));
  ASSERT_TRUE(tok_or.ok()) << tok_or.status().ToString();
  const Tokenizer& tok = **tok_or;
  EXPECT_EQ(tok.vocab_size(), 12);
  EXPECT_EQ(tok.Encode("ab"), (std::vector<int32_t>{11}));  // single word: matched
  EXPECT_EQ(tok.Encode("ab ab"), (std::vector<int32_t>{11, 1, 11}));
  EXPECT_EQ(tok.Encode("abab"), (std::vector<int32_t>{5, 6}));  // not a single word
  EXPECT_EQ(tok.Encode("a  <mask>  b"), (std::vector<int32_t>{4, 10, 1, 3}));
  EXPECT_EQ(tok.Encode("a<mask>b", true, /*parse_special=*/false),
            (std::vector<int32_t>{4, 0, 2, 0, 3}));  // "<m" unk, "a", "sk>" fused unk
  EXPECT_EQ(tok.Decode(std::vector<int32_t>{5, 4, 3}), "ab ab");
  // Invalid ids are skipped.
  EXPECT_EQ(tok.Decode(std::vector<int32_t>{-5, 5, 99999, 4, 7}), "ab a");
  EXPECT_EQ(tok.IdToToken(99999), "");
  EXPECT_FALSE(tok.TokenToId("zzz").has_value());
}

TEST(ToyTokenizerTest, NoDecoderJoinsWithSpaces) {
  std::string json = kToyJson;
  json.replace(json.find("\"decoder\": {"), std::string("\"decoder\": {").size(),
               "\"decoder\": null, \"unused\": {");
  auto tok_or = Tokenizer::FromDir(WriteTokenizer("toy_nodecoder", json));
  ASSERT_TRUE(tok_or.ok()) << tok_or.status().ToString();
  EXPECT_EQ((*tok_or)->Decode(std::vector<int32_t>{5, 3}),
            "\xE2\x96\x81"
            "ab b");
}

// Random id sequences (many byte-level / byte-fallback / special / punctuation tokens): the
// streaming decoder must give exactly the full decode and never a partial character.
void RandomStreamingCheck(const std::string& name, int32_t lo, int32_t hi,
                          const std::vector<int32_t>& extra) {
  const std::string dir = kShared + "/tokenizers/" + name;
  if (!fs::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "missing " << dir;
  auto tok_or = Tokenizer::FromDir(dir);
  ASSERT_TRUE(tok_or.ok()) << tok_or.status().ToString();
  const Tokenizer& tok = **tok_or;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> small(lo, hi);
  std::uniform_int_distribution<int32_t> any(-3, tok.vocab_size() + 3);
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<int32_t> ids;
    const int n = 1 + iter % 40;
    for (int i = 0; i < n; ++i) {
      const int r = static_cast<int>(rng() % 10);
      ids.push_back(r < 6 ? small(rng) : r < 8 ? any(rng) : extra[rng() % extra.size()]);
    }
    for (const bool skip : {false, true}) {
      bool valid = true;
      ASSERT_EQ(Incremental(tok, ids, skip, &valid), tok.Decode(ids, skip)) << name << " " << iter;
      EXPECT_TRUE(valid) << name << " " << iter;
    }
  }
}

TEST(StreamingTest, Llama3RandomIds) {
  // 220 "Ġ", 13 ".", 6 "'", 82 "s", 77 "n", 128000/128009 specials, 1174 "Ġ,", 364 "Ġ'".
  RandomStreamingCheck("llama3", 0, 300, {220, 13, 6, 82, 77, 128000, 128009, 1174, 364, 758});
}

TEST(StreamingTest, MistralRandomIds) {
  // 3..258 are <0xNN> byte tokens, 28705 "▁", 1/2 BOS/EOS.
  RandomStreamingCheck("mistral", 3, 300, {1, 2, 28705, 259, 232, 146, 174});
}

}  // namespace
}  // namespace llm
