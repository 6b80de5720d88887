// llm-generate: load a model folder and generate from one or more prompts, batched together.
// Prints each completion (text and ids) and prefill / decode throughput.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include <optional>

#include "common/cli.h"
#include "common/tokenizer.h"
#include "worker/engine/device_setup.h"
#include "worker/engine/engine.h"

namespace {

using llm::Status;
using llm::StatusOr;

struct Options {
  std::string model;
  std::vector<std::string> prompts;
  std::string prompts_file;
  llm::GenerateRequest request;
  llm::EngineConfig engine;
  std::string load_format = "safetensors";
  std::string quantization = "none";
  int threads = 0;
  int kv_cache_mib = 256;
  std::optional<uint64_t> seed;
  bool add_special = true, json = false;
};

// The flags write straight into the request and engine config; the sampling values are
// checked afterwards by the one validator the coordinator uses (common/sampling_params.h).
void AddFlags(CLI::App& app, Options* o) {
  llm::SamplingParams& s = o->request.sampling;
  s.temperature = 0;  // greedy unless asked
  o->request.max_tokens = 64;
  app.add_option("--model", o->model,
                 "model folder (config.json, safetensors, tokenizer.json) or .gguf file")
      ->required();
  app.add_option("--prompt", o->prompts,
                 "prompt text; repeat the flag for several prompts in one batch");
  app.add_option("--prompts-file", o->prompts_file, "file with one prompt per line")
      ->check(CLI::ExistingFile);
  app.add_option("--max-tokens", o->request.max_tokens, "tokens to generate per prompt")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--temperature", s.temperature, "0 = greedy")->capture_default_str();
  app.add_option("--top-k", s.top_k, "keep the k most likely tokens (0: off)")
      ->capture_default_str();
  app.add_option("--top-p", s.top_p, "nucleus sampling mass")->capture_default_str();
  app.add_option("--min-p", s.min_p, "drop tokens below min_p * p_max")->capture_default_str();
  app.add_option("--repetition-penalty", s.repetition_penalty)->capture_default_str();
  app.add_option("--presence-penalty", s.presence_penalty)->capture_default_str();
  app.add_option("--frequency-penalty", s.frequency_penalty)->capture_default_str();
  app.add_option("--seed", o->seed, "sampling seed (default: random per prompt)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 62));
  app.add_option("--threads", o->threads, "compute threads (0: all cores)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--block-size", o->engine.block_size, "KV cache block size in tokens")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--kv-cache-mib", o->kv_cache_mib, "KV cache size in MiB")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", o->engine.scheduler.max_num_batched_tokens,
                 "token budget per step")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  app.add_option("--prefill-chunk", o->engine.scheduler.max_prefill_chunk,
                 "max prompt tokens per sequence per step (0: the budget)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  app.add_option("--load-format", o->load_format,
                 "safetensors (a .gguf path is read as GGUF), gguf, or dummy = random weights")
      ->check(CLI::IsMember({"safetensors", "gguf", "dummy"}))
      ->capture_default_str();
  app.add_option("--quantization", o->quantization,
                 "quantize the linear weights at load: q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, "
                 "q4_k, q5_k, q6_k, iq4_nl, iq4_xs, or none")
      ->check(CLI::IsMember({"none", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k",
                             "q5_k", "q6_k", "iq4_nl", "iq4_xs"}))
      ->capture_default_str();
  app.add_flag("--ignore-eos", o->request.ignore_eos,
               "keep generating after the end-of-sequence token");
  app.add_flag("!--no-special", o->add_special, "do not add BOS/EOS to the prompts");
  app.add_flag("--json", o->json, "print one JSON object per prompt");
  app.add_option("--device", o->engine.device,
                 "where the forward pass runs: cpu, or cuda (GPU 0, or the local rank's)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
}

Status FinishOptions(Options* o) {
  if (!o->prompts_file.empty()) {
    std::ifstream in(o->prompts_file);
    if (!in) return llm::NotFound("--prompts-file: cannot open '" + o->prompts_file + "'");
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) o->prompts.push_back(line);
    }
  }
  if (o->prompts.empty()) o->prompts.push_back("");
  if (o->seed) o->request.sampling.seed = *o->seed;
  omp_set_num_threads(o->threads > 0 ? o->threads : omp_get_num_procs());
  o->engine.kv_cache_bytes = static_cast<size_t>(o->kv_cache_mib) << 20;
  // The vocabulary is not known yet; Engine::Add checks ids against it.
  return llm::ValidateSamplingParams(o->request.sampling, 1);
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

Status Generate(const Options& o) {
  LLM_ASSIGN_OR_RETURN(const llm::LoadFormat format,
                       llm::ParseLoadFormat(o.load_format, "--load-format"));
  LLM_ASSIGN_OR_RETURN(auto tokenizer, llm::Tokenizer::FromDir(o.model));
  // The device first: a missing GPU is reported before the weights load.
  LLM_ASSIGN_OR_RETURN(llm::kernels::Backend * backend, llm::EngineBackend(o.engine));
  llm::ModelSection ms;
  ms.quantization = o.quantization;
  LLM_ASSIGN_OR_RETURN(auto weights,
                       llm::LoadModelWeights(o.model, format, 0, {}, llm::ModelQuantization(ms)));
  LLM_RETURN_IF_ERROR(llm::PlaceWeightsFor(o.engine, *weights, *backend));
  if (format == llm::LoadFormat::kDummy) {
    std::fprintf(stderr, "llm-generate: dummy (random) weights: the output is meaningless\n");
  }
  LLM_ASSIGN_OR_RETURN(auto engine, llm::Engine::Create(*weights, o.engine, nullptr, *backend));
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
  Options o;
  CLI::App app(
      "Loads a model folder and generates from one or more prompts, batched together; prints\n"
      "each completion (text and ids) and prefill / decode throughput.",
      "llm-generate");
  AddFlags(app, &o);
  if (auto rc = llm::ParseCommandLine(app, argc, argv)) return *rc;
  Status s = FinishOptions(&o);
  if (s.ok()) s = Generate(o);
  if (!s.ok()) {
    std::fprintf(stderr, "llm-generate: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
