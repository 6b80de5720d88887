// llm-admin: the coordinator's admin service from the command line; prints the answer as JSON.
//   llm-admin --coordinator host:port (health|drain|resume|stats) [--timeout-s N]
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

#include "common/cli.h"
#include "proto/llm.grpc.pb.h"
#include "proto/llm.pb.h"

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
  const nlohmann::json j = {{"drained", left == 0},
                            {"finished", at_start - left},
                            {"remaining", left},
                            {"waited_s", std::round(waited * 10) / 10}};
  std::printf("%s\n", j.dump(2).c_str());
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
      "The coordinator's admin service from the command line. Prints one JSON object; exits 1\n"
      "when the call fails (the gRPC status on stderr).",
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
