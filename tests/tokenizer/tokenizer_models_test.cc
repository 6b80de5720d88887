// Tokenizers of the shared test models: Meta's Llama-2 tokenizer, stories260K (the prompts of
// golden/stories260K_greedy.jsonl) and the per-family folders of golden/families/*/hf.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/tokenizer.h"

namespace llm {
namespace {

using nlohmann::json;

const std::string kShared = LLM_SHARED_DIR;

std::string Incremental(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  IncrementalDecoder dec(tok, skip);
  std::string out;
  for (const int32_t id : ids) out += dec.Add(id);
  return out + dec.Flush();
}

TEST(Llama2TokenizerTest, HelloAndRoundTrips) {
  const std::string dir = kShared + "/models/llama2-tokenizer";
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "missing " << dir;
  auto tok = Tokenizer::FromDir(dir);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const Tokenizer& t = **tok;
  EXPECT_EQ(t.Encode("Hello"), (std::vector<int32_t>{1, 15043}));
  EXPECT_EQ(t.Encode("I believe the meaning of life is"),
            (std::vector<int32_t>{1, 306, 4658, 278, 6593, 310, 2834, 338}));
  EXPECT_EQ(t.Encode("Hello", /*add_special_tokens=*/false), (std::vector<int32_t>{15043}));
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.vocab_size(), 32000);
  EXPECT_TRUE(t.IsSpecial(1));
  EXPECT_FALSE(t.IsSpecial(15043));
  EXPECT_EQ(t.IdToToken(15043), "\xE2\x96\x81Hello");
  EXPECT_EQ(t.TokenToId("<s>"), 1);
  for (const std::string text :
       {"Hello world", "  leading spaces", "emoji \xF0\x9F\x98\x80 and \xE5\x8F\xAB",
        "tabs\tand\nnewlines\n\n", "Once upon a time, there was a little girl."}) {
    const auto ids = t.Encode(text);
    EXPECT_EQ(t.Decode(ids, /*skip_special_tokens=*/true), text);
    EXPECT_EQ(Incremental(t, ids, true), text);
    EXPECT_EQ(Incremental(t, ids, false), t.Decode(ids, false));
  }
}

TEST(Stories260KTokenizerTest, GreedyPromptsMatch) {
  const std::string dir = kShared + "/models/stories260K";
  const std::string golden = kShared + "/golden/stories260K_greedy.jsonl";
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "missing " << dir;
  std::ifstream in(golden);
  if (!in) GTEST_SKIP() << "missing " << golden;
  auto tok = Tokenizer::FromDir(dir);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  int n = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json c = json::parse(line);
    const auto want = c["prompt_token_ids"].get<std::vector<int32_t>>();
    const auto ids = (*tok)->Encode(c["prompt"].get<std::string>());
    EXPECT_EQ(ids, want) << c["prompt"];
    EXPECT_EQ((*tok)->Decode(ids, true), c["prompt"].get<std::string>());
    if (c.contains("greedy_token_ids")) {
      const auto gen = c["greedy_token_ids"].get<std::vector<int32_t>>();
      EXPECT_EQ(Incremental(**tok, gen, false), (*tok)->Decode(gen, false));
    }
    ++n;
  }
  EXPECT_GT(n, 0);
  EXPECT_EQ((*tok)->chat_template(),
            "{{ bos_token }}{% for message in messages %}{{ message['content'] }}{% endfor %}");
  EXPECT_EQ((*tok)->bos_token(), "<s>");
  EXPECT_EQ((*tok)->eos_token(), "</s>");
}

TEST(FamiliesTokenizerTest, ReferencePromptsMatch) {
  const std::string root = kShared + "/golden/families";
  if (!std::filesystem::exists(root)) GTEST_SKIP() << "missing " << root;
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    const std::string ref = entry.path().string() + "/reference.json";
    if (!std::filesystem::exists(ref)) continue;
    std::ifstream in(ref);
    const json r = json::parse(in);
    auto tok = Tokenizer::FromDir(entry.path().string() + "/hf");
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    for (const auto& p : r["prompts"]) {
      const auto want = p["ids"].get<std::vector<int32_t>>();
      EXPECT_EQ((*tok)->Encode(p["text"].get<std::string>()), want)
          << entry.path().filename() << " " << p["name"];
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no reference.json under " << root;
  std::cout << "[families] " << checked << " prompts checked\n";
}

}  // namespace
}  // namespace llm
