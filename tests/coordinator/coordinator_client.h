// Client helpers for the coordinator tests: build requests, run one Generate stream to its end,
// read Stats, wait (bounded) for a condition on Stats.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/coordinator/worker_process.h"

namespace llm::testing {

struct GoldenCase {
  std::vector<int32_t> prompt;
  std::vector<int32_t> greedy;
};

inline std::vector<GoldenCase> ReadStoriesGolden() {
  std::ifstream in(SharedPath("golden/stories260K_greedy.jsonl"));
  std::vector<GoldenCase> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    out.push_back({j.at("prompt_token_ids").get<std::vector<int32_t>>(),
                   j.at("greedy_token_ids").get<std::vector<int32_t>>()});
  }
  return out;
}

inline pb::GenerateRequest MakeRequest(const std::vector<int32_t>& prompt, int max_tokens,
                                       float temperature = 0.0f) {
  pb::GenerateRequest r;
  r.set_api_version(1);
  r.set_request_id("test");
  for (int32_t t : prompt) r.add_prompt_token_ids(t);
  r.set_max_tokens(max_tokens);
  r.set_ignore_eos(true);
  r.mutable_sampling()->set_temperature(temperature);
  r.mutable_sampling()->set_top_p(1.0f);
  r.mutable_sampling()->set_repetition_penalty(1.0f);
  r.mutable_sampling()->set_logprobs(-1);
  return r;
}

struct StreamResult {
  grpc::Status status;
  std::vector<int32_t> tokens;
  int messages = 0;
  pb::FinishReason finish = pb::FINISH_REASON_UNSPECIFIED;
  pb::Usage usage;
  std::optional<int32_t> stop_token_id;  // of the final message
  bool finish_before_last = false;       // a finish_reason on a message that was not the last
};

// Runs one stream to its end. `cancel_after` > 0: TryCancel after that many messages.
inline StreamResult RunStream(pb::Generation::Stub& stub, const pb::GenerateRequest& req,
                              int cancel_after = 0, double timeout_s = 120.0) {
  StreamResult out;
  grpc::ClientContext ctx;
  ctx.set_deadline(In(timeout_s));
  auto reader = stub.Generate(&ctx, req);
  pb::GenerateResponse msg;
  while (reader->Read(&msg)) {
    if (out.finish != pb::FINISH_REASON_UNSPECIFIED) out.finish_before_last = true;
    out.messages++;
    out.tokens.insert(out.tokens.end(), msg.token_ids().begin(), msg.token_ids().end());
    if (msg.finish_reason() != pb::FINISH_REASON_UNSPECIFIED) {
      out.finish = msg.finish_reason();
      out.usage = msg.usage();
      if (msg.has_stop_token_id()) out.stop_token_id = msg.stop_token_id();
    }
    if (cancel_after > 0 && out.messages == cancel_after) ctx.TryCancel();
  }
  out.status = reader->Finish();
  return out;
}

inline pb::StatsResponse GetStats(WorkerProcess& w) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(5.0));
  pb::StatsResponse r;
  const grpc::Status s = w.admin().Stats(&ctx, pb::StatsRequest(), &r);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return r;
}

// Polls Stats until `pred` holds or `timeout_s` passes; returns the last Stats.
inline pb::StatsResponse WaitStats(WorkerProcess& w,
                                   const std::function<bool(const pb::StatsResponse&)>& pred,
                                   double timeout_s = 10.0) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  pb::StatsResponse s = GetStats(w);
  while (!pred(s) && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s = GetStats(w);
  }
  return s;
}

inline bool AllBlocksFree(const pb::StatsResponse& s) {
  return s.kv_blocks_free() == s.kv_blocks_total() && s.running_sequences() == 0 &&
         s.waiting_sequences() == 0;
}

// Flags for a stories260K worker that leaves the test runner's cores alone.
inline std::vector<std::string> StoriesFlags(std::vector<std::string> extra = {}) {
  std::vector<std::string> f = {"--model.path",
                                SharedPath("models/stories260K"),
                                "--engine.threads_per_rank",
                                "1",
                                "--engine.kv_cache_mib",
                                "8"};
  f.insert(f.end(), extra.begin(), extra.end());
  return f;
}

// The repo's demo model (deploy/models/demo-llama: 4 layers of 512, context 2048) with dummy
// weights: slow enough per step that a long request is still running when the test cancels it
// or signals the worker, however loaded the machine is.
inline std::string DemoModelPath() {
  return (std::filesystem::path(LLM_SOURCE_DIR) / "deploy/models/demo-llama").string();
}
inline std::vector<std::string> DemoFlags(std::vector<std::string> extra = {}) {
  std::vector<std::string> f = {"--model.path",
                                DemoModelPath(),
                                "--model.load_format",
                                "dummy",
                                "--engine.threads_per_rank",
                                "1",
                                "--engine.kv_cache_mib",
                                "64"};
  f.insert(f.end(), extra.begin(), extra.end());
  return f;
}

}  // namespace llm::testing
