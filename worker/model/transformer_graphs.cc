// TransformerModel's decode graphs (CUDA graphs): see EnableGraphs in transformer_model.h.
#include <string>

#include "worker/model/graph_batch.h"
#include "worker/model/transformer_model.h"

namespace llm {

bool TransformerModel::EnableGraphs(int max_batch, int max_blocks_per_seq) {
  DropGraphs();
  graph_max_batch_ = 0;
  graph_max_blocks_ = max_blocks_per_seq;
  const ModelConfig& c = w_.config;
  if (max_batch <= 0 || max_blocks_per_seq <= 0) {
    graphs_off_reason_ = "turned off";
  } else if (!backend_.SupportsGraphs()) {
    graphs_off_reason_ = "the " + backend_.caps().name + " backend has no graphs";
  } else if (c.num_experts > 0) {
    graphs_off_reason_ = "mixture-of-experts routing runs on the host";
  } else if (c.rope_scaling.type == RopeScalingType::kLongRope) {
    graphs_off_reason_ = "LongRoPE picks its factors per sequence on the host";
  } else if (pipeline_ != nullptr) {
    graphs_off_reason_ = "pipeline stages exchange activations through host memory";
  } else if (sharded_ && !comm_->device_memory()) {
    graphs_off_reason_ = "the tensor-parallel communicator works on host memory";
  } else {
    graphs_off_reason_.clear();
    graph_max_batch_ = max_batch;
  }
  return graph_max_batch_ > 0;
}

void TransformerModel::DropGraphs() {
  if (!graphs_.empty()) backend_.DropGraphs();
  graphs_.clear();
  graph_pointers_.clear();
}

int TransformerModel::GraphBatchFor(const ForwardBatch& batch) const {
  if (graph_max_batch_ <= 0 || !IsGraphableDecode(batch, graph_max_blocks_)) return 0;
  return GraphBatchSize(batch.num_seqs(), graph_max_batch_);
}

std::vector<const void*> TransformerModel::GraphPointers(KvCache& cache) const {
  std::vector<const void*> p;
  for (const kernels::Buffer* b : {&x_, &h_, &q_, &k_, &v_, &attn_, &gate_, &up_, &act_, &out_,
                                   &last_, &logits_, &gathered_, &ids_}) {
    p.push_back(b->data());
  }
  p.push_back(cache.k(0));
  p.push_back(cache.v(0));
  return p;
}

StatusOr<const float*> TransformerModel::ForwardWithGraph(const ForwardBatch& batch,
                                                          KvCache& cache) {
  const int size = GraphBatchFor(batch);
  PadDecodeBatch(batch, size, graph_max_blocks_, &padded_);
  LLM_RETURN_IF_ERROR(Reserve(padded_));
  // A graph points into the buffers of its recording: when one of them moved (a bigger batch
  // grew the workspace, a new cache, the backend's scratch), every graph is recorded again.
  const std::vector<const void*> pointers = GraphPointers(cache);
  if (pointers != graph_pointers_ || backend_.WorkspaceGeneration() != graph_generation_) {
    DropGraphs();
    graph_pointers_ = pointers;
    graph_generation_ = backend_.WorkspaceGeneration();
  }
  const DeviceBatch db = Upload(padded_);  // same offsets for every step of this size
  PlanRope(padded_);
  if (auto it = graphs_.find(size); it != graphs_.end()) {
    LLM_RETURN_IF_ERROR(backend_.ReplayGraph(it->second));
    return FinishStep(size);
  }
  // First step of this size: run it plainly (the backend sizes its scratch memory, the GEMM
  // plans are made), then record the same ops for the next steps. Recording does not run them:
  // the plain run already computed this step (its cache writes are the same either way).
  Enqueue(padded_, db, cache);
  LLM_RETURN_IF_ERROR(backend_.Synchronize());
  if (backend_.WorkspaceGeneration() != graph_generation_) {  // the plain run grew scratch
    DropGraphs();
    graph_pointers_ = pointers;
    graph_generation_ = backend_.WorkspaceGeneration();
  }
  Status recorded = backend_.BeginCapture();
  if (recorded.ok()) {
    Enqueue(padded_, db, cache);
    StatusOr<int> id = backend_.EndCapture();
    if (id.ok()) {
      graphs_[size] = *id;
    } else {
      recorded = id.status();
    }
  }
  if (!recorded.ok()) {
    // With several ranks every one must take the same path each step (their collectives must
    // match), so a rank cannot fall back alone: the step fails. One rank just stops recording.
    if (sharded_)
      return recorded.WithContext("recording a decode graph of " + std::to_string(size));
    graphs_off_reason_ = "recording failed: " + recorded.ToString();
    graph_max_batch_ = 0;
    DropGraphs();
  }
  return FinishStep(size);
}

}  // namespace llm
