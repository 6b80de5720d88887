// Llama 3.1 / 3.2's "llama3" rope scaling in the two forms the tests compare: the rope_freqs
// factors llama.cpp's converter writes into a GGUF, and Llama-3.1-8B's inv_freq computed with
// transformers (independent values both the config.json path, model_loading_test.cc, and the GGUF
// path, gguf_model_config_test.cc, must give).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

namespace llm::testing {

// convert_hf_to_gguf.py, LlamaModel.generate_extra_tensors (llama.cpp c392e50): one factor per
// rotary lane pair of a head of `dim`, the frequencies in float32 as torch computes them there.
inline std::vector<float> ConverterLlama3RopeFactors(float base, int dim, double factor,
                                                     double low_freq_factor,
                                                     double high_freq_factor, double old_context) {
  std::vector<float> out;
  const double low_freq_wavelen = old_context / low_freq_factor;
  const double high_freq_wavelen = old_context / high_freq_factor;
  for (int i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(base, static_cast<float>(i) / static_cast<float>(dim));
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_freq_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth =
          (old_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      out.push_back(static_cast<float>(1 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

// Llama-3.1-8B: rope_theta 500000, head_dim 128, factor 8, low_freq_factor 1, high_freq_factor
// 4, original_max_position_embeddings 8192.
inline void ExpectLlama31InvFreq(const std::vector<float>& inv) {
  ASSERT_EQ(inv.size(), 64u);
  const std::pair<int, double> want[] = {{0, 1.0},
                                         {20, 0.016560440080994446},
                                         {40, 3.428102195952591e-05},
                                         {45, 1.2297638677963614e-05},
                                         {50, 4.411534674558404e-06},
                                         {63, 3.068925988914511e-07}};
  for (auto [i, v] : want) EXPECT_NEAR(inv[i], v, 1e-6 * v) << "inv_freq[" << i << "]";
}

}  // namespace llm::testing
