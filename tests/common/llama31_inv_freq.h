// Llama-3.1-8B's rotary inv_freq under its "llama3" rope scaling (rope_theta 500000, head_dim
// 128, factor 8, low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192),
// computed with transformers' _compute_llama3_parameters: the independent values both the
// config.json path (model_loading_test.cc) and the GGUF rope_freqs path
// (gguf_model_config_test.cc) must give.
#pragma once

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace llm::testing {

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
