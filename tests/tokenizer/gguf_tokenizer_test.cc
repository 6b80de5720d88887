// Tokenizer::FromGguf against the Hugging Face tokenizer.json of the same vocabulary: the golden
// families' GGUFs (SentencePiece "llama" model, the stories260K vocabulary) against
// golden/families/llama/hf, and byte-level "gpt2" GGUFs written here from the llama3 and qwen3
// tokenizer.json files of ../shared/tokenizers against those files, on their golden cases.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/gguf.h"
#include "common/tokenizer.h"
#include "tests/common/gguf_writer.h"

namespace llm::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Shared(const std::string& rel) {
  return (fs::path(LLM_SHARED_DIR) / rel).string();
}

#define REQUIRE_SHARED(rel) \
  if (!fs::exists(Shared(rel))) GTEST_SKIP() << "missing shared test data: " << Shared(rel)

std::vector<std::string> TrickyStrings() {
  return {"Once upon a time",
          "",
          " ",
          "  leading and trailing  ",
          "Hello world",
          "<s>Hi</s> there <unk>",
          "tabs\tand\nnewlines\r\n",
          "caf\xc3\xa9 na\xc3\xafve \xe2\x80\x94 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80",
          "\xe2\x96\x81"
          "already"
          "\xe2\x96\x81"
          "spaced",
          "1234567890 3.14 1,000",
          "The quick brown fox jumps over the lazy dog!!!",
          "ab<s>",
          "<0x41> literally",
          "\xff\xfe invalid utf8"};
}

std::string Show(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? "," : "") << ids[i];
  return s.str();
}

void ExpectSame(const Tokenizer& hf, const Tokenizer& gg, const std::string& text,
                const std::string& where) {
  for (const bool add_special : {true, false}) {
    for (const bool parse_special : {true, false}) {
      const auto want = hf.Encode(text, add_special, parse_special);
      const auto got = gg.Encode(text, add_special, parse_special);
      EXPECT_EQ(got, want) << where << " '" << text << "' add_special=" << add_special
                           << " parse_special=" << parse_special << ": " << Show(got) << " vs "
                           << Show(want);
      for (const bool skip : {false, true}) {
        EXPECT_EQ(gg.Decode(want, skip), hf.Decode(want, skip)) << where << " decode '" << text;
      }
    }
  }
}

TEST(GgufTokenizer, FamiliesMatchTheHfTokenizer) {
  REQUIRE_SHARED("golden/families/llama/hf/tokenizer.json");
  auto hf = Tokenizer::FromDir(Shared("golden/families/llama/hf"));
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  for (const char* family : {"llama", "mistral", "qwen2", "qwen3"}) {
    const std::string dir = Shared(std::string("golden/families/") + family);
    const std::string path = dir + "/" + family + ".gguf";
    if (!fs::exists(path)) GTEST_SKIP() << "missing shared test data: " << path;
    auto gg = Tokenizer::FromDir(path);
    ASSERT_TRUE(gg.ok()) << gg.status().ToString();
    const Tokenizer& a = **hf;
    const Tokenizer& b = **gg;
    EXPECT_EQ(b.vocab_size(), a.vocab_size());
    EXPECT_EQ(b.bos_id(), a.bos_id());
    EXPECT_EQ(b.eos_id(), a.eos_id());
    EXPECT_EQ(b.pad_id(), a.pad_id());
    EXPECT_EQ(b.bos_token(), a.bos_token());
    EXPECT_EQ(b.eos_token(), a.eos_token());
    EXPECT_EQ(b.unk_token(), a.unk_token());
    EXPECT_EQ(b.chat_template(), a.chat_template());
    for (int32_t id = 0; id < a.vocab_size(); ++id) {
      ASSERT_EQ(b.IdToToken(id), a.IdToToken(id)) << id;
      ASSERT_EQ(b.IsSpecial(id), a.IsSpecial(id)) << id;
    }
    std::ifstream in(dir + "/reference.json");
    const json ref = json::parse(in);
    for (const auto& p : ref["prompts"]) {
      const auto text = p["text"].get<std::string>();
      EXPECT_EQ(b.Encode(text), p["ids"].get<std::vector<int32_t>>()) << family << ": " << text;
      ExpectSame(a, b, text, family);
    }
    for (const auto& s : TrickyStrings()) ExpectSame(a, b, s, family);
    // Every token's text, alone and glued to its neighbour, encodes alike.
    for (int32_t id = 3; id + 1 < a.vocab_size(); id += 7) {
      ExpectSame(a, b, a.Decode(std::vector<int32_t>{id}) + a.Decode(std::vector<int32_t>{id + 1}),
                 family);
    }
  }
}

// A "gpt2" GGUF holding the vocabulary, merges and added tokens of a tokenizer.json.
std::string WriteGpt2Gguf(const std::string& name, const std::string& pre, bool add_bos,
                          const fs::path& out) {
  std::ifstream in(Shared("tokenizers/" + name + "/tokenizer.json"));
  const json tj = json::parse(in);
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  const auto put = [&](int64_t id, const std::string& text, int32_t type) {
    if (static_cast<int64_t>(tokens.size()) <= id) {
      tokens.resize(id + 1);
      types.resize(id + 1, 5);  // unused
    }
    tokens[id] = text;
    types[id] = type;
  };
  for (const auto& [text, id] : tj["model"]["vocab"].items()) put(id.get<int64_t>(), text, 1);
  for (const auto& t : tj["added_tokens"]) {
    put(t["id"].get<int64_t>(), t["content"].get<std::string>(), t["special"].get<bool>() ? 3 : 4);
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (types[i] == 5) tokens[i] = "[PAD" + std::to_string(i) + "]";
  }
  std::vector<std::string> merges;
  for (const auto& m : tj["model"]["merges"]) {
    merges.push_back(m.is_string() ? m.get<std::string>()
                                   : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  std::ifstream cin(Shared("tokenizers/" + name + "/tokenizer_config.json"));
  const json config = json::parse(cin);
  GgufWriter w;
  w.Str("general.architecture", "llama");
  w.Str("tokenizer.ggml.model", "gpt2");
  w.Str("tokenizer.ggml.pre", pre);
  w.StrArray("tokenizer.ggml.tokens", tokens);
  w.I32Array("tokenizer.ggml.token_type", types);
  w.StrArray("tokenizer.ggml.merges", merges);
  const auto id_of = [&](const char* key) -> int64_t {
    if (!config.contains(key) || !config[key].is_string()) return -1;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] == config[key].get<std::string>()) return static_cast<int64_t>(i);
    }
    return -1;
  };
  if (id_of("bos_token") >= 0) w.U32("tokenizer.ggml.bos_token_id", id_of("bos_token"));
  if (id_of("eos_token") >= 0) w.U32("tokenizer.ggml.eos_token_id", id_of("eos_token"));
  if (id_of("pad_token") >= 0) w.U32("tokenizer.ggml.padding_token_id", id_of("pad_token"));
  w.Bool("tokenizer.ggml.add_bos_token", add_bos);
  if (config.contains("chat_template") && config["chat_template"].is_string()) {
    w.Str("tokenizer.chat_template", config["chat_template"].get<std::string>());
  }
  const std::string path = (out / (name + ".gguf")).string();
  w.Write(path);
  return path;
}

class Gpt2Gguf : public ::testing::TestWithParam<std::tuple<std::string, std::string, bool>> {};

TEST_P(Gpt2Gguf, MatchesTokenizerJsonOnGoldenCases) {
  const auto& [name, pre, add_bos] = GetParam();
  REQUIRE_SHARED("tokenizers/" + name + "/tokenizer.json");
  REQUIRE_SHARED("tokenizers/encode_cases.jsonl");
  const fs::path dir = fs::temp_directory_path() / ("gguf_tok_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = WriteGpt2Gguf(name, pre, add_bos, dir);
  auto gg = Tokenizer::FromDir(path);
  fs::remove_all(dir);
  ASSERT_TRUE(gg.ok()) << gg.status().ToString();
  auto hf = Tokenizer::FromDir(Shared("tokenizers/" + name));
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  EXPECT_EQ((*gg)->chat_template(), (*hf)->chat_template());
  EXPECT_EQ((*gg)->eos_id(), (*hf)->eos_id());
  std::ifstream in(Shared("tokenizers/encode_cases.jsonl"));
  int checked = 0;
  for (std::string line; std::getline(in, line);) {
    const json c = json::parse(line);
    if (c["tokenizer"] != name || c["kind"] != "encode") continue;
    const std::string text = c["text"].get<std::string>();
    const bool add = c["add_special_tokens"].get<bool>(), parse = c["parse_special"].get<bool>();
    const auto want = c["ids"].get<std::vector<int32_t>>();
    const auto got = (*gg)->Encode(text, add, parse);
    EXPECT_EQ(got, want) << c["id"] << " '" << text << "': " << Show(got) << " vs " << Show(want);
    EXPECT_EQ((*gg)->Decode(want, true), (*hf)->Decode(want, true)) << c["id"];
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Gpt2Gguf,
                         ::testing::Values(std::make_tuple("llama3", "llama-bpe", true),
                                           std::make_tuple("qwen3", "qwen2", false)));

// GLM-4's GGUFs (tokenizer.ggml.pre chatglm-bpe from GLM-4, glm4 from GLM-4-0414): llama.cpp
// splits them with Llama 3's regex and never adds a BOS, whatever add_bos_token says. The Llama 3
// vocabulary written with those pre names encodes as with llama-bpe, minus the BOS.
TEST(GgufTokenizer, GlmPreTokenizers) {
  REQUIRE_SHARED("tokenizers/llama3/tokenizer.json");
  const fs::path dir = fs::temp_directory_path() / ("gguf_tok_glm_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto llama = Tokenizer::FromDir(WriteGpt2Gguf("llama3", "llama-bpe", true, dir));
  ASSERT_TRUE(llama.ok()) << llama.status().ToString();
  const std::string text = "Hello world, it's 1234567 o'clock!\n\n  Ünïcödé   tabs\tand CAPS'LL";
  std::vector<int32_t> want = (*llama)->Encode(text, true, false);
  ASSERT_GT(want.size(), 1u);
  want.erase(want.begin());  // the BOS
  EXPECT_EQ((*llama)->Encode(text, false, false), want);
  for (const char* pre : {"chatglm-bpe", "glm4"}) {
    fs::create_directories(dir / pre);
    auto glm = Tokenizer::FromDir(WriteGpt2Gguf("llama3", pre, true, dir / pre));
    ASSERT_TRUE(glm.ok()) << pre << ": " << glm.status().ToString();
    EXPECT_EQ((*glm)->Encode(text, true, false), want) << pre << ": " << Show(want);
  }
  fs::remove_all(dir);
}

// Mistral's Tekken, GPT-4o's o200k and SmolLM's pre-tokenizers (tokenizer.ggml.pre tekken /
// gpt-4o / smollm), on a byte vocabulary whose only merges would cross their split points:
// "o W" (inside "HelloWorld", which tekken and gpt-4o split before the capital), "1 2" (tekken
// and smollm split digits one by one, gpt-4o by three) and "I '" ("I'M": gpt-4o keeps the
// contraction on the word, tekken makes "'M" its own piece). llama-bpe's regex keeps
// "HelloWorld" whole, and splits "'M" off too.
TEST(GgufTokenizer, CaseDigitAndContractionSplits) {
  const fs::path dir = fs::temp_directory_path() / ("gguf_tok_case_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::vector<std::string> tokens = {"H", "e", "l", "o", "W", "r", "d",  "1",  "2",
                                           "3", "4", "5", "I", "'", "M", "oW", "12", "I'"};
  const auto encode = [&](const std::string& pre, const std::string& text) {
    GgufWriter w;
    w.Str("general.architecture", "llama");
    w.Str("tokenizer.ggml.model", "gpt2");
    w.Str("tokenizer.ggml.pre", pre);
    w.StrArray("tokenizer.ggml.tokens", tokens);
    w.StrArray("tokenizer.ggml.merges", {"o W", "1 2", "I '"});
    w.Bool("tokenizer.ggml.add_bos_token", false);
    const std::string path = (dir / (pre + ".gguf")).string();
    w.Write(path);
    auto t = Tokenizer::FromDir(path);
    EXPECT_TRUE(t.ok()) << pre << ": " << t.status().ToString();
    std::string pieces;
    if (!t.ok()) return pieces;
    for (int32_t id : (*t)->Encode(text, false, false)) pieces += "[" + tokens.at(id) + "]";
    return pieces;
  };
  const struct {
    const char* pre;
    const char* text;
    const char* pieces;
  } cases[] = {
      {"tekken", "HelloWorld", "[H][e][l][l][o][W][o][r][l][d]"},
      {"gpt-4o", "HelloWorld", "[H][e][l][l][o][W][o][r][l][d]"},
      {"llama-bpe", "HelloWorld", "[H][e][l][l][oW][o][r][l][d]"},
      {"tekken", "12345", "[1][2][3][4][5]"},
      {"gpt-4o", "12345", "[12][3][4][5]"},
      {"tekken", "I'M", "[I]['][M]"},
      {"gpt-4o", "I'M", "[I'][M]"},
      {"llama-bpe", "I'M", "[I]['][M]"},
      // SmolLM's (smollm): every digit alone, then GPT-2's regex, which keeps letter runs whole.
      {"smollm", "12345", "[1][2][3][4][5]"},
      {"smollm", "HelloWorld", "[H][e][l][l][oW][o][r][l][d]"},
      {"smollm", "I'M", "[I]['][M]"},
  };
  for (const auto& c : cases) EXPECT_EQ(encode(c.pre, c.text), c.pieces) << c.pre << ": " << c.text;
  fs::remove_all(dir);
}

TEST(GgufTokenizer, Errors) {
  const fs::path dir = fs::temp_directory_path() / ("gguf_tok_err_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "t.gguf").string();
  const auto load = [&](const GgufWriter& w) {
    w.Write(path);
    return Tokenizer::FromDir(path).status();
  };
  GgufWriter none;
  none.Str("general.architecture", "llama");
  EXPECT_NE(load(none).message().find("missing key 'tokenizer.ggml.model'"), std::string::npos);
  GgufWriter bert = none;
  bert.Str("tokenizer.ggml.model", "bert");
  EXPECT_NE(load(bert).message().find("tokenizer.ggml.model 'bert' is not supported"),
            std::string::npos);
  GgufWriter mismatch = none;
  mismatch.Str("tokenizer.ggml.model", "llama");
  mismatch.StrArray("tokenizer.ggml.tokens", {"a", "b"});
  mismatch.F32Array("tokenizer.ggml.scores", {0});
  EXPECT_NE(load(mismatch).message().find("'tokenizer.ggml.scores' has 1 entries for 2 tokens"),
            std::string::npos);
  GgufWriter pre = none;
  pre.Str("tokenizer.ggml.model", "gpt2");
  pre.Str("tokenizer.ggml.pre", "made-up");
  pre.StrArray("tokenizer.ggml.tokens", {"a", "b"});
  pre.StrArray("tokenizer.ggml.merges", {"a b"});
  EXPECT_NE(load(pre).message().find("tokenizer.ggml.pre 'made-up' is not supported"),
            std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace llm::testing
