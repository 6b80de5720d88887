// Token masks for structured output on real vocabularies (SentencePiece Llama-2 with byte
// fallback, byte-level BPE Llama-3 and Qwen3): the bytes each token adds agree with the
// tokenizer's own decoding, the trie walk gives exactly the tokens a one-by-one check allows,
// and the tokens of a valid JSON text are allowed one after the other.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "common/grammar_vocab.h"
#include "common/json_schema_grammar.h"
#include "common/tokenizer.h"

namespace llm {
namespace {

const std::string kShared = LLM_SHARED_DIR;

std::unique_ptr<Tokenizer> Load(const std::string& dir) {
  if (!std::filesystem::exists(dir + "/tokenizer.json")) return nullptr;
  auto t = Tokenizer::FromDir(dir);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : nullptr;
}

class GrammarVocabTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string dir = kShared + "/" + GetParam();
    tok_ = Load(dir);
    if (!tok_) GTEST_SKIP() << "missing " << dir << "/tokenizer.json";
    vocab_ = GrammarVocabulary::FromTokenizer(*tok_);
  }
  std::unique_ptr<Tokenizer> tok_;
  std::shared_ptr<const GrammarVocabulary> vocab_;
};

TEST_P(GrammarVocabTest, TokenBytesConcatenateToTheDecodedText) {
  for (const std::string text :
       {"{\"name\": \"caf\xC3\xA9\", \"n\": [1, 2.5]}",
        " leading space and \xF0\x9F\x98\x80 emoji \xE4\xB8\xAD\xE6\x96\x87", "hello world",
        "\n\n  {\n\t\"a\":null}"}) {
    const std::vector<int32_t> ids = tok_->Encode(text, /*add_special_tokens=*/false);
    ASSERT_FALSE(ids.empty());
    // As the router shows generated text: a decoder primed with the prompt's last tokens.
    const std::vector<int32_t> prompt = tok_->Encode("Once upon a time", false);
    IncrementalDecoder decoder(*tok_, /*skip_special_tokens=*/true);
    decoder.Prime(prompt);
    std::string shown, joined;
    for (int32_t id : ids) {
      shown += decoder.Add(id);
      joined += vocab_->Bytes(id);
    }
    shown += decoder.Flush();
    EXPECT_EQ(joined, shown) << text;
  }
  // Special tokens are never part of a grammar's text.
  if (auto eos = tok_->eos_id(); eos && tok_->IsSpecial(*eos)) {
    EXPECT_TRUE(vocab_->Bytes(*eos).empty());
  }
}

// The router primes its detokenizer with the prompt's end: none of the prompt's text may come
// out with the generated text (a clean-up stage holds the prompt's last character back).
TEST_P(GrammarVocabTest, PrimedDecoderShowsOnlyTheNewText) {
  IncrementalDecoder decoder(*tok_, /*skip_special_tokens=*/true);
  decoder.Prime(tok_->Encode("Once upon a time", false));
  const std::vector<int32_t> prompt = tok_->Encode("Once upon a time", false);
  const std::vector<int32_t> more = tok_->Encode(" there was a cat.", false);
  std::string shown;
  for (int32_t id : more) shown += decoder.Add(id);
  shown += decoder.Flush();
  // The text the new tokens add to the prompt's in a full decode.
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), more.begin(), more.end());
  const std::string whole = tok_->Decode(all, true), start = tok_->Decode(prompt, true);
  ASSERT_EQ(whole.compare(0, start.size(), start), 0);
  EXPECT_EQ(shown, whole.substr(start.size()));
  EXPECT_NE(shown.find("there was a cat."), std::string::npos);
}

void ExpectMaskMatchesOneByOne(GrammarTokenFilter& f, int vocab_size, int words) {
  const uint64_t* mask = f.AllowedTokens();
  std::vector<uint64_t> copy(mask, mask + words);
  int allowed = 0;
  for (int32_t id = 0; id < vocab_size; ++id) {
    const bool in_mask = (copy[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
    ASSERT_EQ(in_mask, f.Allows(id)) << "token " << id;
    allowed += in_mask;
  }
  EXPECT_GT(allowed, 0);
}

TEST_P(GrammarVocabTest, MaskEqualsOneByOneCheckAlongAValidText) {
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array",
          "items":{"enum":["a","b c"]}},"n":{"type":"number"}},"required":["name","n"]})");
  auto g = JsonSchemaGrammar(schema);
  ASSERT_TRUE(g.ok());
  GrammarTokenFilter f(std::make_shared<Grammar>(*g), vocab_);
  const std::string text =
      "{\"name\": \"Zo\xC3\xAB \\\"Z\\\"\", \"tags\": [\"b c\", \"a\"], \"n\": -12.5e3}";
  // The text as a model would write it: at each step the longest allowed token that spells
  // what comes next (the tokenizer's own split may open with a word-start "▁{", which is " {"
  // after the prompt and so not the start of the JSON).
  std::string_view rest = text;
  for (int step = 0; !rest.empty(); ++step) {
    ASSERT_LT(step, 200);
    // The full one-by-one comparison at a few steps (it costs a pass over the vocabulary).
    if (step < 3 || step == 10 || step == 20) {
      ExpectMaskMatchesOneByOne(f, vocab_->vocab_size(), vocab_->mask_words());
    }
    const uint64_t* mask = f.AllowedTokens();
    int32_t best = -1;
    for (int32_t id = 0; id < vocab_->vocab_size(); ++id) {
      const std::string_view b = vocab_->Bytes(id);
      if (!((mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1) || b.empty()) continue;
      if (rest.substr(0, b.size()) == b && (best < 0 || b.size() > vocab_->Bytes(best).size())) {
        best = id;
      }
    }
    ASSERT_GE(best, 0) << "no allowed token spells the start of: " << rest;
    ASSERT_TRUE(f.Accept(best));
    rest.remove_prefix(vocab_->Bytes(best).size());
    EXPECT_EQ(f.Accepting(), rest.empty()) << rest;
  }
  EXPECT_TRUE(f.Finished());
  // Rejected tokens change nothing.
  GrammarTokenFilter g2(std::make_shared<Grammar>(*g), vocab_);
  const std::vector<int32_t> wrong = tok_->Encode("[", false);
  EXPECT_FALSE(g2.Accept(wrong[0]));
  EXPECT_EQ(g2.num_accepted(), 0);
}

std::string VocabName(const ::testing::TestParamInfo<std::string>& p) {
  const std::string name = p.param.substr(p.param.find('/') + 1);
  return name == "llama2-tokenizer" ? "llama2" : name;
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, GrammarVocabTest,
                         ::testing::Values("models/llama2-tokenizer", "tokenizers/llama3",
                                           "tokenizers/qwen3"),
                         VocabName);

}  // namespace
}  // namespace llm
