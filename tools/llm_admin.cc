// llm-admin: the coordinator's admin service from the command line; prints the answer as JSON.
//   llm-admin --coordinator host:port (health|drain|resume|stats) [--timeout-s N]
//             [--admin-token T]    (default: the LLM_ADMIN_TOKEN environment variable)
//             [--tls-ca FILE]      (the coordinator speaks TLS; FILE: PEM roots to trust)
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "proto/llm.grpc.pb.h"
#include "proto/llm.pb.h"

namespace {

namespace pb = llm::v1;

constexpr const char* kUsage =
    "usage: llm-admin --coordinator host:port [--timeout-s N] [--admin-token T] "
    "[--tls-ca FILE] COMMAND\n"
    "  health   serving state, served model, max_model_len, vocab size\n"
    "  drain    stop admitting new requests; running ones finish\n"
    "  resume   admit new requests again\n"
    "  stats    running/waiting sequences, KV blocks total/free, tokens served, preemptions\n"
    "drain and resume send the admin token (--admin-token, else LLM_ADMIN_TOKEN) when set.\n"
    "Prints one JSON object; exits 1 when the call fails (the gRPC status on stderr).\n";

struct Options {
  std::string coordinator = "127.0.0.1:50051";
  std::string command;
  int timeout_s = 10;
  std::string admin_token;
  std::string tls_ca;  // PEM file: connect with TLS, trusting these roots
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if ((a == "--coordinator" || a == "--timeout-s" || a == "--admin-token" ||
                a == "--tls-ca") &&
               i + 1 < argc) {
      const std::string v = argv[++i];
      if (a == "--coordinator") {
        o->coordinator = v;
      } else if (a == "--tls-ca") {
        o->tls_ca = v;
      } else if (a == "--admin-token") {
        o->admin_token = v;
      } else {
        o->timeout_s = std::atoi(v.c_str());
        if (o->timeout_s <= 0) {
          std::fprintf(stderr, "llm-admin: --timeout-s must be a positive integer, got '%s'\n",
                       v.c_str());
          return false;
        }
      }
    } else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "llm-admin: unknown flag or missing value: %s\n", a.c_str());
      return false;
    } else if (o->command.empty()) {
      o->command = a;
    } else {
      std::fprintf(stderr, "llm-admin: unexpected argument '%s'\n", a.c_str());
      return false;
    }
  }
  if (o->command != "health" && o->command != "drain" && o->command != "resume" &&
      o->command != "stats") {
    std::fprintf(stderr, "llm-admin: COMMAND must be health, drain, resume or stats%s%s\n",
                 o->command.empty() ? "" : ", got ", o->command.c_str());
    return false;
  }
  return true;
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

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
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
    return Print(stub->Drain(&ctx, pb::DrainRequest(), &r), r, o);
  }
  if (o.command == "resume") {
    pb::ResumeResponse r;
    return Print(stub->Resume(&ctx, pb::ResumeRequest(), &r), r, o);
  }
  pb::StatsResponse r;
  return Print(stub->Stats(&ctx, pb::StatsRequest(), &r), r, o);
}
