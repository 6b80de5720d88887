#include "common/cluster_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

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

template <typename T>
KeySpec IntKey(const char* name, T ClusterConfig::*member, int64_t min, int64_t max,
               const char* help) {
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
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
            c.*member = static_cast<T>(x);
            return Status::Ok();
          },
          [=](const ClusterConfig& c) { return std::to_string(c.*member); }};
}

KeySpec DoubleKey(const char* name, double ClusterConfig::*member, double min, double max,
                  const char* help) {
  std::ostringstream r;
  r << "[" << min << ", " << max << "]";
  const std::string range = r.str();
  return {name,
          "number",
          range,
          help,
          [=](ClusterConfig& c, const std::vector<std::string>& v) -> Status {
            if (v.size() != 1) return BadValue(name, "a list", "a number");
            char* end = nullptr;
            const double x = std::strtod(v[0].c_str(), &end);
            if (v[0].empty() || *end != '\0' || !(x >= min && x <= max)) {
              return BadValue(name, v[0], "a number in " + range);
            }
            c.*member = x;
            return Status::Ok();
          },
          [=](const ClusterConfig& c) {
            std::ostringstream s;
            s << c.*member;
            return s.str();
          }};
}

KeySpec BoolKey(const char* name, bool ClusterConfig::*member, const char* help) {
  return {name,
          "bool",
          "true|false",
          help,
          [=](ClusterConfig& c, const std::vector<std::string>& v) -> Status {
            if (v.size() != 1) return BadValue(name, "a list", "true or false");
            if (v[0] == "true") {
              c.*member = true;
            } else if (v[0] == "false") {
              c.*member = false;
            } else {
              return BadValue(name, v[0], "true or false");
            }
            return Status::Ok();
          },
          [=](const ClusterConfig& c) { return std::string(c.*member ? "true" : "false"); }};
}

KeySpec LoadFormatKey(const char* name, LoadFormat ClusterConfig::*member, const char* help) {
  return {name,
          "enum",
          "safetensors|dummy",
          help,
          [=](ClusterConfig& c, const std::vector<std::string>& v) -> Status {
            if (v.size() != 1) return BadValue(name, "a list", "safetensors or dummy");
            StatusOr<LoadFormat> f =
                ParseLoadFormat(v[0], std::string("config key '") + name + "'");
            if (!f.ok()) return f.status();
            c.*member = *f;
            return Status::Ok();
          },
          [=](const ClusterConfig& c) { return std::string(LoadFormatName(c.*member)); }};
}

KeySpec StringKey(const char* name, std::string ClusterConfig::*member,
                  std::vector<std::string> allowed, const char* help) {
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
        c.*member = v[0];
        return Status::Ok();
      },
      [=](const ClusterConfig& c) { return c.*member; }};
}

KeySpec ListKey(const char* name, std::vector<std::string> ClusterConfig::*member,
                const char* help) {
  return {name,
          "list",
          "",
          help,
          [=](ClusterConfig& c, const std::vector<std::string>& v) -> Status {
            c.*member = v;
            return Status::Ok();
          },
          [=](const ClusterConfig& c) {
            std::string s;
            for (const auto& x : c.*member) s += (s.empty() ? "" : ",") + x;
            return s;
          }};
}

const std::vector<KeySpec>& Schema() {
  using C = ClusterConfig;
  static const std::vector<KeySpec> schema = {
      StringKey("model.path", &C::model_path, {}, "Hugging Face model folder"),
      StringKey("model.served_model_name", &C::served_model_name, {},
                "name clients use in 'model' (default: the folder name)"),
      LoadFormatKey("model.load_format", &C::load_format,
                    "dummy = seeded random weights, output meaningless"),
      IntKey("model.max_model_len", &C::max_model_len, 0, 1 << 24,
             "context length; 0 = max_position_embeddings"),
      IntKey("engine.tensor_parallel_size", &C::tensor_parallel_size, 1, 1024,
             "ranks the model is split over (the mpirun -np)"),
      IntKey("engine.block_size", &C::block_size, 1, 1 << 16,
             "tokens per KV cache block (at most the backend's limit: cpu 256)"),
      IntKey("engine.kv_cache_mib", &C::kv_cache_mib, 0, 1 << 30,
             "KV cache per rank in MiB; 0 = use kv_cache_memory_fraction"),
      IntKey("engine.kv_cache_blocks", &C::kv_cache_blocks, 0, 1 << 30,
             "KV cache blocks per rank; > 0 wins over kv_cache_mib and the fraction"),
      DoubleKey("engine.kv_cache_memory_fraction", &C::kv_cache_memory_fraction, 0.01, 0.95,
                "fraction of available memory for the KV cache"),
      IntKey("engine.max_num_seqs", &C::max_num_seqs, 1, 65536, "sequences per step"),
      IntKey("engine.max_num_batched_tokens", &C::max_num_batched_tokens, 1, 1 << 20,
             "token budget per step"),
      IntKey("engine.max_prefill_chunk", &C::max_prefill_chunk, 0, 1 << 20,
             "prompt tokens per sequence per step; 0 = the budget"),
      IntKey("engine.threads_per_rank", &C::threads_per_rank, 0, 4096,
             "compute threads per rank; 0 = cores / local ranks"),
      StringKey("engine.matmul_isa", &C::matmul_isa, {"auto", "avx512", "avx2-fma", "scalar"},
                "SIMD path of the CPU matmul; auto = the best this CPU has (or LLM_MATMUL_ISA)"),
      IntKey("engine.seed", &C::seed, 0, INT64_MAX, "seed for requests without one"),
      IntKey("engine.rank_timeout_s", &C::rank_timeout_s, 1, 86400,
             "a collective some rank does not complete within this ends the whole job"),
      IntKey("engine.heartbeat_timeout_s", &C::heartbeat_timeout_s, 1, 3600,
             "health reports not serving once a rank has not answered for this long"),
      IntKey("engine.max_waiting_requests", &C::max_waiting_requests, 0, 1 << 24,
             "requests waiting to be scheduled; more are refused (router: 429); 0 = no bound"),
      IntKey("engine.queue_timeout_s", &C::queue_timeout_s, 0, 86400,
             "a request still waiting after this long fails (router: 429); 0 = never"),
      StringKey("coordinator.host", &C::coordinator_host, {}, "gRPC bind address of rank 0"),
      IntKey("coordinator.port", &C::coordinator_port, 1, 65535, "gRPC port of rank 0"),
      StringKey("coordinator.admin_token", &C::admin_token, {},
                "token Drain/Resume need (Bearer); empty: LLM_ADMIN_TOKEN, else loopback only"),
      StringKey("coordinator.tls_cert_file", &C::tls_cert_file, {},
                "PEM certificate (chain) of the gRPC port; with tls_key_file: TLS only"),
      StringKey("coordinator.tls_key_file", &C::tls_key_file, {},
                "PEM private key of tls_cert_file"),
      IntKey("coordinator.shutdown_grace_s", &C::shutdown_grace_s, 0, 86400,
             "on SIGTERM/SIGINT running requests get this long to finish (a 2nd signal: now)"),
      StringKey("router.host", &C::router_host, {},
                "HTTP bind address; empty = 0.0.0.0 when an API key is set, else 127.0.0.1"),
      IntKey("router.port", &C::router_port, 1, 65535, "HTTP port"),
      ListKey("router.upstreams", &C::upstreams,
              "coordinator host:port list; default: coordinator.host:port"),
      StringKey("router.upstream_tls_ca_file", &C::upstream_tls_ca_file, {},
                "PEM roots: connect to the coordinators with TLS (coordinator.tls_cert_file)"),
      StringKey("router.tls_cert_file", &C::router_tls_cert_file, {},
                "PEM certificate (chain) of the HTTP port; with tls_key_file: HTTPS only"),
      StringKey("router.tls_key_file", &C::router_tls_key_file, {},
                "PEM private key of router.tls_cert_file"),
      IntKey("router.max_body_bytes", &C::max_body_bytes, 1024, int64_t{1} << 30,
             "larger request bodies get 413"),
      IntKey("router.max_n", &C::max_n, 1, 1024, "largest n a request may ask for"),
      IntKey("router.request_timeout_s", &C::request_timeout_s, 1, 86400,
             "a request running longer is aborted"),
      IntKey("router.max_prompts", &C::max_prompts, 1, 65536,
             "most prompts in one completions request (more: 400)"),
      IntKey("router.max_choices", &C::max_choices, 1, 65536,
             "most choices (prompts x n) in one request, each an upstream call (more: 400)"),
      IntKey("router.max_stop_strings", &C::max_stop_strings, 0, 4096,
             "most 'stop' strings in one request (more: 400)"),
      IntKey("router.max_stop_bytes", &C::max_stop_bytes, 1, 1 << 20,
             "most bytes of 'stop' strings in one request, all together (more: 400)"),
      IntKey("router.max_stop_token_ids", &C::max_stop_token_ids, 0, 65536,
             "most 'stop_token_ids' in one request (more: 400)"),
      BoolKey("router.allow_priority", &C::allow_priority,
              "honour the request field 'priority' (otherwise a non-zero priority gets 400)"),
      ListKey("router.api_keys", &C::api_keys,
              "accepted API keys (Authorization: Bearer KEY); with api_key_file and the "
              "LLM_API_KEY environment variable; none = no authentication"),
      StringKey("router.api_key_file", &C::api_key_file, {},
                "file with one API key per line ('#' comments); empty = none"),
      BoolKey("router.health_requires_key", &C::health_requires_key,
              "/health needs a key too (when keys are set); default: open for load balancers"),
      IntKey("router.max_connections", &C::max_connections, 1, 1 << 20,
             "open HTTP connections; requests on connections beyond it get 429"),
      IntKey("router.max_inflight_requests", &C::max_inflight_requests, 1, 1 << 20,
             "requests in progress over all connections; beyond it 429 (GET /health exempt)"),
      BoolKey("router.special_tokens_in_messages", &C::special_tokens_in_messages,
              "special-token text in chat message content becomes control tokens (vLLM's "
              "behaviour); default false: it is tokenized as plain text"),
      IntKey("router.health_check_interval_ms", &C::health_check_interval_ms, 50, 600000,
             "how often each upstream is asked for Admin.Health (unhealthy: no new requests)"),
      IntKey("router.shutdown_grace_s", &C::router_shutdown_grace_s, 0, 86400,
             "on SIGTERM/SIGINT: no new connections or requests (503), those in flight get "
             "this long to finish, then are cancelled (a 2nd signal: now)"),
      IntKey("router.io_timeout_s", &C::io_timeout_s, 1, 86400,
             "reading one request (an idle keep-alive connection too) and each write; past it "
             "the connection closes and its request is cancelled"),
      IntKey("router.write_queue_bytes", &C::write_queue_bytes, 1024, int64_t{1} << 30,
             "response bytes queued per connection; beyond it the stream waits for the client"),
      IntKey("router.max_header_bytes", &C::max_header_bytes, 1024, int64_t{1} << 24,
             "request headers larger than this get 431"),
      IntKey("router.io_threads", &C::io_threads, 0, 1024,
             "HTTP I/O threads, and as many threads for request parsing/templating/"
             "tokenization; 0 = the number of cores, at least 2"),
  };
  return schema;
}

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
                             "' must be a section (model, engine, coordinator, router)");
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

Status Finish(ClusterConfig* c) {
  if (c->served_model_name.empty() && !c->model_path.empty()) {
    c->served_model_name = std::filesystem::path(c->model_path).lexically_normal().filename();
    if (c->served_model_name.empty()) {
      c->served_model_name =
          std::filesystem::path(c->model_path).lexically_normal().parent_path().filename();
    }
  }
  if (c->router_tls_cert_file.empty() != c->router_tls_key_file.empty()) {
    return InvalidArgument(
        std::string(c->router_tls_key_file.empty() ? "router.tls_key_file"
                                                   : "router.tls_cert_file") +
        " is not set: router.tls_cert_file and router.tls_key_file go together (both: HTTPS; "
        "neither: plain HTTP)");
  }
  if (c->upstreams.empty()) {
    c->upstreams.push_back(c->coordinator_host + ":" + std::to_string(c->coordinator_port));
  }
  return Status::Ok();
}

}  // namespace

std::string ClusterConfigHelp() {
  ClusterConfig defaults;
  std::string out;
  for (const auto& k : Schema()) {
    out += "  --" + k.name + " (" + k.type + (k.range.empty() ? "" : " " + k.range) +
           ", default '" + k.get(defaults) + "')\n      " + k.help + "\n";
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

StatusOr<ClusterConfig> LoadClusterConfig(int argc, char** argv) {
  std::string path;
  std::vector<std::pair<std::string, std::string>> overrides;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) return InvalidArgument("unexpected argument '" + arg + "'");
    std::string key = arg.substr(2), value;
    const size_t eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return InvalidArgument("flag --" + key + " needs a value");
    }
    if (key == "config") {
      path = value;
    } else {
      overrides.emplace_back(key, value);
    }
  }
  std::string text;
  if (!path.empty()) {
    std::ifstream in(path);
    if (!in) return NotFound("--config: cannot open '" + path + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  return ParseClusterConfig(text, path.empty() ? "(defaults)" : path, overrides);
}

}  // namespace llm
