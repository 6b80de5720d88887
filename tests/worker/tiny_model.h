// Writes small Llama-style model folders (config.json + safetensors) for loader tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace llm::testing {

struct FakeTensor {
  std::string dtype = "F32";
  std::vector<int64_t> shape;
  std::vector<float> values;  // written in `dtype` (F32/F16/BF16); other dtypes get raw zeros
};

inline std::string TinyConfig() {
  return R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
    "vocab_size": 16, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
    "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": [2, 3]})";
}

// The tensors of TinyConfig(), random but deterministic.
inline std::map<std::string, FakeTensor> TinyTensors() {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  auto make = [&](std::vector<int64_t> shape, bool ones = false) {
    FakeTensor t;
    t.shape = shape;
    int64_t n = 1;
    for (auto d : shape) n *= d;
    for (int64_t i = 0; i < n; ++i) t.values.push_back(ones ? 1.0f + 0.1f * dist(rng) : dist(rng));
    return t;
  };
  const std::string p = "model.layers.0.";
  return {{"model.embed_tokens.weight", make({16, 8})},
          {"lm_head.weight", make({16, 8})},
          {"model.norm.weight", make({8}, true)},
          {p + "input_layernorm.weight", make({8}, true)},
          {p + "post_attention_layernorm.weight", make({8}, true)},
          {p + "self_attn.q_proj.weight", make({8, 8})},
          {p + "self_attn.k_proj.weight", make({4, 8})},
          {p + "self_attn.v_proj.weight", make({4, 8})},
          {p + "self_attn.o_proj.weight", make({8, 8})},
          {p + "mlp.gate_proj.weight", make({16, 8})},
          {p + "mlp.up_proj.weight", make({16, 8})},
          {p + "mlp.down_proj.weight", make({8, 16})}};
}

inline void WriteSafetensors(const std::string& path, const std::map<std::string, FakeTensor>& ts) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& [name, t] : ts) {
    const size_t begin = data.size();
    for (float v : t.values) {
      if (t.dtype == "F32") {
        data.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        uint16_t h = t.dtype == "F16" ? F32ToF16(v) : t.dtype == "BF16" ? F32ToBf16(v) : 0;
        data.append(reinterpret_cast<const char*>(&h), 2);
      }
    }
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  const std::string h = header.dump();
  const uint64_t len = h.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << h << data;
}

// A fresh folder under the test temp dir holding config.json (+ model.safetensors if given).
inline std::string MakeModelDir(const std::string& name, const std::string& config,
                                const std::map<std::string, FakeTensor>* tensors) {
  auto dir = std::filesystem::temp_directory_path() /
             ("llm_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << config;
  if (tensors) WriteSafetensors((dir / "model.safetensors").string(), *tensors);
  return dir.string();
}

}  // namespace llm::testing
