#include "worker/coordinator/coordinator_app.h"

#include <omp.h>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "common/grammar_vocab.h"
#include "common/systemd_notify.h"
#include "common/tokenizer.h"
#include "kernels/cpu_ops.h"
#include "worker/coordinator/coordinator_service.h"
#include "worker/coordinator/engine_loop.h"
#include "worker/coordinator/stats_logger.h"
#include "worker/engine/device_setup.h"
#include "worker/engine/engine.h"
#include "worker/engine/rank_threads.h"
#include "worker/model/model_weights.h"

namespace llm {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

void ConfigureThreads(const ClusterConfig& c, int ranks_on_host) {
  const RankThreads rt = ComputeRankThreads(c, ranks_on_host);
  if (!rt.warning.empty()) spdlog::warn("rank 0: {}", rt.warning);
  omp_set_num_threads(rt.threads);
  spdlog::info("compute threads: {}", rt.threads);
}

StatusOr<std::unique_ptr<ModelWeights>> LoadWeights(const ClusterConfig& c,
                                                    const EngineShard& shard) {
  if (c.model.path.empty()) {
    return InvalidArgument("model.path: not set (give it in the config file or --model.path DIR)");
  }
  const bool dummy = c.model.load_format == LoadFormat::kDummy;
  if (dummy) {
    spdlog::warn("**************************************************************************");
    spdlog::warn("model.load_format is 'dummy': the weights are RANDOM and every output of");
    spdlog::warn("this server is MEANINGLESS. Use it for load tests and benchmarks only.");
    spdlog::warn("**************************************************************************");
  }
  const auto t0 = std::chrono::steady_clock::now();
  StatusOr<std::unique_ptr<ModelWeights>> w =
      LoadModelWeights(c.model.path, c.model.load_format, static_cast<uint64_t>(c.engine.seed),
                       shard.tp, ModelQuantization(c.model), shard.pipeline);
  if (!w.ok()) return w.status().WithContext("model.path '" + c.model.path + "'");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ModelConfig& mc = (*w)->config;
  spdlog::info(
      "model {} ({}): {} layers, hidden {}, vocab {}, {:.1f} MiB of matrices, loaded in "
      "{:.2f} s",
      c.model.path, mc.architecture, mc.num_layers, mc.hidden_size, mc.vocab_size,
      static_cast<double>((*w)->matrix_bytes) / kMiB, secs);
  if (const PipelineStage& pp = (*w)->pipeline; pp.num_stages > 1) {
    spdlog::info("pipeline stage 0 of {}: layers {}..{} (the matrices above are this stage's)",
                 pp.num_stages, pp.layers.begin, pp.layers.end - 1);
  }
  return w;
}

StatusOr<std::unique_ptr<Engine>> CreateEngine(const ClusterConfig& c, const ModelWeights& w,
                                               Communicator* comm, Communicator* stage_comm,
                                               kernels::Backend& backend, Communicator* host_comm) {
  LLM_ASSIGN_OR_RETURN(int max_len, ServedMaxModelLen(c, w.config));
  EngineConfig ec;
  static_cast<EngineSection&>(ec) = c.engine;
  ec.max_model_len = max_len;
  ec.fit_max_model_len_to_cache = c.model.max_model_len <= 0;
  std::string source;
  const bool device = !backend.caps().host_memory;
  if (c.engine.kv_cache_blocks > 0) {
    ec.num_blocks = c.engine.kv_cache_blocks;
    source = "engine.kv_cache_blocks";
  } else if (device && c.engine.kv_cache_mib > 0) {
    // The device's memory, not the host's: an allocation that does not fit fails below.
    ec.kv_cache_bytes = static_cast<size_t>(c.engine.kv_cache_mib) << 20;
    source = "engine.kv_cache_mib = " + std::to_string(c.engine.kv_cache_mib);
  } else if (device) {
    // vLLM's rule: what the weights and the largest step leave of gpu_memory_utilization of
    // the GPU; every rank measures its own, the engine takes the smallest.
    const bool pipelined = w.pipeline.num_stages > 1;
    LLM_ASSIGN_OR_RETURN(
        const int mine,
        ProfileKvBlocks(w, backend, pipelined ? stage_comm : comm, pipelined ? comm : nullptr,
                        c.engine, max_len, [&] { return kernels::CudaMemoryInfo(backend); }));
    ec.num_blocks = MinOverRanks(host_comm, mine);
    std::ostringstream s;
    s.precision(3);
    s << "engine.gpu_memory_utilization " << c.engine.gpu_memory_utilization
      << " of the GPU's memory after the weights and a profiling pass of "
      << c.engine.scheduler.max_num_batched_tokens << " tokens";
    if (host_comm != nullptr && host_comm->world_size() > 1) {
      s << " (the smallest of " << host_comm->world_size() << " ranks; this rank: " << mine << ")";
    }
    source = s.str();
  } else {
    LLM_ASSIGN_OR_RETURN(const int64_t available, ReadMemAvailableBytes());
    LLM_ASSIGN_OR_RETURN(ec.kv_cache_bytes, KvCacheBytes(c, available));
    std::ostringstream s;
    s.precision(3);
    if (c.engine.kv_cache_mib > 0) {
      s << "engine.kv_cache_mib = " << c.engine.kv_cache_mib;
    } else {
      s << "engine.kv_cache_memory_fraction " << c.engine.kv_cache_memory_fraction << " of "
        << static_cast<double>(available) / kMiB << " MiB available";
    }
    source = s.str();
  }
  StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(w, ec, comm, backend, stage_comm);
  if (!engine.ok()) return engine.status().WithContext("KV cache from " + source);
  const EngineStats st = (*engine)->stats();
  const int64_t tokens = static_cast<int64_t>(st.blocks_total) * c.engine.block_size;
  if (const int served = (*engine)->max_model_len(); served < max_len) {
    spdlog::warn(
        "model.max_model_len: the model's context of {} tokens does not fit the KV cache ({}: "
        "{} tokens); serving sequences of up to {} tokens. Raise engine.kv_cache_mib for longer "
        "ones, or set model.max_model_len (a length asked for must fit, or the worker stops)",
        max_len, source, tokens, served);
    max_len = served;
  }
  if (tokens < max_len) {
    return ResourceExhausted(
        "the model does not fit: the KV cache (" + source + ") holds " +
        std::to_string(st.blocks_total) + " blocks of " + std::to_string(c.engine.block_size) +
        " tokens = " + std::to_string(tokens) +
        " tokens, less than one sequence of max_model_len " + std::to_string(max_len) +
        " tokens; raise engine.kv_cache_mib (or the memory fraction) or "
        "lower model.max_model_len");
  }
  spdlog::info(
      "KV cache: {} blocks of {} tokens = {} tokens at most in flight ({:.1f} "
      "max_model_len sequences of {}), {}, from {}",
      st.blocks_total, c.engine.block_size, tokens, static_cast<double>(tokens) / max_len, max_len,
      KvCacheDtypeLogName(c.engine, (*engine)->kv_cache_dtype()), source);
  const SchedulerConfig& sc = c.engine.scheduler;
  spdlog::info(
      "scheduler: max_num_seqs {}, max_num_batched_tokens {}, max_prefill_chunk {}, "
      "max_prefill_tokens_while_decoding {}{}",
      sc.max_num_seqs, sc.max_num_batched_tokens, sc.max_prefill_chunk,
      sc.max_prefill_tokens_while_decoding,
      sc.max_prefill_tokens_while_decoding > 0 ? "" : " (no bound while decoding)");
  return engine;
}

// A PEM file's contents (at most 1 MiB), or an error naming the key.
StatusOr<std::string> ReadSmallFile(const std::string& path, const std::string& key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(key + ": cannot read '" + path + "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.empty() || text.size() > (1u << 20)) {
    return InvalidArgument(key + ": '" + path + "' is empty or larger than 1 MiB");
  }
  return text;
}

Status Serve(const ClusterConfig& c, Communicator* comm, int ranks_on_host, int data_parallel_rank,
             Communicator* stage_comm, kernels::Backend* backend, Communicator* host_comm) {
  const auto started = std::chrono::steady_clock::now();
  const int world = comm != nullptr ? comm->world_size() : 1;
  if (host_comm == nullptr) host_comm = comm;
  // The device first: a missing GPU is reported before minutes of loading.
  if (backend == nullptr) {
    LLM_ASSIGN_OR_RETURN(backend, EngineBackend(c.engine));
  }
  ConfigureThreads(c, ranks_on_host);
  LLM_RETURN_IF_ERROR(kernels::SelectMatmulIsa(c.engine.matmul_isa));
  if (const int tiles = kernels::MatmulFloatTilesMinM(); tiles > 1) {
    spdlog::info(
        "matmul SIMD path: {}, F16/BF16 on AMX tiles from {} rows (LLM_AMX_F16=batched: "
        "a row's last bits depend on its batch's size)",
        kernels::MatmulIsa(), tiles);
  } else {
    spdlog::info("matmul SIMD path: {}{}", kernels::MatmulIsa(),
                 tiles == 1 ? ", F16/BF16 on AMX tiles at every batch size" : "");
  }
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<ModelWeights> weights,
                       LoadWeights(c, EngineShardOf(c.engine, 0, world)));
  LLM_RETURN_IF_ERROR(PlaceWeightsFor(c.engine, *weights, *backend));
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                       CreateEngine(c, *weights, comm, stage_comm, *backend, host_comm));
  // Structured output masks tokens by their bytes, so the coordinator reads the tokenizer too;
  // a model without one still serves everything else.
  if (auto tokenizer = Tokenizer::FromDir(c.model.path); tokenizer.ok()) {
    engine->SetGrammarVocabulary(GrammarVocabulary::FromTokenizer(**tokenizer));
  } else {
    spdlog::warn("structured output (response_format) is off: {}", tokenizer.status().ToString());
  }
  CoordinatorInfo info;
  info.served_model_name = c.model.served_model_name;
  info.max_model_len = engine->max_model_len();
  info.vocab_size = engine->model_config().vocab_size;
  info.world_size = world;
  info.data_parallel_rank = data_parallel_rank;
  info.data_parallel_size = c.engine.data_parallel_size;
  info.started = started;
  QueueLimits queue;
  queue.max_waiting = c.engine.max_waiting_requests;
  queue.timeout_s = c.engine.queue_timeout_s;
  EngineLoop loop(std::move(engine), c.engine.block_size, queue);
  std::optional<EngineStatsLogger> stats_logger;  // stops before the loop is destroyed
  if (c.engine.log_stats_interval_s > 0) stats_logger.emplace(&loop, c.engine.log_stats_interval_s);
  CoordinatorHealth health;
  health.comm = host_comm;
  health.heartbeat_timeout_s = c.engine.heartbeat_timeout_s;
  health.admin_token = c.coordinator.admin_token;
  if (health.admin_token.empty()) {
    if (const char* env = std::getenv("LLM_ADMIN_TOKEN")) health.admin_token = env;
  }
  if (c.coordinator.tls_cert_file.empty() != c.coordinator.tls_key_file.empty()) {
    return InvalidArgument(
        "coordinator.tls_cert_file and coordinator.tls_key_file must be set together");
  }
  if (!c.coordinator.tls_cert_file.empty()) {
    LLM_ASSIGN_OR_RETURN(health.tls_cert_pem,
                         ReadSmallFile(c.coordinator.tls_cert_file, "coordinator.tls_cert_file"));
    LLM_ASSIGN_OR_RETURN(health.tls_key_pem,
                         ReadSmallFile(c.coordinator.tls_key_file, "coordinator.tls_key_file"));
    spdlog::info("gRPC port speaks TLS only (coordinator.tls_cert_file)");
  }
  if (health.admin_token.empty()) {
    spdlog::info(
        "no admin token: Drain/Resume are accepted from this host only "
        "(set coordinator.admin_token or LLM_ADMIN_TOKEN)");
  }
  LLM_ASSIGN_OR_RETURN(
      std::unique_ptr<CoordinatorServer> server,
      CoordinatorServer::Start(c.coordinator.host, c.coordinator.port, info, &loop, health));
  if (c.engine.data_parallel_size > 1) {
    spdlog::info(
        "coordinator of data-parallel group {} of {} serving '{}' on {}:{} (gRPC); "
        "max_model_len {}; {} rank(s)",
        data_parallel_rank, c.engine.data_parallel_size, c.model.served_model_name,
        c.coordinator.host, c.coordinator.port, info.max_model_len, world);
  } else {
    spdlog::info("coordinator serving '{}' on {}:{} (gRPC); max_model_len {}; {} rank(s)",
                 c.model.served_model_name, c.coordinator.host, c.coordinator.port,
                 info.max_model_len, world);
  }
  NotifySystemd("READY=1");  // Type=notify units (deploy/systemd/llm-worker.service)

  // The first SIGTERM/SIGINT drains: new requests are refused, running ones get
  // coordinator.shutdown_grace_s to finish. A second one stops at once.
  std::atomic<bool> stopped{false};
  std::thread signals([&] {
    const sigset_t set = ShutdownSignals();
    int sig = 0;
    sigwait(&set, &sig);
    NotifySystemd("STOPPING=1");
    spdlog::info("received {}: refusing new requests, giving running ones up to {} s to finish",
                 sig == SIGINT ? "SIGINT" : "SIGTERM", c.coordinator.shutdown_grace_s);
    server->BeginShutdown();
    loop.StopWhenIdle(std::chrono::steady_clock::now() +
                      std::chrono::seconds(c.coordinator.shutdown_grace_s));
    const timespec poll{0, 100 * 1000 * 1000};
    while (!stopped.load()) {
      if (sigtimedwait(&set, nullptr, &poll) > 0) {
        spdlog::info("second signal: stopping now");
        loop.Stop();
      }
    }
  });
  loop.Run();  // until drained; then every live request has been answered
  stopped.store(true);
  server->Shutdown();
  signals.join();
  spdlog::info("coordinator stopped");
  return Status::Ok();
}

}  // namespace

StatusOr<int64_t> ReadMemAvailableBytes(const std::string& meminfo_path) {
  std::ifstream in(meminfo_path);
  if (!in) return NotFound("cannot read " + meminfo_path + " to size the KV cache");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream s(line.substr(13));
    int64_t kib = 0;
    std::string unit;
    if (!(s >> kib) || kib < 0) break;
    s >> unit;
    return kib * 1024;
  }
  return DataLoss(meminfo_path + ": no MemAvailable line; set engine.kv_cache_mib instead");
}

StatusOr<size_t> KvCacheBytes(const ClusterConfig& c, int64_t mem_available) {
  if (c.engine.kv_cache_mib > 0) {
    const int64_t bytes = static_cast<int64_t>(c.engine.kv_cache_mib) << 20;
    if (bytes > mem_available) {
      return ResourceExhausted("engine.kv_cache_mib: " + std::to_string(c.engine.kv_cache_mib) +
                               " MiB is more than the " + std::to_string(mem_available >> 20) +
                               " MiB of memory available");
    }
    return static_cast<size_t>(bytes);
  }
  return static_cast<size_t>(c.engine.kv_cache_memory_fraction *
                             static_cast<double>(mem_available));
}

StatusOr<int> ServedMaxModelLen(const ClusterConfig& c, const ModelConfig& model) {
  if (c.model.max_model_len <= 0) return model.max_position_embeddings;
  if (c.model.max_model_len > model.max_position_embeddings) {
    return InvalidArgument("model.max_model_len: " + std::to_string(c.model.max_model_len) +
                           " exceeds the model's max_position_embeddings of " +
                           std::to_string(model.max_position_embeddings));
  }
  return c.model.max_model_len;
}

void BlockShutdownSignals() {
  const sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int RunCoordinator(const ClusterConfig& config, Communicator* comm, int ranks_on_host,
                   int data_parallel_rank, Communicator* stage_comm, kernels::Backend* backend,
                   Communicator* host_comm) {
  const Status s =
      Serve(config, comm, ranks_on_host, data_parallel_rank, stage_comm, backend, host_comm);
  if (!s.ok()) {
    spdlog::critical("worker: {}", s.ToString());
    return 1;
  }
  return 0;
}

}  // namespace llm
