// Golden encode/decode cases of /work/shared/tokenizers/encode_cases.jsonl (five tokenizers),
// plus incremental decoding == full decoding on every case.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/tokenizer.h"

namespace llm {
namespace {

using nlohmann::json;

const std::string kDir = std::string(LLM_SHARED_DIR) + "/tokenizers";

std::string Incremental(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  IncrementalDecoder dec(tok, skip);
  std::string out;
  for (const int32_t id : ids) out += dec.Add(id);
  out += dec.Flush();
  return out;
}

std::string Show(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? "," : "") << ids[i];
  s << ']';
  return s.str();
}

// Checks one case; returns an empty string when it passes, else what failed.
std::string CheckCase(const Tokenizer& tok, const json& c) {
  std::string err;
  const auto ids = c["ids"].get<std::vector<int32_t>>();
  if (c["kind"] == "encode") {
    const auto got = tok.Encode(c["text"].get<std::string>(), c["add_special_tokens"].get<bool>(),
                                c["parse_special"].get<bool>());
    if (got != ids) err += " encode " + Show(got) + " != " + Show(ids) + ";";
    for (const bool skip : {false, true}) {
      const std::string want = c[skip ? "decoded_skip_special" : "decoded"].get<std::string>();
      if (tok.Decode(ids, skip) != want) err += " decode(skip=" + std::to_string(skip) + ");";
      if (Incremental(tok, ids, skip) != want)
        err += " incremental(skip=" + std::to_string(skip) + ");";
    }
  } else {
    const bool skip = c["skip_special_tokens"].get<bool>();
    const std::string want = c["decoded"].get<std::string>();
    const std::string got = tok.Decode(ids, skip);
    if (got != want) err += " decode '" + got + "' != '" + want + "';";
    if (Incremental(tok, ids, skip) != want) err += " incremental;";
  }
  return err;
}

class EncodeCasesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EncodeCasesTest, AllCasesPass) {
  const std::string name = GetParam();
  const std::string cases_path = kDir + "/encode_cases.jsonl";
  std::ifstream in(cases_path);
  if (!in) GTEST_SKIP() << "missing " << cases_path;
  if (!std::ifstream(kDir + "/" + name + "/tokenizer.json")) {
    GTEST_SKIP() << "missing " << kDir << "/" << name << "/tokenizer.json";
  }
  auto tok_or = Tokenizer::FromDir(kDir + "/" + name);
  ASSERT_TRUE(tok_or.ok()) << tok_or.status().ToString();
  const Tokenizer& tok = **tok_or;
  int total = 0, passed = 0;
  std::vector<std::string> failures;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json c = json::parse(line);
    if (c["tokenizer"] != name) continue;
    ++total;
    const std::string err = CheckCase(tok, c);
    if (err.empty()) {
      ++passed;
    } else {
      failures.push_back(c["id"].get<std::string>() + ":" + err);
    }
  }
  std::cout << "[tokenizer " << name << "] " << passed << "/" << total << " cases pass\n";
  for (const auto& f : failures) std::cout << "  FAIL " << f << "\n";
  EXPECT_GT(total, 0);
  EXPECT_EQ(passed, total) << failures.size() << " failing cases for " << name;
}

// chat_cases.jsonl: the rendered chat prompts encode (add_special_tokens=false) to `ids`.
TEST_P(EncodeCasesTest, RenderedChatPromptsEncode) {
  const std::string name = GetParam();
  const std::string cases_path = kDir + "/chat_cases.jsonl";
  std::ifstream in(cases_path);
  if (!in) GTEST_SKIP() << "missing " << cases_path;
  if (!std::ifstream(kDir + "/" + name + "/tokenizer.json")) {
    GTEST_SKIP() << "missing " << kDir << "/" << name << "/tokenizer.json";
  }
  auto tok_or = Tokenizer::FromDir(kDir + "/" + name);
  ASSERT_TRUE(tok_or.ok()) << tok_or.status().ToString();
  int total = 0, passed = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json c = json::parse(line);
    if (c["tokenizer"] != name || !c["rendered"].is_string()) continue;
    ++total;
    const auto want = c["ids"].get<std::vector<int32_t>>();
    const auto got = (*tok_or)->Encode(c["rendered"].get<std::string>(), false);
    if (got == want) {
      ++passed;
    } else {
      std::cout << "  FAIL " << c["id"].get<std::string>() << "\n";
    }
  }
  std::cout << "[chat " << name << "] " << passed << "/" << total << " rendered prompts encode\n";
  EXPECT_EQ(passed, total);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, EncodeCasesTest,
                         ::testing::Values("mistral", "llama3", "qwen3", "gemma3", "deepseek_v3"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace llm
