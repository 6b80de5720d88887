#include "worker/coordinator/coordinator_service.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/json_schema_grammar.h"
#include "common/log.h"
#include "common/regex_grammar.h"
#include "proto/llm.grpc.pb.h"
#include "proto/llm.pb.h"
#include "worker/engine/device_setup.h"

namespace llm {

namespace pb = ::llm::v1;

namespace {

constexpr uint32_t kApiVersion = pb::API_VERSION_CURRENT;

// The one place where llm::Status becomes a gRPC status.
grpc::Status ToGrpcStatus(const Status& s) {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (s.code()) {
    case StatusCode::kOk:
      return grpc::Status::OK;
    case StatusCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case StatusCode::kFailedPrecondition:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case StatusCode::kOutOfRange:
      code = grpc::StatusCode::OUT_OF_RANGE;
      break;
    case StatusCode::kResourceExhausted:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    case StatusCode::kUnimplemented:
      code = grpc::StatusCode::UNIMPLEMENTED;
      break;
    case StatusCode::kDataLoss:
      code = grpc::StatusCode::DATA_LOSS;
      break;
    case StatusCode::kInternal:
      code = grpc::StatusCode::INTERNAL;
      break;
    case StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case StatusCode::kCancelled:
      code = grpc::StatusCode::CANCELLED;
      break;
  }
  return grpc::Status(code, s.message());
}

pb::FinishReason ToProto(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return pb::FINISH_REASON_UNSPECIFIED;
    case FinishReason::kEos:
      return pb::FINISH_REASON_EOS;
    case FinishReason::kStopToken:
      return pb::FINISH_REASON_STOP_TOKEN;
    case FinishReason::kMaxTokens:
      return pb::FINISH_REASON_MAX_TOKENS;
    case FinishReason::kMaxModelLen:
      return pb::FINISH_REASON_MAX_MODEL_LEN;
    case FinishReason::kAbort:
      return pb::FINISH_REASON_ABORT;
  }
  return pb::FINISH_REASON_UNSPECIFIED;
}

// The largest JSON Schema text a request may carry (the router's body limit is smaller).
constexpr size_t kMaxSchemaBytes = 1 << 20;

// The grammar a request's structured_output asks for (nullptr: none).
StatusOr<std::shared_ptr<const Grammar>> GrammarOf(const pb::GenerateRequest& r) {
  if (!r.has_structured_output()) return std::shared_ptr<const Grammar>();
  const pb::StructuredOutput& so = r.structured_output();
  StatusOr<Grammar> g = InvalidArgument("structured_output: set json_object or json_schema");
  if (so.kind_case() == pb::StructuredOutput::kJsonObject) {
    if (!so.json_object()) return std::shared_ptr<const Grammar>();
    g = JsonObjectGrammar();
  } else if (so.kind_case() == pb::StructuredOutput::kJsonSchema) {
    if (so.json_schema().size() > kMaxSchemaBytes) {
      return InvalidArgument("structured_output.json_schema: larger than 1 MiB");
    }
    if (!JsonTextNestingAtMost(so.json_schema(), kMaxSchemaTextDepth)) {
      return InvalidArgument("structured_output.json_schema: nests deeper than " +
                             std::to_string(kMaxSchemaTextDepth) + " levels");
    }
    const auto schema = nlohmann::ordered_json::parse(so.json_schema(), nullptr, false);
    if (schema.is_discarded()) {
      return InvalidArgument("structured_output.json_schema: not valid JSON");
    }
    g = JsonSchemaGrammar(schema);
  } else if (so.kind_case() == pb::StructuredOutput::kChoice) {
    g = ChoiceGrammar({so.choice().values().begin(), so.choice().values().end()});
    if (!g.ok()) return InvalidArgument("structured_output.choice: " + g.status().message());
  } else if (so.kind_case() == pb::StructuredOutput::kRegex) {
    g = RegexGrammar(so.regex());
    if (!g.ok()) return InvalidArgument("structured_output.regex: " + g.status().message());
  }
  if (!g.ok()) return InvalidArgument("structured_output.json_schema: " + g.status().message());
  return std::shared_ptr<const Grammar>(std::make_shared<Grammar>(std::move(*g)));
}

// The wire request as the engine's. Proto3 zeros of top_p and repetition_penalty mean "unset".
StatusOr<GenerateRequest> FromProto(const pb::GenerateRequest& r) {
  GenerateRequest out;
  LLM_ASSIGN_OR_RETURN(out.grammar, GrammarOf(r));
  out.prompt.assign(r.prompt_token_ids().begin(), r.prompt_token_ids().end());
  const pb::SamplingParams& s = r.sampling();
  out.sampling.temperature = s.temperature();
  out.sampling.top_k = s.top_k();
  out.sampling.top_p = s.top_p() == 0.0f ? 1.0f : s.top_p();
  out.sampling.min_p = s.min_p();
  out.sampling.repetition_penalty = s.repetition_penalty() == 0.0f ? 1.0f : s.repetition_penalty();
  out.sampling.presence_penalty = s.presence_penalty();
  out.sampling.frequency_penalty = s.frequency_penalty();
  if (s.has_seed()) out.sampling.seed = s.seed();
  out.sampling.logprobs = s.logprobs();
  out.max_tokens = r.max_tokens();
  out.ignore_eos = r.ignore_eos();
  out.stop_token_ids.assign(r.stop_token_ids().begin(), r.stop_token_ids().end());
  out.priority = r.priority();
  out.min_tokens = r.min_tokens();
  return out;
}

// A request id as it appears in log lines: the client's (the router's X-Request-Id), cut to a
// bounded length; the log formats escape the rest.
std::string LoggedRequestId(const std::string& id) {
  constexpr size_t kMaxLogged = 128;
  return id.size() <= kMaxLogged ? id : id.substr(0, kMaxLogged) + "...";
}

const char* DetailedFinishName(FinishReason r) {
  switch (r) {
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kStopToken:
      return "stop_token";
    case FinishReason::kMaxTokens:
      return "max_tokens";
    case FinishReason::kMaxModelLen:
      return "max_model_len";
    case FinishReason::kAbort:
      return "abort";
    default:
      return "none";
  }
}

// A Generate call that is answered with a status at once (bad version, draining).
class RejectedStream final : public grpc::ServerWriteReactor<pb::GenerateResponse> {
 public:
  RejectedStream(const Status& status, const std::string& request_id) {
    LogEvent(LogLevel::kWarn, "request refused",
             {{"request_id", LoggedRequestId(request_id)}, {"error", status.message()}});
    Finish(ToGrpcStatus(status));
  }
  void OnDone() override { delete this; }
};

// One Generate stream. Shared by gRPC (until OnDone) and the engine loop (until the request
// ends). Tokens that arrive while a write is outstanding are coalesced into the next message.
// Every gRPC operation is started by whoever moves the stream out of the idle state under mu_,
// so at most one write (and one Finish) is ever in flight.
class GenerateStream final : public grpc::ServerWriteReactor<pb::GenerateResponse>,
                             public RequestSink {
 public:
  static void Start(std::shared_ptr<GenerateStream> stream, GenerateRequest request) {
    stream->self_ = stream;
    stream->ticket_ = stream->loop_->Submit(std::move(request), stream);
    // OnCancel may have run before the ticket existed.
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(stream->mu_);
      stream->ticket_set_ = true;
      cancelled = stream->cancelled_;
    }
    if (cancelled) stream->loop_->Cancel(stream->ticket_);
  }

  GenerateStream(EngineLoop* loop, int logprobs, std::string request_id)
      : loop_(loop), logprobs_(logprobs), request_id_(LoggedRequestId(request_id)) {}

  void OnToken(const SampleResult& sample, FinishReason finish, int prompt_tokens,
               int completion_tokens, const RequestTimings& timings) override {
    std::unique_lock<std::mutex> lock(mu_);
    pending_.add_token_ids(sample.token);
    if (logprobs_ >= 0) pending_.add_logprobs(sample.logprob);
    if (logprobs_ > 0) {
      pb::TopLogprobs* top = pending_.add_top_logprobs();
      for (const TokenLogprob& t : sample.top) {
        pb::TokenLogprob* e = top->add_entries();
        e->set_token_id(t.token);
        e->set_logprob(t.logprob);
      }
    }
    if (finish != FinishReason::kNone) {
      pending_.set_finish_reason(ToProto(finish));
      if (EndedByToken(finish)) pending_.set_stop_token_id(sample.token);
      pending_.mutable_usage()->set_prompt_tokens(prompt_tokens);
      pending_.mutable_usage()->set_completion_tokens(completion_tokens);
      pb::RequestTimings* t = pending_.mutable_timings();
      t->set_queue_s(timings.queue_s);
      t->set_prefill_s(timings.prefill_s);
      t->set_decode_s(timings.decode_s);
      t->set_inference_s(timings.inference_s);
      final_status_ = grpc::Status::OK;
      LogEvent(LogLevel::kInfo, "request finished",
               {{"request_id", request_id_},
                {"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"finish_reason", DetailedFinishName(finish)},
                {"total_ms", ElapsedMs()}});
    }
    Advance(lock);
  }

  void OnError(const Status& status) override {
    std::unique_lock<std::mutex> lock(mu_);
    pending_.Clear();
    has_pending_ = false;
    final_status_ = ToGrpcStatus(status);
    LogEvent(LogLevel::kWarn, "request failed",
             {{"request_id", request_id_}, {"error", status.message()}, {"total_ms", ElapsedMs()}});
    Advance(lock);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    write_outstanding_ = false;
    if (!ok)
      MarkCancelledLocked(lock);
    else
      Advance(lock);
  }

  void OnCancel() override {
    std::unique_lock<std::mutex> lock(mu_);
    MarkCancelledLocked(lock);
  }

  void OnDone() override { self_.reset(); }  // may destroy this

 private:
  int64_t ElapsedMs() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 started_)
        .count();
  }

  void MarkCancelledLocked(std::unique_lock<std::mutex>& lock) {
    const bool notify = !cancelled_ && ticket_set_ && !final_status_;
    if (!cancelled_ && !final_status_) {
      LogEvent(LogLevel::kInfo, "request cancelled",
               {{"request_id", request_id_}, {"total_ms", ElapsedMs()}});
    }
    cancelled_ = true;
    EngineLoop* loop = loop_;
    const uint64_t ticket = ticket_;
    Advance(lock);  // releases the lock; `this` may be gone after it
    if (notify) loop->Cancel(ticket);
  }

  // Starts the next write or the Finish when nothing is in flight. Releases the lock, then
  // calls into gRPC (after Finish `this` may be gone: nothing is touched after it).
  void Advance(std::unique_lock<std::mutex>& lock) {
    has_pending_ = has_pending_ || pending_.token_ids_size() > 0;
    if (write_outstanding_ || finish_called_) return lock.unlock();
    if (cancelled_) {
      finish_called_ = true;
      lock.unlock();
      return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
    }
    if (has_pending_) {
      writing_.Clear();
      writing_.Swap(&pending_);
      has_pending_ = false;
      write_outstanding_ = true;
      lock.unlock();
      return StartWrite(&writing_);
    }
    if (final_status_) {
      finish_called_ = true;
      grpc::Status s = *final_status_;
      lock.unlock();
      return Finish(s);
    }
    lock.unlock();
  }

  EngineLoop* loop_;
  const int logprobs_;
  const std::string request_id_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::shared_ptr<GenerateStream> self_;  // held until OnDone
  uint64_t ticket_ = 0;

  std::mutex mu_;
  bool ticket_set_ = false;
  pb::GenerateResponse pending_;  // tokens not written yet
  bool has_pending_ = false;
  pb::GenerateResponse writing_;  // the message of the outstanding write
  bool write_outstanding_ = false;
  std::optional<grpc::Status> final_status_;  // the request ended (after pending_ is written)
  bool cancelled_ = false;
  bool finish_called_ = false;
};

}  // namespace

struct CoordinatorServer::Impl {
  class Generation final : public pb::Generation::CallbackService {
   public:
    explicit Generation(Impl* impl) : impl_(impl) {}
    grpc::ServerWriteReactor<pb::GenerateResponse>* Generate(
        grpc::CallbackServerContext*, const pb::GenerateRequest* request) override {
      if (request->api_version() != kApiVersion) {
        return new RejectedStream(
            FailedPrecondition("api_version " + std::to_string(request->api_version()) +
                               " is not supported; this coordinator speaks version " +
                               std::to_string(kApiVersion)),
            request->request_id());
      }
      if (impl_->shutting_down.load()) {
        return new RejectedStream(Unavailable("the coordinator is shutting down"),
                                  request->request_id());
      }
      if (impl_->draining.load()) {
        return new RejectedStream(
            Unavailable(
                "the coordinator is draining: it admits no new requests (running ones finish); "
                "`llm-admin resume` admits them again"),
            request->request_id());
      }
      if (const std::string problem = impl_->HealthProblem(); !problem.empty()) {
        return new RejectedStream(Unavailable("the cluster is not healthy: " + problem),
                                  request->request_id());
      }
      StatusOr<GenerateRequest> engine_request = FromProto(*request);
      if (!engine_request.ok()) {
        return new RejectedStream(engine_request.status(), request->request_id());
      }
      auto stream = std::make_shared<GenerateStream>(impl_->loop, request->sampling().logprobs(),
                                                     request->request_id());
      GenerateStream::Start(stream, std::move(*engine_request));
      return stream.get();
    }

   private:
    Impl* impl_;
  };

  class Admin final : public pb::Admin::CallbackService {
   public:
    explicit Admin(Impl* impl) : impl_(impl) {}
    grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx, const pb::HealthRequest*,
                                     pb::HealthResponse* out) override {
      const std::string problem = impl_->HealthProblem();
      std::string detail = impl_->shutting_down.load() ? "shutting down"
                           : impl_->draining.load()    ? "draining"
                                                       : problem;
      out->set_ranks_unresponsive(!problem.empty());
      out->set_serving(detail.empty());
      out->set_detail(detail);
      out->set_model(impl_->info.served_model_name);
      out->set_max_model_len(impl_->info.max_model_len);
      out->set_vocab_size(impl_->info.vocab_size);
      return Done(ctx);
    }
    grpc::ServerUnaryReactor* Drain(grpc::CallbackServerContext* ctx, const pb::DrainRequest*,
                                    pb::DrainResponse*) override {
      if (grpc::Status denied = impl_->CheckAdmin(*ctx); !denied.ok()) return Done(ctx, denied);
      if (!impl_->draining.exchange(true)) spdlog::info("draining: new requests are refused");
      impl_->UpdateServingStatus();
      return Done(ctx);
    }
    grpc::ServerUnaryReactor* Resume(grpc::CallbackServerContext* ctx, const pb::ResumeRequest*,
                                     pb::ResumeResponse*) override {
      if (grpc::Status denied = impl_->CheckAdmin(*ctx); !denied.ok()) return Done(ctx, denied);
      if (impl_->draining.exchange(false)) spdlog::info("resumed: admitting new requests");
      impl_->UpdateServingStatus();
      return Done(ctx);
    }
    grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* ctx, const pb::StatsRequest*,
                                    pb::StatsResponse* out) override {
      const EngineLoopStats s = impl_->loop->Snapshot();
      out->set_running_sequences(s.engine.running);
      out->set_waiting_sequences(s.engine.waiting);
      out->set_kv_blocks_total(s.engine.blocks_total);
      out->set_kv_blocks_free(s.engine.blocks_free);
      out->set_prompt_tokens_total(s.prompt_tokens_total);
      out->set_generated_tokens_total(s.engine.tokens_generated);
      out->set_preemptions_total(s.engine.preemptions);
      out->set_world_size(impl_->info.world_size);
      out->set_draining(impl_->draining.load());
      out->set_kv_block_size(s.block_size);
      out->set_kv_cache_dtype(KvCacheDtypeName(s.kv_cache_dtype));
      out->set_requests_total(s.requests_total);
      out->set_aborted_total(s.aborts_total);
      out->set_prefill_tokens_computed_total(s.engine.prompt_tokens_computed);
      out->set_rejected_queue_full_total(s.rejected_queue_full);
      out->set_queue_timeouts_total(s.queue_timeouts);
      out->set_prefix_cache_hit_tokens_total(s.engine.prefix_cache_hit_tokens);
      out->set_prefix_cache_queried_tokens_total(s.engine.prefix_cache_queried_tokens);
      out->set_uptime_s(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->info.started)
              .count());
      out->set_model(impl_->info.served_model_name);
      out->set_data_parallel_rank(impl_->info.data_parallel_rank);
      out->set_data_parallel_size(impl_->info.data_parallel_size);
      impl_->FillRanks(out);
      return Done(ctx);
    }

   private:
    static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx,
                                          const grpc::Status& status = grpc::Status::OK) {
      grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
      r->Finish(status);
      return r;
    }
    Impl* impl_;
  };

  Impl(const CoordinatorInfo& i, EngineLoop* l, CoordinatorHealth h)
      : info(i), loop(l), health(h), generation(this), admin(this) {
    if (health.comm != nullptr) hosts = health.comm->HostNames();
    if (hosts.empty()) {
      char name[HOST_NAME_MAX + 1] = {};
      if (gethostname(name, sizeof(name) - 1) == 0) hosts.push_back(name);
    }
  }

  // Stats' per-rank entries, from what the communicator already knows (no MPI traffic): a
  // collective completes only when every rank took part, so all followers share one "last
  // seen", and a stalled one marks them all (rank 0 cannot tell which one is stuck).
  void FillRanks(pb::StatsResponse* out) const {
    const double stalled = health.comm ? health.comm->StalledSeconds() : 0.0;
    const double seen = health.comm ? health.comm->SecondsSinceAllAnswered() : -1.0;
    for (int r = 0; r < info.world_size; ++r) {
      pb::RankStatus* rank = out->add_ranks();
      rank->set_rank(r);
      rank->set_world_rank(info.data_parallel_rank * info.world_size + r);
      if (static_cast<size_t>(r) < hosts.size()) rank->set_host(hosts[r]);
      if (r == 0) {
        rank->set_status("ok");
        rank->set_last_seen_s(0);
        continue;
      }
      rank->set_status(stalled > health.heartbeat_timeout_s ? "not answering" : "ok");
      if (seen >= 0) rank->set_last_seen_s(seen);
    }
  }

  // Sets the gRPC health service's status of "" and llm.v1.Generation from the state Health
  // reports (under a lock, so a drain and the monitor cannot publish out of order).
  void UpdateServingStatus() {
    std::lock_guard<std::mutex> lock(serving_mu);
    if (health_service == nullptr) return;  // not started yet: Start publishes
    const bool serving = !shutting_down.load() && !draining.load() && HealthProblem().empty();
    if (serving_published == static_cast<int>(serving)) return;
    serving_published = static_cast<int>(serving);
    health_service->SetServingStatus("", serving);
    health_service->SetServingStatus(pb::Generation::service_full_name(), serving);
  }

  // With several ranks a rank can stop answering at any time: checked every second.
  void StartMonitor() {
    if (health.comm == nullptr || info.world_size <= 1) return;
    monitor = std::thread([this] {
      std::unique_lock<std::mutex> lock(monitor_mu);
      while (!monitor_stop) {
        lock.unlock();
        UpdateServingStatus();
        lock.lock();
        monitor_cv.wait_for(lock, std::chrono::seconds(1), [this] { return monitor_stop; });
      }
    });
  }
  void StopMonitor() {
    {
      std::lock_guard<std::mutex> lock(monitor_mu);
      monitor_stop = true;
    }
    monitor_cv.notify_all();
    if (monitor.joinable()) monitor.join();
  }

  // Drain/Resume change what every client gets: they need the admin token (compared in
  // constant time), or, when none is configured, a caller on this host.
  grpc::Status CheckAdmin(const grpc::CallbackServerContext& ctx) const {
    const std::string& token = health.admin_token;
    if (token.empty()) {
      const std::string peer = ctx.peer();
      const bool local = peer.rfind("ipv4:127.", 0) == 0 || peer.rfind("ipv6:[::1]", 0) == 0 ||
                         peer.rfind("unix:", 0) == 0;
      if (local) return grpc::Status::OK;
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "admin calls from " + peer +
                              " need coordinator.admin_token (or LLM_ADMIN_TOKEN) to be set");
    }
    const auto& md = ctx.client_metadata();
    const auto it = md.find("authorization");
    const std::string given =
        it == md.end() ? "" : std::string(it->second.data(), it->second.size());
    const std::string want = "Bearer " + token;
    unsigned char diff = given.size() == want.size() ? 0 : 1;
    for (size_t i = 0; i < want.size(); ++i) {
      diff |= static_cast<unsigned char>(want[i] ^ (i < given.size() ? given[i] : 0));
    }
    if (diff == 0) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "admin calls need 'authorization: Bearer <coordinator.admin_token>' "
                        "(llm-admin reads LLM_ADMIN_TOKEN or --admin-token)");
  }

  // Empty while every rank answers; else what is wrong (logged once per episode).
  std::string HealthProblem() {
    const double stalled = health.comm ? health.comm->StalledSeconds() : 0.0;
    if (stalled <= health.heartbeat_timeout_s) {
      if (stall_logged.exchange(false)) spdlog::info("every rank answers again");
      return "";
    }
    std::string problem = "a rank has not answered for " +
                          std::to_string(static_cast<int>(stalled)) +
                          " s (engine.heartbeat_timeout_s = " +
                          std::to_string(static_cast<int>(health.heartbeat_timeout_s)) + ")";
    if (!stall_logged.exchange(true)) spdlog::error("not serving: {}", problem);
    return problem;
  }

  CoordinatorInfo info;
  EngineLoop* loop;
  CoordinatorHealth health;
  std::atomic<bool> draining{false};
  std::atomic<bool> shutting_down{false};
  std::atomic<bool> stall_logged{false};
  std::vector<std::string> hosts;  // by rank
  std::mutex serving_mu;
  grpc::HealthCheckServiceInterface* health_service = nullptr;  // guarded by serving_mu
  int serving_published = -1;  // what health_service says: -1 not set yet, 0, 1
  std::thread monitor;
  std::mutex monitor_mu;
  std::condition_variable monitor_cv;
  bool monitor_stop = false;
  Generation generation;
  Admin admin;
  std::unique_ptr<grpc::Server> server;
  std::once_flag shutdown_once;
};

CoordinatorServer::CoordinatorServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CoordinatorServer::~CoordinatorServer() {
  Shutdown();
}

StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(const std::string& host,
                                                                      int port,
                                                                      const CoordinatorInfo& info,
                                                                      EngineLoop* loop,
                                                                      CoordinatorHealth health) {
  auto impl = std::make_unique<Impl>(info, loop, health);
  const std::string address = host + ":" + std::to_string(port);
  // grpc.health.v1.Health (Check and Watch) on the same port, for Kubernetes gRPC probes.
  grpc::EnableDefaultHealthCheckService(true);
  int bound_port = 0;
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!health.tls_cert_pem.empty()) {
    grpc::SslServerCredentialsOptions tls;
    tls.pem_key_cert_pairs.push_back({health.tls_key_pem, health.tls_cert_pem});
    credentials = grpc::SslServerCredentials(tls);
  }
  builder.AddListeningPort(address, credentials, &bound_port);
  // Routers send keepalive pings every 10 s, also between calls; allow them (the default
  // policy would answer them with GOAWAY "too_many_pings").
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.RegisterService(&impl->generation);
  builder.RegisterService(&impl->admin);
  impl->server = builder.BuildAndStart();
  if (!impl->server || bound_port == 0) {
    return Unavailable("coordinator.host/coordinator.port: cannot listen on " + address +
                       " (address in use or not local?)");
  }
  {
    std::lock_guard<std::mutex> lock(impl->serving_mu);
    impl->health_service = impl->server->GetHealthCheckService();
  }
  impl->UpdateServingStatus();
  impl->StartMonitor();
  return std::unique_ptr<CoordinatorServer>(new CoordinatorServer(std::move(impl)));
}

void CoordinatorServer::BeginShutdown() {
  impl_->shutting_down.store(true);
  impl_->UpdateServingStatus();
}

void CoordinatorServer::Shutdown() {
  std::call_once(impl_->shutdown_once, [this] {
    impl_->StopMonitor();
    impl_->shutting_down.store(true);
    impl_->UpdateServingStatus();  // NOT_SERVING
    // Every stream has been finished by now; the grace period only lets their last messages
    // and in-flight admin calls drain (idle client connections would hold it to the deadline).
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    impl_->server->Wait();
  });
}

}  // namespace llm
