// llm-admin: the coordinator's admin service from the command line; prints the answer as
// aligned "key: value" lines (stats adds a table of the ranks), or as JSON with --json (the
// proto's field names: the form for scripts).
//   llm-admin --coordinator host:port (health|drain|resume|stats) [--json] [--timeout-s N]
//             [--admin-token T]    (default: the LLM_ADMIN_TOKEN environment variable)
//             [--tls-ca FILE]      (the coordinator speaks TLS; FILE: PEM roots to trust)
// Bad arguments exit 2 (llm::kUsageExitCode) with CLI11's message naming the flag.
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/cli.h"
#include "proto/llm.grpc.pb.h"
#include "proto/llm.pb.h"
#include "tools/admin_text.h"

namespace {

namespace pb = llm::v1;

struct Options {
  std::string coordinator = "127.0.0.1:50051";
  std::string command;
  int timeout_s = 10;
  std::string admin_token;
  std::string tls_ca;  // PEM file: connect with TLS, trusting these roots
  bool wait = false;   // drain: until nothing runs or waits
  int wait_timeout_s = 600;
  bool json = false;  // JSON instead of text
};

void AddFlags(CLI::App& app, Options* o) {
  app.add_option("command", o->command,
                 "health: serving state, served model, max_model_len, vocab size\n"
                 "drain: stop admitting new requests; running ones finish\n"
                 "resume: admit new requests again\n"
                 "stats: running/waiting sequences, KV blocks total/free, tokens served, "
                 "preemptions")
      ->required()
      ->check(CLI::IsMember({"health", "drain", "resume", "stats"}));
  app.add_option("--coordinator", o->coordinator, "gRPC address host:port")->capture_default_str();
  app.add_option("--timeout-s", o->timeout_s, "deadline of the call")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--admin-token", o->admin_token,
                 "sent by drain and resume (default: the LLM_ADMIN_TOKEN environment variable)");
  app.add_option("--tls-ca", o->tls_ca, "the coordinator speaks TLS; PEM roots to trust")
      ->check(CLI::ExistingFile);
  app.add_flag("--wait", o->wait,
               "drain: return once no request runs or waits (prints how many finished); exit 1 "
               "if some are left after --wait-timeout-s");
  app.add_option("--wait-timeout-s", o->wait_timeout_s, "drain --wait: the longest wait")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_flag("--json", o->json,
               "print one JSON object with the proto's field names (for scripts) instead of text");
}

const char* YesNo(bool b) {
  return b ? "yes" : "no";
}

void PrintFields(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::fputs(llm::admin::FormatFields(fields).c_str(), stdout);
}

void PrintText(const pb::HealthResponse& h) {
  std::vector<std::pair<std::string, std::string>> f = {
      {"serving", YesNo(h.serving())},
      {"model", h.model()},
      {"max model len", std::to_string(h.max_model_len())},
      {"vocab size", std::to_string(h.vocab_size())},
      {"ranks unresponsive", YesNo(h.ranks_unresponsive())},
  };
  if (!h.detail().empty()) f.emplace_back("detail", h.detail());
  PrintFields(f);
}

void PrintText(const pb::StatsResponse& s) {
  const int used = s.kv_blocks_total() - s.kv_blocks_free();
  const auto n = [](int64_t v) { return std::to_string(v); };
  std::vector<std::pair<std::string, std::string>> fields = {
      {"model", s.model()},
      {"uptime", llm::admin::Duration(s.uptime_s())},
      {"draining", YesNo(s.draining())},
      {"ranks", n(s.world_size())},
  };
  const bool data_parallel = s.data_parallel_size() > 1;
  if (data_parallel) {  // one of several engines of an mpirun job
    fields.emplace_back("data-parallel group",
                        n(s.data_parallel_rank()) + " of " + n(s.data_parallel_size()));
  }
  fields.insert(
      fields.end(),
      {
          {"running sequences", n(s.running_sequences())},
          {"waiting sequences", n(s.waiting_sequences())},
          {"KV cache", n(used) + " / " + n(s.kv_blocks_total()) + " blocks used (" +
                           llm::admin::Percent(used, s.kv_blocks_total()) + "), " +
                           n(s.kv_block_size()) + " tokens per block" +
                           (s.kv_cache_dtype().empty() ? "" : ", " + s.kv_cache_dtype())},
          {"requests", n(s.requests_total())},
          {"aborted", n(s.aborted_total())},
          {"refused (queue full)", n(s.rejected_queue_full_total())},
          {"queue timeouts", n(s.queue_timeouts_total())},
          {"prompt tokens", n(s.prompt_tokens_total())},
          {"prefill tokens computed", n(s.prefill_tokens_computed_total())},
          {"generated tokens", n(s.generated_tokens_total())},
          {"preemptions", n(s.preemptions_total())},
          {"prefix cache hits",
           n(s.prefix_cache_hit_tokens_total()) + " of " +
               n(s.prefix_cache_queried_tokens_total()) + " tokens (" +
               llm::admin::Percent(static_cast<double>(s.prefix_cache_hit_tokens_total()),
                                   static_cast<double>(s.prefix_cache_queried_tokens_total())) +
               ")"},
      });
  PrintFields(fields);
  if (s.ranks_size() == 0) return;
  std::vector<std::vector<std::string>> rows = {{"rank", "host", "status", "last seen"}};
  if (data_parallel) rows[0].insert(rows[0].begin() + 1, "world rank");
  for (const pb::RankStatus& r : s.ranks()) {
    rows.push_back({n(r.rank()), r.host().empty() ? "-" : r.host(), r.status(),
                    r.has_last_seen_s() ? llm::admin::Duration(r.last_seen_s()) + " ago" : "-"});
    if (data_parallel) rows.back().insert(rows.back().begin() + 1, n(r.world_rank()));
  }
  std::printf("\n%s", llm::admin::FormatTable(rows).c_str());
}

bool IsInteger(const std::string& s) {
  const size_t start = !s.empty() && s[0] == '-' ? 1 : 0;
  if (s.size() <= start || s.size() > 19) return false;
  for (size_t i = start; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

int Print(const grpc::Status& status, const google::protobuf::Message& reply, const Options& o) {
  if (!status.ok()) {
    std::fprintf(stderr, "llm-admin: %s %s: gRPC status %d: %s\n", o.command.c_str(),
                 o.coordinator.c_str(), static_cast<int>(status.error_code()),
                 status.error_message().c_str());
    return 1;
  }
  if (!o.json) {
    if (const auto* h = dynamic_cast<const pb::HealthResponse*>(&reply)) {
      PrintText(*h);
    } else if (const auto* s = dynamic_cast<const pb::StatsResponse*>(&reply)) {
      PrintText(*s);
    } else if (o.command == "drain") {
      std::printf("draining: new requests are refused, running ones finish\n");
    } else {
      std::printf("resumed: new requests are admitted\n");
    }
    return 0;
  }
  google::protobuf::util::JsonPrintOptions opts;
  opts.always_print_primitive_fields = true;
  opts.preserve_proto_field_names = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(reply, &json, opts).ok()) return 1;
  // Proto3 JSON writes 64-bit integers as strings; these replies hold only counters, so print
  // them as numbers.
  nlohmann::json j = nlohmann::json::parse(json);
  for (auto& [key, value] : j.items()) {
    if (key != "model" && value.is_string() && IsInteger(value.get<std::string>())) {
      value = std::stoll(value.get<std::string>());
    }
  }
  std::printf("%s\n", j.dump(2).c_str());
  return 0;
}

// After Drain: polls Stats until no sequence runs or waits; prints how many finished meanwhile.
int WaitDrained(pb::Admin::Stub& stub, const Options& o) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::seconds(o.wait_timeout_s);
  int64_t at_start = -1, left = -1;
  for (;;) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(o.timeout_s));
    pb::StatsResponse s;
    const grpc::Status st = stub.Stats(&ctx, pb::StatsRequest(), &s);
    if (!st.ok()) return Print(st, s, o);
    left = int64_t{s.running_sequences()} + s.waiting_sequences();
    if (at_start < 0) at_start = left;
    if (left == 0 || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (o.json) {
    const nlohmann::json j = {{"drained", left == 0},
                              {"finished", at_start - left},
                              {"remaining", left},
                              {"waited_s", std::round(waited * 10) / 10}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.1f s", waited);
    PrintFields({{"drained", YesNo(left == 0)},
                 {"finished", std::to_string(at_start - left)},
                 {"remaining", std::to_string(left)},
                 {"waited", secs}});
  }
  if (left != 0) {
    std::fprintf(stderr, "llm-admin: %lld request(s) still running after %d s\n",
                 static_cast<long long>(left), o.wait_timeout_s);
  }
  return left == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app(
      "The coordinator's admin service from the command line. Prints aligned 'key: value'\n"
      "lines (stats adds a table of the ranks), or one JSON object with --json; exits 1 when\n"
      "the call fails (the gRPC status on stderr).",
      "llm-admin");
  AddFlags(app, &o);
  if (auto rc = llm::ParseCommandLine(app, argc, argv)) return *rc;
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!o.tls_ca.empty()) {
    std::ifstream in(o.tls_ca, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "llm-admin: --tls-ca: cannot read '%s'\n", o.tls_ca.c_str());
      return 2;
    }
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    credentials = grpc::SslCredentials(tls);
  }
  auto channel = grpc::CreateChannel(o.coordinator, credentials);
  auto stub = pb::Admin::NewStub(channel);
  if (o.admin_token.empty()) {
    if (const char* env = std::getenv("LLM_ADMIN_TOKEN")) o.admin_token = env;
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(o.timeout_s));
  if (!o.admin_token.empty()) ctx.AddMetadata("authorization", "Bearer " + o.admin_token);
  if (o.command == "health") {
    pb::HealthResponse r;
    return Print(stub->Health(&ctx, pb::HealthRequest(), &r), r, o);
  }
  if (o.command == "drain") {
    pb::DrainResponse r;
    const grpc::Status st = stub->Drain(&ctx, pb::DrainRequest(), &r);
    if (!o.wait || !st.ok()) return Print(st, r, o);
    return WaitDrained(*stub, o);
  }
  if (o.command == "resume") {
    pb::ResumeResponse r;
    return Print(stub->Resume(&ctx, pb::ResumeRequest(), &r), r, o);
  }
  pb::StatsResponse r;
  return Print(stub->Stats(&ctx, pb::StatsRequest(), &r), r, o);
}
