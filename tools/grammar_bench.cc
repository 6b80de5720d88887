// grammar-bench: what structured output costs per decode step. Walks a JSON Schema (or "any JSON
// object") token by token over a real vocabulary, choosing a random allowed token each step, and
// times the token mask: "cold" computes it from scratch every step (a walk over the whole
// vocabulary trie with a fresh matcher's caches kept), "served" is what the engine pays (masks
// cached per grammar state). Compare the figures with a decode step of the same model
// (`llm-bench`).
//
//   grammar-bench --tokenizer ../shared/models/llama2-tokenizer [--schema FILE] [--steps 200]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/grammar_vocab.h"
#include "common/json_schema_grammar.h"
#include "common/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

void Report(const char* what, std::vector<double> ms) {
  if (ms.empty()) return;
  std::sort(ms.begin(), ms.end());
  double sum = 0;
  for (double x : ms) sum += x;
  std::printf("%-28s mean %.3f ms  p50 %.3f  p90 %.3f  max %.3f  (%zu steps)\n", what,
              sum / static_cast<double>(ms.size()), ms[ms.size() / 2], ms[ms.size() * 9 / 10],
              ms.back(), ms.size());
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_dir = "../shared/models/llama2-tokenizer";
  std::string schema_file;
  int steps = 200;
  uint64_t seed = 1;
  CLI::App app{"Token-mask cost of structured output"};
  app.add_option("--tokenizer", tokenizer_dir, "folder with tokenizer.json, or a .gguf");
  app.add_option("--schema", schema_file, "JSON Schema file (default: any JSON object)");
  app.add_option("--steps", steps, "tokens to generate")->check(CLI::Range(1, 100000));
  app.add_option("--seed", seed, "random choice of allowed tokens");
  CLI11_PARSE(app, argc, argv);

  auto tok = llm::Tokenizer::FromDir(tokenizer_dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "grammar-bench: %s\n", tok.status().ToString().c_str());
    return 1;
  }
  const auto t0 = Clock::now();
  auto vocab = llm::GrammarVocabulary::FromTokenizer(**tok);
  std::printf("vocabulary: %d tokens, trie built in %.0f ms\n", vocab->vocab_size(),
              Ms(Clock::now() - t0));
  llm::StatusOr<llm::Grammar> grammar = llm::JsonObjectGrammar();
  if (!schema_file.empty()) {
    std::ifstream in(schema_file);
    std::stringstream text;
    text << in.rdbuf();
    const auto schema = nlohmann::ordered_json::parse(text.str(), nullptr, false);
    if (schema.is_discarded()) {
      std::fprintf(stderr, "grammar-bench: %s is not JSON\n", schema_file.c_str());
      return 1;
    }
    grammar = llm::JsonSchemaGrammar(schema);
  }
  if (!grammar.ok()) {
    std::fprintf(stderr, "grammar-bench: %s\n", grammar.status().ToString().c_str());
    return 1;
  }
  auto g = std::make_shared<llm::Grammar>(*grammar);
  llm::GrammarTokenFilter served(g, vocab);
  llm::GrammarMatcher cold_matcher(g);  // follows the same tokens; masks never cached
  std::vector<uint64_t> cold_mask(static_cast<size_t>(vocab->mask_words()));
  std::mt19937_64 rng(seed);
  std::vector<double> served_ms, cold_ms;
  std::vector<int32_t> allowed;
  std::string text;
  for (int step = 0; step < steps; ++step) {
    auto a = Clock::now();
    const uint64_t* mask = served.AllowedTokens();
    served_ms.push_back(Ms(Clock::now() - a));
    a = Clock::now();
    vocab->FillMask(cold_matcher, cold_mask.data());
    cold_ms.push_back(Ms(Clock::now() - a));
    allowed.clear();
    for (int32_t id = 0; id < vocab->vocab_size(); ++id) {
      if ((mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1) allowed.push_back(id);
    }
    if (allowed.empty()) break;  // complete: only the end of the sequence may follow
    const int32_t pick = allowed[rng() % allowed.size()];
    text += vocab->Bytes(pick);
    served.Accept(pick);
    cold_matcher.Consume(vocab->Bytes(pick));
  }
  std::printf("generated %zu bytes%s\n", text.size(), served.Finished() ? " (complete)" : "");
  Report("mask, served (cached)", served_ms);
  Report("mask, cold (every step)", cold_ms);
  return 0;
}
