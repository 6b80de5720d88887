// The one configuration of a cluster (cluster.yaml), shared by the router and the worker job.
// Every key is declared once in a schema (type, default, range, help); the YAML is parsed and
// validated at start-up, command-line overrides (`--section.key value`) are applied on top, and
// the result is immutable. Unknown keys and bad values are errors that name the key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/model_config.h"
#include "common/status.h"

namespace llm {

struct ClusterConfig {
  // model
  std::string model_path;
  std::string served_model_name;  // default: the folder name
  LoadFormat load_format = LoadFormat::kSafetensors;
  int max_model_len = 0;  // 0: the model's max_position_embeddings
  // engine
  int tensor_parallel_size = 1;
  int block_size = 16;
  int kv_cache_mib = 0;                    // > 0 wins over the fraction
  int kv_cache_blocks = 0;                 // > 0 wins over both sizes (tests, tuning)
  double kv_cache_memory_fraction = 0.25;  // of the memory available at start-up
  int max_num_seqs = 256;
  int max_num_batched_tokens = 2048;
  int max_prefill_chunk = 512;
  int threads_per_rank = 0;         // 0: cores / ranks on this host
  std::string matmul_isa = "auto";  // SIMD path of the CPU matmul
  int64_t seed = 0;
  int rank_timeout_s = 60;          // a collective not completed within it ends the job
  int heartbeat_timeout_s = 5;      // health is false while a rank has not answered this long
  int max_waiting_requests = 4096;  // queued requests beyond it are refused (429)
  int queue_timeout_s = 300;        // a request queued this long fails (429); 0: never
  // coordinator
  std::string coordinator_host = "127.0.0.1";
  int coordinator_port = 50051;
  int shutdown_grace_s = 30;  // SIGTERM: running requests get this long to finish
  std::string admin_token;    // Drain/Resume need it; empty: LLM_ADMIN_TOKEN, else local only
  std::string tls_cert_file;  // PEM; with tls_key_file the gRPC port speaks TLS only
  std::string tls_key_file;
  // router
  std::string router_host;  // "": 0.0.0.0 when an API key is set, else 127.0.0.1
  int router_port = 2000;
  std::vector<std::string> upstreams;  // coordinator addresses; default: the coordinator's
  std::string upstream_tls_ca_file;    // PEM roots: the coordinators speak TLS
  // PEM certificate (chain) and private key: both set, the HTTP port speaks HTTPS only
  std::string router_tls_cert_file;
  std::string router_tls_key_file;
  int64_t max_body_bytes = 1 << 20;
  int max_n = 16;
  int request_timeout_s = 600;
  // router: fan-out caps (each choice = prompt × n is one upstream call)
  int max_prompts = 256;
  int max_choices = 256;
  int max_stop_strings = 16;
  int max_stop_bytes = 4096;
  int max_stop_token_ids = 256;
  // router: a client's 'priority' reorders the engine's queue (and can preempt others), so
  // only an operator who trusts every client turns it on.
  bool allow_priority = false;
  // router: API keys (with LLM_API_KEY from the environment); none = no authentication
  std::vector<std::string> api_keys;
  std::string api_key_file;
  bool health_requires_key = false;
  // router: back-pressure (beyond either limit a request gets 429 with Retry-After)
  int max_connections = 1024;
  int max_inflight_requests = 256;
  // router: special-token text in chat message content becomes control tokens (vLLM) or, by
  // default, stays text
  bool special_tokens_in_messages = false;
  // router: how often each upstream coordinator is asked for Admin.Health
  int health_check_interval_ms = 1000;
  // router: on SIGTERM/SIGINT, requests in flight get this long to finish (a 2nd signal: now)
  int router_shutdown_grace_s = 30;
  // router: HTTP connections
  int io_timeout_s = 60;                  // reading one request, and each write
  int64_t write_queue_bytes = 256 << 10;  // per connection; a full queue pauses its stream
  int64_t max_header_bytes = 16 << 10;    // larger request headers get 431
  int io_threads = 0;  // HTTP I/O threads (and as many handler threads); 0: cores, at least 2
};

// Describes every key: "section.key  type  default  range  help" lines.
std::string ClusterConfigHelp();

// Parses YAML text (`source` names it in errors), then applies overrides of the form
// {"engine.block_size", "32"} in order.
StatusOr<ClusterConfig> ParseClusterConfig(
    const std::string& yaml_text, const std::string& source,
    const std::vector<std::pair<std::string, std::string>>& overrides = {});

// Reads `path` (empty: defaults only) and applies the overrides taken from argv
// (`--section.key value` or `--section.key=value`; `--config PATH` names the file).
StatusOr<ClusterConfig> LoadClusterConfig(int argc, char** argv);

}  // namespace llm
