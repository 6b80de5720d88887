// The family golden check of ../shared/golden/families (tests/golden/families_golden_test.cc on
// the CPU backend, tests/gpu/families_gpu_test.cc on the CUDA one): a family's model at `rel`
// against the NumPy float64 reference, greedy ids exact and every listed logit within 1e-3.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tests/golden/golden_util.h"
#include "worker/model/model_weights.h"

namespace llm::testing {

inline constexpr double kFamilyTolerance = 1e-3;  // the families README's bound, F32 engine

// Compares a reference top-10 list ([[id, logit], ...]) with one row of logits.
inline void ExpectTop10(const nlohmann::json& ref, const float* row, const std::string& where,
                        double* max_diff) {
  for (const auto& pair : ref) {
    const int id = pair[0].get<int>();
    const double want = pair[1].get<double>();
    const double diff = std::fabs(row[id] - want);
    *max_diff = std::max(*max_diff, diff);
    EXPECT_LE(diff, kFamilyTolerance)
        << where << " id " << id << ": got " << row[id] << " want " << want;
  }
}

// Runs `family`'s golden prompts on the model at `rel` (under golden/families/<family>/), on
// `backend` (its weights placed there when it has its own memory).
inline void ExpectFamilyGolden(const std::string& family, const std::string& rel,
                               kernels::Backend& backend = kernels::CpuBackend()) {
  const nlohmann::json ref = ReadJson(SharedPath("golden/families/" + family + "/reference.json"));
  auto weights = LoadModelWeights(SharedPath("golden/families/" + family + "/" + rel),
                                  LoadFormat::kSafetensors);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  if (!backend.caps().host_memory) {
    const Status placed = PlaceWeights(**weights, backend);
    ASSERT_TRUE(placed.ok()) << placed.ToString();
  }
  auto exec = RankExecutor::Create(**weights, backend);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  RankExecutor& model = **exec;
  const int vocab = model.config().vocab_size;
  double max_diff = 0;
  for (const auto& prompt : ref["prompts"]) {
    const std::string name = family + "/" + prompt["name"].get<std::string>();
    const auto ids = prompt["ids"].get<std::vector<int32_t>>();
    const auto greedy_ref = prompt["greedy_ids"].get<std::vector<int32_t>>();
    SequenceRunner runner(model, static_cast<int>(ids.size() + greedy_ref.size()));
    std::vector<float> logits = runner.Feed(ids, /*all_rows=*/true);
    for (size_t p = 0; p < ids.size(); ++p) {
      ExpectTop10(prompt["top10_per_position"][p], logits.data() + p * vocab,
                  name + " position " + std::to_string(p), &max_diff);
    }
    const float* last = logits.data() + (ids.size() - 1) * vocab;
    const auto& last_ref = prompt["last_position_logits"];
    for (int v = 0; v < vocab; ++v) {
      max_diff = std::max(max_diff, std::fabs(last[v] - last_ref[v].get<double>()));
      ASSERT_NEAR(last[v], last_ref[v].get<double>(), kFamilyTolerance)
          << name << " last logit " << v;
    }
    std::vector<int32_t> greedy;
    std::vector<float> step(last, last + vocab);
    for (size_t k = 0; k < greedy_ref.size(); ++k) {
      ExpectTop10(prompt["greedy_step_top10"][k], step.data(),
                  name + " greedy step " + std::to_string(k), &max_diff);
      greedy.push_back(Argmax(step.data(), vocab));
      if (k + 1 < greedy_ref.size()) step = runner.Feed({greedy.back()}, false);
    }
    EXPECT_EQ(greedy, greedy_ref) << name;
  }
  std::printf("[ %s/%s on %s ] max |logit - numpy_float64| = %.3g\n", family.c_str(), rel.c_str(),
              backend.caps().name.c_str(), max_diff);
}

}  // namespace llm::testing
