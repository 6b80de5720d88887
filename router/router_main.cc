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

#include "common/cluster_config.h"
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
  std::fprintf(stderr,
               "router: %s: draining (no new connections or requests); %d connection(s) busy get "
               "up to %d s (router.shutdown_grace_s); a second signal stops now\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", server.busy_connections(), grace_s);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_s);
  const timespec poll{0, 50 * 1000 * 1000};
  while (server.busy_connections() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::fprintf(stderr, "router: %d connection(s) still busy after %d s: cancelling them\n",
                   server.busy_connections(), grace_s);
      return true;
    }
    if (sigtimedwait(&signals, nullptr, &poll) > 0) {
      std::fprintf(stderr, "router: second signal: cancelling %d busy connection(s) now\n",
                   server.busy_connections());
      return false;
    }
  }
  std::fprintf(stderr, "router: drained\n");
  return true;
}

int Run(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::printf("usage: router --config cluster.yaml [--section.key value ...]\n%s",
                  llm::ClusterConfigHelp().c_str());
      return 0;
    }
  }
  auto config = llm::LoadClusterConfig(argc, argv);
  if (!config.ok()) {
    std::fprintf(stderr, "router: %s\n", config.status().ToString().c_str());
    return 2;
  }
  if (config->model_path.empty()) {
    std::fprintf(stderr, "router: model.path is required (the tokenizer is loaded from it)\n");
    return 2;
  }
  auto tokenizer = llm::Tokenizer::FromDir(config->model_path);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "router: %s\n", tokenizer.status().ToString().c_str());
    return 2;
  }
  std::shared_ptr<const llm::Tokenizer> shared_tokenizer(std::move(tokenizer).value());
  auto keys = llm::router::ApiKeys::Load(config->api_keys, config->api_key_file,
                                         std::getenv("LLM_API_KEY"));
  if (!keys.ok()) {
    std::fprintf(stderr, "router: %s\n", keys.status().ToString().c_str());
    return 2;
  }

  // Block the signals in every thread; this one waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::string upstream_ca;
  if (!config->upstream_tls_ca_file.empty()) {
    std::ifstream ca(config->upstream_tls_ca_file, std::ios::binary);
    if (ca.is_open()) {
      upstream_ca.assign(std::istreambuf_iterator<char>(ca), std::istreambuf_iterator<char>());
    }
    if (upstream_ca.empty()) {
      std::fprintf(stderr, "router: router.upstream_tls_ca_file: cannot read '%s'\n",
                   config->upstream_tls_ca_file.c_str());
      return 2;
    }
  }
  llm::router::UpstreamPool pool(
      config->upstreams, std::chrono::milliseconds(config->health_check_interval_ms), upstream_ca);
  pool.Start(std::chrono::milliseconds(2000));
  llm::router::ServiceOptions service_options;
  llm::router::RequestLimits& limits = service_options.limits;
  limits.served_model_name = config->served_model_name;
  limits.max_n = config->max_n;
  limits.max_prompts = config->max_prompts;
  limits.max_choices = config->max_choices;
  limits.max_stop_strings = config->max_stop_strings;
  limits.max_stop_bytes = config->max_stop_bytes;
  limits.max_stop_token_ids = config->max_stop_token_ids;
  limits.allow_priority = config->allow_priority;
  service_options.request_timeout = std::chrono::seconds(config->request_timeout_s);
  service_options.api_keys = *keys;
  service_options.health_requires_key = config->health_requires_key;
  service_options.special_tokens_in_messages = config->special_tokens_in_messages;
  llm::router::OpenAiService service(service_options, shared_tokenizer, pool);
  if (!service.chat_template_problem().empty()) {
    std::fprintf(stderr, "router: chat completions disabled: %s\n",
                 service.chat_template_problem().c_str());
  }

  llm::router::HttpServerOptions http;
  http.host = llm::router::BindHost(config->router_host, *keys);
  if (!keys->enabled() && config->router_host.empty()) {
    std::fprintf(stderr,
                 "router: no API key is set, so the API listens on 127.0.0.1 only; to serve other "
                 "hosts set a key (router.api_keys, router.api_key_file or LLM_API_KEY) or "
                 "router.host: 0.0.0.0\n");
  } else if (!keys->enabled() && http.host != "127.0.0.1" && http.host != "localhost" &&
             http.host != "::1") {
    std::fprintf(stderr,
                 "router: WARNING: listening on %s without an API key: anyone who reaches this "
                 "port can use the API\n",
                 http.host.c_str());
  }
  http.port = config->router_port;
  http.max_body_bytes = config->max_body_bytes;
  http.max_connections = config->max_connections;
  http.max_inflight_requests = config->max_inflight_requests;
  http.io_timeout_s = config->io_timeout_s;
  http.write_queue_bytes = static_cast<size_t>(config->write_queue_bytes);
  http.max_header_bytes = static_cast<uint32_t>(config->max_header_bytes);
  // Several I/O threads even on one core: a connection whose strand is busy (stop strings of a
  // big stream) must not hold up accept() and /health.
  http.io_threads = config->io_threads > 0
                        ? config->io_threads
                        : static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  http.work_threads = http.io_threads;
  http.tls_cert_file = config->router_tls_cert_file;
  http.tls_key_file = config->router_tls_key_file;
  llm::router::HttpServer server(http, service);
  if (auto s = server.Start(); !s.ok()) {
    std::fprintf(stderr, "router: %s\n", s.ToString().c_str());
    return 1;
  }
  std::string upstreams;
  for (const auto& u : config->upstreams) upstreams += (upstreams.empty() ? "" : ", ") + u;
  std::fprintf(
      stderr, "router: serving model '%s' on %s://%s:%d (upstreams: %s; %s; %s)\n",
      config->served_model_name.c_str(), http.tls_cert_file.empty() ? "http" : "https",
      http.host.c_str(), server.port(), upstreams.c_str(),
      pool.AnyHealthy() ? "healthy" : "none healthy yet",
      keys->enabled() ? (std::to_string(keys->size()) + " API key(s)").c_str() : "no API key");

  int sig = 0;
  sigwait(&signals, &sig);
  const bool now = !DrainUntilIdle(server, signals, sig, config->router_shutdown_grace_s);
  server.StopAccepting();  // cancels what is still in flight
  const auto upstream_wait = std::chrono::seconds(now ? 1 : 5);
  if (!pool.WaitIdle(upstream_wait)) {
    std::fprintf(stderr, "router: %d upstream calls still open after cancelling\n",
                 pool.Outstanding());
  }
  server.Stop();
  pool.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return Run(argc, argv);
}
