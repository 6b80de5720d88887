// router --config cluster.yaml [--section.key value]: the OpenAI-compatible HTTP front end.
// SIGINT/SIGTERM drains: no new connections, 503 for new requests on open ones, requests in
// flight (streams too) get router.shutdown_grace_s to finish; then what remains is cancelled
// (the coordinator frees its blocks) and the router exits 0. A second signal cancels at once.
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/cli.h"
#include "common/log.h"
#include "common/systemd_notify.h"
#include "common/tokenizer.h"
#include "router/api_keys.h"
#include "router/http_server.h"
#include "router/openai_service.h"
#include "router/upstream_pool.h"

namespace {

// The drain after the first signal: new connections are refused and new requests get 503 while
// those in flight finish, for up to `grace_s`. False when a second signal cut it short.
bool DrainUntilIdle(llm::router::HttpServer& server, const sigset_t& signals, int sig,
                    int grace_s) {
  server.BeginDrain();
  spdlog::info(
      "{}: draining (no new connections or requests); {} connection(s) busy get up to {} s "
      "(router.shutdown_grace_s); a second signal stops now",
      sig == SIGINT ? "SIGINT" : "SIGTERM", server.busy_connections(), grace_s);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_s);
  const timespec poll{0, 50 * 1000 * 1000};
  while (server.busy_connections() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      spdlog::warn("{} connection(s) still busy after {} s: cancelling them",
                   server.busy_connections(), grace_s);
      return true;
    }
    if (sigtimedwait(&signals, nullptr, &poll) > 0) {
      spdlog::warn("second signal: cancelling {} busy connection(s) now",
                   server.busy_connections());
      return false;
    }
  }
  spdlog::info("drained");
  return true;
}

// model.chat_template: a file (at most 1 MiB), or the template itself when it holds a '{' (as
// vLLM's --chat-template); "" stays "" (the tokenizer's template).
llm::StatusOr<std::string> ReadChatTemplate(const std::string& value) {
  if (value.empty() || value.find('{') != std::string::npos) return value;
  std::ifstream in(value, std::ios::binary);
  if (!in) return llm::NotFound("model.chat_template: cannot read '" + value + "'");
  std::string text(1 << 20, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.gcount() == (1 << 20) && in.peek() != EOF) {
    return llm::InvalidArgument("model.chat_template: '" + value + "' is larger than 1 MiB");
  }
  return text;
}

int Run(int argc, char** argv) {
  llm::InitLogging("router");
  CLI::App app(
      "The OpenAI-compatible HTTP front end of the cluster.\n"
      "  router --config cluster.yaml [--section.key value ...]\n"
      "Every config key can be given as a flag; flags override the file.",
      "router");
  llm::ClusterFlags flags(app);
  if (auto rc = llm::ParseCommandLine(app, argc, argv)) return *rc;
  auto config = flags.Load();
  if (!config.ok()) {
    spdlog::error("{}", config.status().ToString());
    return 2;
  }
  if (auto s = llm::ConfigureLogging(config->log); !s.ok()) {
    spdlog::error("{}", s.ToString());
    return 2;
  }
  if (config->model.path.empty()) {
    spdlog::error("model.path is required (the tokenizer is loaded from it)");
    return 2;
  }
  auto tokenizer = llm::Tokenizer::FromDir(config->model.path);
  if (!tokenizer.ok()) {
    spdlog::error("{}", tokenizer.status().ToString());
    return 2;
  }
  std::shared_ptr<const llm::Tokenizer> shared_tokenizer(std::move(tokenizer).value());
  auto keys = llm::router::ApiKeys::Load(config->router.api_keys, config->router.api_key_file,
                                         std::getenv("LLM_API_KEY"));
  if (!keys.ok()) {
    spdlog::error("{}", keys.status().ToString());
    return 2;
  }

  // Block the signals in every thread; this one waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::string upstream_ca;
  if (!config->router.upstream_tls_ca_file.empty()) {
    std::ifstream ca(config->router.upstream_tls_ca_file, std::ios::binary);
    if (ca.is_open()) {
      upstream_ca.assign(std::istreambuf_iterator<char>(ca), std::istreambuf_iterator<char>());
    }
    if (upstream_ca.empty()) {
      spdlog::error("router.upstream_tls_ca_file: cannot read '{}'",
                    config->router.upstream_tls_ca_file);
      return 2;
    }
  }
  llm::router::UpstreamPool pool(config->router.upstreams,
                                 std::chrono::milliseconds(config->router.health_check_interval_ms),
                                 upstream_ca);
  using Mode = llm::router::RoutingPolicy::Mode;
  const std::string& routing = config->router.routing;
  pool.SetRouting({routing == "round_robin"    ? Mode::kRoundRobin
                   : routing == "least_loaded" ? Mode::kLeastLoaded
                                               : Mode::kPrefixAffinity,
                   config->router.affinity_prefix_tokens, config->router.affinity_max_imbalance});
  pool.Start(std::chrono::milliseconds(2000));
  llm::router::ServiceOptions service_options;
  llm::router::RequestLimits& limits = service_options.limits;
  static_cast<llm::RequestCaps&>(limits) = config->router.caps;
  limits.served_model_name = config->model.served_model_name;
  if (auto d = llm::router::SamplingDefaultsFromModel(config->model.path); !d.ok()) {
    spdlog::error("{}", d.status().ToString());
    return 2;
  } else {
    limits.default_sampling = *d;
    const llm::SamplingParams& p = *d;
    const llm::SamplingParams none;
    if (p.temperature != none.temperature || p.top_p != none.top_p || p.top_k != none.top_k ||
        p.min_p != none.min_p || p.repetition_penalty != none.repetition_penalty) {
      spdlog::info(
          "sampling defaults from the model's generation_config.json (for requests that do not set "
          "them): temperature {}, top_p {}, top_k {}, min_p {}, repetition_penalty {}",
          p.temperature, p.top_p, p.top_k, p.min_p, p.repetition_penalty);
    }
  }
  service_options.request_timeout = std::chrono::seconds(config->router.request_timeout_s);
  service_options.api_keys = *keys;
  service_options.health_requires_key = config->router.health_requires_key;
  service_options.admin_token = config->router.admin_token;
  if (service_options.admin_token.empty()) {
    if (const char* env = std::getenv("LLM_ADMIN_TOKEN")) service_options.admin_token = env;
  }
  service_options.special_tokens_in_messages = config->router.special_tokens_in_messages;
  service_options.tool_call_parser = config->router.tool_call_parser;
  service_options.reasoning_parser = config->router.reasoning_parser;
  if (auto t = ReadChatTemplate(config->model.chat_template); !t.ok()) {
    spdlog::error("{}", t.status().ToString());
    return 2;
  } else {
    service_options.chat_template = std::move(t).value();
  }
  llm::router::OpenAiService service(service_options, shared_tokenizer, pool);
  if (!service.chat_template_problem().empty()) {
    spdlog::warn("chat completions disabled: {}", service.chat_template_problem());
  }

  llm::router::HttpServerOptions http;
  static_cast<llm::HttpSection&>(http) = config->router.http;  // the section as configured
  http.host = llm::router::BindHost(config->router.http.host, *keys);
  if (!keys->enabled() && config->router.http.host.empty()) {
    spdlog::info(
        "no API key is set, so the API listens on 127.0.0.1 only; to serve other hosts set a key "
        "(router.api_keys, router.api_key_file or LLM_API_KEY) or router.host: 0.0.0.0");
  } else if (!keys->enabled() && http.host != "127.0.0.1" && http.host != "localhost" &&
             http.host != "::1") {
    spdlog::warn("listening on {} without an API key: anyone who reaches this port can use the API",
                 http.host);
  }
  llm::router::HttpServer server(http, service);
  service.SetServerGauges([&server] {
    return std::pair<int, int>{server.open_connections(), server.busy_connections()};
  });
  if (auto s = server.Start(); !s.ok()) {
    spdlog::error("{}", s.ToString());
    return 1;
  }
  std::string upstreams;
  for (const auto& u : config->router.upstreams) upstreams += (upstreams.empty() ? "" : ", ") + u;
  spdlog::info("serving model '{}' on {}://{}:{} (upstreams: {}; {}; {})",
               config->model.served_model_name, http.tls_cert_file.empty() ? "http" : "https",
               http.host, server.port(), upstreams,
               pool.AnyHealthy() ? "healthy" : "none healthy yet",
               keys->enabled() ? (std::to_string(keys->size()) + " API key(s)") : "no API key");
  llm::NotifySystemd("READY=1");  // Type=notify units (deploy/systemd/llm-router.service)

  int sig = 0;
  sigwait(&signals, &sig);
  llm::NotifySystemd("STOPPING=1");
  const bool now = !DrainUntilIdle(server, signals, sig, config->router.shutdown_grace_s);
  server.StopAccepting();  // cancels what is still in flight
  const auto upstream_wait = std::chrono::seconds(now ? 1 : 5);
  if (!pool.WaitIdle(upstream_wait)) {
    spdlog::warn("{} upstream calls still open after cancelling", pool.Outstanding());
  }
  server.Stop();
  pool.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return Run(argc, argv);
}
