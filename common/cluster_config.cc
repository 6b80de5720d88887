#include "common/cluster_config.h"

// GCC 12 reports -Wrestrict inside std::string's insert/replace when it inlines `"x" + s` with
// constants (GCC bug 105329, a false positive); this file builds many such messages.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <type_traits>

#include "common/parallel_layout.h"

namespace llm {

namespace {

using Setter = std::function<Status(ClusterConfig&, const std::vector<std::string>&)>;
using Getter = std::function<std::string(const ClusterConfig&)>;

struct KeySpec {
  std::string name;  // "section.key"
  std::string type;
  std::string range;
  std::string help;
  Setter set;
  Getter get;
};

Status BadValue(const std::string& key, const std::string& value, const std::string& want) {
  return InvalidArgument("config key '" + key + "': expected " + want + ", got '" + value + "'");
}

// `field` is a generic lambda returning a reference to the key's member (see LLM_FIELD).
template <typename Field>
KeySpec IntKey(const char* name, Field field, int64_t min, int64_t max, const char* help) {
  std::string range = "[";  // appends: GCC 12 -Wrestrict false positive on "[" + string&&
  range.append(std::to_string(min)).append(", ").append(std::to_string(max)).append("]");
  return {name,
          "int",
          range,
          help,
          [=](ClusterConfig& c, const std::vector<std::string>& v) -> Status {
            if (v.size() != 1) return BadValue(name, "a list", "an integer");
            char* end = nullptr;
            errno = 0;
            const long long x = std::strtoll(v[0].c_str(), &end, 10);
            if (v[0].empty() || *end != '\0' || errno != 0 || x < min || x > max) {
              return BadValue(name, v[0], "an integer in " + range);
            }
            field(c) = static_cast<std::remove_reference_t<decltype(field(c))>>(x);
            return Status::Ok();
          },
          [=](const ClusterConfig& c) { return std::to_string(field(c)); }};
}

template <typename Field>
KeySpec DoubleKey(const char* name, Field field, double min, double max, const char* help,
                  bool min_exclusive = false) {
  std::ostringstream r;
  r << (min_exclusive ? "(" : "[") << min << ", " << max << "]";
  const std::string range = r.str();
  return {
      name,
      "number",
      range,
      help,
      [=](ClusterConfig& c, const std::vector<std::string>& v) -> Status {
        if (v.size() != 1) return BadValue(name, "a list", "a number");
        char* end = nullptr;
        const double x = std::strtod(v[0].c_str(), &end);
        if (v[0].empty() || *end != '\0' || !(min_exclusive ? x > min : x >= min) || !(x <= max)) {
          return BadValue(name, v[0], "a number in " + range);
        }
        field(c) = x;
        return Status::Ok();
      },
      [=](const ClusterConfig& c) {
        std::ostringstream s;
        s << field(c);
        return s.str();
      }};
}

template <typename Field>
KeySpec BoolKey(const char* name, Field field, const char* help) {
  return {name,
          "bool",
          "true|false",
          help,
          [=](ClusterConfig& c, const std::vector<std::string>& v) -> Status {
            if (v.size() != 1) return BadValue(name, "a list", "true or false");
            if (v[0] == "true") {
              field(c) = true;
            } else if (v[0] == "false") {
              field(c) = false;
            } else {
              return BadValue(name, v[0], "true or false");
            }
            return Status::Ok();
          },
          [=](const ClusterConfig& c) { return std::string(field(c) ? "true" : "false"); }};
}

template <typename Field>
KeySpec LoadFormatKey(const char* name, Field field, const char* help) {
  return {name,
          "enum",
          "safetensors|gguf|dummy",
          help,
          [=](ClusterConfig& c, const std::vector<std::string>& v) -> Status {
            if (v.size() != 1) return BadValue(name, "a list", "safetensors, gguf or dummy");
            StatusOr<LoadFormat> f =
                ParseLoadFormat(v[0], std::string("config key '") + name + "'");
            if (!f.ok()) return f.status();
            field(c) = *f;
            return Status::Ok();
          },
          [=](const ClusterConfig& c) { return std::string(LoadFormatName(field(c))); }};
}

template <typename Field>
KeySpec StringKey(const char* name, Field field, std::vector<std::string> allowed,
                  const char* help) {
  std::string range;
  for (const auto& a : allowed) range += (range.empty() ? "" : "|") + a;
  return {
      name,
      "string",
      range,
      help,
      [=](ClusterConfig& c, const std::vector<std::string>& v) -> Status {
        if (v.size() != 1) return BadValue(name, "a list", "a string");
        if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), v[0]) == allowed.end()) {
          return BadValue(name, v[0], "one of " + range);
        }
        field(c) = v[0];
        return Status::Ok();
      },
      [=](const ClusterConfig& c) { return field(c); }};
}

template <typename Field>
KeySpec ListKey(const char* name, Field field, const char* help) {
  return {name,
          "list",
          "",
          help,
          [=](ClusterConfig& c, const std::vector<std::string>& v) -> Status {
            field(c) = v;
            return Status::Ok();
          },
          [=](const ClusterConfig& c) {
            std::string s;
            for (const auto& x : field(c)) s += (s.empty() ? "" : ",") + x;
            return s;
          }};
}

// A list of integers in [lo, hi]; `what` describes them ("ports in [1, 65535]").
template <typename Field>
KeySpec IntListKey(const char* name, Field field, int lo, int hi, const char* what,
                   const char* help) {
  return {name,
          "list",
          what,
          help,
          [=](ClusterConfig& c, const std::vector<std::string>& v) -> Status {
            std::vector<int> values;
            for (const std::string& item : v) {
              char* end = nullptr;
              errno = 0;
              const long x = std::strtol(item.c_str(), &end, 10);
              if (item.empty() || *end != '\0' || errno != 0 || x < lo || x > hi) {
                return BadValue(name, item, what);
              }
              values.push_back(static_cast<int>(x));
            }
            field(c) = std::move(values);
            return Status::Ok();
          },
          [=](const ClusterConfig& c) {
            std::string s;
            for (const int x : field(c)) s.append(s.empty() ? "" : ",").append(std::to_string(x));
            return s;
          }};
}

// A reference to one member of a ClusterConfig, const or not: LLM_FIELD(engine.block_size).
#define LLM_FIELD(path)  \
  [](auto& c) -> auto& { \
    return c.path;       \
  }

const std::vector<KeySpec>& Schema() {
  static const std::vector<KeySpec> schema = {
      StringKey("model.path", LLM_FIELD(model.path), {},
                "Hugging Face model folder, or a .gguf file"),
      StringKey("model.served_model_name", LLM_FIELD(model.served_model_name), {},
                "name clients use in 'model' (default: the folder name)"),
      LoadFormatKey("model.load_format", LLM_FIELD(model.load_format),
                    "dummy = seeded random weights, output meaningless"),
      StringKey("model.quantization", LLM_FIELD(model.quantization),
                {"none", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k",
                 "q6_k", "iq4_nl", "iq4_xs", "mxfp4", "q1_0", "nvfp4"},
                "quantize the linear weights of an F32/F16/BF16 model to this GGML block format "
                "at load (embeddings, lm_head and norms stay)"),
      IntKey("model.max_model_len", LLM_FIELD(model.max_model_len), 0, 1 << 24,
             "context length; 0 = max_position_embeddings"),
      StringKey("model.chat_template", LLM_FIELD(model.chat_template), {},
                "chat template file (Jinja), or the template itself; empty = the model's"),
      IntKey("engine.tensor_parallel_size", LLM_FIELD(engine.tensor_parallel_size), 1, 1024,
             "ranks one engine's model is split over (tensor parallelism); the mpirun -np is "
             "data_parallel_size x pipeline_parallel_size x tensor_parallel_size"),
      IntKey("engine.data_parallel_size", LLM_FIELD(engine.data_parallel_size), 1, 1024,
             "independent engines in one mpirun job, each of tensor_parallel_size consecutive "
             "ranks; group g's coordinator serves on coordinator.port + g"),
      IntKey("engine.pipeline_parallel_size", LLM_FIELD(engine.pipeline_parallel_size), 1, 1024,
             "pipeline stages per engine, each a contiguous range of layers on "
             "tensor_parallel_size ranks (stages go across hosts, tensor parallelism inside)"),
      IntListKey("engine.pipeline_layer_partition", LLM_FIELD(engine.pipeline_layer_partition), 1,
                 1 << 16, "layer counts in [1, 65536]",
                 "layers per pipeline stage, one per stage (e.g. 12,10); empty = balanced"),
      IntKey("engine.block_size", LLM_FIELD(engine.block_size), 1, 1 << 16,
             "tokens per KV cache block (at most the backend's limit: cpu 256)"),
      IntKey("engine.kv_cache_mib", LLM_FIELD(engine.kv_cache_mib), 0, 1 << 30,
             "KV cache per rank in MiB; 0 = use kv_cache_memory_fraction"),
      IntKey("engine.kv_cache_blocks", LLM_FIELD(engine.kv_cache_blocks), 0, 1 << 30,
             "KV cache blocks per rank; > 0 wins over kv_cache_mib and the fraction"),
      StringKey("engine.kv_cache_dtype", LLM_FIELD(engine.kv_cache_dtype),
                {"auto", "float32", "float16"},
                "element type of the KV cache; auto = float16 for a 16-bit or quantized model, "
                "float32 for a float32 one; float16 halves its memory per token and the bytes "
                "attention reads (engine.device cpu only)"),
      DoubleKey("engine.kv_cache_memory_fraction", LLM_FIELD(engine.kv_cache_memory_fraction), 0.01,
                0.95, "fraction of available memory for the KV cache"),
      IntKey("engine.max_num_seqs", LLM_FIELD(engine.scheduler.max_num_seqs), 1, 65536,
             "sequences per step"),
      IntKey("engine.max_num_batched_tokens", LLM_FIELD(engine.scheduler.max_num_batched_tokens), 1,
             1 << 20, "token budget per step"),
      IntKey("engine.max_prefill_chunk", LLM_FIELD(engine.scheduler.max_prefill_chunk), 0, 1 << 20,
             "prompt tokens per sequence per step; 0 = the budget"),
      IntKey("engine.max_prefill_tokens_while_decoding",
             LLM_FIELD(engine.scheduler.max_prefill_tokens_while_decoding), -1, 1 << 20,
             "prompt tokens of all sequences in a step while any sequence decodes; 0 = no "
             "bound but the budget; -1 = auto (32 on engine.device cpu, 0 on cuda)"),
      BoolKey("engine.enable_prefix_caching", LLM_FIELD(engine.enable_prefix_caching),
              "reuse the KV blocks of prompt prefixes computed before (vLLM's automatic prefix "
              "caching)"),
      IntKey("engine.threads_per_rank", LLM_FIELD(engine.threads_per_rank), 0, 4096,
             "compute threads per rank; 0 = cores / local ranks"),
      StringKey("engine.matmul_isa", LLM_FIELD(engine.matmul_isa),
                {"auto", "avx512-amx", "avx512-vnni", "avx512", "avx2-fma", "scalar"},
                "SIMD path of the CPU matmul; auto = the best this CPU has (or LLM_MATMUL_ISA)"),
      StringKey("engine.huge_pages", LLM_FIELD(engine.huge_pages), {"auto", "off"},
                "engine.device cpu: auto = weights (copied out of the model file), KV cache and "
                "workspace in transparent huge pages where the kernel's THP mode allows; off = "
                "weights read in place from the file mapping, small pages"),
      StringKey("engine.device", LLM_FIELD(engine.device), {"cpu", "cuda"},
                "where the forward pass runs; cuda = one GPU per rank (the local rank's)"),
      DoubleKey("engine.gpu_memory_utilization", LLM_FIELD(engine.gpu_memory_utilization), 0.0, 1.0,
                "engine.device cuda: fraction of the GPU's memory for weights, workspace and "
                "KV cache",
                /*min_exclusive=*/true),
      IntKey("engine.cuda_graph_max_batch", LLM_FIELD(engine.cuda_graph_max_batch), 0,
             kMaxCudaGraphBatch,
             "engine.device cuda: largest decode batch run as a CUDA graph; 0 = no CUDA graphs"),
      IntKey("engine.seed", LLM_FIELD(engine.seed), 0, INT64_MAX, "seed for requests without one"),
      IntKey("engine.rank_timeout_s", LLM_FIELD(engine.rank_timeout_s), 1, 86400,
             "a collective some rank does not complete within this ends the whole job"),
      IntKey("engine.heartbeat_timeout_s", LLM_FIELD(engine.heartbeat_timeout_s), 1, 3600,
             "health reports not serving once a rank has not answered for this long"),
      IntKey("engine.max_waiting_requests", LLM_FIELD(engine.max_waiting_requests), 0, 1 << 24,
             "requests waiting to be scheduled; more are refused (router: 429); 0 = no bound"),
      IntKey("engine.queue_timeout_s", LLM_FIELD(engine.queue_timeout_s), 0, 86400,
             "a request still waiting after this long fails (router: 429); 0 = never"),
      IntKey("engine.log_stats_interval_s", LLM_FIELD(engine.log_stats_interval_s), 0, 86400,
             "every this many seconds rank 0 logs throughput, running/waiting, KV cache use "
             "(only when something changed); 0 = never"),
      StringKey("coordinator.host", LLM_FIELD(coordinator.host), {}, "gRPC bind address of rank 0"),
      IntKey("coordinator.port", LLM_FIELD(coordinator.port), 1, 65535,
             "gRPC port of rank 0; data-parallel group g's coordinator: coordinator.port + g"),
      IntListKey("coordinator.ports", LLM_FIELD(coordinator.ports), 1, 65535, "ports in [1, 65535]",
                 "gRPC port of each data-parallel group's coordinator, one per group "
                 "(engine.data_parallel_size); empty = coordinator.port + g"),
      StringKey("coordinator.admin_token", LLM_FIELD(coordinator.admin_token), {},
                "token Drain/Resume need (Bearer); empty: LLM_ADMIN_TOKEN, else loopback only"),
      StringKey("coordinator.tls_cert_file", LLM_FIELD(coordinator.tls_cert_file), {},
                "PEM certificate (chain) of the gRPC port; with tls_key_file: TLS only"),
      StringKey("coordinator.tls_key_file", LLM_FIELD(coordinator.tls_key_file), {},
                "PEM private key of tls_cert_file"),
      IntKey("coordinator.shutdown_grace_s", LLM_FIELD(coordinator.shutdown_grace_s), 0, 86400,
             "on SIGTERM/SIGINT running requests get this long to finish (a 2nd signal: now)"),
      StringKey("router.host", LLM_FIELD(router.http.host), {},
                "HTTP bind address; empty = 0.0.0.0 when an API key is set, else 127.0.0.1"),
      IntKey("router.port", LLM_FIELD(router.http.port), 1, 65535, "HTTP port"),
      ListKey("router.upstreams", LLM_FIELD(router.upstreams),
              "coordinator host:port list; default: coordinator.host:port, or with "
              "engine.data_parallel_size N every group's coordinator.host:port+g, g < N"),
      StringKey("router.upstream_tls_ca_file", LLM_FIELD(router.upstream_tls_ca_file), {},
                "PEM roots: connect to the coordinators with TLS (coordinator.tls_cert_file)"),
      IntKey("router.max_body_bytes", LLM_FIELD(router.http.max_body_bytes), 1024, int64_t{1} << 30,
             "larger request bodies get 413"),
      IntKey("router.max_n", LLM_FIELD(router.caps.max_n), 1, 1024,
             "largest n a request may ask for"),
      IntKey("router.request_timeout_s", LLM_FIELD(router.request_timeout_s), 1, 86400,
             "a request running longer is aborted"),
      IntKey("router.max_prompts", LLM_FIELD(router.caps.max_prompts), 1, 65536,
             "most prompts in one completions request (more: 400)"),
      IntKey("router.max_choices", LLM_FIELD(router.caps.max_choices), 1, 65536,
             "most choices (prompts x n) in one request, each an upstream call (more: 400)"),
      IntKey("router.max_stop_strings", LLM_FIELD(router.caps.max_stop_strings), 0, 4096,
             "most 'stop' strings in one request (more: 400)"),
      IntKey("router.max_stop_bytes", LLM_FIELD(router.caps.max_stop_bytes), 1, 1 << 20,
             "most bytes of 'stop' strings in one request, all together (more: 400)"),
      IntKey("router.max_stop_token_ids", LLM_FIELD(router.caps.max_stop_token_ids), 0, 65536,
             "most 'stop_token_ids' in one request (more: 400)"),
      BoolKey("router.allow_priority", LLM_FIELD(router.caps.allow_priority),
              "honour the request field 'priority' (otherwise a non-zero priority gets 400)"),
      ListKey("router.api_keys", LLM_FIELD(router.api_keys),
              "accepted API keys (Authorization: Bearer KEY); with api_key_file and the "
              "LLM_API_KEY environment variable; none = no authentication"),
      StringKey("router.api_key_file", LLM_FIELD(router.api_key_file), {},
                "file with one API key per line ('#' comments); empty = none"),
      StringKey("router.admin_token", LLM_FIELD(router.admin_token), {},
                "token for the /upstreams admin routes (Authorization: Bearer); empty: "
                "LLM_ADMIN_TOKEN, else only clients on this host"),
      BoolKey("router.health_requires_key", LLM_FIELD(router.health_requires_key),
              "/health needs a key too (when keys are set); default: open for load balancers"),
      IntKey("router.max_connections", LLM_FIELD(router.http.max_connections), 1, 1 << 20,
             "open HTTP connections; requests on connections beyond it get 429"),
      IntKey("router.max_inflight_requests", LLM_FIELD(router.http.max_inflight_requests), 1,
             1 << 20,
             "requests in progress over all connections; beyond it 429 (GET /health exempt)"),
      BoolKey("router.special_tokens_in_messages", LLM_FIELD(router.special_tokens_in_messages),
              "special-token text in chat message content becomes control tokens (vLLM's "
              "behaviour); default false: it is tokenized as plain text"),
      StringKey("router.tool_call_parser", LLM_FIELD(router.tool_call_parser),
                {"auto", "none", "hermes", "llama3_json", "mistral", "deepseek_v3"},
                "how tool calls are found in chat output when a request has tools; auto: from "
                "the chat template (<tool_call> hermes, <|python_tag|> llama3_json, "
                "[TOOL_CALLS] mistral, DeepSeek-V3's tool-call tokens deepseek_v3)"),
      StringKey("router.reasoning_parser", LLM_FIELD(router.reasoning_parser),
                {"none", "deepseek_r1", "qwen3"},
                "text inside <think>...</think> goes to reasoning_content (deepseek_r1: the "
                "opening tag may be missing); none: all text is content"),
      IntKey("router.health_check_interval_ms", LLM_FIELD(router.health_check_interval_ms), 50,
             600000,
             "how often each upstream is asked for Admin.Health (unhealthy: no new requests)"),
      StringKey("router.routing", LLM_FIELD(router.routing),
                {"prefix_affinity", "least_loaded", "round_robin"},
                "prefix_affinity: prompts with the same first tokens go to the same coordinator "
                "(its prefix cache), unless it is much busier; least_loaded: the one with the "
                "fewest requests in flight; round_robin: each in turn"),
      IntKey("router.affinity_prefix_tokens", LLM_FIELD(router.affinity_prefix_tokens), 1, 1 << 20,
             "prefix_affinity: how many first prompt tokens pick the coordinator"),
      IntKey("router.affinity_max_imbalance", LLM_FIELD(router.affinity_max_imbalance), 0, 1 << 20,
             "prefix_affinity: requests in flight above the least-loaded coordinator's at which "
             "a request goes to that one instead"),
      IntKey("router.shutdown_grace_s", LLM_FIELD(router.shutdown_grace_s), 0, 86400,
             "on SIGTERM/SIGINT: no new connections or requests (503), those in flight get "
             "this long to finish, then are cancelled (a 2nd signal: now)"),
      IntKey("router.io_timeout_s", LLM_FIELD(router.http.io_timeout_s), 1, 86400,
             "reading one request (an idle keep-alive connection too) and each write; past it "
             "the connection closes and its request is cancelled"),
      IntKey("router.write_queue_bytes", LLM_FIELD(router.http.write_queue_bytes), 1024,
             int64_t{1} << 30,
             "response bytes queued per connection; beyond it the stream waits for the client"),
      IntKey("router.max_header_bytes", LLM_FIELD(router.http.max_header_bytes), 1024,
             int64_t{1} << 24, "request headers larger than this get 431"),
      StringKey("router.tls_cert_file", LLM_FIELD(router.http.tls_cert_file), {},
                "PEM certificate (chain) of the HTTP port; with tls_key_file: HTTPS only"),
      StringKey("router.tls_key_file", LLM_FIELD(router.http.tls_key_file), {},
                "PEM private key of router.tls_cert_file"),
      IntKey("router.io_threads", LLM_FIELD(router.http.io_threads), 0, 1024,
             "HTTP I/O threads, and as many threads for request parsing/templating/"
             "tokenization; 0 = the number of cores, at least 2"),
      StringKey("log.level", LLM_FIELD(log.level),
                {"trace", "debug", "info", "warn", "error", "critical", "off"},
                "least severe log level written to stderr"),
      StringKey("log.format", LLM_FIELD(log.format), {"text", "json"},
                "log lines as text or as one JSON object per line (for log shippers)"),
  };
  return schema;
}
#undef LLM_FIELD

const KeySpec* FindKey(const std::string& name) {
  for (const auto& k : Schema()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

Status ApplyYaml(const YAML::Node& root, const std::string& source, ClusterConfig* c) {
  if (!root || root.IsNull()) return Status::Ok();
  if (!root.IsMap()) return InvalidArgument(source + ": the top level must be a mapping");
  for (const auto& section : root) {
    const std::string sname = section.first.as<std::string>();
    if (!section.second.IsMap()) {
      return InvalidArgument(source + ": '" + sname +
                             "' must be a section (model, engine, coordinator, router, log)");
    }
    for (const auto& entry : section.second) {
      const std::string key = sname + "." + entry.first.as<std::string>();
      const KeySpec* spec = FindKey(key);
      if (spec == nullptr) return InvalidArgument(source + ": unknown config key '" + key + "'");
      std::vector<std::string> values;
      if (entry.second.IsSequence()) {
        if (spec->type != "list") return BadValue(key, "a list", spec->type).WithContext(source);
        for (const auto& v : entry.second) values.push_back(v.as<std::string>());
      } else if (entry.second.IsScalar()) {
        values.push_back(entry.second.as<std::string>());
      } else if (!entry.second.IsNull()) {
        return BadValue(key, "a mapping", spec->type).WithContext(source);
      }
      if (!values.empty() || spec->type == "list") {
        LLM_RETURN_IF_ERROR(spec->set(*c, values).WithContext(source));
      }
    }
  }
  return Status::Ok();
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// The name a model folder is served under: its folder name, or for a Hugging Face cache
// snapshot (.../models--ORG--NAME/snapshots/COMMIT) the repository's name, ORG/NAME; a .gguf
// file's name without the extension.
std::string DefaultModelName(const std::string& path) {
  std::filesystem::path p = std::filesystem::path(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // a trailing '/'
  const std::filesystem::path snapshots = p.parent_path();
  const std::string repo = snapshots.parent_path().filename().string();
  if (snapshots.filename() == "snapshots" && repo.rfind("models--", 0) == 0 && repo.size() > 8) {
    std::string name = repo.substr(8);
    if (const size_t sep = name.find("--"); sep != std::string::npos) name.replace(sep, 2, "/");
    return name;
  }
  // A GGUF file: its name without the extension (llama-q8_0.gguf -> llama-q8_0).
  if (p.extension() == ".gguf") return p.stem().string();
  return p.filename().string();
}

Status Finish(ClusterConfig* c) {
  ModelSection& m = c->model;
  if (m.served_model_name.empty() && !m.path.empty())
    m.served_model_name = DefaultModelName(m.path);
  int& prefill_bound = c->engine.scheduler.max_prefill_tokens_while_decoding;
  if (prefill_bound < 0)
    prefill_bound = c->engine.device == "cuda" ? 0 : kCpuPrefillTokensWhileDecoding;
  const HttpSection& http = c->router.http;
  if (http.tls_cert_file.empty() != http.tls_key_file.empty()) {
    return InvalidArgument(
        std::string(http.tls_key_file.empty() ? "router.tls_key_file" : "router.tls_cert_file") +
        " is not set: router.tls_cert_file and router.tls_key_file go together (both: HTTPS; "
        "neither: plain HTTP)");
  }
  const int dp = c->engine.data_parallel_size;
  const size_t listed = c->coordinator.ports.size();
  if (listed != 0 && listed != static_cast<size_t>(dp)) {
    return InvalidArgument("coordinator.ports lists " + std::to_string(listed) +
                           " port(s) but engine.data_parallel_size is " + std::to_string(dp) +
                           ": give one port per data-parallel group, or none (coordinator.port "
                           "+ g)");
  }
  if (listed == 0 && c->coordinator.port + dp - 1 > 65535) {
    return InvalidArgument("coordinator.port " + std::to_string(c->coordinator.port) + " + " +
                           "engine.data_parallel_size " + std::to_string(dp) +
                           " - 1 is past 65535: data-parallel group g serves on "
                           "coordinator.port + g; lower coordinator.port");
  }
  const size_t stages = c->engine.pipeline_layer_partition.size();
  if (stages != 0 && stages != static_cast<size_t>(c->engine.pipeline_parallel_size)) {
    return InvalidArgument("engine.pipeline_layer_partition lists " + std::to_string(stages) +
                           " stage(s) but engine.pipeline_parallel_size is " +
                           std::to_string(c->engine.pipeline_parallel_size));
  }
  // Default: every data-parallel group's coordinator of the job this config describes.
  if (c->router.upstreams.empty()) c->router.upstreams = CoordinatorAddresses(c->coordinator, dp);
  return Status::Ok();
}

}  // namespace

const std::vector<ConfigKeyInfo>& ClusterConfigKeys() {
  static const std::vector<ConfigKeyInfo> keys = [] {
    const ClusterConfig defaults;
    std::vector<ConfigKeyInfo> out;
    for (const auto& k : Schema())
      out.push_back({k.name, k.type, k.range, k.help, k.get(defaults)});
    return out;
  }();
  return keys;
}

std::string ClusterConfigHelp() {
  std::string out;
  for (const auto& k : ClusterConfigKeys()) {
    // Appends, not `"  --" + k.name + ...`: GCC 12 flags that pattern (-Wrestrict, a false
    // positive inside basic_string::insert).
    out.append("  --").append(k.name).append(" (").append(k.type);
    if (!k.range.empty()) out.append(" ").append(k.range);
    out.append(", default '").append(k.default_value).append("')\n      ");
    out.append(k.help).append("\n");
  }
  return out;
}

StatusOr<ClusterConfig> ParseClusterConfig(
    const std::string& yaml_text, const std::string& source,
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  ClusterConfig c;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": not valid YAML: " + e.what());
  }
  try {
    LLM_RETURN_IF_ERROR(ApplyYaml(root, source, &c));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": " + e.what());
  }
  for (const auto& [key, value] : overrides) {
    const KeySpec* spec = FindKey(key);
    if (spec == nullptr) return InvalidArgument("unknown flag --" + key);
    LLM_RETURN_IF_ERROR(
        spec->set(c, spec->type == "list" ? SplitList(value) : std::vector<std::string>{value}));
  }
  LLM_RETURN_IF_ERROR(Finish(&c));
  return c;
}

std::string ConfigEnvName(const std::string& key) {
  std::string name = "LLM_" + key;
  for (char& ch : name) {
    ch = ch == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  }
  return name;
}

StatusOr<ClusterConfig> LoadClusterConfig(
    const std::string& path, const std::vector<std::pair<std::string, std::string>>& overrides,
    const EnvLookup& env) {
  std::string text;
  if (!path.empty()) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return NotFound("--config: cannot open '" + path + "'");
    // An operator file, but still bounded: a config is a few KiB.
    constexpr size_t kMaxConfigBytes = 1 << 20;
    text.resize(kMaxConfigBytes + 1);
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxConfigBytes) {
      return InvalidArgument("--config: '" + path + "' is larger than 1 MiB");
    }
  }
  // The environment first, then the command line: CLI > env > YAML > default.
  std::vector<std::pair<std::string, std::string>> all;
  if (env) {
    for (const auto& k : Schema()) {
      const std::string name = ConfigEnvName(k.name);
      const char* v = env(name);
      if (v == nullptr) continue;
      ClusterConfig scratch;  // checked alone, so that an error names the variable
      Status s = k.set(scratch, k.type == "list" ? SplitList(v) : std::vector<std::string>{v});
      if (!s.ok()) return InvalidArgument("environment variable " + name + ": " + s.message());
      all.emplace_back(k.name, v);
    }
  }
  all.insert(all.end(), overrides.begin(), overrides.end());
  return ParseClusterConfig(text, path.empty() ? "(defaults)" : path, all);
}

}  // namespace llm
