// The sections of cluster.yaml as the structs their users take directly: the engine gets
// EngineSection (its SchedulerConfig included), the router's request parser RequestCaps, the
// coordinator CoordinatorSection. Each default is written once, here; the schema in
// cluster_config.cc only names the keys, their ranges and help, and reads the defaults from a
// default-constructed ClusterConfig.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/model_config.h"

namespace llm {

// model.*
struct ModelSection {
  std::string path;               // model folder (or file)
  std::string served_model_name;  // default: the folder name
  LoadFormat load_format = LoadFormat::kSafetensors;
  // "none", or a block format ("q8_0", "q4_0", "q4_k", ...) the linear weights of an
  // F32/F16/BF16 model are quantized to at load (ParseQuantFormat in common/dtype.h).
  std::string quantization = "none";
  int max_model_len = 0;  // 0: the model's max_position_embeddings
  // A Jinja chat template file, or the template itself (text with a '{'), instead of the
  // model's own (tokenizer_config.json); "": the model's.
  std::string chat_template;
};

// engine.max_num_seqs, max_num_batched_tokens, max_prefill_chunk,
// max_prefill_tokens_while_decoding
struct SchedulerConfig {
  int max_num_seqs = 256;             // sequences in one step
  int max_num_batched_tokens = 2048;  // tokens in one step (the budget)
  // > 0: at most this many prompt tokens per sequence per step, so one long prompt cannot
  // take a whole step's budget from the running decodes; 0: the budget.
  int max_prefill_chunk = 512;
  // > 0: while any sequence decodes, the prompt tokens of one step (all sequences together)
  // stay under this, so a burst of new prompts cannot stall every running stream for a whole
  // prefill step (the inter-token latency tail); 0: only the budget and the chunk bound them.
  // -1 (auto): the cluster config resolves it by engine.device (kCpuPrefillTokensWhileDecoding
  // on a CPU, where a step's time grows with its tokens; 0 on CUDA, as vLLM); a scheduler
  // given -1 treats it as 0.
  int max_prefill_tokens_while_decoding = -1;
};

// engine.max_prefill_tokens_while_decoding's auto value on a CPU: measured on the 2-core
// development host (README, "Serving"), 32 cut the p99 inter-token latency under Poisson
// arrivals about 3x for ~0.3 s more time to first token.
constexpr int kCpuPrefillTokensWhileDecoding = 32;

// engine.*
// engine.cuda_graph_max_batch's upper bound: a follower records at most this many sequences
// per graph (the start message is checked against it too).
constexpr int kMaxCudaGraphBatch = 1024;

struct EngineSection {
  int tensor_parallel_size = 1;
  // Independent engines (replicas) in one mpirun job, each tensor_parallel_size ranks with its
  // own coordinator on coordinator.port + its group index (common/parallel_layout.h).
  int data_parallel_size = 1;
  // Pipeline stages per engine, each holding a contiguous range of layers: balanced, or
  // pipeline_layer_partition's layers per stage (common/parallel_layout.h).
  int pipeline_parallel_size = 1;
  std::vector<int> pipeline_layer_partition;
  int block_size = 16;
  int kv_cache_mib = 0;                    // > 0 wins over the fraction
  int kv_cache_blocks = 0;                 // > 0 wins over both sizes (tests, tuning)
  double kv_cache_memory_fraction = 0.25;  // of the memory available at start-up
  // Element type of the KV cache, vLLM's kv_cache_dtype: "auto" (float16 for a model stored in
  // 16 bits or quantized, float32 for a float32 one: ResolveKvCacheDtype in
  // worker/engine/device_setup.h), "float32", or "float16" (half the memory per token and half the
  // bytes attention reads; each K and V value rounded to half once). kv_cache_element_type() is
  // the DType of an explicit value (float32 for auto).
  std::string kv_cache_dtype = "auto";
  DType kv_cache_element_type() const {
    return kv_cache_dtype == "float16" ? DType::kF16 : DType::kF32;
  }
  SchedulerConfig scheduler;
  // Reuse the KV blocks of prompt prefixes already computed (shared system prompts, chat
  // history, n > 1); as vLLM, on by default.
  bool enable_prefix_caching = true;
  int threads_per_rank = 0;         // 0: the cores of the rank's affinity mask
  std::string matmul_isa = "auto";  // SIMD path of the CPU matmul
  // engine.device cpu: "auto" keeps the weights (copied out of the model file's mapping), the KV
  // cache and the workspace in transparent huge pages where the kernel allows them
  // (kernels::SetCpuHugePages); "off" reads the weights in place from the file mapping.
  std::string huge_pages = "auto";
  // Where the forward pass runs: "cpu" or "cuda" (one GPU per rank, picked by the local rank).
  std::string device = "cpu";
  // engine.device cuda: fraction of the GPU's total memory this rank may use (weights,
  // workspace and KV cache), as vLLM's gpu_memory_utilization; in (0, 1].
  double gpu_memory_utilization = 0.9;
  // engine.device cuda: the largest decode batch captured as a CUDA graph; 0: no CUDA graphs.
  int cuda_graph_max_batch = 64;
  uint64_t seed = 0;                // draws the seeds of requests that bring none
  int rank_timeout_s = 60;          // a collective not completed within it ends the job
  int heartbeat_timeout_s = 5;      // health is false while a rank has not answered this long
  int max_waiting_requests = 4096;  // queued requests beyond it are refused (429)
  int queue_timeout_s = 300;        // a request queued this long fails (429); 0: never
  int log_stats_interval_s = 10;    // rank 0 logs throughput, queue and KV use; 0: never
};

// coordinator.*
struct CoordinatorSection {
  std::string host = "127.0.0.1";
  int port = 50051;
  // Data-parallel group g's coordinator port: ports[g], one per group; empty: port + g.
  std::vector<int> ports;
  int shutdown_grace_s = 30;  // SIGTERM: running requests get this long to finish
  std::string admin_token;    // Drain/Resume need it; empty: LLM_ADMIN_TOKEN, else local only
  std::string tls_cert_file;  // PEM; with tls_key_file the gRPC port speaks TLS only
  std::string tls_key_file;
};

// router.max_n ... allow_priority: what one request may ask for. The fan-out caps bound the
// work one small body can start: every choice (prompt × n) is one upstream call with its own
// decoder and stop matcher.
struct RequestCaps {
  int max_n = 16;
  int max_prompts = 256;         // prompts in one completions request
  int max_choices = 256;         // prompts × n
  int max_stop_strings = 16;     // entries of `stop`
  int max_stop_bytes = 4096;     // their total length
  int max_stop_token_ids = 256;  // entries of `stop_token_ids`
  // A client's 'priority' reorders the engine's queue (and can preempt others), so only an
  // operator who trusts every client turns it on; false: a non-zero priority is a 400.
  bool allow_priority = false;
};

// router.* about HTTP connections
struct HttpSection {
  std::string host;  // "": 0.0.0.0 when an API key is set, else 127.0.0.1
  int port = 2000;
  int64_t max_body_bytes = 1 << 20;
  int io_timeout_s = 60;                  // reading one request, and each write
  int64_t write_queue_bytes = 256 << 10;  // per connection; a full queue pauses its stream
  int64_t max_header_bytes = 16 << 10;    // larger request headers get 431
  int io_threads = 0;  // HTTP I/O threads (and as many handler threads); 0: cores, at least 2
  // back-pressure: beyond either limit a request gets 429 with Retry-After
  int max_connections = 1024;
  int max_inflight_requests = 256;
  // PEM certificate (chain) and private key: both set, the HTTP port speaks HTTPS only
  std::string tls_cert_file;
  std::string tls_key_file;
};

// router.*
struct RouterSection {
  HttpSection http;
  RequestCaps caps;
  std::vector<std::string> upstreams;  // coordinator addresses; default: the coordinator's
  std::string upstream_tls_ca_file;    // PEM roots: the coordinators speak TLS
  int request_timeout_s = 600;
  // API keys (with LLM_API_KEY from the environment); none = no authentication
  std::vector<std::string> api_keys;
  std::string api_key_file;
  bool health_requires_key = false;
  // GET/POST/DELETE /upstreams need 'Authorization: Bearer <admin_token>'; empty:
  // LLM_ADMIN_TOKEN, and with neither only clients on this host may use them.
  std::string admin_token;
  // special-token text in chat message content becomes control tokens (vLLM) or, by default,
  // stays text
  bool special_tokens_in_messages = false;
  // How tool calls are found in chat output when a request has tools: "auto" (from the chat
  // template), "none", "hermes", "llama3_json", "mistral", "deepseek_v3".
  std::string tool_call_parser = "auto";
  // <think>...</think> → reasoning_content: "none", "deepseek_r1", "qwen3".
  std::string reasoning_parser = "none";
  int health_check_interval_ms = 1000;  // how often each upstream is asked for Admin.Health
  // How requests are spread over the upstreams: "prefix_affinity" (requests whose prompts
  // start with the same affinity_prefix_tokens tokens go to the same coordinator, for its prefix
  // cache, unless it has affinity_max_imbalance more requests in flight than the least-loaded
  // one), "least_loaded" or "round_robin".
  std::string routing = "prefix_affinity";
  int affinity_prefix_tokens = 64;
  int affinity_max_imbalance = 32;
  int shutdown_grace_s = 30;  // SIGTERM/SIGINT: requests in flight get this long to finish
};

}  // namespace llm
