// Generate through the real `worker` binary over gRPC: golden greedy ids, seeded sampling,
// 64 concurrent streams, cancellation, a KV cache too small for the load.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "tests/coordinator/coordinator_client.h"

namespace llm::testing {
namespace {

constexpr const char* kModel = "models/stories260K";
constexpr const char* kGolden = "golden/stories260K_greedy.jsonl";

class GenerateTest : public ::testing::Test {
 protected:
  void StartWorker(std::vector<std::string> extra = {}) {
    StartWorkerWith(StoriesFlags(std::move(extra)));
  }
  void StartWorkerWith(std::vector<std::string> flags) {
    worker_ = std::make_unique<WorkerProcess>(std::move(flags));
    ASSERT_TRUE(worker_->WaitHealthy()) << "worker did not become healthy:\n" << worker_->Log();
  }
  std::unique_ptr<WorkerProcess> worker_;
};

TEST_F(GenerateTest, GoldenGreedyIds) {
  LLM_REQUIRE_SHARED(kModel);
  LLM_REQUIRE_SHARED(kGolden);
  StartWorker();
  const auto cases = ReadStoriesGolden();
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    const int n = static_cast<int>(c.greedy.size());
    const StreamResult r = RunStream(worker_->generation(), MakeRequest(c.prompt, n));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.tokens, c.greedy);
    EXPECT_EQ(r.finish, pb::FINISH_REASON_MAX_TOKENS);
    EXPECT_FALSE(r.finish_before_last);
    EXPECT_EQ(r.usage.prompt_tokens(), static_cast<int>(c.prompt.size()));
    EXPECT_EQ(r.usage.completion_tokens(), n);
  }
  EXPECT_TRUE(AllBlocksFree(WaitStats(*worker_, AllBlocksFree)));
}

// The final message says why the request ended and which token ended it, so the router never
// guesses from the model's eos id.
TEST_F(GenerateTest, FinalMessageNamesTheStopTokenThatEndedIt) {
  LLM_REQUIRE_SHARED(kModel);
  LLM_REQUIRE_SHARED(kGolden);
  StartWorker();
  const auto cases = ReadStoriesGolden();
  ASSERT_FALSE(cases.empty());
  const auto& c = cases[0];
  ASSERT_GT(c.greedy.size(), 4u);
  const int32_t stop = c.greedy[3];
  const size_t first = std::find(c.greedy.begin(), c.greedy.end(), stop) - c.greedy.begin();
  pb::GenerateRequest req = MakeRequest(c.prompt, static_cast<int>(c.greedy.size()));
  req.add_stop_token_ids(stop);
  const StreamResult r = RunStream(worker_->generation(), req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens, std::vector<int32_t>(c.greedy.begin(), c.greedy.begin() + first + 1));
  EXPECT_EQ(r.finish, pb::FINISH_REASON_STOP_TOKEN);
  ASSERT_TRUE(r.stop_token_id.has_value());
  EXPECT_EQ(*r.stop_token_id, stop);
  const StreamResult len = RunStream(worker_->generation(), MakeRequest(c.prompt, 3));
  EXPECT_EQ(len.finish, pb::FINISH_REASON_MAX_TOKENS);
  EXPECT_FALSE(len.stop_token_id.has_value());
}

TEST_F(GenerateTest, SeededSamplingIsReproducibleAlsoWhenBatched) {
  LLM_REQUIRE_SHARED(kModel);
  LLM_REQUIRE_SHARED(kGolden);
  StartWorker();
  const auto cases = ReadStoriesGolden();
  auto seeded = [&](uint64_t seed) {
    pb::GenerateRequest r = MakeRequest(cases[0].prompt, 48, 0.9f);
    r.mutable_sampling()->set_seed(seed);
    r.mutable_sampling()->set_top_k(40);
    r.mutable_sampling()->set_top_p(0.95f);
    r.mutable_sampling()->set_logprobs(2);
    return r;
  };
  const StreamResult a = RunStream(worker_->generation(), seeded(7));
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  ASSERT_EQ(a.tokens.size(), 48u);
  // The same seed again, this time next to other requests in the batch.
  std::vector<StreamResult> others(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      others[i] = RunStream(worker_->generation(),
                            MakeRequest(cases[i % cases.size()].prompt, 40 + i, 1.0f));
    });
  }
  const StreamResult b = RunStream(worker_->generation(), seeded(7));
  for (auto& t : threads) t.join();
  ASSERT_TRUE(b.status.ok()) << b.status.error_message();
  EXPECT_EQ(a.tokens, b.tokens);
  const StreamResult c = RunStream(worker_->generation(), seeded(8));
  ASSERT_TRUE(c.status.ok());
  EXPECT_NE(a.tokens, c.tokens) << "different seeds gave the same 48 tokens";
  for (const auto& o : others) EXPECT_TRUE(o.status.ok()) << o.status.error_message();
}

TEST_F(GenerateTest, LogprobsArePerToken) {
  LLM_REQUIRE_SHARED(kModel);
  StartWorker();
  pb::GenerateRequest req = MakeRequest({1, 403, 407}, 10);
  req.mutable_sampling()->set_logprobs(3);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(60));
  auto reader = worker_->generation().Generate(&ctx, req);
  pb::GenerateResponse msg;
  int tokens = 0;
  while (reader->Read(&msg)) {
    ASSERT_EQ(msg.logprobs_size(), msg.token_ids_size());
    ASSERT_EQ(msg.top_logprobs_size(), msg.token_ids_size());
    for (int i = 0; i < msg.token_ids_size(); ++i) {
      ASSERT_EQ(msg.top_logprobs(i).entries_size(), 3);
      // Greedy: the chosen token is the most likely one.
      EXPECT_EQ(msg.top_logprobs(i).entries(0).token_id(), msg.token_ids(i));
      EXPECT_LE(msg.logprobs(i), 0.0f);
    }
    tokens += msg.token_ids_size();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(tokens, 10);
}

// Runs `n` streams at once; stream i asks for `max_tokens(i)` and cancels after
// `cancel_after(i)` messages (0 = never).
std::vector<StreamResult> RunConcurrent(WorkerProcess& w, int n,
                                        const std::function<int(int)>& max_tokens,
                                        const std::function<int(int)>& cancel_after) {
  const auto cases = ReadStoriesGolden();
  std::vector<StreamResult> results(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      std::vector<int32_t> prompt = cases[i % cases.size()].prompt;
      prompt.push_back(static_cast<int32_t>(300 + i));  // distinct prompts
      results[i] = RunStream(w.generation(), MakeRequest(prompt, max_tokens(i)), cancel_after(i));
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

TEST_F(GenerateTest, SixtyFourConcurrentStreamsComplete) {
  LLM_REQUIRE_SHARED(kModel);
  LLM_REQUIRE_SHARED(kGolden);
  StartWorker();
  auto max_tokens = [](int i) { return 8 + (i * 7) % 40; };
  const auto results = RunConcurrent(*worker_, 64, max_tokens, [](int) { return 0; });
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(results[i].status.ok()) << i << ": " << results[i].status.error_message();
    EXPECT_EQ(static_cast<int>(results[i].tokens.size()), max_tokens(i)) << i;
    EXPECT_EQ(results[i].usage.completion_tokens(), max_tokens(i)) << i;
    EXPECT_EQ(results[i].finish, pb::FINISH_REASON_MAX_TOKENS) << i;
  }
  const pb::StatsResponse s = WaitStats(*worker_, AllBlocksFree);
  EXPECT_TRUE(AllBlocksFree(s)) << s.DebugString();
  EXPECT_EQ(s.requests_total(), 64);
  EXPECT_GT(s.kv_blocks_total(), 0);
}

TEST_F(GenerateTest, CancellingHalfMidStreamFreesTheirBlocks) {
  LLM_REQUIRE_SHARED(kGolden);
  StartWorkerWith(DemoFlags());
  auto max_tokens = [](int i) { return i % 2 == 0 ? 2000 : 24; };
  auto cancel_after = [](int i) { return i % 2 == 0 ? 2 : 0; };
  const auto results = RunConcurrent(*worker_, 64, max_tokens, cancel_after);
  for (int i = 0; i < 64; ++i) {
    if (i % 2 == 0) {
      EXPECT_EQ(results[i].status.error_code(), grpc::StatusCode::CANCELLED) << i;
      EXPECT_LT(results[i].tokens.size(), 2000u) << i;
    } else {
      ASSERT_TRUE(results[i].status.ok()) << i << ": " << results[i].status.error_message();
      EXPECT_EQ(results[i].tokens.size(), 24u) << i;
    }
  }
  const pb::StatsResponse s = WaitStats(*worker_, AllBlocksFree);
  EXPECT_TRUE(AllBlocksFree(s)) << s.DebugString();
  EXPECT_EQ(s.aborted_total(), 32) << s.DebugString();
}

TEST_F(GenerateTest, CancelFreesBlocksAtOnce) {
  StartWorkerWith(DemoFlags());
  grpc::ClientContext ctx;
  ctx.set_deadline(In(120));
  auto reader = worker_->generation().Generate(&ctx, MakeRequest({1, 403, 407}, 2000));
  pb::GenerateResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  const pb::StatsResponse busy = GetStats(*worker_);
  EXPECT_LT(busy.kv_blocks_free(), busy.kv_blocks_total());
  ctx.TryCancel();
  while (reader->Read(&msg)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  const pb::StatsResponse s = WaitStats(*worker_, AllBlocksFree, 5.0);
  EXPECT_TRUE(AllBlocksFree(s)) << s.DebugString();
  EXPECT_EQ(s.aborted_total(), 1);
  // Still serving.
  EXPECT_TRUE(RunStream(worker_->generation(), MakeRequest({1, 403}, 4)).status.ok());
}

TEST_F(GenerateTest, TooSmallKvCacheStillCompletesEveryRequestExactly) {
  LLM_REQUIRE_SHARED(kModel);
  LLM_REQUIRE_SHARED(kGolden);
  // 36 blocks of 16 tokens = 576 tokens (one 512-token sequence fits); 24 requests of
  // 5 + 64 tokens want 120 blocks, so they wait and are preempted.
  StartWorker({"--engine.kv_cache_blocks", "36"});
  const auto cases = ReadStoriesGolden();
  std::vector<StreamResult> results(24);
  std::vector<std::thread> threads;
  for (int i = 0; i < 24; ++i) {
    threads.emplace_back([&, i] {
      const GoldenCase& c = cases[i % cases.size()];
      results[i] = RunStream(worker_->generation(),
                             MakeRequest(c.prompt, static_cast<int>(c.greedy.size())));
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 24; ++i) {
    ASSERT_TRUE(results[i].status.ok()) << i << ": " << results[i].status.error_message();
    EXPECT_EQ(results[i].tokens, cases[i % cases.size()].greedy) << i;
  }
  const pb::StatsResponse s = WaitStats(*worker_, AllBlocksFree);
  EXPECT_TRUE(AllBlocksFree(s)) << s.DebugString();
  EXPECT_EQ(s.kv_blocks_total(), 36);
  EXPECT_GT(s.preemptions_total(), 0) << s.DebugString();
}

}  // namespace
}  // namespace llm::testing

namespace llm::testing {
namespace {

// Structured output over the public gRPC API: schemas the coordinator cannot enforce (or
// that are not JSON) are INVALID_ARGUMENT naming the field, and a valid one gives JSON that
// ends with the model's end token.
TEST(GenerateStructuredOutput, BadSchemasAreInvalidArgumentGoodOnesEndAtTheEndToken) {
  LLM_REQUIRE_SHARED(kModel);
  WorkerProcess worker(StoriesFlags());
  ASSERT_TRUE(worker.WaitHealthy()) << worker.Log();
  for (const std::string& schema :
       {std::string("{not json"), std::string(R"({"type":"integer","not":{"const":3}})"),
        std::string(R"({"$ref":"#/nowhere"})"), std::string(2 << 20, ' '),
        R"({"enum":[)" + std::string(100000, '[') + std::string(100000, ']') + "]}"}) {
    pb::GenerateRequest req = MakeRequest({1, 403}, 20);
    req.mutable_structured_output()->set_json_schema(schema);
    const StreamResult r = RunStream(worker.generation(), req);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << schema.substr(0, 40);
    EXPECT_NE(r.status.error_message().find("structured_output.json_schema"), std::string::npos)
        << r.status.error_message();
  }
  pb::GenerateRequest req = MakeRequest({1, 403}, 50);
  req.mutable_structured_output()->set_json_schema(R"({"enum":["yes","no"]})");
  const StreamResult r = RunStream(worker.generation(), req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.finish, pb::FINISH_REASON_EOS);
  EXPECT_LE(r.tokens.size(), 6u);  // "yes"/"no" in a few tokens, then the end token
  EXPECT_TRUE(AllBlocksFree(WaitStats(worker, AllBlocksFree)));
}

}  // namespace
}  // namespace llm::testing
