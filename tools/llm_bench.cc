// llm-bench: engine throughput on one model folder (not a test). Prints prefill tokens/s,
// decode tokens/s at the batch sizes asked for, peak RSS against weights + KV cache, and the
// machine's read bandwidth (a read loop) beside what batch-1 decode streams, and its F32 FMA peak
// beside what batched decode computes. With
// --structured, each decode run alternates plain and structured-output sequences (sampled,
// token masks from --tokenizer) and prints what the mask costs per step.
#include <omp.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <sstream>
#include <vector>

#include <fstream>

#include "common/cli.h"
#include "common/json_schema_grammar.h"
#include "common/tokenizer.h"
#include "kernels/backend.h"
#include "kernels/cpu/huge_pages.h"
#include "tools/fma_peak.h"
#include "worker/engine/device_setup.h"
#include "worker/engine/engine.h"

namespace {

using llm::Status;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string model;
  std::string load_format = "safetensors";
  std::string quantization = "none";
  int threads = 0;
  int prompt_len = 128;
  int decode_tokens = 32;
  int decode_context = 16;  // prompt tokens of each decode sequence: the attention depth
  std::vector<int> batches{1, 16};
  int kv_cache_mib = 0;                 // 0: KvCacheMib's rule
  std::string kv_cache_dtype = "auto";  // engine.kv_cache_dtype
  std::string structured;               // "": none; "json_object"; else a JSON Schema file
  std::string tokenizer;                // for the token masks; "": the model's
  std::string device = "cpu";
  std::string huge_pages = "auto";  // engine.huge_pages
  // Rounds of (read-loop bandwidth, batch-1 decode) taken in turn after the main runs: the
  // machine's bandwidth moves from minute to minute, so the share is measured on neighbours.
  int share_rounds = 0;
};

std::vector<int32_t> RandomPrompt(std::mt19937& rng, int len, int vocab) {
  std::vector<int32_t> p(len);
  for (auto& t : p) t = static_cast<int32_t>(rng() % vocab);
  return p;
}

// CPU time of the whole process (all threads): on a machine shared with other work, tokens per
// CPU-second at 1 thread measure the code rather than the share of the cores it got.
double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// Where a decode step's wall time went, in ms per step (the engine's forward / sampling clocks).
struct StepSplit {
  double step_ms = 0, forward_ms = 0, sampling_ms = 0;
};

// Seconds spent in steps whose work was only decoding, and the tokens they produced.
Status RunDecode(llm::Engine& engine, int batch, const BenchOptions& o, double* tokens_per_s,
                 double* tokens_per_cpu_s, std::shared_ptr<const llm::Grammar> grammar = nullptr,
                 StepSplit* split = nullptr) {
  std::mt19937 rng(batch);
  const int vocab = engine.model_config().vocab_size;
  for (int i = 0; i < batch; ++i) {
    llm::GenerateRequest r;
    r.prompt = RandomPrompt(rng, o.decode_context, vocab);
    r.max_tokens = o.decode_tokens + 1;
    r.ignore_eos = true;
    // Sampled when comparing with structured output (greedy random-weight output would close
    // a JSON object at once); the plain runs sample the same way.
    r.sampling.temperature = o.structured.empty() ? 0.0f : 1.0f;
    r.sampling.seed = static_cast<uint64_t>(i);
    r.grammar = grammar;
    LLM_ASSIGN_OR_RETURN(int64_t id, engine.Add(r));
    (void)id;
  }
  std::vector<llm::TokenEvent> events;
  // Timed: the steps that decode every sequence of the batch and prefill nothing. Long decode
  // contexts are prefilled in chunks over several steps, and the sequences prefilled first
  // decode (untimed) beside the later ones' chunks, so they finish first: the steps after that
  // decode fewer sequences. Timing those too (and with a 512 MiB cache that held 12 of the 16
  // sequences, KvCacheMib), "batch 16" at 1900 tokens of context decoded 7.8 sequences a step.
  // (When no step decodes them all, e.g. a batch past the scheduler's max_num_seqs, every
  // decode-only step is timed.)
  struct Timed {
    double seconds = 0, cpu = 0;
    long tokens = 0, steps = 0;
    int64_t forward_ns = 0, sampling_ns = 0;
  } full, any;
  while (!engine.idle()) {
    const llm::EngineStats before = engine.stats();
    events.clear();
    const auto t0 = Clock::now();
    const double c0 = CpuSeconds();
    LLM_RETURN_IF_ERROR(engine.Step(&events));
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    const double dcpu = CpuSeconds() - c0;
    const llm::EngineStats after = engine.stats();
    if (after.prompt_tokens_computed != before.prompt_tokens_computed) continue;
    for (Timed* t : {&full, &any}) {
      if (t == &full && static_cast<int>(events.size()) != batch) continue;
      t->seconds += dt;
      t->cpu += dcpu;
      t->tokens += static_cast<long>(events.size());
      ++t->steps;
      t->forward_ns += after.forward_ns - before.forward_ns;
      t->sampling_ns += after.sampling_ns - before.sampling_ns;
    }
  }
  const Timed& t = full.steps > 0 ? full : any;
  if (split != nullptr && t.steps > 0) {
    split->step_ms = 1e3 * t.seconds / t.steps;
    split->forward_ms = 1e-6 * static_cast<double>(t.forward_ns) / t.steps;
    split->sampling_ms = 1e-6 * static_cast<double>(t.sampling_ns) / t.steps;
  }
  *tokens_per_s = t.tokens / std::max(t.seconds, 1e-9);
  *tokens_per_cpu_s = t.tokens / std::max(t.cpu, 1e-9);
  return Status::Ok();
}

Status RunPrefill(llm::Engine& engine, const BenchOptions& o, double* tokens_per_s) {
  std::mt19937 rng(99);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    llm::GenerateRequest r;
    r.prompt = RandomPrompt(rng, o.prompt_len, engine.model_config().vocab_size);
    r.max_tokens = 1;
    r.sampling.temperature = 0;
    LLM_ASSIGN_OR_RETURN(int64_t id, engine.Add(r));
    (void)id;
    std::vector<llm::TokenEvent> events;
    const auto t0 = Clock::now();
    while (!engine.idle()) LLM_RETURN_IF_ERROR(engine.Step(&events));
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, o.prompt_len / dt);
  }
  *tokens_per_s = best;
  return Status::Ok();
}

void AddFlags(CLI::App& app, BenchOptions* o) {
  app.add_option("--model", o->model, "model folder or .gguf file")->required();
  app.add_option("--load-format", o->load_format,
                 "safetensors (a .gguf path is read as GGUF), gguf, or dummy = random weights")
      ->check(CLI::IsMember({"safetensors", "gguf", "dummy"}))
      ->capture_default_str();
  app.add_option("--quantization", o->quantization,
                 "quantize the linear weights at load (with dummy: random blocks) to q8_0, q4_0, "
                 "q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, mxfp4, q1_0 or "
                 "nvfp4; none "
                 "keeps the file's format")
      ->capture_default_str();
  app.add_option("--threads", o->threads, "compute threads (0: all cores)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--prompt-len", o->prompt_len, "prefill prompt length")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--decode-tokens", o->decode_tokens, "tokens decoded per sequence")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--decode-context", o->decode_context,
                 "prompt tokens of each decode sequence (prefilled, not timed): the context the "
                 "decode steps attend over")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--share-rounds", o->share_rounds,
                 "then N rounds of read bandwidth and batch-1 decode in turn, each round's share "
                 "and the median (the bandwidth of a shared machine moves between minutes)")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  app.add_option("--batches", o->batches, "decode batch sizes")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--kv-cache-mib", o->kv_cache_mib,
                 "KV cache size in MiB; 0: 512, or more where the widest decode batch needs it to "
                 "hold all its sequences at their context")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  app.add_option("--kv-cache-dtype", o->kv_cache_dtype,
                 "KV cache element type (engine.kv_cache_dtype): auto (float16 for a 16-bit or "
                 "quantized model, float32 for a float32 one), float32 or float16")
      ->check(CLI::IsMember({"auto", "float32", "float16"}))
      ->capture_default_str();
  app.add_option("--huge-pages", o->huge_pages,
                 "engine.huge_pages: auto = weights (copied out of the file), KV cache and read "
                 "loop in transparent huge pages where the kernel allows; off = weights read in "
                 "place from the file mapping, small pages")
      ->check(CLI::IsMember({"auto", "off"}))
      ->capture_default_str();
  app.add_option("--structured", o->structured,
                 "also decode with structured output: json_object or a JSON Schema file");
  app.add_option("--tokenizer", o->tokenizer,
                 "tokenizer folder or .gguf for --structured (default: the model's)");
  app.add_option("--device", o->device,
                 "where the forward pass runs: cpu, or cuda (GPU 0, or the local rank's)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
}

llm::StatusOr<std::shared_ptr<const llm::Grammar>> LoadGrammar(const std::string& what) {
  llm::StatusOr<llm::Grammar> g = llm::JsonObjectGrammar();
  if (what != "json_object") {
    std::ifstream in(what);
    if (!in) return llm::NotFound("--structured: cannot read " + what);
    std::stringstream text;
    text << in.rdbuf();
    const auto schema = nlohmann::ordered_json::parse(text.str(), nullptr, false);
    if (schema.is_discarded())
      return llm::InvalidArgument("--structured: " + what + " is not JSON");
    g = llm::JsonSchemaGrammar(schema);
  }
  if (!g.ok()) return g.status();
  return std::shared_ptr<const llm::Grammar>(std::make_shared<llm::Grammar>(std::move(*g)));
}

// How a pass reads: plainly, with software prefetch, or as 4 prefetched streams per thread.
enum class ReadKind { kPlain, kPrefetched, kFourStreams };

// The 64-byte line at `at`, summed; with prefetch the line 2 KiB ahead into L1 and the one 4 KiB
// ahead into L2, as the engine's GEMVs do (matmul_internal.h's g_prefetch).
inline uint64_t SumLine(const uint64_t* at) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(at);  // past the end: a hint, no fault
  __builtin_prefetch(reinterpret_cast<const void*>(a + 2048), 0, 3);
  __builtin_prefetch(reinterpret_cast<const void*>(a + 4096), 0, 1);
  uint64_t sum = 0;
  for (size_t i = 0; i < 64 / sizeof(uint64_t); ++i) sum += at[i];
  return sum;
}

// One pass of every thread summing its share of buf (8-byte words, which the compiler
// vectorizes). kFourStreams: each thread reads the four quarters of its share in lockstep, a
// line of each in turn, as the AVX-512 F16 GEMV reads a panel's four row groups (and llama.cpp's
// F16 kernel six rows): on the Xeon with AMX (2 Dec 2026) batch-1 F16 decode then streamed
// 119-127% of the best single-stream pass. Seconds.
double ReadPass(const uint64_t* buf, size_t words, ReadKind kind, uint64_t* sink) {
  constexpr size_t kLine = 64 / sizeof(uint64_t);
  const auto t0 = Clock::now();
  uint64_t total = 0;
  if (kind == ReadKind::kPlain) {
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (size_t i = 0; i < words; ++i) total += buf[i];
  } else if (kind == ReadKind::kPrefetched) {
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (size_t line = 0; line < words / kLine; ++line) total += SumLine(buf + line * kLine);
  } else {
    const size_t lines = words / kLine;
#pragma omp parallel reduction(+ : total)
    {
      const size_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const size_t begin = lines * t / threads, end = lines * (t + 1) / threads;
      const size_t quarter = (end - begin) / 4;
      for (size_t i = 0; i < quarter; ++i) {
        for (size_t q = 0; q < 4; ++q) total += SumLine(buf + (begin + q * quarter + i) * kLine);
      }
      for (size_t line = begin + 4 * quarter; line < end; ++line) {
        total += SumLine(buf + line * kLine);
      }
    }
  }
  *sink += total;
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The machine's read bandwidth with the compute threads: the best of 3 passes over a 1 GiB
// buffer, each pass read plainly, with software prefetch and as four streams (ReadPass), so
// decode's "GB/s of weights" can be read against what the memory gives on this machine now.
// All three, because machines differ: on an Intel Xeon (Emerald Rapids, 2 Dec 2026) the plain loop
// read 13.8-15.3 GB/s at 2 threads and the prefetched one 21.0-26.6, while batch-1 decode (which
// prefetches) streamed 16.7-18.2, "115-132%" of the plain loop. On AMD Zen 4 the GEMVs measured
// best without software prefetch, so the plain pass stays. In huge pages where the CPU backend uses
// them (as the weights are then), else in small pages: the read loop measures the best the machine
// streams, not a TLB-bound figure.
double ReadBandwidthGBs() {
  const size_t words = (size_t{1} << 30) / sizeof(uint64_t);
  std::vector<uint64_t> small;
  size_t mapped = 0;
  uint64_t* buf = nullptr;
  if (llm::kernels::CpuHugePages()) {
    buf = static_cast<uint64_t*>(
        llm::kernels::AllocateHugePageAligned(words * sizeof(uint64_t), &mapped));
  }
  if (buf == nullptr) {
    small.resize(words);
    buf = small.data();
  }
  std::fill(buf, buf + words, uint64_t{1});
  double best = 0;
  uint64_t sink = 0;
  for (int pass = 0; pass < 3; ++pass) {
    for (const ReadKind kind : {ReadKind::kPlain, ReadKind::kPrefetched, ReadKind::kFourStreams}) {
      const double s = ReadPass(buf, words, kind, &sink);
      best = std::max(best, static_cast<double>(words * sizeof(uint64_t)) / s / 1e9);
    }
  }
  if (sink == 0) std::printf("(empty buffer)\n");  // keeps the sums from being optimized away
  if (small.empty()) llm::kernels::FreeHugePageAligned(buf, mapped);
  return best;
}

// --kv-cache-mib, 0 resolved: 512 MiB, or what the widest decode batch needs to hold every
// sequence at its full length (decode context + decode tokens, in whole blocks, one spare each).
// With less, the scheduler runs part of the batch while the rest waits for blocks: at 1900
// tokens of context, 512 MiB of TinyLlama's float16 cache held 12 of "batch 16"'s sequences.
int KvCacheMib(const BenchOptions& o, const llm::ModelConfig& mc, const llm::EngineConfig& cfg,
               llm::DType kv_dtype) {
  if (o.kv_cache_mib > 0) return o.kv_cache_mib;
  const int widest = *std::max_element(o.batches.begin(), o.batches.end());
  const int64_t bs = cfg.block_size;
  const int64_t seq_blocks = (o.decode_context + o.decode_tokens + 1 + bs - 1) / bs + 1;
  const int64_t blocks =
      std::max<int64_t>(widest * seq_blocks, (o.prompt_len + 1 + bs - 1) / bs + 1);
  const double bytes = static_cast<double>(blocks) * bs * 2.0 * mc.num_layers * mc.kv_dim() *
                       static_cast<double>(llm::DTypeSize(kv_dtype));
  // At most what --kv-cache-mib takes (16 TiB): a larger need fails to allocate, with its size.
  return static_cast<int>(std::clamp(bytes / 1048576.0 + 1, 512.0, double{1 << 24}));
}

Status Bench(const BenchOptions& o) {
  omp_set_num_threads(o.threads > 0 ? o.threads : omp_get_num_procs());
  LLM_ASSIGN_OR_RETURN(const llm::LoadFormat format,
                       llm::ParseLoadFormat(o.load_format, "--load-format"));
  std::optional<llm::DType> quant;
  if (o.quantization != "none") {
    llm::DType t;
    if (!llm::ParseQuantFormat(o.quantization, &t)) {
      return llm::InvalidArgument("--quantization: unknown format '" + o.quantization + "'");
    }
    quant = t;
  }
  llm::EngineSection device;
  device.device = o.device;
  device.huge_pages = o.huge_pages;
  // The device first: a missing GPU is reported before the weights load.
  LLM_ASSIGN_OR_RETURN(llm::kernels::Backend * backend, llm::EngineBackend(device));
  LLM_ASSIGN_OR_RETURN(auto weights, llm::LoadModelWeights(o.model, format, 0, {}, quant));
  LLM_RETURN_IF_ERROR(llm::PlaceWeightsFor(device, *weights, *backend));
  llm::EngineConfig cfg;
  cfg.kv_cache_dtype = o.kv_cache_dtype;
  const int kv_cache_mib =
      KvCacheMib(o, weights->config, cfg, llm::ResolveKvCacheDtype(cfg, *weights, backend->caps()));
  cfg.kv_cache_bytes = static_cast<size_t>(kv_cache_mib) << 20;
  cfg.scheduler.max_num_batched_tokens = std::max(2048, o.prompt_len);
  LLM_ASSIGN_OR_RETURN(auto engine, llm::Engine::Create(*weights, cfg, nullptr, *backend));
  const auto& mc = weights->config;
  // Bytes of weights one decode step reads: every matrix but an untied embedding (gathered).
  const auto& emb = weights->embed;
  const double streamed =
      static_cast<double>(weights->matrix_bytes) -
      (weights->lm_head.data != emb.data ? llm::RowBytes(emb.format, emb.cols) * emb.rows : 0.0);
  std::printf(
      "model %s (%s, %d layers, hidden %d), weights %.1f MiB %s (mlp %s), %.1f MiB read per "
      "decode step, %d threads, device %s, KV cache %s %d MiB, %.1f MiB in huge pages\n",
      o.model.c_str(), mc.architecture.c_str(), mc.num_layers, mc.hidden_size,
      weights->matrix_bytes / 1048576.0, llm::DTypeName(weights->layers[0].q.format),
      llm::DTypeName(weights->layers[0].down.format), streamed / 1048576.0, omp_get_max_threads(),
      o.device.c_str(), llm::KvCacheDtypeLogName(cfg, engine->kv_cache_dtype()).c_str(),
      kv_cache_mib, llm::kernels::AnonHugePageBytes() / 1048576.0);
  // Multiply-adds of one token's matmuls (dense models; 0 for a mixture of experts, whose
  // experts a token picks): two FLOPs each.
  double macs = 0;
  if (mc.num_experts == 0) {
    macs = static_cast<double>(weights->lm_head.rows) * weights->lm_head.cols;
    for (const auto& l : weights->layers) {
      for (const auto* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) {
        macs += static_cast<double>(m->rows) * m->cols;
      }
    }
  }
  double tps = 0, decode_b1_gbs = 0, widest_gflops = 0;
  int widest = 0;
  LLM_RETURN_IF_ERROR(RunPrefill(*engine, o, &tps));
  std::printf("prefill  %5d tokens         : %10.1f tokens/s\n", o.prompt_len, tps);
  std::shared_ptr<const llm::Grammar> grammar;
  if (!o.structured.empty()) {
    LLM_ASSIGN_OR_RETURN(auto tok,
                         llm::Tokenizer::FromDir(o.tokenizer.empty() ? o.model : o.tokenizer));
    engine->SetGrammarVocabulary(llm::GrammarVocabulary::FromTokenizer(*tok));
    LLM_ASSIGN_OR_RETURN(grammar, LoadGrammar(o.structured));
  }
  for (int b : o.batches) {
    double per_cpu_s = 0;
    if (!grammar) {
      StepSplit split;
      LLM_RETURN_IF_ERROR(RunDecode(*engine, b, o, &tps, &per_cpu_s, nullptr, &split));
      std::printf("decode   batch %3d          : %10.1f tokens/s (%.1f GB/s of weights", b, tps,
                  streamed * tps / b / 1e9);
      if (macs > 0) std::printf(", matmuls %.0f GFLOP/s", 2 * macs * tps / 1e9);
      std::printf(
          "), %.1f tokens per CPU-second, context %d; a step %.2f ms: forward %.2f, sampling "
          "%.2f\n",
          per_cpu_s, o.decode_context, split.step_ms, split.forward_ms, split.sampling_ms);
      if (b == 1) decode_b1_gbs = streamed * tps / 1e9;
      if (b > widest) {
        widest = b;
        widest_gflops = 2 * macs * tps / 1e9;
      }
      continue;
    }
    // Alternating runs (this machine is shared and noisy): plain, structured, x3.
    double plain = 0, masked = 0;
    for (int rep = 0; rep < 3; ++rep) {
      LLM_RETURN_IF_ERROR(RunDecode(*engine, b, o, &tps, &per_cpu_s));
      plain += tps / 3;
      LLM_RETURN_IF_ERROR(RunDecode(*engine, b, o, &tps, &per_cpu_s, grammar));
      masked += tps / 3;
    }
    // Per generated token; structured sequences may end early (a complete value ends them), so
    // at batch > 1 their later steps run smaller batches: compare at batch 1.
    std::printf(
        "decode   batch %3d          : %10.1f tokens/s plain, %.1f structured (%s): %.2f -> "
        "%.2f ms per token (%+.1f%%)\n",
        b, plain, masked, o.structured.c_str(), 1000.0 / plain, 1000.0 / masked,
        100.0 * (plain / masked - 1.0));
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double kv_mib = static_cast<double>(engine->stats().blocks_total) * 2 *
                        llm::DTypeSize(engine->kv_cache_dtype()) * cfg.block_size * mc.kv_dim() *
                        mc.num_layers / 1048576.0;
  const double budget = (weights->matrix_bytes / 1048576.0 + kv_mib) * 1.10;
  std::printf("peak RSS %.1f MiB; weights + KV cache (%.1f MiB) + 10%% = %.1f MiB\n",
              ru.ru_maxrss / 1024.0, kv_mib, budget);
  if (!backend->caps().host_memory) return Status::Ok();  // host bandwidth says nothing here
  // After the RSS line: the 1 GiB buffer would count in the peak.
  const double bandwidth = ReadBandwidthGBs();
  std::printf(
      "read bandwidth %.1f GB/s (%d threads, best of 3 passes over 1 GiB: plain, prefetched, 4 "
      "streams)",
      bandwidth, omp_get_max_threads());
  if (decode_b1_gbs > 0)
    std::printf(": decode batch 1 streams %.0f%% of it", 100 * decode_b1_gbs / bandwidth);
  std::printf("\n");
  // Float weights multiply on the FMA units: batched decode computes at most this peak.
  const double peak = llm_bench::FmaPeakGflops();
  if (peak > 0) {
    std::printf("FMA peak %.0f GFLOP/s (F32, %d threads)", peak, omp_get_max_threads());
    if (widest > 1 && widest_gflops > 0 && !llm::IsBlockFormat(weights->layers[0].q.format)) {
      std::printf(": decode batch %d's matmuls compute %.0f%% of it", widest,
                  100 * widest_gflops / peak);
    }
    std::printf("\n");
  }
  std::vector<double> shares;
  for (int r = 0; r < o.share_rounds; ++r) {
    const double bw = ReadBandwidthGBs();
    double per_cpu_s = 0;
    LLM_RETURN_IF_ERROR(RunDecode(*engine, 1, o, &tps, &per_cpu_s));
    const double gbs = streamed * tps / 1e9;
    shares.push_back(gbs / bw);
    std::printf(
        "share round %d: read bandwidth %.1f GB/s, decode batch 1 %.1f tokens/s (%.1f GB/s): "
        "%.0f%%\n",
        r + 1, bw, tps, gbs, 100 * shares.back());
  }
  if (!shares.empty()) {
    std::sort(shares.begin(), shares.end());
    const size_t n = shares.size();
    const double median = n % 2 ? shares[n / 2] : (shares[n / 2 - 1] + shares[n / 2]) / 2;
    std::printf(
        "decode batch 1 streams %.0f%% of the read bandwidth (median of %zu rounds, %.0f-%.0f%%)\n",
        100 * median, n, 100 * shares.front(), 100 * shares.back());
  }
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  BenchOptions o;
  CLI::App app(
      "Engine throughput on one model folder (not a test): prefill tokens/s, decode tokens/s at\n"
      "the batch sizes asked for, and peak RSS against weights + KV cache.",
      "llm-bench");
  AddFlags(app, &o);
  if (auto rc = llm::ParseCommandLine(app, argc, argv)) return *rc;
  Status s = Bench(o);
  if (!s.ok()) {
    std::fprintf(stderr, "llm-bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
