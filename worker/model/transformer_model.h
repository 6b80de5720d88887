// The decoder-only transformer of the Llama family (Llama 2/3, Mistral, Qwen2, Qwen3) over a
// flat batch with a paged KV cache, on one tensor-parallel rank and one kernel backend: the
// weights hold this rank's shard (see ModelWeights) and the communicator joins the ranks
// (all-reduce after the row-parallel o/down projections and the vocab-parallel embedding,
// gather of the vocab-parallel logits to rank 0). Every rank runs Forward on the same batch in
// the same order. The model calls only the kernels::Backend interface: activations, the KV cache
// and the batch's index arrays live in the backend's memory; only the logits come back to the
// host. Thread affinity: one caller at a time. Workspace buffers only grow, so steady-state
// steps allocate nothing.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kernels/backend.h"
#include "worker/model/communicator.h"
#include "worker/model/forward_batch.h"
#include "worker/model/kv_cache.h"
#include "worker/model/model_weights.h"

namespace llm {

class TransformerModel {
 public:
  // `weights` must be usable by `backend` (PlaceWeights; nothing to do for a host-memory
  // backend) and outlive the model, as must `backend` and `comm` (this stage's tensor-parallel
  // ranks; nullptr: one rank). With pipeline stages (weights.pipeline.num_stages > 1),
  // `pipeline` joins every rank of the engine, rank = stage * tp.size + tp.rank: a stage
  // receives its input hidden states from the same tensor-parallel rank of the stage before
  // and sends its output to the one after; the last stage's tp rank 0 sends the logits to rank
  // 0 (the engine's sampler). FailedPrecondition / InvalidArgument when the model exceeds the
  // backend's limits (naming the config.json key) or the ranks do not match the weights.
  static StatusOr<std::unique_ptr<TransformerModel>> Create(const ModelWeights& weights,
                                                            kernels::Backend& backend,
                                                            Communicator* comm = nullptr,
                                                            Communicator* pipeline = nullptr);

  const ModelConfig& config() const { return w_.config; }
  kernels::Backend& backend() const { return backend_; }
  // Shape of a KV cache this model can use: this rank's KV heads and this stage's layers only.
  KvCacheShape CacheShape(int num_blocks, int block_size, DType kv_dtype = DType::kF32) const;

  // Runs the batch, writes its K/V into `cache` and returns logits for batch.logit_rows as
  // [logit_rows.size(), vocab] in host memory (valid until the next call; with several ranks,
  // significant on the engine's rank 0 only). The batch must be well formed (the engine builds it);
  // token ids are checked against the vocabulary before any collective, so every rank fails alike.
  StatusOr<const float*> Forward(const ForwardBatch& batch, KvCache& cache);
  // With pipeline stages, Forward returns nullptr on every stage but the last (whose
  // tensor-parallel rank 0 gets the logits, to sample from: worker/engine/follower.h).
  bool pipelined() const { return pipeline_ != nullptr; }

  // Graphs (CUDA graphs) for decode steps of up to `max_batch` sequences whose block tables have
  // at most `max_blocks_per_seq` entries (0 turns them off): such a step is padded to the next
  // recorded size (worker/model/graph_batch.h) and replayed with one launch; the first step of a
  // size runs once plainly (sizing every workspace), then is recorded. Only on a backend with
  // graphs and for a forward pass without a host step in the middle: no mixture of experts, no
  // per-sequence LongRoPE factors, one pipeline stage, and a device-memory communicator for
  // tensor parallelism. Every rank must enable the same. Returns whether graphs are on.
  bool EnableGraphs(int max_batch, int max_blocks_per_seq);
  // Graphs recorded so far, and why recording was turned off (empty while it is not).
  int graphs_recorded() const { return static_cast<int>(graphs_.size()); }
  const std::string& graphs_off_reason() const { return graphs_off_reason_; }

 private:
  TransformerModel(const ModelWeights& weights, kernels::Backend& backend, Communicator* comm,
                   Communicator* pipeline);
  // Pipeline stages: the engine rank of (stage, this tensor-parallel rank).
  int PeerOf(int stage) const { return stage * w_.tp.size + w_.tp.rank; }
  // [count] floats of backend memory to / from another engine rank (through host memory when
  // the backend's is not).
  void SendTo(const float* data, size_t count, int rank);
  void RecvFrom(float* data, size_t count, int rank);
  // Backend copies (or, for host memory, views) of the batch's index arrays.
  struct DeviceBatch {
    const int32_t *token_ids, *positions, *slot_mapping, *query_start, *context_len, *block_tables,
        *logit_rows;
  };
  Status Reserve(const ForwardBatch& batch);
  // The batch's RoPE runs: consecutive sequences that rotate with the same table (LongRoPE picks
  // the short or long factors per sequence; every other model has one run over all tokens).
  void PlanRope(const ForwardBatch& batch);
  DeviceBatch Upload(const ForwardBatch& batch);
  // Enqueues the whole step on the backend, through the lm_head (and the gather of its shards);
  // no host copy and no host decision, so a graph can record it.
  void Enqueue(const ForwardBatch& batch, const DeviceBatch& db, KvCache& cache);
  // After Enqueue: the logits in host memory, the step's errors, Gemma 2's soft-cap.
  StatusOr<const float*> FinishStep(int rows);
  // The recorded size a graph runs `batch` at; 0: run it plainly.
  int GraphBatchFor(const ForwardBatch& batch) const;
  StatusOr<const float*> ForwardWithGraph(const ForwardBatch& batch, KvCache& cache);
  // Every buffer a recorded graph points into (workspace, index arrays, the cache).
  std::vector<const void*> GraphPointers(KvCache& cache) const;
  void DropGraphs();
  void Embed(const DeviceBatch& db, int tokens);
  void Attention(int layer, const ForwardBatch& batch, const DeviceBatch& db, KvCache& cache);
  void Mlp(int layer, int tokens);
  // Mixture of experts: routes each token to its top-k experts on the host, runs every expert
  // on its tokens, and sums the weighted outputs (and the gated shared expert) into out_.
  void Moe(int layer, int tokens);
  // gate_/up_ → act_ → `down` of one SwiGLU MLP on x [tokens, hidden] into y (partial per rank).
  void SwiGlu(const float* x, int tokens, const Weight& gate, const Weight& up, const Weight& down,
              float* y);
  // A [rows, cols] backend buffer as host floats (a view for host memory, else a copy).
  const float* HostView(const float* device, size_t count, std::vector<float>* copy);
  void Linear(const float* x, int m, const Weight& w, const Weight& bias, float* y);
  struct LinearOut {
    const Weight* w;
    const Weight* bias;
    float* y;
  };
  // Linear for each output on the same x (q, k, v; gate, up): one backend call.
  void LinearSameInput(const float* x, int m, std::span<const LinearOut> outs);
  // out_ holds this rank's partial [tokens, hidden]: sum it over ranks and add `bias` once.
  void ReduceRowParallel(int tokens, const Weight& bias);
  void LmHeadOnDevice(int rows);
  const float* LogitsToHost(int rows);

  const ModelWeights& w_;
  kernels::Backend& backend_;
  const bool host_memory_;  // the backend's buffers are host memory: no copies needed
  std::unique_ptr<Communicator> local_comm_;  // when none is given
  Communicator* comm_;
  Communicator* pipeline_;  // nullptr: one stage
  bool sharded_;
  int heads_, kv_heads_, inter_;  // this rank's share
  kernels::Buffer inv_freq_;
  kernels::Buffer inv_freq_local_;  // Gemma 3's sliding layers (empty otherwise)
  kernels::Buffer inv_freq_long_;   // LongRoPE's long factors (empty otherwise)
  struct RopeRun {
    int begin = 0, count = 0;  // token rows
    bool long_factors = false;
  };
  std::vector<RopeRun> rope_runs_;
  // Workspace in backend memory, [tokens, ...] each.
  kernels::Buffer x_, h_, q_, k_, v_, attn_, gate_, up_, act_, out_, last_, logits_, gathered_;
  kernels::Buffer ids_;  // the batch's index arrays, back to back (device backends only)
  // Mixture of experts: router logits, the gathered rows of one expert and its output, and the
  // routing (rows, weights) uploaded per expert.
  kernels::Buffer router_, xe_, ye_, route_rows_, route_weights_;
  std::vector<float> host_router_, host_gate_;
  std::vector<std::vector<std::pair<int32_t, float>>> routed_;  // per expert: (token, weight)
  std::vector<int32_t> packed_ids_;
  std::vector<float> host_logits_, host_gathered_;  // device backends, and TP reassembly
  std::vector<float> host_pipe_;                    // stage-to-stage messages of a device backend
  // Graphs: recorded batch size -> graph id, the buffers they point into, the backend's
  // workspace generation they were recorded at, and the padded batch of the current step.
  int graph_max_batch_ = 0, graph_max_blocks_ = 0;
  std::map<int, int> graphs_;
  std::vector<const void*> graph_pointers_;
  uint64_t graph_generation_ = 0;
  ForwardBatch padded_;
  std::string graphs_off_reason_;
};

}  // namespace llm
