// llm-generate: load a model folder and generate from one or more prompts, batched together.
// Prints each completion (text and ids) and prefill / decode throughput.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/cli_args.h"
#include "common/tokenizer.h"
#include "worker/engine/engine.h"

namespace {

using llm::CliArgs;
using llm::Status;
using llm::StatusOr;

CliArgs MakeArgs() {
  return CliArgs(
      "llm-generate",
      {{"model", "model folder (config.json, safetensors, tokenizer.json) or .gguf file"},
       {"prompt", "prompt text; repeat the flag for several prompts in one batch"},
       {"prompts-file", "file with one prompt per line"},
       {"max-tokens", "tokens to generate per prompt (default 64)"},
       {"temperature", "0 = greedy (default 0)"},
       {"top-k", "keep the k most likely tokens (default off)"},
       {"top-p", "nucleus sampling mass (default 1)"},
       {"min-p", "drop tokens below min_p * p_max (default 0)"},
       {"repetition-penalty", "default 1"},
       {"presence-penalty", "default 0"},
       {"frequency-penalty", "default 0"},
       {"seed", "sampling seed (default: random per prompt)"},
       {"threads", "compute threads (default: all cores)"},
       {"block-size", "KV cache block size in tokens (default 16)"},
       {"kv-cache-mib", "KV cache size in MiB (default 256)"},
       {"max-num-batched-tokens", "token budget per step (default 2048)"},
       {"prefill-chunk", "max prompt tokens per sequence per step (default: budget)"},
       {"load-format",
        "safetensors (default; a .gguf path is read as GGUF), gguf or dummy (random weights)"},
       {"ignore-eos", "[flag] keep generating after the end-of-sequence token"},
       {"no-special", "[flag] do not add BOS/EOS to the prompts"},
       {"json", "[flag] print one JSON object per prompt"}});
}

struct Options {
  std::string model;
  std::vector<std::string> prompts;
  llm::GenerateRequest request;
  llm::EngineConfig engine;
  llm::LoadFormat load_format = llm::LoadFormat::kSafetensors;
  bool add_special = true, json = false;
};

Status ParseSampling(const CliArgs& a, llm::GenerateRequest* r) {
  LLM_ASSIGN_OR_RETURN(long max_tokens, a.Int("max-tokens", 64, 1, 1 << 20));
  r->max_tokens = static_cast<int>(max_tokens);
  auto& s = r->sampling;
  // Loose parsing, then the one validator the coordinator uses (common/sampling_params.h).
  LLM_ASSIGN_OR_RETURN(double t, a.Double("temperature", 0, -1e9, 1e9));
  LLM_ASSIGN_OR_RETURN(long k, a.Int("top-k", 0, -1, 1 << 30));
  LLM_ASSIGN_OR_RETURN(double p, a.Double("top-p", 1, -1e9, 1e9));
  LLM_ASSIGN_OR_RETURN(double mp, a.Double("min-p", 0, -1e9, 1e9));
  LLM_ASSIGN_OR_RETURN(double rp, a.Double("repetition-penalty", 1, -1e9, 1e9));
  LLM_ASSIGN_OR_RETURN(double pp, a.Double("presence-penalty", 0, -1e9, 1e9));
  LLM_ASSIGN_OR_RETURN(double fp, a.Double("frequency-penalty", 0, -1e9, 1e9));
  s.temperature = static_cast<float>(t);
  s.top_k = static_cast<int>(k);
  s.top_p = static_cast<float>(p);
  s.min_p = static_cast<float>(mp);
  s.repetition_penalty = static_cast<float>(rp);
  s.presence_penalty = static_cast<float>(pp);
  s.frequency_penalty = static_cast<float>(fp);
  if (a.Has("seed")) {
    LLM_ASSIGN_OR_RETURN(long seed, a.Int("seed", 0, 0, 1L << 62));
    s.seed = static_cast<uint64_t>(seed);
  }
  r->ignore_eos = a.Has("ignore-eos");
  // The vocabulary is not known yet; Engine::Add checks ids against it.
  return llm::ValidateSamplingParams(s, 1);
}

Status ParseEngine(const CliArgs& a, Options* o) {
  LLM_ASSIGN_OR_RETURN(long threads, a.Int("threads", omp_get_num_procs(), 1, 1024));
  omp_set_num_threads(static_cast<int>(threads));
  LLM_ASSIGN_OR_RETURN(long bs, a.Int("block-size", 16, 1, 1024));
  LLM_ASSIGN_OR_RETURN(long mib, a.Int("kv-cache-mib", 256, 1, 1 << 24));
  LLM_ASSIGN_OR_RETURN(long budget, a.Int("max-num-batched-tokens", 2048, 1, 1 << 24));
  LLM_ASSIGN_OR_RETURN(long chunk, a.Int("prefill-chunk", 0, 0, 1 << 24));
  o->engine.block_size = static_cast<int>(bs);
  o->engine.kv_cache_bytes = static_cast<size_t>(mib) << 20;
  o->engine.scheduler.max_num_batched_tokens = static_cast<int>(budget);
  o->engine.scheduler.max_prefill_chunk = static_cast<int>(chunk);
  LLM_ASSIGN_OR_RETURN(o->load_format,
                       llm::ParseLoadFormat(a.Str("load-format", "safetensors"), "--load-format"));
  return Status::Ok();
}

StatusOr<Options> ParseOptions(const CliArgs& a) {
  Options o;
  o.model = a.Str("model");
  if (o.model.empty()) return llm::InvalidArgument("--model is required");
  o.prompts = a.All("prompt");
  if (a.Has("prompts-file")) {
    std::ifstream in(a.Str("prompts-file"));
    if (!in) return llm::NotFound("--prompts-file: cannot open '" + a.Str("prompts-file") + "'");
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) o.prompts.push_back(line);
    }
  }
  if (o.prompts.empty()) o.prompts.push_back("");
  LLM_RETURN_IF_ERROR(ParseSampling(a, &o.request));
  LLM_RETURN_IF_ERROR(ParseEngine(a, &o));
  o.add_special = !a.Has("no-special");
  o.json = a.Has("json");
  return o;
}

struct Timing {
  double prefill_s = 0, decode_s = 0;
  long prefill_tokens = 0, decode_tokens = 0;
};

StatusOr<std::vector<std::vector<int32_t>>> Run(llm::Engine& engine,
                                                const std::vector<llm::GenerateRequest>& reqs,
                                                Timing* timing) {
  std::vector<std::vector<int32_t>> out(reqs.size());
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < reqs.size(); ++i) {
    LLM_ASSIGN_OR_RETURN(int64_t id, engine.Add(reqs[i]));
    index[id] = i;
  }
  std::vector<llm::TokenEvent> events;
  while (!engine.idle()) {
    const long before = engine.stats().prompt_tokens_computed;
    events.clear();
    auto t0 = std::chrono::steady_clock::now();
    LLM_RETURN_IF_ERROR(engine.Step(&events));
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const long prefill = engine.stats().prompt_tokens_computed - before;
    if (prefill > 0) {
      timing->prefill_s += dt;
      timing->prefill_tokens += prefill;
    } else {
      timing->decode_s += dt;
      timing->decode_tokens += static_cast<long>(events.size());
    }
    for (const auto& ev : events) out[index[ev.request_id]].push_back(ev.sample.token);
  }
  return out;
}

Status Main(int argc, char** argv) {
  CliArgs args = MakeArgs();
  LLM_RETURN_IF_ERROR(args.Parse(argc, argv));
  if (args.Has("help")) {
    std::fputs(args.Usage().c_str(), stdout);
    return Status::Ok();
  }
  LLM_ASSIGN_OR_RETURN(Options o, ParseOptions(args));
  LLM_ASSIGN_OR_RETURN(auto tokenizer, llm::Tokenizer::FromDir(o.model));
  LLM_ASSIGN_OR_RETURN(auto weights, llm::LoadModelWeights(o.model, o.load_format));
  if (o.load_format == llm::LoadFormat::kDummy) {
    std::fprintf(stderr, "llm-generate: dummy (random) weights: the output is meaningless\n");
  }
  LLM_ASSIGN_OR_RETURN(auto engine, llm::Engine::Create(*weights, o.engine));
  std::vector<llm::GenerateRequest> reqs;
  for (const auto& p : o.prompts) {
    llm::GenerateRequest r = o.request;
    r.prompt = tokenizer->Encode(p, o.add_special);
    reqs.push_back(std::move(r));
  }
  Timing timing;
  LLM_ASSIGN_OR_RETURN(auto outputs, Run(*engine, reqs, &timing));
  for (size_t i = 0; i < reqs.size(); ++i) {
    // Decode prompt + completion together so pieces that join across the boundary (a
    // leading space the decoder strips at the start of a text) come out right.
    std::vector<int32_t> all = reqs[i].prompt;
    all.insert(all.end(), outputs[i].begin(), outputs[i].end());
    const std::string prompt_text = tokenizer->Decode(reqs[i].prompt, true);
    std::string text = tokenizer->Decode(all, true);
    text = text.rfind(prompt_text, 0) == 0 ? text.substr(prompt_text.size()) : text;
    if (o.json) {
      nlohmann::json j = {{"prompt", o.prompts[i]},
                          {"prompt_token_ids", reqs[i].prompt},
                          {"token_ids", outputs[i]},
                          {"text", text}};
      std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::printf("--- prompt %zu: %s\n%s%s\nids: %s\n", i, o.prompts[i].c_str(),
                  o.prompts[i].c_str(), text.c_str(), nlohmann::json(outputs[i]).dump().c_str());
    }
  }
  std::fprintf(stderr,
               "prefill: %ld tokens in %.3f s = %.1f tokens/s; decode: %ld tokens in %.3f s = "
               "%.1f tokens/s (batch of %zu, %d threads)\n",
               timing.prefill_tokens, timing.prefill_s,
               timing.prefill_tokens / std::max(timing.prefill_s, 1e-9), timing.decode_tokens,
               timing.decode_s, timing.decode_tokens / std::max(timing.decode_s, 1e-9), reqs.size(),
               omp_get_max_threads());
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  Status s = Main(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "llm-generate: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
