// The weights of one model (or of one tensor-parallel rank's shard of it), ready for the forward
// pass: matrices are views into the memory-mapped safetensors (no copy) where the shard is a row
// range, owned copies where it is a column slice; small vectors (norms, biases) are float32
// copies. Every tensor is a kernels::Weight (pointer + format + shape), so a quantized format or
// a device copy is a new Weight, not a new code path in the model.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config_sections.h"
#include "common/gguf.h"
#include "common/model_config.h"
#include "common/parallel_layout.h"
#include "common/safetensors.h"
#include "common/status.h"
#include "kernels/backend.h"

namespace llm {

// Every tensor is a kernels::Weight: a view tagged with its format. After loading they point
// into host memory (the memory-mapped files or the owned copies below); PlaceWeights moves them
// into a backend's memory when that is not host memory.
using kernels::Weight;

// One SwiGLU expert: this rank's columns of its intermediate dimension, like the dense MLP.
struct ExpertWeights {
  Weight gate, up, down;
};

struct LayerWeights {
  Weight input_norm, post_attention_norm;  // F32 [hidden]
  // Gemma 2's sandwich norms (post_attention_norm then normalizes the attention output).
  Weight pre_ffw_norm, post_ffw_norm;
  Weight q_norm, k_norm;  // Qwen3 only, F32 [head_dim]
  Weight q, k, v, o, gate, up, down;
  Weight q_bias, k_bias, v_bias, o_bias;  // F32; empty when the model has none
  Weight gate_bias, up_bias, down_bias;
  // Mixture of experts (config.layer_is_moe; gate/up/down above are then empty): the router
  // [num_experts, hidden] on every rank, the experts, and Qwen2-MoE's shared expert with its
  // gate [1, hidden].
  Weight router;
  std::vector<ExpertWeights> experts;
  ExpertWeights shared_expert;
  Weight shared_expert_gate;
};

// LoadFormat and ParseLoadFormat: common/model_config.h.

// The half-open range [begin, end) of one part of a dimension split over `parts` ranks.
struct ShardRange {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
};
// Ceil-sized chunks: part p gets [p * c, (p + 1) * c) clipped to n, c = ceil(n / parts), so
// uneven sizes (intermediate 172 over 8 ranks) work and every part but the last has c entries.
ShardRange SplitRange(int n, int parts, int part);

// Which shard of the model a rank holds. Column-parallel (q, k, v, gate, up) matrices keep the
// rank's row range, row-parallel ones (o, down) its column slice; embedding and lm_head keep a
// row range of the vocabulary. Query heads split evenly (num_heads % size == 0); KV heads split
// evenly too, or, when size is a multiple of num_kv_heads, are replicated: each rank keeps the
// one KV head its query heads attend with (vLLM's KV-head replication).
struct TensorParallel {
  int rank = 0;
  int size = 1;
};

// Which pipeline stage of the model a rank holds: the layers [layers.begin, layers.end), plus
// the embedding on the first stage and the final norm and lm_head on the last (a tied lm_head
// is the embedding, so the last stage keeps that too).
struct PipelineStage {
  int stage = 0;
  int num_stages = 1;
  std::vector<int> partition;  // engine.pipeline_layer_partition; empty: balanced
  LayerRange layers;           // set by LoadModelWeights
  bool first() const { return stage == 0; }
  bool last() const { return stage == num_stages - 1; }
};

// The shard engine rank `rank` of `world_size` holds (rank = stage * tp size + tp rank, tp size =
// world_size / engine.pipeline_parallel_size; see common/parallel_layout.h).
struct EngineShard {
  TensorParallel tp;
  PipelineStage pipeline;
};
EngineShard EngineShardOf(const EngineSection& engine, int rank, int world_size);

struct ShardDims {
  ShardRange heads;                // query heads of this rank
  ShardRange kv_heads;             // KV heads of this rank
  ShardRange intermediate;         // MLP columns of this rank
  ShardRange moe_intermediate;     // each expert's columns of this rank
  ShardRange shared_intermediate;  // the shared expert's columns of this rank
  ShardRange vocab;                // embedding / lm_head rows of this rank
  int vocab_chunk = 0;  // ceil(vocab / size): the padded per-rank width of gathered logits
};

struct ModelWeights {
  ModelConfig config;  // the whole model's hyper-parameters, whatever the shard
  TensorParallel tp;
  ShardDims shard;
  PipelineStage pipeline;
  // Tensors of another pipeline stage stay empty: embed off the first stage (and the last when
  // tied), final_norm and lm_head off the last, layers outside pipeline.layers (`layers` has
  // num_layers entries whatever the stage).
  Weight embed;  // [shard.vocab, hidden]
  // [shard.vocab_chunk, hidden]: this rank's vocabulary rows (the embedding's when tied), with
  // zero rows after them on a rank whose share is short, so every rank's logits have
  // vocab_chunk columns for the gather.
  Weight lm_head;
  Weight final_norm;
  std::vector<LayerWeights> layers;
  size_t matrix_bytes = 0;  // bytes of all matrices (for memory planning and reports)

  // Owners of the memory the views above point into.
  std::unique_ptr<ModelWeightFiles> files;
  std::unique_ptr<GgufFile> gguf;
  std::vector<std::vector<uint16_t>> owned16;
  std::vector<std::vector<float>> owned32;
  std::vector<std::vector<uint8_t>> owned8;     // block-format copies
  std::vector<kernels::Buffer> placed;          // backend copies (PlaceWeights)
  const kernels::Backend* placed_on = nullptr;  // nullptr: host memory

  // Calls fn(name, weight&) for every tensor (layers as "layers.N.q" etc.); the tied lm_head is
  // visited once as the embedding plus once more only when it is a separate (padded) copy.
  void ForEachWeight(const std::function<void(const std::string&, Weight&)>& fn);
  void ForEachWeight(const std::function<void(const std::string&, const Weight&)>& fn) const;
};

// InvalidArgument naming the first matrix whose format the backend cannot use.
Status CheckWeightFormats(const ModelWeights& w, const kernels::BackendCaps& caps);

// Makes `w` usable by `backend`: checks every matrix's format against the backend's
// capabilities (an error naming the tensor and format) and, for a backend whose memory is not
// host memory, copies every tensor into backend buffers and points the views at them.
// Idempotent for the same backend.
Status PlaceWeights(ModelWeights& w, kernels::Backend& backend);

// Loads `dir` (config.json + safetensors), or a .gguf file (config from its metadata, weights
// from its tensors: F32, F16, BF16 and the block formats of common/dtype.h; llama.cpp's tensor
// names and layout, see gguf_source.cc). Every mismatch (missing or unexpected tensor, wrong shape,
// unsupported dtype, truncated file) is an error naming the file and tensor. A .gguf path is
// recognised whatever `format` says, except kDummy (random weights of the file's shape); kGguf
// insists on one. kDummy needs only config.json: weights are random (uniform, seeded,
// deterministic), in the config's torch_dtype, like vLLM's --load-format dummy; every shard of a
// dummy model holds the same values as the matching part of the unsharded one. `tp` selects the
// shard; a tp.size that does not divide num_attention_heads or num_key_value_heads is an
// InvalidArgument naming both numbers. `quantize` (model.quantization): the linear weights
// (attention and MLP projections) of an F32/F16/BF16 model are quantized to that block format at
// load (worker/model/quantize_source.cc); with kDummy they are random blocks of that format.
// model.quantization as LoadModelWeights takes it (nullopt for "none").
std::optional<DType> ModelQuantization(const ModelSection& m);

// `pipeline` selects the stage (its stage, num_stages and partition; see PipelineLayerRanges for
// the errors naming engine.pipeline_parallel_size).
StatusOr<std::unique_ptr<ModelWeights>> LoadModelWeights(
    const std::string& dir, LoadFormat format, uint64_t dummy_seed = 0, TensorParallel tp = {},
    std::optional<DType> quantize = std::nullopt, PipelineStage pipeline = {});

}  // namespace llm
