// Tensor parallelism under real mpirun: tests/mpi/tp_driver.cc on 1, 2 and 4 ranks
// (oversubscribed on small machines) must give exactly the greedy ids of the independent NumPy
// references in ../shared/golden, free every KV block, survive preemption and aborts, refuse a
// world size that does not divide the KV heads, and leave idle followers asleep.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/golden/gemma3_model.h"
#include "tests/golden/glm_model.h"
#include "tests/golden/glm_reference.h"
#include "tests/golden/phi3_model.h"
#include "tests/golden/phi3_reference.h"
#include "tests/golden/qwen3moe_model.h"

namespace llm::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string SharedPath(const std::string& rel) {
  return (fs::path(LLM_SHARED_DIR) / rel).string();
}

std::string FindMpirun() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path p = fs::path(dir) / "mpirun";
    if (!dir.empty() && access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

#define LLM_REQUIRE_MPIRUN()                                                         \
  const std::string mpirun = FindMpirun();                                           \
  if (mpirun.empty()) GTEST_SKIP() << "mpirun not found on PATH: MPI tests skipped"; \
  static_assert(true)

#define LLM_REQUIRE_SHARED(rel) \
  if (!fs::exists(SharedPath(rel))) GTEST_SKIP() << "missing shared test data: " << SharedPath(rel)

struct Request {
  std::vector<int32_t> prompt;
  std::vector<int32_t> want;  // golden greedy ids
};

class TpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("llm_tp_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string WriteRequests(const std::vector<Request>& reqs) {
    json doc = {{"requests", json::array()}};
    for (const auto& r : reqs) {
      doc["requests"].push_back({{"prompt", r.prompt}, {"max_tokens", r.want.size()}});
    }
    const std::string path = (dir_ / "requests.json").string();
    std::ofstream(path) << doc.dump();
    return path;
  }

  // The mpirun command line for `np` ranks of the driver, bounded by `timeout_s`.
  std::string Command(const std::string& mpirun, int np, const std::string& args,
                      int timeout_s = 240) const {
    return "timeout -k 5 " + std::to_string(timeout_s) + " " + mpirun +
           " --allow-run-as-root --oversubscribe --bind-to none -np " + std::to_string(np) +
           " -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=passive " + LLM_TP_DRIVER + " --result " +
           ResultPath().string() + " " + args + " 2>" + (dir_ / "stderr.txt").string();
  }

  std::string stdout_;  // of the last Run

  std::string Stderr() const {
    std::ifstream in(dir_ / "stderr.txt");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // Where the driver's rank 0 writes its JSON result (--result).
  fs::path ResultPath() const { return dir_ / "result.json"; }

  // Runs the driver; returns its exit status and the JSON result file rank 0 wrote (discarded
  // if left unset). All the job printed, the ranks' logs too, is in stdout_.
  int Run(const std::string& cmd, json* result) {
    fs::remove(ResultPath());
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return -1;
    char buf[1 << 16];
    stdout_.clear();
    while (std::fgets(buf, sizeof(buf), p)) {
      if (stdout_.size() < (1u << 20)) stdout_ += buf;
    }
    const int status = pclose(p);
    std::ifstream in(ResultPath());
    if (in && result) *result = json::parse(in, nullptr, false);
    return status;
  }

  // Runs `reqs` on `np` ranks and checks the exact ids (requests with index % abort_every ==
  // abort_every - 1 are aborted and must come back empty).
  void ExpectGolden(const std::string& mpirun, const std::string& model,
                    const std::vector<Request>& reqs, int np, const std::string& extra = "",
                    int abort_every = 0, json* out = nullptr) {
    const std::string args = "--model " + model + " --requests " + WriteRequests(reqs) + " " +
                             extra + (abort_every ? " --abort " + std::to_string(abort_every) : "");
    json result;
    const int status = Run(Command(mpirun, np, args), &result);
    ASSERT_EQ(status, 0) << "np=" << np << " exit status " << status << "\n" << Stderr();
    ASSERT_TRUE(result.is_object()) << "np=" << np << ": no JSON output\n" << Stderr();
    EXPECT_EQ(result["world_size"], np);
    const auto& outputs = result["outputs"];
    ASSERT_EQ(outputs.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      const bool aborted = abort_every > 0 && (i + 1) % abort_every == 0;
      const auto got = outputs[i].get<std::vector<int32_t>>();
      if (aborted) {
        EXPECT_TRUE(got.empty()) << "np=" << np << " request " << i << " was aborted";
      } else {
        EXPECT_EQ(got, reqs[i].want) << model << " np=" << np << " request " << i;
      }
    }
    EXPECT_EQ(result["blocks_free"], result["blocks_total"]) << "np=" << np << ": blocks leaked";
    if (out) *out = result;
  }

  fs::path dir_;
};

std::vector<Request> StoriesRequests() {
  std::vector<Request> reqs;
  std::ifstream in(SharedPath("golden/stories260K_greedy.jsonl"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const json c = json::parse(line);
    reqs.push_back({c["prompt_token_ids"].get<std::vector<int32_t>>(),
                    c["greedy_token_ids"].get<std::vector<int32_t>>()});
  }
  return reqs;
}

std::vector<Request> FamilyRequests(const std::string& family) {
  std::ifstream in(SharedPath("golden/families/" + family + "/reference.json"));
  const json ref = json::parse(in);
  std::vector<Request> reqs;
  for (const auto& p : ref["prompts"]) {
    reqs.push_back(
        {p["ids"].get<std::vector<int32_t>>(), p["greedy_ids"].get<std::vector<int32_t>>()});
  }
  return reqs;
}

// The families of ../shared/golden/families.
constexpr const char* kFamilies[] = {"llama",  "mistral", "qwen2",   "qwen3",   "gemma",
                                     "gemma2", "phi3",    "mixtral", "qwen2moe"};
constexpr const char* kStoriesGolden = "golden/stories260K_greedy.jsonl";
constexpr const char* kStories = "models/stories260K";

TEST_F(TpTest, Stories260KGreedyIdsOn1To8Ranks) {
  LLM_REQUIRE_MPIRUN();
  LLM_REQUIRE_SHARED(kStoriesGolden);
  LLM_REQUIRE_SHARED(kStories);
  const auto reqs = StoriesRequests();
  ASSERT_FALSE(reqs.empty());
  // 8 ranks > 4 KV heads: each KV head replicated on two ranks.
  for (int np : {1, 2, 4, 8}) ExpectGolden(mpirun, SharedPath(kStories), reqs, np);
}

TEST_F(TpTest, FamiliesGreedyIdsOn1To4Ranks) {
  LLM_REQUIRE_MPIRUN();
  for (const char* family : kFamilies) {
    const std::string rel = std::string("golden/families/") + family;
    LLM_REQUIRE_SHARED(rel + "/reference.json");
    const auto reqs = FamilyRequests(family);
    for (int np : {1, 2}) ExpectGolden(mpirun, SharedPath(rel + "/hf"), reqs, np);
    // 4 ranks > 2 KV heads (replicated), where 4 divides the query heads.
    if (std::string(family) != "qwen2") ExpectGolden(mpirun, SharedPath(rel + "/hf"), reqs, 4);
  }
}

// Qwen3-MoE has no shared golden: the random-weight model of tests/golden/qwen3moe_model.h,
// written here, against the float64 reference of qwen3moe_reference.h (which
// qwen3moe_golden_test.cc validates on the shared qwen3 and qwen2moe references). 2 ranks split
// each expert's 32 intermediate columns (and the dense layer's 96) in halves; the all-sparse
// model also from its F32 GGUF.
TEST_F(TpTest, Qwen3MoeGreedyIdsOn1And2Ranks) {
  LLM_REQUIRE_MPIRUN();
  for (int dense_layer : {-1, 0}) {
    const TinyQwen3Moe m = MakeTinyQwen3Moe(kQwen3MoeSeed, dense_layer);
    const fs::path model = dir_ / ("qwen3moe" + std::to_string(dense_layer + 1));
    m.Write(model, SharedPath("models/stories260K"));
    const reference::Reference ref(reference::RefConfigFromJson(m.config), &m.tensors);
    std::vector<Request> reqs;
    for (const auto& prompt : Qwen3MoePrompts()) {
      reqs.push_back({prompt, reference::ReferenceGreedy(ref, prompt, 8).ids});
    }
    for (int np : {1, 2}) ExpectGolden(mpirun, model.string(), reqs, np);
    if (dense_layer >= 0) continue;
    const std::string gguf = (dir_ / "qwen3moe.gguf").string();  // the same, llama.cpp's layout
    WriteTinyQwen3MoeGguf(m, gguf);
    for (int np : {1, 2}) ExpectGolden(mpirun, gguf, reqs, np);
  }
}

// Gemma 3 has no shared golden either: the random-weight model of tests/golden/gemma3_model.h
// against the float64 reference of gemma3_reference.h (validated in gemma3_golden_test.cc on
// the shared gemma2 reference). 2 ranks hold 2 query heads and 1 KV head each (with their q/k
// norms and both RoPE tables); 4 ranks replicate the KV heads. Prompts longer than the sliding
// window, both the sliding_window_pattern and the layer_types + soft-caps variants (also over
// two pipeline stages, and TP2 x PP2), the 6-layer variant from its F32 GGUF, and the text
// model as a multimodal checkpoint's language model.
TEST_F(TpTest, Gemma3GreedyIdsOnRanksAndStages) {
  LLM_REQUIRE_MPIRUN();
  for (auto variant : {Gemma3Variant::kPattern, Gemma3Variant::kLayerTypes}) {
    const TinyGemma3 m = MakeTinyGemma3(kGemma3Seed, variant);
    const fs::path model =
        dir_ / (variant == Gemma3Variant::kPattern ? "gemma3_pattern" : "gemma3_layer_types");
    m.Write(model, SharedPath("models/stories260K"));
    const reference::GemmaReference ref(reference::GemmaRefConfigFromJson(m.config), &m.tensors);
    std::vector<Request> reqs;
    for (const auto& prompt : StoriesPrompts()) {
      reqs.push_back({prompt, reference::ReferenceGreedy(ref, prompt, 8).ids});
    }
    for (int np : {1, 2, 4}) ExpectGolden(mpirun, model.string(), reqs, np);
    // Two pipeline stages (layers 0-1 and 2-3: sliding and global layers on each), alone and
    // with TP2 in each stage.
    ExpectGolden(mpirun, model.string(), reqs, 2, "--pp 2");
    ExpectGolden(mpirun, model.string(), reqs, 4, "--pp 2");
  }
  // The 6-layer variant as an F32 GGUF in llama.cpp's gemma3 layout.
  const TinyGemma3 m = MakeTinyGemma3(kGemma3Seed, Gemma3Variant::kGguf);
  const reference::GemmaReference ref(reference::GemmaRefConfigFromJson(m.config), &m.tensors);
  std::vector<Request> reqs;
  for (const auto& prompt : StoriesPrompts()) {
    reqs.push_back({prompt, reference::ReferenceGreedy(ref, prompt, 8).ids});
  }
  const std::string gguf = (dir_ / "gemma3.gguf").string();
  WriteTinyGemma3Gguf(m, gguf);
  for (int np : {1, 2}) ExpectGolden(mpirun, gguf, reqs, np);
  // A multimodal checkpoint's language model (Gemma3ForConditionalGeneration, the layout
  // transformers >= 4.52 saves, untied lm_head) on 2 ranks and over 2 pipeline stages.
  TinyGemma3 text = MakeTinyGemma3(kGemma3Seed, Gemma3Variant::kPattern);
  const TinyModel mm = AsGemma3Multimodal(text, MultimodalLayout::kTransformers452, true);
  const fs::path multimodal = dir_ / "gemma3_multimodal";
  mm.Write(multimodal, SharedPath("models/stories260K"));
  const reference::GemmaReference mm_ref(reference::GemmaRefConfigFromJson(text.config),
                                         &text.tensors);
  reqs.clear();
  for (const auto& prompt : StoriesPrompts()) {
    reqs.push_back({prompt, reference::ReferenceGreedy(mm_ref, prompt, 8).ids});
  }
  ExpectGolden(mpirun, multimodal.string(), reqs, 2);
  ExpectGolden(mpirun, multimodal.string(), reqs, 2, "--pp 2");
}

// Phi-3 with LongRoPE (tests/golden/phi3_model.h against the float64 reference of
// phi3_reference.h): a prompt that stays short, one that crosses original_max_position_embeddings
// while decoding and one that starts long, batched in one engine (each sequence picks its own
// factors), on 1 and 2 ranks (2 query heads and 1 KV head each), also from its GGUF. Whole
// prompts in one step, as transformers' generate feeds them: the factors of a prompt prefilled
// in chunks are chosen per chunk.
TEST_F(TpTest, Phi3LongRopeGreedyIdsOn1And2Ranks) {
  LLM_REQUIRE_MPIRUN();
  const TinyModel m = MakeTinyPhi3(kPhi3Seed);
  const fs::path model = dir_ / "phi3_longrope";
  m.Write(model, SharedPath("models/stories260K"));
  const reference::Phi3Reference ref(reference::Phi3RefConfigFromJson(m.config), &m.tensors);
  std::vector<Request> reqs;
  for (const auto& prompt : Phi3Prompts()) {
    reqs.push_back({prompt, reference::ReferenceGreedy(ref, prompt, 8).ids});
  }
  const std::string whole = "--prefill-chunk 0 --batched-tokens 256";
  for (int np : {1, 2}) ExpectGolden(mpirun, model.string(), reqs, np, whole);
  const std::string gguf = (dir_ / "phi3.gguf").string();
  WriteTinyPhi3Gguf(m, gguf);
  ExpectGolden(mpirun, gguf, reqs, 2, whole);
}

// GLM-4 and GLM-4-0414 (tests/golden/glm_model.h against the float64 reference of
// glm_reference.h): partial interleaved RoPE, q/k/v biases, fused gate_up_proj (and GLM-4-0414's
// extra norms) on 1 and 2 ranks (2 query heads, 1 KV head and half of each MLP row block each).
TEST_F(TpTest, GlmGreedyIdsOn1And2Ranks) {
  LLM_REQUIRE_MPIRUN();
  for (bool glm4 : {false, true}) {
    const TinyModel m = MakeTinyGlm(kGlmSeed, glm4);
    const fs::path model = dir_ / (glm4 ? "glm4" : "glm");
    m.Write(model, SharedPath("models/stories260K"));
    const reference::GlmReference ref(reference::GlmRefConfigFromJson(m.config), &m.tensors);
    std::vector<Request> reqs;
    for (const auto& prompt : StoriesPrompts()) {
      reqs.push_back({prompt, reference::ReferenceGreedy(ref, prompt, 8).ids});
    }
    for (int np : {1, 2}) ExpectGolden(mpirun, model.string(), reqs, np);
  }
}

// The same from the families' F32 GGUF files, and the llama F16 / Q8_0 GGUFs (Q8_0: the greedy
// ids of llama.cpp on that file) on 2 ranks: the q/k un-permutation and Q8_0 blocks shard
// along whole heads and whole blocks.
TEST_F(TpTest, FamiliesGgufGreedyIdsOn1And2Ranks) {
  LLM_REQUIRE_MPIRUN();
  for (const char* family : kFamilies) {
    const std::string rel = std::string("golden/families/") + family;
    if (!fs::exists(SharedPath(rel + "/" + family + ".gguf"))) {
      GTEST_SKIP() << "missing shared test data: " << SharedPath(rel + "/" + family + ".gguf");
    }
    const auto reqs = FamilyRequests(family);
    for (int np : {1, 2}) ExpectGolden(mpirun, SharedPath(rel + "/" + family + ".gguf"), reqs, np);
  }
  LLM_REQUIRE_SHARED("golden/families/llama/llama-q8_0.gguf");
  ExpectGolden(mpirun, SharedPath("golden/families/llama/llama-f16.gguf"), FamilyRequests("llama"),
               2);
  std::ifstream in(SharedPath("golden/families/llama/reference.json"));
  const json ref = json::parse(in);
  std::vector<Request> q8;
  for (const auto& p : ref["prompts"]) {
    q8.push_back({p["ids"].get<std::vector<int32_t>>(),
                  p["llamacpp_quantized"]["Q8_0"]["greedy_ids"].get<std::vector<int32_t>>()});
  }
  for (int np : {1, 2}) {
    ExpectGolden(mpirun, SharedPath("golden/families/llama/llama-q8_0.gguf"), q8, np);
  }
}

// Q8_0 on 4 ranks: each rank's o_proj columns are one 16-wide head, half a Q8_0 block. Every
// rank refuses at start-up, naming the tensor.
TEST_F(TpTest, Q8_0ShardsThatCutABlockFailAtStartUp) {
  LLM_REQUIRE_MPIRUN();
  LLM_REQUIRE_SHARED("golden/families/llama/llama-q8_0.gguf");
  const std::string args = "--model " + SharedPath("golden/families/llama/llama-q8_0.gguf") +
                           " --requests " + WriteRequests(FamilyRequests("llama"));
  const int status = Run(Command(mpirun, 4, args, 60), nullptr);
  EXPECT_NE(status, 0);
  EXPECT_NE(Stderr().find("tensor 'blk.0.attn_output.weight' is Q8_0"), std::string::npos)
      << Stderr();
  EXPECT_NE(Stderr().find("cut a block"), std::string::npos) << Stderr();
}

// A cache of 8 blocks for 4 sequences of 5 blocks each: sequences are preempted and recomputed
// on every rank, and still give the golden ids; every other one is aborted mid-way.
TEST_F(TpTest, PreemptionAndAbortKeepRanksInStep) {
  LLM_REQUIRE_MPIRUN();
  LLM_REQUIRE_SHARED(kStoriesGolden);
  LLM_REQUIRE_SHARED(kStories);
  auto reqs = StoriesRequests();
  const size_t n = reqs.size();
  for (size_t i = 0; i < n; ++i) reqs.push_back(reqs[i]);
  json result;
  ExpectGolden(mpirun, SharedPath(kStories), reqs, 2, "--num-blocks 8", 0, &result);
  EXPECT_GT(result["preemptions"].get<int>(), 0) << "the small cache should force preemption";
  // The duplicated prompts (and the preempted sequences coming back) start at cached blocks:
  // followers must take the same starting points (PlanScheduled.start).
  EXPECT_GT(result["prefix_cache_hit_tokens"].get<int>(), 0);
  ExpectGolden(mpirun, SharedPath(kStories), reqs, 4, "--num-blocks 8", 2);
}

// Pipeline parallelism: each stage holds a contiguous range of stories260K's 5 layers (and its
// own KV cache for them), the hidden states go stage to stage and the last stage's logits back
// to rank 0. PP2, PP4, PP5 (one layer each), TP2×PP2, TP4×PP2 (8 ranks, KV heads
// replicated), an explicit partition; then a small cache that forces preemption, with aborts,
// through TP2×PP2: every stage's mirror and cache stay in step and no block leaks.
TEST_F(TpTest, Stories260KGreedyIdsOverPipelineStages) {
  LLM_REQUIRE_MPIRUN();
  LLM_REQUIRE_SHARED(kStoriesGolden);
  LLM_REQUIRE_SHARED(kStories);
  auto reqs = StoriesRequests();
  ASSERT_FALSE(reqs.empty());
  const std::pair<int, const char*> layouts[] = {{2, "--pp 2"}, {4, "--pp 4"},
                                                 {5, "--pp 5"}, {4, "--pp 2"},
                                                 {8, "--pp 2"}, {2, "--pp 2 --pp-partition 1,4"}};
  for (const auto& [np, args] : layouts) ExpectGolden(mpirun, SharedPath(kStories), reqs, np, args);
  const size_t n = reqs.size();
  for (size_t i = 0; i < n; ++i) reqs.push_back(reqs[i]);
  json result;
  ExpectGolden(mpirun, SharedPath(kStories), reqs, 4, "--pp 2 --num-blocks 8", 2, &result);
  EXPECT_GT(result["preemptions"].get<int>(), 0) << "the small cache should force preemption";
}

// Steps in flight: with more sequences than stages, each of the PP2 / PP4 steps in flight takes
// its share of the sequences (stage 0 starts the next while the others run the previous).
// Eight copies of the golden prompts give the golden ids, in turn (one step in flight) and
// pipelined; aborts land on requests while their step is in flight (they end when it comes
// back, with no token and no leaked block); the preemptions of a small cache never touch a
// sequence in flight.
TEST_F(TpTest, StepsInFlightGiveTheGoldenIds) {
  LLM_REQUIRE_MPIRUN();
  LLM_REQUIRE_SHARED(kStoriesGolden);
  LLM_REQUIRE_SHARED(kStories);
  const auto golden = StoriesRequests();
  std::vector<Request> reqs;
  for (int copy = 0; copy < 8; ++copy) reqs.insert(reqs.end(), golden.begin(), golden.end());
  const std::string model = SharedPath(kStories);
  ExpectGolden(mpirun, model, reqs, 2, "--pp 2 --pp-in-flight 1");
  ExpectGolden(mpirun, model, reqs, 2, "--pp 2");
  ExpectGolden(mpirun, model, reqs, 4, "--pp 4");
  ExpectGolden(mpirun, model, reqs, 4, "--pp 2 --pp-in-flight 3");
  ExpectGolden(mpirun, model, reqs, 2, "--pp 2 --abort-between-steps", 3);
  ExpectGolden(mpirun, model, reqs, 4, "--pp 4 --abort-between-steps", 3);
  json result;
  ExpectGolden(mpirun, model, reqs, 4, "--pp 2 --num-blocks 12", 0, &result);
  EXPECT_GT(result["preemptions"].get<int>(), 0) << "the small cache should force preemption";
}

// Every family over two stages (tied embeddings: the last stage keeps the embedding as its
// lm_head; Gemma's embedding scale and soft-caps; MoE layers), and TP2×PP2 on three of them.
TEST_F(TpTest, FamiliesGreedyIdsOverTwoPipelineStages) {
  LLM_REQUIRE_MPIRUN();
  for (const char* family : kFamilies) {
    const std::string rel = std::string("golden/families/") + family;
    LLM_REQUIRE_SHARED(rel + "/reference.json");
    const auto reqs = FamilyRequests(family);
    ExpectGolden(mpirun, SharedPath(rel + "/hf"), reqs, 2, "--pp 2");
    const std::string f = family;
    if (f == "llama" || f == "gemma2" || f == "qwen2moe") {
      ExpectGolden(mpirun, SharedPath(rel + "/hf"), reqs, 4, "--pp 2");
    }
  }
  // From a GGUF file too (its tensor names for the stage's layers).
  LLM_REQUIRE_SHARED("golden/families/llama/llama.gguf");
  ExpectGolden(mpirun, SharedPath("golden/families/llama/llama.gguf"), FamilyRequests("llama"), 2,
               "--pp 2");
}

// The last pipeline stage samples (rank 0 sends each request's sampling parameters and seed
// once, the stage's mirror has its tokens for the penalties) and sends the tokens and logprobs
// back: seeded sampling with every filter and penalty gives on PP2 and PP4, in turn or with
// steps in flight, exactly the tokens and top-5 logprobs of one rank (stages change no sum).
TEST_F(TpTest, LastStageSamplesAsOneRankDoes) {
  LLM_REQUIRE_MPIRUN();
  LLM_REQUIRE_SHARED(kStories);
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i) {
    Request r{{1}, std::vector<int32_t>(12 + i)};
    for (int j = 0; j < 4 + 3 * i; ++j) r.prompt.push_back(300 + (j * 37 + i * 11) % 200);
    reqs.push_back(r);
  }
  const std::string args = "--sample --logprobs 5 --model " + SharedPath(kStories) +
                           " --requests " + WriteRequests(reqs);
  json one;
  ASSERT_EQ(Run(Command(mpirun, 1, args), &one), 0) << Stderr();
  ASSERT_TRUE(one.is_object()) << Stderr();
  for (const auto& [np, extra] : std::vector<std::pair<int, std::string>>{
           {2, "--pp 2"}, {2, "--pp 2 --pp-in-flight 1"}, {4, "--pp 4"}}) {
    json result;
    ASSERT_EQ(Run(Command(mpirun, np, args + " " + extra), &result), 0) << extra << Stderr();
    ASSERT_TRUE(result.is_object()) << Stderr();
    EXPECT_EQ(result["outputs"], one["outputs"]) << extra;
    EXPECT_EQ(result["logprobs"], one["logprobs"]) << extra;
  }
}

TEST_F(TpTest, MorePipelineStagesThanLayersFailAtStartUp) {
  LLM_REQUIRE_MPIRUN();
  LLM_REQUIRE_SHARED(kStories);
  const std::string args =
      "--pp 6 --model " + SharedPath(kStories) + " --requests " + WriteRequests({{{1, 2}, {3}}});
  EXPECT_NE(Run(Command(mpirun, 6, args, 60), nullptr), 0);
  EXPECT_NE(Stderr().find("engine.pipeline_parallel_size = 6 exceeds the model's "
                          "num_hidden_layers = 5"),
            std::string::npos)
      << Stderr();
}

TEST_F(TpTest, WorldSizeThatDoesNotDivideTheHeadsFailsAtStartUp) {
  LLM_REQUIRE_MPIRUN();
  LLM_REQUIRE_SHARED("golden/families/qwen2/hf");
  // qwen2: 6 query heads, 2 KV heads. 4 ranks: 4 does not divide 6.
  const std::string args = "--model " + SharedPath("golden/families/qwen2/hf") + " --requests " +
                           WriteRequests(FamilyRequests("qwen2"));
  const int status = Run(Command(mpirun, 4, args, 60), nullptr);
  EXPECT_NE(status, 0);
  EXPECT_NE(Stderr().find("does not divide num_attention_heads = 6"), std::string::npos)
      << Stderr();
}

// The top-20 logprob values of every step (descending, so near-ties that swap ids compare
// alike) agree to 1e-4: a bias added twice or a misplaced shard moves them far more.
void ExpectCloseLogprobs(const json& got, const json& want, const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  size_t compared = 0;
  for (size_t r = 0; r < want.size(); ++r) {
    ASSERT_EQ(got[r].size(), want[r].size()) << where;
    for (size_t t = 0; t < want[r].size(); ++t) {
      const auto g = got[r][t].get<std::vector<float>>(), w = want[r][t].get<std::vector<float>>();
      ASSERT_EQ(g.size(), w.size()) << where;
      for (size_t k = 0; k < w.size(); ++k, ++compared) {
        EXPECT_NEAR(g[k], w[k], 1e-4) << where << " request " << r << " token " << t;
      }
    }
  }
  EXPECT_GT(compared, 0u) << where;
}

// Dummy models with a vocabulary and MLP width no world size divides (509, 171) and every bias
// kind (Qwen2's sliced q/k/v biases with tied embeddings; Llama's o/down biases added after
// the all-reduce): 2 and 4 ranks give the ids of 1 rank. Dummy shards hold the same weights
// as the whole model, so only the summation order of the row-parallel layers differs.
TEST_F(TpTest, UnevenShardsAndBiasesGiveTheIdsOfOneRank) {
  LLM_REQUIRE_MPIRUN();
  const std::vector<std::string> configs = {
      R"({"architectures": ["Qwen2ForCausalLM"], "tie_word_embeddings": true)",
      R"({"architectures": ["LlamaForCausalLM"], "attention_bias": true, "mlp_bias": true)"};
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i) {
    Request r{{1}, std::vector<int32_t>(10)};
    for (int j = 0; j < 3 + 5 * i; ++j) r.prompt.push_back(3 + (j * 37 + i * 11) % 500);
    reqs.push_back(r);
  }
  for (const auto& head : configs) {
    const fs::path model = dir_ / "model";
    fs::create_directories(model);
    std::ofstream(model / "config.json")
        << head << R"(, "hidden_size": 64, "intermediate_size": 171, "num_hidden_layers": 2,
        "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 509,
        "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "torch_dtype": "float32",
        "bos_token_id": 1, "eos_token_id": 2})";
    const std::string args =
        "--dummy --logprobs 20 --model " + model.string() + " --requests " + WriteRequests(reqs);
    json one;
    for (int np : {1, 2, 4}) {
      json result;
      ASSERT_EQ(Run(Command(mpirun, np, args), &result), 0) << head << " np=" << np << Stderr();
      ASSERT_TRUE(result.is_object()) << Stderr();
      if (np == 1) one = result;
      EXPECT_EQ(result["outputs"], one["outputs"]) << head << ": np=" << np << " ids differ";
      ExpectCloseLogprobs(result["logprobs"], one["logprobs"], head + " np=" + std::to_string(np));
    }
  }
}

// engine.kv_cache_dtype auto on a float16 model: rank 0 resolves it to a half cache and the
// start message carries that to the other ranks (a follower once kept a float32 cache whatever
// rank 0 chose): rank 1 says so, and 2 ranks give 1 rank's ids and logprobs.
TEST_F(TpTest, AutoKvCacheDtypeIsRank0sOnEveryRank) {
  LLM_REQUIRE_MPIRUN();
  const fs::path model = dir_ / "model";
  fs::create_directories(model);
  std::ofstream(model / "config.json")
      << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4,
      "vocab_size": 256, "max_position_embeddings": 128, "rms_norm_eps": 1e-5,
      "torch_dtype": "float16", "bos_token_id": 1, "eos_token_id": 2})";
  std::vector<Request> reqs;
  for (int i = 0; i < 3; ++i) {
    Request r{{1}, std::vector<int32_t>(12)};
    for (int j = 0; j < 20 + 7 * i; ++j) r.prompt.push_back(3 + (j * 29 + i * 13) % 250);
    reqs.push_back(r);
  }
  const std::string args =
      "--dummy --logprobs 20 --model " + model.string() + " --requests " + WriteRequests(reqs);
  json one;
  for (int np : {1, 2}) {
    json result;
    ASSERT_EQ(Run(Command(mpirun, np, args + " --kv-cache-dtype auto"), &result), 0)
        << "np=" << np << Stderr();
    ASSERT_TRUE(result.is_object()) << Stderr();
    EXPECT_EQ(result["kv_cache_dtype"], "F16") << "np=" << np;
    if (np == 1) {
      one = result;
      continue;
    }
    EXPECT_NE(stdout_.find("rank 1: KV cache of 256 blocks of 16 tokens in F16"), std::string::npos)
        << stdout_;
    EXPECT_EQ(result["outputs"], one["outputs"]) << "np=" << np << " ids differ";
    ExpectCloseLogprobs(result["logprobs"], one["logprobs"], "np=" + std::to_string(np));
  }
}

// CPU seconds (user + system) a process has used so far, or -1.
double CpuSeconds(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string f;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {  // fields 14 and 15: utime, stime
    if (i == 14) utime = std::stol(f);
    if (i == 15) stime = std::stol(f);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

TEST_F(TpTest, IdleFollowerSleeps) {
  LLM_REQUIRE_MPIRUN();
  LLM_REQUIRE_SHARED(kStoriesGolden);
  LLM_REQUIRE_SHARED(kStories);
  const std::string args = "--model " + SharedPath(kStories) + " --requests " +
                           WriteRequests(StoriesRequests()) + " --idle-ms 4000 --pid-dir " +
                           dir_.string();
  FILE* p = popen(Command(mpirun, 2, args, 120).c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[1 << 16];
  double used = -1;
  while (std::fgets(buf, sizeof(buf), p)) {
    if (std::string(buf) != "IDLE\n") continue;
    std::string pid;
    std::ifstream(dir_ / "rank1.pid") >> pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past the spin phase
    const double before = CpuSeconds(pid);
    std::this_thread::sleep_for(std::chrono::seconds(2));  // 200 clock ticks: 1 tick is 0.5%
    const double after = CpuSeconds(pid);
    if (before >= 0 && after >= 0) used = (after - before) / 2;
  }
  const int status = pclose(p);
  EXPECT_EQ(status, 0) << Stderr();
  ASSERT_GE(used, 0) << "could not sample the follower's CPU time\n" << Stderr();
  std::printf("[ idle ] follower used %.3f CPU seconds a second\n", used);
  // A spinning follower uses ~1; one that sleeps < 0.01 (0.12 was seen at a 2 ms sleep cap on a
  // loaded CI host, which had a wake-up every 2 ms).
  EXPECT_LT(used, 0.05) << "an idle follower used " << used << " CPU seconds a second";
}

}  // namespace
}  // namespace llm::testing
