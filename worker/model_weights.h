// The weights of one model, ready for the forward pass: matrices are views into the
// memory-mapped safetensors (no copy), small vectors (norms, biases) are float32 copies.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/model_config.h"
#include "common/safetensors.h"
#include "common/status.h"

namespace llm {

// A row-major [rows, cols] matrix in `dtype`, as a Hugging Face nn.Linear stores it.
struct WeightMatrix {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int rows = 0;
  int cols = 0;
};

struct LayerWeights {
  std::vector<float> input_norm, post_attention_norm;
  std::vector<float> q_norm, k_norm;  // Qwen3 only, [head_dim]
  WeightMatrix q, k, v, o, gate, up, down;
  std::vector<float> q_bias, k_bias, v_bias, o_bias;  // empty when the model has none
  std::vector<float> gate_bias, up_bias, down_bias;
};

enum class LoadFormat { kSafetensors, kDummy };

struct ModelWeights {
  ModelConfig config;
  WeightMatrix embed;    // [vocab, hidden]
  WeightMatrix lm_head;  // [vocab, hidden]; the embedding when tied
  std::vector<float> final_norm;
  std::vector<LayerWeights> layers;
  size_t matrix_bytes = 0;  // bytes of all matrices (for memory planning and reports)

  // Owners of the memory the views above point into.
  std::unique_ptr<ModelWeightFiles> files;
  std::vector<std::vector<uint16_t>> owned16;
  std::vector<std::vector<float>> owned32;
};

// Loads `dir` (config.json + safetensors). Every mismatch (missing or unexpected tensor,
// wrong shape, unsupported dtype, truncated file) is an error naming the file and tensor.
// kDummy needs only config.json: weights are random (uniform, seeded, deterministic), in the
// config's torch_dtype, like vLLM's --load-format dummy.
StatusOr<std::unique_ptr<ModelWeights>> LoadModelWeights(const std::string& dir, LoadFormat format,
                                                         uint64_t dummy_seed = 0);

}  // namespace llm
