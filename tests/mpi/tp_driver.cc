// Test driver for tensor and pipeline parallelism: every rank loads its shard of a model
// (--pp N: N pipeline stages of world/N tensor-parallel ranks each); rank 0 runs the
// engine on the requests of a JSON file (continuous batching, chunked prefill) and prints one
// JSON line {"world_size", "outputs": [[ids...], ...], "blocks_free", "blocks_total",
// "kv_cache_dtype", "hosts"}; the other ranks follow. Started by tests/mpi/tp_golden_test.cc
// under mpirun.
//
//   tp_driver --model DIR --requests FILE [--result FILE] [--num-blocks N] [--idle-ms N]
//             [--pid-dir DIR]
//             [--abort N] [--dummy] [--logprobs N] [--pp N] [--pp-partition A,B,..] [--sample]
//             [--kv-cache-dtype float32|float16|auto]
//
// The KV cache is float32 unless --kv-cache-dtype says otherwise: the references the tests
// compare with were computed with float K and V.
//
// requests FILE: {"requests": [{"prompt": [ids], "max_tokens": n}, ...]}. --abort N aborts
// every N-th request (1-based) after its first token and reports its output as [].
// --idle-ms: after printing, rank 0 prints "IDLE", idles that long, then shuts down;
// --pid-dir: each rank writes its pid to DIR/rank<r>.pid. --logprobs N adds "logprobs": per
// request, per token, the top-N logprob values (descending). --result FILE: rank 0 also writes
// the JSON to FILE (whole, by rename). Tests read that file: mpirun forwards every rank's
// output through one stream in chunks, so another rank's log line can land inside or after the
// printed line (seen in CI).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <unordered_map>

#include "common/cli.h"
#include "worker/comm/mpi_communicator.h"
#include "worker/engine/engine.h"
#include "worker/engine/follower.h"
#include "worker/model/model_weights.h"

namespace {

struct Options {
  std::string model, requests, pid_dir, result;
  int num_blocks = 256;
  int idle_ms = 0;
  int abort_every = 0;
  bool abort_between_steps = false;
  bool sample = false;
  int logprobs = -1;
  bool dummy = false;
  int world_size = 1;
  int pp = 1;
  int pp_in_flight = 0;
  int prefill_chunk = 7;  // small chunks and budgets exercise chunked prefill in the tests
  int batched_tokens = 64;
  std::vector<int> partition;
  std::string kv_cache_dtype = "float32";
};

void AddFlags(CLI::App& app, Options* o) {
  app.add_option("--model", o->model, "model folder")->required();
  app.add_option("--requests", o->requests, "JSON lines of requests")->required();
  app.add_option("--result", o->result, "rank 0 writes the JSON result to this file");
  app.add_option("--pid-dir", o->pid_dir, "each rank writes rankN.pid here");
  app.add_option("--num-blocks", o->num_blocks, "KV cache blocks")->check(CLI::Range(1, 1 << 20));
  app.add_option("--idle-ms", o->idle_ms, "idle time between requests")
      ->check(CLI::Range(0, 600000));
  app.add_flag("--sample", o->sample,
               "seeded sampling with every filter and penalty instead of greedy decoding");
  app.add_flag("--abort-between-steps", o->abort_between_steps,
               "abort after a step that gave the request no token, once it has one (with "
               "steps in flight, while its step runs)");
  app.add_option("--abort", o->abort_every, "abort every Nth request")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--logprobs", o->logprobs, "top logprobs per token")->check(CLI::Range(-1, 20));
  app.add_flag("--dummy", o->dummy, "random weights");
  app.add_option("--kv-cache-dtype", o->kv_cache_dtype, "engine.kv_cache_dtype")
      ->check(CLI::IsMember({"auto", "float32", "float16"}));
  app.add_option("--pp", o->pp, "pipeline stages")->check(CLI::Range(1, 64));
  app.add_option("--pp-partition", o->partition, "layers per stage")->delimiter(',');
  app.add_option("--pp-in-flight", o->pp_in_flight, "steps in flight (0: one per stage)")
      ->check(CLI::Range(0, 64));
  app.add_option("--prefill-chunk", o->prefill_chunk, "max_prefill_chunk")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--batched-tokens", o->batched_tokens, "max_num_batched_tokens")
      ->check(CLI::Range(1, 1 << 20));
}

llm::EngineConfig Config(const Options& o) {
  llm::EngineConfig cfg;
  cfg.num_blocks = o.num_blocks;
  cfg.block_size = 16;
  cfg.scheduler.max_prefill_chunk = o.prefill_chunk;
  cfg.scheduler.max_num_batched_tokens = o.batched_tokens;
  cfg.pipeline_steps_in_flight = o.pp_in_flight;
  cfg.kv_cache_dtype = o.kv_cache_dtype;
  return cfg;
}

// Rank 0: runs every request to the end (aborting some) and prints the outputs.
llm::Status RunRank0(llm::Engine& engine, const Options& o, const std::vector<std::string>& hosts) {
  std::ifstream in(o.requests);
  const auto doc = nlohmann::json::parse(in, nullptr, false);
  if (doc.is_discarded()) return llm::InvalidArgument("cannot parse " + o.requests);
  std::vector<std::vector<int32_t>> outputs(doc["requests"].size());
  std::vector<std::vector<std::vector<float>>> logprobs(outputs.size());
  std::unordered_map<int64_t, size_t> index;
  std::vector<int64_t> ids(outputs.size());
  std::vector<bool> done(outputs.size());  // finished or aborted
  for (size_t i = 0; i < outputs.size(); ++i) {
    llm::GenerateRequest r;
    r.prompt = doc["requests"][i]["prompt"].get<std::vector<int32_t>>();
    r.max_tokens = doc["requests"][i]["max_tokens"].get<int>();
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    r.sampling.logprobs = o.logprobs;
    if (o.sample) {  // the penalties see the prompt and the output; the seed is per request
      r.sampling.temperature = 0.9f;
      r.sampling.top_k = 40;
      r.sampling.top_p = 0.95f;
      r.sampling.min_p = 0.01f;
      r.sampling.repetition_penalty = 1.2f;
      r.sampling.presence_penalty = 0.3f;
      r.sampling.frequency_penalty = 0.2f;
      r.sampling.seed = 1000 + i;
    }
    LLM_ASSIGN_OR_RETURN(int64_t id, engine.Add(std::move(r)));
    index[id] = i;
    ids[i] = id;
  }
  const auto marked = [&](size_t i) {
    return o.abort_every > 0 && (i + 1) % static_cast<size_t>(o.abort_every) == 0;
  };
  std::vector<llm::TokenEvent> events;
  const auto t0 = std::chrono::steady_clock::now();
  int64_t tokens = 0;
  while (!engine.idle()) {
    events.clear();
    LLM_RETURN_IF_ERROR(engine.Step(&events));
    tokens += static_cast<int64_t>(events.size());
    for (const auto& ev : events) {
      const size_t i = index.at(ev.request_id);
      if (done[i]) return llm::Internal("a token after the request ended or was aborted");
      outputs[i].push_back(ev.sample.token);
      std::vector<float>& top = logprobs[i].emplace_back();
      for (const auto& t : ev.sample.top) top.push_back(t.logprob);
      done[i] = ev.finish != llm::FinishReason::kNone;
      if (marked(i) && !done[i] && !o.abort_between_steps) {
        engine.Abort(ev.request_id);
        outputs[i].clear();
        done[i] = true;
      }
    }
    // Requests that have a token but got none this step: with steps in flight, their step is
    // still running.
    std::vector<bool> got(outputs.size());
    for (const auto& ev : events) got[index.at(ev.request_id)] = true;
    for (size_t i = 0; i < outputs.size() && o.abort_between_steps; ++i) {
      if (!marked(i) || done[i] || outputs[i].empty() || got[i]) continue;
      if (!engine.Abort(ids[i])) return llm::Internal("a running request was unknown to Abort");
      outputs[i].clear();
      done[i] = true;
    }
  }
  const llm::EngineStats s = engine.stats();
  nlohmann::json out = {{"world_size", o.world_size},
                        {"outputs", outputs},
                        {"blocks_free", s.blocks_free},
                        {"blocks_total", s.blocks_total},
                        {"preemptions", s.preemptions},
                        {"prefix_cache_hit_tokens", s.prefix_cache_hit_tokens},
                        {"kv_cache_dtype", llm::DTypeName(engine.kv_cache_dtype())}};
  if (o.logprobs > 0) out["logprobs"] = logprobs;
  out["hosts"] = hosts;  // each rank's host name
  // For benchmarks (tools/), never asserted on: generated tokens and the wall time of the run.
  out["tokens"] = tokens;
  out["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string text = out.dump();
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
  if (!o.result.empty()) {
    const std::string tmp = o.result + ".tmp";
    std::ofstream(tmp) << text << "\n";
    if (std::rename(tmp.c_str(), o.result.c_str()) != 0) {
      return llm::Internal("cannot write --result " + o.result);
    }
  }
  return llm::Status::Ok();
}

int Fail(int rank, const llm::Status& s, int code) {
  std::fprintf(stderr, "tp_driver rank %d: %s\n", rank, s.ToString().c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("Tensor-parallel test driver: runs the requests file on every rank.", "tp_driver");
  AddFlags(app, &o);
  if (auto rc = llm::ParseCommandLine(app, argc, argv)) return *rc;
  auto comm_or = llm::MpiCommunicator::Create(&argc, &argv);
  if (!comm_or.ok()) return Fail(-1, comm_or.status(), 2);
  llm::MpiCommunicator& comm = **comm_or;
  const int rank = comm.rank();
  o.world_size = comm.world_size();
  if (!o.pid_dir.empty()) {
    std::ofstream(o.pid_dir + "/rank" + std::to_string(rank) + ".pid") << getpid() << "\n";
  }
  if (comm.world_size() % o.pp != 0) {
    return Fail(rank, llm::InvalidArgument("--pp must divide the world size"), 2);
  }
  llm::EngineSection es;
  es.pipeline_parallel_size = o.pp;
  es.pipeline_layer_partition = o.partition;
  const llm::EngineShard shard = llm::EngineShardOf(es, rank, comm.world_size());
  // Each stage's tensor-parallel ranks (collective: every rank splits, or none).
  std::unique_ptr<llm::MpiCommunicator> stage_comm;
  if (o.pp > 1 && shard.tp.size > 1) {
    auto split = comm.Split(shard.pipeline.stage, shard.tp.rank);
    if (!split.ok()) return Fail(rank, split.status(), 2);
    stage_comm = std::move(*split);
  }
  // Every rank checks the same config.json, so a bad tensor-parallel size fails on all alike.
  auto weights = llm::LoadModelWeights(
      o.model, o.dummy ? llm::LoadFormat::kDummy : llm::LoadFormat::kSafetensors, 0, shard.tp,
      std::nullopt, shard.pipeline);
  if (!weights.ok()) return Fail(rank, weights.status(), 3);
  const llm::EngineConfig cfg = Config(o);
  if (rank != 0) {
    llm::Status s =
        llm::RunFollower(**weights, cfg, comm, llm::kernels::CpuBackend(), stage_comm.get());
    if (!s.ok()) {
      Fail(rank, s, 4);
      comm.AbortJob(4);
    }
    return 0;
  }
  auto engine =
      llm::Engine::Create(**weights, cfg, &comm, llm::kernels::CpuBackend(), stage_comm.get());
  if (!engine.ok()) {
    llm::ShutdownFollowers(comm);
    return Fail(rank, engine.status(), 5);
  }
  llm::Status s = RunRank0(**engine, o, comm.HostNames());
  if (s.ok() && o.idle_ms > 0) {
    std::printf("IDLE\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(o.idle_ms));
  }
  engine->reset();
  return s.ok() ? 0 : Fail(rank, s, 6);
}
