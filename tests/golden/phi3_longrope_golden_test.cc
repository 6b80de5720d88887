// Phi-3 with LongRoPE (rope_scaling "longrope" / "su"): there is no shared golden for it, so the
// test builds its own. phi3_model.h writes a small random-weight model (fixed seed) with
// original_max_position_embeddings 32, and phi3_reference.h runs a naive float64 forward pass
// written from transformers' modeling_phi3.py and _compute_longrope_parameters. The engine must
// give the reference's greedy ids exactly and every logit (all 512, every prompt position and
// every decode step) within 1e-3, on prompts that stay short, cross 32 while decoding, and start
// long; from the folder and from the same model as a llama.cpp-layout GGUF.
//
// Why the reference can be trusted: everything but LongRoPE is the shared phi3 family's
// architecture, which families_golden_test.cc checks against ../shared's NumPy reference;
// ReferenceRules checks the LongRoPE arithmetic by hand, and EveryRuleMovesTheLogits shows the
// comparison would catch each rule (long vs short factors, the switch point, attention_factor).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/gguf.h"
#include "common/model_config.h"
#include "tests/golden/golden_util.h"
#include "tests/golden/phi3_model.h"
#include "tests/golden/phi3_reference.h"
#include "worker/engine/engine.h"
#include "worker/engine/step_plan.h"
#include "worker/model/model_weights.h"

namespace llm::testing {
namespace {

namespace fs = std::filesystem;
using reference::Phi3RefConfig;
using reference::Phi3Reference;
using reference::RefGreedy;

constexpr double kTolerance = 1e-3;  // engine (float32) vs reference (float64)
constexpr int kSteps = 8;            // greedy tokens per prompt
// The partial-rotary model's seed: of seeds 1-40, the one whose reference keeps the greedy
// top-1 minus top-2 logit farthest from a tie (0.32; DISABLED_PartialRotarySeedScan).
constexpr uint64_t kPhi3PartialSeed = 34;

fs::path TempModelPath(const std::string& name) {
  return fs::temp_directory_path() / ("llm_phi3_" + std::to_string(getpid()) + "_" + name);
}

// `m` written as a safetensors folder at TempModelPath(name).
fs::path WriteFolder(const TinyModel& m, const std::string& name) {
  const fs::path dir = TempModelPath(name);
  m.Write(dir, SharedPath("models/stories260K"));
  return dir;
}

// A model written as a folder, loaded and on an engine; the folder is removed with it.
struct FolderEngine {
  fs::path dir;
  std::unique_ptr<ModelWeights> weights;
  std::unique_ptr<RankExecutor> exec;  // declared after weights: destroyed before them
  ~FolderEngine() { fs::remove_all(dir); }
};

// Writes `m` as the folder `name` and puts it on an engine (call with ASSERT_NO_FATAL_FAILURE).
void LoadFolderEngine(const TinyModel& m, const std::string& name, FolderEngine* out) {
  out->dir = WriteFolder(m, name);
  auto weights = LoadModelWeights(out->dir.string(), LoadFormat::kSafetensors);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  out->weights = std::move(*weights);
  auto exec = RankExecutor::Create(*out->weights);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  out->exec = std::move(*exec);
}

TEST(Phi3LongRopeReference, ReferenceRules) {
  const TinyModel m = MakeTinyPhi3(kPhi3Seed);
  const Phi3RefConfig c = reference::Phi3RefConfigFromJson(m.config);
  EXPECT_EQ(c.original_max, 32);
  EXPECT_NEAR(c.attention_factor, std::sqrt(1 + std::log(4.0) / std::log(32.0)), 1e-15);
  const Phi3Reference ref(c, &m.tensors);
  for (int i = 0; i < 8; ++i) {
    EXPECT_NEAR(ref.InvFreq(false)[i], 1 / ((1 + 0.1 * i) * std::pow(1e4, i / 8.0)), 1e-15);
    EXPECT_NEAR(ref.InvFreq(true)[i], 1 / (std::pow(1.6, i) * std::pow(1e4, i / 8.0)), 1e-15);
  }
  // An explicit attention_factor wins; without an original length the factor is
  // rope_scaling.factor (absent: 1, so attention_factor 1).
  EXPECT_EQ(reference::Phi3RefConfigFromJson(MakeTinyPhi3(kPhi3Seed, 0.5).config).attention_factor,
            0.5);
  nlohmann::json j = m.config;
  j.erase("original_max_position_embeddings");
  EXPECT_EQ(reference::Phi3RefConfigFromJson(j).attention_factor, 1.0);
}

// The golden is sensitive to every LongRoPE rule: the reference with any one changed moves some
// logit of the prompts far more than the tolerance.
TEST(Phi3LongRopeReference, EveryRuleMovesTheLogits) {
  const TinyModel m = MakeTinyPhi3(kPhi3Seed);
  const Phi3RefConfig c = reference::Phi3RefConfigFromJson(m.config);
  for (const auto& prompt : Phi3Prompts()) {
    const RefGreedy g = reference::ReferenceGreedy(Phi3Reference(c, &m.tensors), prompt, kSteps);
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), g.ids.begin(), g.ids.end() - 1);
    const auto want = Phi3Reference(c, &m.tensors).Forward(seq, prompt.size());
    auto moved = [&](const Phi3RefConfig& other) {
      return reference::MaxAbsDiff(Phi3Reference(other, &m.tensors).Forward(seq, prompt.size()),
                                   want);
    };
    Phi3RefConfig x = c;
    x.original_max = 1 << 20;  // short factors everywhere
    const double all_short = moved(x);
    x.original_max = 0;  // long factors everywhere
    const double all_long = moved(x);
    x = c;
    x.attention_factor = 1;
    const double no_mscale = moved(x);
    EXPECT_GT(no_mscale, 100 * kTolerance) << "attention_factor, prompt of " << prompt.size();
    std::printf(
        "[ phi3 longrope prompt of %zu ] max logit change: all short %.3g, all long %.3g, "
        "attention_factor 1: %.3g\n",
        prompt.size(), all_short, all_long, no_mscale);
    if (prompt.size() > 32) {
      EXPECT_GT(all_short, 100 * kTolerance) << "long factors";
      EXPECT_EQ(all_long, 0.0);
    } else if (seq.size() > 32) {  // short prompt, long decode steps
      EXPECT_GT(all_short, 100 * kTolerance) << "long factors from length 33";
      EXPECT_GT(all_long, 100 * kTolerance) << "short factors up to length 32";
    } else {
      EXPECT_EQ(all_short, 0.0);
      EXPECT_GT(all_long, 100 * kTolerance) << "short factors";
    }
  }
}

// Loads `path` (a folder or a .gguf) and runs every prompt against the reference of `m`.
void ExpectEngineMatchesReference(const std::string& path, const TinyModel& m) {
  auto weights = LoadModelWeights(path, LoadFormat::kSafetensors);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  const RopeScaling& rs = (*weights)->config.rope_scaling;
  EXPECT_EQ(rs.type, RopeScalingType::kLongRope);
  EXPECT_EQ(rs.original_max_position_embeddings, 32);
  const Phi3Reference ref(reference::Phi3RefConfigFromJson(m.config), &m.tensors);
  ExpectEngineOnWeightsMatchesGreedy(
      **weights, ref, Phi3Prompts(), kSteps, kTolerance,
      std::string("phi3 longrope ") + (IsGgufPath(path) ? "gguf" : "hf"));
}

// The same from `m` written as the folder `name`.
void ExpectFolderMatchesReference(const TinyModel& m, const std::string& name) {
  const fs::path dir = WriteFolder(m, name);
  ExpectEngineMatchesReference(dir.string(), m);
  fs::remove_all(dir);
}

TEST(Phi3LongRopeGolden, EngineMatchesReference) {
  ExpectFolderMatchesReference(MakeTinyPhi3(kPhi3Seed), "hf");
}

// The same model as llama.cpp's converter writes it (factors as tensors, written here).
TEST(Phi3LongRopeGolden, F32GgufMatchesReference) {
  const TinyModel m = MakeTinyPhi3(kPhi3Seed);
  const fs::path path = TempModelPath("m.gguf");
  WriteTinyPhi3Gguf(m, path.string());
  ExpectEngineMatchesReference(path.string(), m);
  fs::remove(path);
}

// Phi-4-mini's partial rotary (partial_rotary_factor 0.75: RoPE on 12 of 16 lanes, 6 LongRoPE
// factors of each kind) from the folder and from a GGUF, where llama.cpp's converter stores it as
// phi3.rope.dimension_count = 12. Rotating whole heads instead (the factors extended with ones)
// would move the logits far beyond the tolerance, so the golden needs the rotary dimension.
TEST(Phi3LongRopeGolden, PartialRotaryMatchesReference) {
  const TinyModel m = MakeTinyPhi3(kPhi3PartialSeed, -1, 0.75);
  const Phi3RefConfig c = reference::Phi3RefConfigFromJson(m.config);
  ASSERT_EQ(c.rotary_dim, 12);
  ASSERT_EQ(c.short_factor.size(), 6u);
  Phi3RefConfig whole = c;
  whole.rotary_dim = c.head_dim;
  whole.short_factor.resize(c.head_dim / 2, 1.0);
  whole.long_factor.resize(c.head_dim / 2, 1.0);
  for (const auto& prompt : Phi3Prompts()) {
    const double moved =
        reference::MaxAbsDiff(Phi3Reference(whole, &m.tensors).Forward(prompt, prompt.size()),
                              Phi3Reference(c, &m.tensors).Forward(prompt, prompt.size()));
    EXPECT_GT(moved, 100 * kTolerance) << "whole-head rotary, prompt of " << prompt.size();
  }
  const fs::path path = TempModelPath("partial.gguf");
  WriteTinyPhi3Gguf(m, path.string());
  auto cfg = LoadModelConfig(path.string());
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->head_dim, 16);
  EXPECT_EQ(cfg->rotary_dim, 12);
  EXPECT_FALSE(cfg->rope_interleaved);
  EXPECT_EQ(cfg->rope_scaling.long_factor.size(), 6u);
  ExpectEngineMatchesReference(path.string(), m);
  fs::remove(path);
  ExpectFolderMatchesReference(m, "partial_hf");
}

// How kPhi3PartialSeed was chosen: run with --gtest_also_run_disabled_tests.
TEST(Phi3LongRopeGolden, DISABLED_PartialRotarySeedScan) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const TinyModel m = MakeTinyPhi3(seed, -1, 0.75);
    const Phi3Reference ref(reference::Phi3RefConfigFromJson(m.config), &m.tensors);
    double margin = 1e300;
    for (const auto& prompt : Phi3Prompts()) {
      margin = std::min(margin, reference::ReferenceGreedy(ref, prompt, kSteps).min_margin);
    }
    std::printf("seed %d: min greedy margin %.4f\n", static_cast<int>(seed), margin);
  }
}

// A GGUF with only one of the two factor tensors is an error naming the missing one.
TEST(Phi3LongRopeGolden, GgufWithoutShortFactorsIsAnError) {
  const fs::path path = TempModelPath("broken.gguf");
  WriteTinyPhi3Gguf(MakeTinyPhi3(kPhi3Seed), path.string(), /*short_factors=*/false);
  auto c = LoadModelConfig(path.string());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().ToString().find("rope_factors_short.weight"), std::string::npos)
      << c.status().ToString();
  fs::remove(path);
}

// One step holding a long and a short sequence: each rotates with its own factors (the rule is
// per sequence), so both give the logits they give alone.
TEST(Phi3LongRopeGolden, FactorsArePerSequenceInOneBatch) {
  const TinyModel m = MakeTinyPhi3(kPhi3Seed);
  FolderEngine engine;
  ASSERT_NO_FATAL_FAILURE(LoadFolderEngine(m, "batch", &engine));
  RankExecutor& model = *engine.exec;
  const Phi3Reference ref(reference::Phi3RefConfigFromJson(m.config), &m.tensors);
  constexpr int kBlock = 4, kBlocksPerSeq = 10;
  ASSERT_TRUE(model.AllocateCache(3 * kBlocksPerSeq, kBlock).ok());
  // Short, long, short: three runs of the RoPE tables in one batch.
  const std::vector<std::vector<int32_t>> seqs = {Phi3Prompts()[0], Phi3Prompts()[2],
                                                  Phi3Prompts()[1]};
  ForwardBatch& b = model.batch();
  b.Clear();
  b.max_blocks_per_seq = kBlocksPerSeq;
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (size_t p = 0; p < seqs[s].size(); ++p) {
      b.logit_rows.push_back(b.num_tokens());
      b.token_ids.push_back(seqs[s][p]);
      b.positions.push_back(static_cast<int32_t>(p));
      b.slot_mapping.push_back(static_cast<int32_t>(s * kBlocksPerSeq * kBlock + p));
    }
    b.query_start.push_back(b.num_tokens());
    b.context_len.push_back(static_cast<int32_t>(seqs[s].size()));
    for (int i = 0; i < kBlocksPerSeq; ++i) {
      b.block_tables.push_back(static_cast<int32_t>(s * kBlocksPerSeq + i));
    }
  }
  auto logits = model.Execute();
  ASSERT_TRUE(logits.ok()) << logits.status().ToString();
  const int vocab = model.config().vocab_size;
  size_t row = 0;
  double max_diff = 0;
  for (const auto& seq : seqs) {
    std::vector<std::vector<float>> got;
    for (size_t p = 0; p < seq.size(); ++p, ++row) {
      got.emplace_back(*logits + row * vocab, *logits + (row + 1) * vocab);
    }
    max_diff =
        std::max(max_diff, ExpectRowsNear(got, ref.Forward(seq, seq.size()), kTolerance,
                                          "batched prompt of " + std::to_string(seq.size())));
  }
  std::printf("[ phi3 longrope batch ] max |engine - reference| = %.3g\n", max_diff);
}

// Prefix caching with LongRoPE: the 28-token prompt (short) and the 40-token one (long) share
// their first 20 tokens, but not their keys: the long prompt rotates every token with the long
// factors. So the long prompt must not take the short one's cached blocks (it would attend to
// keys rotated with the short factors and leave the reference), and it still shares blocks with
// another long prompt. Greedy ids against the reference, through the engine's scheduler.
TEST(Phi3LongRopeGolden, PrefixCacheKeepsLongAndShortKeysApart) {
  const TinyModel m = MakeTinyPhi3(kPhi3Seed);
  FolderEngine folder;
  ASSERT_NO_FATAL_FAILURE(LoadFolderEngine(m, "prefix", &folder));
  const Phi3Reference ref(reference::Phi3RefConfigFromJson(m.config), &m.tensors);
  const std::vector<int32_t> shorter = Phi3Prompts()[1], longer = Phi3Prompts()[2];
  ASSERT_TRUE(std::equal(shorter.begin(), shorter.begin() + 20, longer.begin()));
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.block_size = 4;
  cfg.enable_prefix_caching = true;
  auto engine = Engine::Create(*folder.weights, cfg);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto generate = [&](const std::vector<int32_t>& prompt) {
    auto out = GenerateAll(**engine, {GreedyRequest(prompt, kSteps)});
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? TokenIds((*out)[0]) : std::vector<int32_t>{};
  };
  EXPECT_EQ(generate(shorter), reference::ReferenceGreedy(ref, shorter, kSteps).ids);
  const int64_t hits_before = (*engine)->stats().prefix_cache_hit_tokens;
  const std::vector<int32_t> want = reference::ReferenceGreedy(ref, longer, kSteps).ids;
  EXPECT_EQ(generate(longer), want) << "the long prompt reused the short prompt's blocks";
  EXPECT_EQ((*engine)->stats().prefix_cache_hit_tokens, hits_before);
  EXPECT_EQ(generate(longer), want);  // now from the long prompt's own blocks
  EXPECT_GE((*engine)->stats().prefix_cache_hit_tokens, hits_before + 36);
  EXPECT_EQ((*engine)->stats().blocks_free, 64) << "blocks leaked";
}

// Preemption: with too few KV blocks for both, the 40-token (long) and the 28-token (short,
// long from position 32 on) prompts preempt each other while decoding; every recompute must
// give each token the rotation it had (the scheduler splits a recompute at the boundary), so
// both still produce the reference's greedy ids, with and without prefix caching.
TEST(Phi3LongRopeGolden, PreemptedSequencesKeepTheirRotations) {
  const TinyModel m = MakeTinyPhi3(kPhi3Seed);
  FolderEngine folder;
  ASSERT_NO_FATAL_FAILURE(LoadFolderEngine(m, "preempt", &folder));
  const Phi3Reference ref(reference::Phi3RefConfigFromJson(m.config), &m.tensors);
  const std::vector<std::vector<int32_t>> prompts = {Phi3Prompts()[2], Phi3Prompts()[1]};
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : prompts) want.push_back(reference::ReferenceGreedy(ref, p, kSteps).ids);
  int64_t preemptions = 0;
  for (const bool caching : {false, true}) {
    for (int blocks = 18; blocks <= 21; ++blocks) {
      SCOPED_TRACE("blocks " + std::to_string(blocks) + (caching ? " with" : " without") +
                   " prefix caching");
      EngineConfig cfg;
      cfg.num_blocks = blocks;
      cfg.block_size = 4;
      cfg.enable_prefix_caching = caching;
      auto engine = Engine::Create(*folder.weights, cfg);
      ASSERT_TRUE(engine.ok()) << engine.status().ToString();
      std::vector<GenerateRequest> reqs;
      for (const auto& p : prompts) reqs.push_back(GreedyRequest(p, kSteps));
      auto out = GenerateAll(**engine, reqs);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(TokenIds((*out)[i]), want[i]) << "prompt of " << prompts[i].size();
      }
      preemptions += (*engine)->stats().preemptions;
      EXPECT_EQ((*engine)->stats().blocks_free, blocks) << "blocks leaked";
    }
  }
  EXPECT_GT(preemptions, 0);  // the test means something only if some runs preempted
  std::printf("[ phi3 longrope preemption ] %lld preemptions\n",
              static_cast<long long>(preemptions));
}

// A prompt longer than original_max_position_embeddings (40 > 32) prefilled in 8-token chunks, as
// chunked prefill (scheduler.max_prefill_chunk / max_num_batched_tokens) splits it: the batches
// come from BuildForwardBatch, as every rank builds them, and every chunk must rotate with the
// long factors as transformers' one forward of the whole prompt does, so every prompt position
// and the greedy steps after it match the reference. Deciding per chunk by the tokens held so
// far (the first four chunks short) moves the logits far beyond the tolerance.
TEST(Phi3LongRopeGolden, ChunkedLongPromptMatchesReference) {
  const TinyModel m = MakeTinyPhi3(kPhi3Seed);
  FolderEngine engine;
  ASSERT_NO_FATAL_FAILURE(LoadFolderEngine(m, "chunked", &engine));
  RankExecutor& model = *engine.exec;
  const int vocab = model.config().vocab_size;
  const Phi3Reference ref(reference::Phi3RefConfigFromJson(m.config), &m.tensors);
  const std::vector<int32_t> prompt = Phi3Prompts()[2];
  ASSERT_EQ(prompt.size(), 40u);
  const RefGreedy want = reference::ReferenceGreedy(ref, prompt, kSteps);
  constexpr int kBlock = 4, kChunk = 8;
  const int blocks = (static_cast<int>(prompt.size()) + kSteps + kBlock - 1) / kBlock;
  // by_prompt false: the batches without rope_len (the rule per chunk, as before the fix).
  auto run = [&](bool by_prompt) {
    EXPECT_TRUE(model.AllocateCache(blocks, kBlock).ok());
    Sequence seq;
    seq.id = 1;
    seq.prompt = prompt;
    for (int i = 0; i < blocks; ++i) seq.block_table.push_back(blocks - 1 - i);
    EngineRun r;
    ForwardBatch& b = model.batch();
    while (seq.num_computed < static_cast<int>(prompt.size())) {
      const int n = std::min(kChunk, static_cast<int>(prompt.size()) - seq.num_computed);
      BuildForwardBatch({{&seq, n, true}}, kBlock, &b);
      if (!by_prompt) b.rope_len.clear();
      b.logit_rows.clear();
      for (int i = 0; i < n; ++i) b.logit_rows.push_back(i);
      auto logits = model.Execute();
      EXPECT_TRUE(logits.ok()) << logits.status().ToString();
      if (!logits.ok()) return r;
      for (int i = 0; i < n; ++i) {
        r.prompt_logits.emplace_back(*logits + i * vocab, *logits + (i + 1) * vocab);
      }
      seq.num_computed += n;
    }
    std::vector<float> step = r.prompt_logits.back();
    for (int k = 0; k < kSteps; ++k) {
      r.step_logits.push_back(step);
      r.ids.push_back(Argmax(step.data(), vocab));
      if (k + 1 == kSteps) break;
      seq.output.push_back(r.ids.back());
      BuildForwardBatch({{&seq, 1, true}}, kBlock, &b);
      if (!by_prompt) b.rope_len.clear();
      auto logits = model.Execute();
      EXPECT_TRUE(logits.ok()) << logits.status().ToString();
      if (!logits.ok()) return r;
      step.assign(*logits, *logits + vocab);
      seq.num_computed += 1;
    }
    return r;
  };
  const EngineRun got = run(true);
  EXPECT_EQ(got.ids, want.ids);
  const double diff =
      std::max(ExpectRowsNear(got.prompt_logits, want.prompt_logits, kTolerance, "position"),
               ExpectRowsNear(got.step_logits, want.step_logits, kTolerance, "greedy step"));
  const EngineRun per_chunk = run(false);
  double moved = 0;
  for (size_t p = 0; p < per_chunk.prompt_logits.size(); ++p) {
    for (int v = 0; v < vocab; ++v) {
      moved = std::max(moved, std::fabs(per_chunk.prompt_logits[p][v] - want.prompt_logits[p][v]));
    }
  }
  EXPECT_GT(moved, 100 * kTolerance) << "short factors on the first chunks";
  std::printf(
      "[ phi3 longrope chunked ] max |engine - reference| = %.3g; deciding per chunk: %.3g\n", diff,
      moved);
}

// Config parsing follows transformers' _compute_longrope_parameters; errors name the key.
constexpr const char* kBase = R"({"architectures": ["Phi3ForCausalLM"], "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
    "vocab_size": 512, "max_position_embeddings": 131072)";

std::string Factors(int n, double v) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v + i);
  return s + "]";
}

TEST(Phi3LongRopeConfig, KeysFollowTransformers) {
  const std::string rope = R"(, "rope_scaling": {"type": "su", "short_factor": )" + Factors(8, 1) +
                           R"(, "long_factor": )" + Factors(8, 2) + "}";
  auto c = ParseModelConfig(
      std::string(kBase) + R"(, "original_max_position_embeddings": 4096)" + rope + "}", "t");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const RopeScaling& rs = c->rope_scaling;
  EXPECT_EQ(rs.type, RopeScalingType::kLongRope);
  EXPECT_EQ(rs.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(rs.attention_factor, std::sqrt(1 + std::log(32.0) / std::log(4096.0)));
  EXPECT_FALSE(RopeUsesLongFactors(rs, 4096));
  EXPECT_TRUE(RopeUsesLongFactors(rs, 4097));
  const std::vector<float> s = RopeInvFreq(*c), l = RopeInvFreq(*c, true);
  for (int i = 0; i < 8; ++i) {
    EXPECT_FLOAT_EQ(s[i], static_cast<float>(1 / ((1.0 + i) * std::pow(1e4, i / 8.0))));
    EXPECT_FLOAT_EQ(l[i], static_cast<float>(1 / ((2.0 + i) * std::pow(1e4, i / 8.0))));
  }
  // The original length from rope_scaling, an explicit attention_factor.
  c = ParseModelConfig(std::string(kBase) + R"(, "rope_scaling": {"rope_type": "longrope",
      "original_max_position_embeddings": 8192, "attention_factor": 1.5, "short_factor": )" +
                           Factors(8, 1) + R"(, "long_factor": )" + Factors(8, 2) + "}}",
                       "t");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c->rope_scaling.attention_factor, 1.5);
  // No original length: max_position_embeddings, factor 1, attention_factor 1.
  c = ParseModelConfig(std::string(kBase) + rope + "}", "t");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 131072);
  EXPECT_EQ(c->rope_scaling.attention_factor, 1.0);
  // Other models keep attention_factor 1 and never use long factors.
  c = ParseModelConfig(std::string(kBase) + "}", "t");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rope_scaling.attention_factor, 1.0);
  EXPECT_FALSE(RopeUsesLongFactors(c->rope_scaling, 1 << 30));

  for (const std::string& bad :
       {R"(, "rope_scaling": {"type": "longrope", "short_factor": )" + Factors(7, 1) +
            R"(, "long_factor": )" + Factors(8, 1) + "}}",
        R"(, "rope_scaling": {"type": "longrope", "short_factor": )" + Factors(8, 1) + "}}",
        R"(, "rope_scaling": {"type": "longrope", "short_factor": )" + Factors(8, 1) +
            R"(, "long_factor": )" + Factors(8, -3) + "}}"}) {
    auto e = ParseModelConfig(std::string(kBase) + bad, "t");
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().ToString().find("_factor'"), std::string::npos) << e.status().ToString();
  }
}

// Phi-4-mini's partial_rotary_factor: RoPE on int(head_dim × factor) lanes, and the LongRoPE
// factor lists have that / 2 entries (transformers' dim in _compute_longrope_parameters).
TEST(Phi3LongRopeConfig, PartialRotary) {
  auto c = ParseModelConfig(std::string(kBase) + R"(, "partial_rotary_factor": 0.75,
      "rope_scaling": {"type": "longrope", "short_factor": )" +
                                Factors(6, 1) + R"(, "long_factor": )" + Factors(6, 2) + "}}",
                            "t");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->rotary_dim, 12);
  EXPECT_FALSE(c->rope_interleaved);
  const std::vector<float> inv = RopeInvFreq(*c);
  ASSERT_EQ(inv.size(), 6u);
  EXPECT_FLOAT_EQ(inv[1], static_cast<float>(1 / (2.0 * std::pow(1e4, 2.0 / 12))));
  auto bad = ParseModelConfig(std::string(kBase) + R"(, "partial_rotary_factor": 0.75,
      "rope_scaling": {"type": "longrope", "short_factor": )" +
                                  Factors(8, 1) + R"(, "long_factor": )" + Factors(8, 2) + "}}",
                              "t");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("short_factor"), std::string::npos);
}

}  // namespace
}  // namespace llm::testing
