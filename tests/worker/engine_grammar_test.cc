// Structured output inside the engine, on the real stories260K model and its tokenizer (a model
// that never writes JSON by itself): every sampled output is JSON of the schema once it stops,
// the end token is only sampled once the JSON is complete, and it then ends the request even
// with ignore_eos and min_tokens; a grammar request without a vocabulary is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/json_schema_grammar.h"
#include "common/tokenizer.h"
#include "tests/common/json_schema_validator.h"
#include "worker/engine/engine.h"
#include "worker/model/model_weights.h"

namespace llm {
namespace {

const std::string kModel = std::string(LLM_SHARED_DIR) + "/models/stories260K";

class EngineGrammar : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "missing shared test data: " << kModel;
    auto weights = LoadModelWeights(kModel, LoadFormat::kSafetensors);
    ASSERT_TRUE(weights.ok()) << weights.status().ToString();
    weights_ = std::move(*weights);
    EngineConfig cfg;
    cfg.num_blocks = 256;
    auto engine = Engine::Create(*weights_, cfg);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(*engine);
    auto tok = Tokenizer::FromDir(kModel);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    tokenizer_ = std::move(*tok);
  }
  std::string Text(const GenerateResult& r) const {
    std::vector<int32_t> ids;
    for (const auto& t : r.tokens) ids.push_back(t.token);
    if (EndedByToken(r.finish)) ids.pop_back();
    return tokenizer_->Decode(ids, /*skip_special_tokens=*/true);
  }
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(EngineGrammar, RefusedWithoutAVocabulary) {
  GenerateRequest r;
  r.prompt = {1, 403};
  r.grammar = std::make_shared<Grammar>(*JsonObjectGrammar());
  const auto id = engine_->Add(r);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(EngineGrammar, SampledOutputsAreValidJsonOfTheSchema) {
  engine_->SetGrammarVocabulary(GrammarVocabulary::FromTokenizer(*tokenizer_));
  const test::ojson schema = test::ojson::parse(R"({"type":"object","properties":{
      "hero":{"type":"string","maxLength":10},"happy":{"type":"boolean"},
      "friends":{"type":"array","items":{"enum":["Lily","Tim"]},"maxItems":2}},
      "required":["hero","happy"]})");
  auto grammar = std::make_shared<Grammar>(*JsonSchemaGrammar(schema));
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 24; ++i) {
    GenerateRequest r;
    r.prompt = {1, 403, 407, 261};
    r.max_tokens = 200;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = static_cast<uint64_t>(i);
    r.grammar = grammar;
    requests.push_back(r);
  }
  auto results = GenerateAll(*engine_, requests);
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  for (const GenerateResult& r : *results) {
    ASSERT_EQ(r.finish, FinishReason::kEos) << Text(r);
    const test::ojson value = test::ojson::parse(Text(r), nullptr, false);
    ASSERT_FALSE(value.is_discarded()) << Text(r);
    EXPECT_TRUE(test::ValidateJson(value, schema)) << Text(r);
  }
}

TEST_F(EngineGrammar, ACompleteValueEndsTheRequestDespiteIgnoreEosAndMinTokens) {
  engine_->SetGrammarVocabulary(GrammarVocabulary::FromTokenizer(*tokenizer_));
  GenerateRequest r;
  r.prompt = {1, 403};
  r.max_tokens = 100;
  r.min_tokens = 90;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  r.grammar =
      std::make_shared<Grammar>(*JsonSchemaGrammar(test::ojson::parse(R"({"enum":[true]})")));
  auto results = GenerateAll(*engine_, {r});
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  const GenerateResult& out = (*results)[0];
  EXPECT_EQ(out.finish, FinishReason::kEos);
  EXPECT_EQ(Text(out), "true");
  // The mask applies before logprobs: once "true" is complete the end token is the only one
  // allowed, so its probability is 1.
  r.sampling.logprobs = 0;
  auto again = GenerateAll(*engine_, {r});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Text((*again)[0]), "true");
  EXPECT_NEAR((*again)[0].tokens.back().logprob, 0.0f, 1e-6);
  EXPECT_EQ(engine_->stats().blocks_free, engine_->stats().blocks_total);
}

}  // namespace
}  // namespace llm
