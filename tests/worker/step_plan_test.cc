// The StepPlan protocol without MPI: wire format round trip and errors, and a follower's mirror
// that rebuilds exactly rank 0's ForwardBatch through random schedules with chunked prefill,
// preemption and aborts. Also: sharded weights are the matching parts of the whole model.
#include <gtest/gtest.h>

#include <iterator>

#include <fstream>

#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <random>

#include "worker/engine/scheduler.h"
#include "worker/engine/step_plan.h"
#include "worker/model/model_weights.h"

namespace llm {
namespace {

StepPlan SamplePlan() {
  StepPlan p;
  p.step = 7;
  SamplingParams sp;
  sp.temperature = 0.7f;
  sp.top_k = 40;
  sp.top_p = 0.9f;
  sp.min_p = 0.05f;
  sp.repetition_penalty = 1.1f;
  sp.presence_penalty = -0.5f;
  sp.frequency_penalty = 0.25f;
  sp.logprobs = 5;
  p.new_sequences = {{11, {1, 2, 3}, sp, 0xfeedface12345678ull}, {12, {4}, {}, 0}};
  p.sampled = {{9, 42}};
  p.finished = {3, 4};
  p.preempted = {5};
  p.blocks = {{11, 0, {7, 8}}, {5, 0, {}}};
  p.scheduled = {{11, 0, 3, true, {0x5ull, ~0ull}}, {9, 4, 1, false, {}}};
  return p;
}

// The fuzz seeds (tests/fuzz/make_corpus.py) speak the current wire format: every message of
// every seed parses and a mirror follows the whole stream.
TEST(StepPlanWire, FuzzSeedsAreCurrentMessages) {
  const std::filesystem::path dir =
      std::filesystem::path(LLM_SOURCE_DIR) / "tests/fuzz/corpus/step_plan";
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), {});
    ASSERT_GE(data.size(), 2u);
    SequenceMirror mirror(1 + data[0] % 64, 1 + data[1] % 32);
    std::vector<BatchEntry> entries;
    size_t pos = 2;
    int steps = 0;
    while (pos + 2 <= data.size()) {
      const size_t len = data[pos] | (static_cast<size_t>(data[pos + 1]) << 8);
      pos += 2;
      ASSERT_LE(pos + len, data.size()) << entry.path();
      const std::vector<uint8_t> bytes(data.begin() + static_cast<long>(pos),
                                       data.begin() + static_cast<long>(pos + len));
      pos += len;
      StepPlan plan;
      const Status s = ParseStepPlan(bytes, &plan);
      ASSERT_TRUE(s.ok()) << entry.path() << ": " << s.ToString();
      if (plan.kind != StepMessageKind::kStep) continue;
      const Status a = mirror.Apply(plan, &entries);
      ASSERT_TRUE(a.ok()) << entry.path() << ": " << a.ToString();
      mirror.Commit(plan);
      ++steps;
    }
    EXPECT_GT(steps, 0) << entry.path();
    ++seeds;
  }
  EXPECT_GE(seeds, 3);
}

TEST(StepPlanWire, RoundTripsEveryField) {
  std::vector<uint8_t> bytes;
  SerializeStepPlan(SamplePlan(), &bytes);
  EXPECT_EQ(bytes[0], kStepPlanVersion);
  EXPECT_EQ(bytes[1], static_cast<uint8_t>(StepMessageKind::kStep));
  StepPlan got;
  ASSERT_TRUE(ParseStepPlan(bytes, &got).ok());
  const StepPlan want = SamplePlan();
  EXPECT_EQ(got.step, want.step);
  ASSERT_EQ(got.new_sequences.size(), 2u);
  EXPECT_EQ(got.new_sequences[0].prompt, want.new_sequences[0].prompt);
  EXPECT_EQ(got.sampled[0].token, 42);
  EXPECT_EQ(got.finished, want.finished);
  EXPECT_EQ(got.preempted, want.preempted);
  ASSERT_EQ(got.blocks.size(), 2u);
  EXPECT_EQ(got.blocks[0].blocks, want.blocks[0].blocks);
  ASSERT_EQ(got.scheduled.size(), 2u);
  EXPECT_TRUE(got.scheduled[0].samples);
  EXPECT_EQ(got.scheduled[1].num_new_tokens, 1);
  EXPECT_EQ(got.scheduled[1].start, 4);
  // What the last pipeline stage samples with.
  const SamplingParams& sp = got.new_sequences[0].sampling;
  EXPECT_EQ(sp.temperature, 0.7f);
  EXPECT_EQ(sp.top_k, 40);
  EXPECT_EQ(sp.top_p, 0.9f);
  EXPECT_EQ(sp.min_p, 0.05f);
  EXPECT_EQ(sp.repetition_penalty, 1.1f);
  EXPECT_EQ(sp.presence_penalty, -0.5f);
  EXPECT_EQ(sp.frequency_penalty, 0.25f);
  EXPECT_EQ(sp.logprobs, 5);
  EXPECT_EQ(got.new_sequences[0].seed, 0xfeedface12345678ull);
  EXPECT_EQ(got.new_sequences[1].sampling.temperature, 1.0f);
  EXPECT_EQ(got.scheduled[0].allowed, (std::vector<uint64_t>{0x5ull, ~0ull}));
  EXPECT_TRUE(got.scheduled[1].allowed.empty());

  StepPlan start;
  start.kind = StepMessageKind::kStart;
  start.num_blocks = 123;
  start.block_size = 16;
  start.graph_max_batch = 64;
  start.graph_max_blocks = 512;
  start.kv_dtype = DType::kF16;
  SerializeStepPlan(start, &bytes);
  ASSERT_TRUE(ParseStepPlan(bytes, &got).ok());
  EXPECT_EQ(got.kind, StepMessageKind::kStart);
  EXPECT_EQ(got.num_blocks, 123);
  EXPECT_EQ(got.graph_max_batch, 64);
  EXPECT_EQ(got.graph_max_blocks, 512);
  EXPECT_EQ(got.kv_dtype, DType::kF16);
  // The KV cache's element type is float32 or float16; any other byte is a bad message.
  SerializeStepPlan(start, &bytes);
  ASSERT_EQ(bytes.back(), static_cast<uint8_t>(DType::kF16));
  for (DType other : {DType::kBF16, DType::kQ8_0, static_cast<DType>(200)}) {
    bytes.back() = static_cast<uint8_t>(other);
    EXPECT_EQ(ParseStepPlan(bytes, &got).code(), StatusCode::kDataLoss) << static_cast<int>(other);
  }
  // Graph sizes are bounded: a follower never records thousands of graphs on a bad message.
  for (auto [batch, blocks] :
       {std::pair{kMaxGraphBatch + 1, 4}, std::pair{-1, 4}, std::pair{8, -1}}) {
    start.graph_max_batch = batch;
    start.graph_max_blocks = blocks;
    SerializeStepPlan(start, &bytes);
    EXPECT_EQ(ParseStepPlan(bytes, &got).code(), StatusCode::kDataLoss) << batch << " " << blocks;
  }
}

TEST(StepPlanWire, BadMessagesAreDataLoss) {
  std::vector<uint8_t> bytes;
  SerializeStepPlan(SamplePlan(), &bytes);
  StepPlan got;
  for (size_t cut = 0; cut < bytes.size(); ++cut) {  // every truncation
    std::vector<uint8_t> part(bytes.begin(), bytes.begin() + static_cast<long>(cut));
    EXPECT_EQ(ParseStepPlan(part, &got).code(), StatusCode::kDataLoss) << cut;
  }
  auto bad = bytes;
  bad[0] = kStepPlanVersion + 1;
  EXPECT_NE(ParseStepPlan(bad, &got).message().find("version"), std::string::npos);
  bad = bytes;
  bad[1] = 99;
  EXPECT_NE(ParseStepPlan(bad, &got).message().find("kind"), std::string::npos);
  bad = bytes;
  bad.push_back(0);
  EXPECT_EQ(ParseStepPlan(bad, &got).code(), StatusCode::kDataLoss);
  bad = bytes;
  std::memset(bad.data() + 10, 0xff, 4);  // a huge count
  EXPECT_EQ(ParseStepPlan(bad, &got).code(), StatusCode::kDataLoss);
}

TEST(SequenceMirror, RejectsWhatItCannotIndex) {
  SequenceMirror mirror(/*num_blocks=*/4, /*block_size=*/4);
  std::vector<BatchEntry> entries;
  StepPlan p;
  p.step = 2;  // a gap
  EXPECT_EQ(mirror.Apply(p, &entries).code(), StatusCode::kDataLoss);
  SequenceMirror m2(4, 4);
  p.step = 1;
  p.new_sequences = {{1, {5, 6}, {}, 0}};
  p.blocks = {{1, 0, {4}}};  // block id out of range
  EXPECT_EQ(m2.Apply(p, &entries).code(), StatusCode::kDataLoss);
  SequenceMirror m3(4, 4);
  p.blocks = {{1, 0, {3}}};
  p.scheduled = {{1, 0, 3, true, {}}};  // more tokens than the sequence has
  EXPECT_EQ(m3.Apply(p, &entries).code(), StatusCode::kDataLoss);
  SequenceMirror m4(4, 4);
  p.scheduled = {{2, 0, 1, false, {}}};  // unknown sequence
  EXPECT_EQ(m4.Apply(p, &entries).code(), StatusCode::kDataLoss);
}

// Found by fuzzing (tests/fuzz/fuzz_step_plan): num_computed + num_new_tokens overflowed int for
// a token count near 2^31 once a sequence had computed tokens, so the range check passed and the
// mirror then indexed past the sequence.
TEST(SequenceMirror, RejectsATokenCountThatWouldOverflow) {
  SequenceMirror mirror(/*num_blocks=*/4, /*block_size=*/4);
  std::vector<BatchEntry> entries;
  StepPlan p;
  p.step = 1;
  p.new_sequences = {{1, {5, 6}, {}, 0}};
  p.blocks = {{1, 0, {0}}};
  p.scheduled = {{1, 0, 1, false, {}}};
  ASSERT_TRUE(mirror.Apply(p, &entries).ok());
  mirror.Commit(p);
  StepPlan q;
  q.step = 2;
  q.scheduled = {{1, 1, std::numeric_limits<int32_t>::max(), false, {}}};
  EXPECT_EQ(mirror.Apply(q, &entries).code(), StatusCode::kDataLoss);
}

void ExpectSameBatch(const ForwardBatch& a, const ForwardBatch& b, int step) {
  EXPECT_EQ(a.token_ids, b.token_ids) << "step " << step;
  EXPECT_EQ(a.positions, b.positions) << "step " << step;
  EXPECT_EQ(a.slot_mapping, b.slot_mapping) << "step " << step;
  EXPECT_EQ(a.query_start, b.query_start) << "step " << step;
  EXPECT_EQ(a.context_len, b.context_len) << "step " << step;
  EXPECT_EQ(a.block_tables, b.block_tables) << "step " << step;
  EXPECT_EQ(a.logit_rows, b.logit_rows) << "step " << step;
}

// Rank 0's scheduler against a follower's mirror fed only the serialized messages.
TEST(SequenceMirror, RebuildsRank0BatchThroughPreemptionAndAborts) {
  int total_preemptions = 0;
  for (int seed = 0; seed < 20; ++seed) {
    std::mt19937 rng(seed);
    const int num_blocks = 12, bs = 4;
    BlockManager blocks(num_blocks, bs);
    SchedulerConfig sc;
    sc.max_num_seqs = 5;
    sc.max_num_batched_tokens = 16;
    sc.max_prefill_chunk = 5;
    Scheduler sched(sc, &blocks);
    StepPlanWriter writer;
    SequenceMirror mirror(num_blocks, bs);
    std::map<int64_t, int> target;  // id -> output length that finishes it
    int64_t next_id = 1;
    int preemptions = 0, steps = 0;
    auto add = [&] {
      auto s = std::make_unique<Sequence>();
      s->id = next_id++;
      const int len = 1 + static_cast<int>(rng() % 14);
      for (int i = 0; i < len; ++i) s->prompt.push_back(static_cast<int32_t>(rng() % 100));
      target[s->id] = 1 + static_cast<int>(rng() % 12);
      sched.Add(std::move(s));
    };
    for (int i = 0; i < 6; ++i) add();
    ForwardBatch want, got;
    std::vector<BatchEntry> entries, mirror_entries;
    StepPlan received;
    while (!sched.idle() && steps < 500) {
      if (rng() % 7 == 0 && next_id < 16) add();
      if (rng() % 11 == 0 && !target.empty()) {  // abort someone, running or waiting
        auto it = target.begin();
        std::advance(it, rng() % target.size());
        sched.Remove(it->first);
        writer.OnRemoved(it->first);
        target.erase(it);
        continue;
      }
      SchedulePlan plan = sched.Schedule();
      preemptions += static_cast<int>(plan.preempted.size());
      writer.OnPreempted(plan.preempted);
      if (plan.empty()) continue;
      ++steps;
      ASSERT_TRUE(ParseStepPlan(writer.Write(plan), &received).ok());
      ASSERT_TRUE(mirror.Apply(received, &mirror_entries).ok()) << "seed " << seed;
      entries.clear();
      for (const auto& s : plan.scheduled) entries.push_back({s.seq, s.num_new_tokens, s.samples});
      BuildForwardBatch(entries, bs, &want);
      BuildForwardBatch(mirror_entries, bs, &got);
      ExpectSameBatch(want, got, steps);
      sched.Commit(plan);
      mirror.Commit(received);
      for (const auto& s : plan.scheduled) {
        if (!s.samples) continue;
        const int32_t token = static_cast<int32_t>(rng() % 100);
        s.seq->output.push_back(token);
        const int64_t id = s.seq->id;
        if (static_cast<int>(s.seq->output.size()) >= target[id]) {
          sched.Remove(id);
          writer.OnRemoved(id);
          target.erase(id);
        } else {
          writer.OnSampled(id, token);
        }
      }
    }
    EXPECT_TRUE(sched.idle()) << "seed " << seed;
    EXPECT_GT(steps, 5);
    total_preemptions += preemptions;
    EXPECT_EQ(blocks.num_free(), num_blocks);
  }
  EXPECT_GT(total_preemptions, 0) << "the small cache should preempt";
}

// Every tensor-parallel shard holds the matching rows / columns of the unsharded weights,
// for real (stories260K) and dummy weights.
float At(const Weight& m, int r, int c) {
  float v = 0;
  std::memcpy(&v, static_cast<const char*>(m.data) + (static_cast<size_t>(r) * m.cols + c) * 4, 4);
  return v;
}

TEST(Sharding, ShardsAreTheMatchingPartsOfTheWholeModel) {
  const std::string dir = std::string(LLM_SHARED_DIR) + "/models/stories260K";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "missing shared test data: " << dir;
  for (LoadFormat format : {LoadFormat::kSafetensors, LoadFormat::kDummy}) {
    auto whole = LoadModelWeights(dir, format, 5);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    const ModelConfig& c = (*whole)->config;
    ASSERT_EQ(c.torch_dtype, DType::kF32);
    for (int w : {2, 4, 8}) {  // 8 > 4 KV heads: each pair of ranks shares (replicates) one
      for (int r = 0; r < w; ++r) {
        auto part = LoadModelWeights(dir, format, 5, TensorParallel{r, w});
        ASSERT_TRUE(part.ok()) << part.status().ToString();
        const ShardDims& d = (*part)->shard;
        const LayerWeights& pl = (*part)->layers[1];
        const LayerWeights& wl = (*whole)->layers[1];
        const int q0 = d.heads.begin * c.head_dim, i0 = d.intermediate.begin;
        ASSERT_EQ(pl.q.rows, d.heads.size() * c.head_dim);
        ASSERT_EQ(pl.down.cols, d.intermediate.size());
        for (int i = 0; i < pl.q.rows; ++i) EXPECT_EQ(At(pl.q, i, 3), At(wl.q, q0 + i, 3));
        // The KV head(s) this rank keeps are those its query heads read.
        const int group = c.num_heads / c.num_kv_heads;
        EXPECT_EQ(d.kv_heads.begin, d.heads.begin / group) << "w=" << w << " r=" << r;
        EXPECT_EQ(d.kv_heads.end - 1, (d.heads.end - 1) / group) << "w=" << w << " r=" << r;
        const int k0 = d.kv_heads.begin * c.head_dim;
        ASSERT_EQ(pl.k.rows, d.kv_heads.size() * c.head_dim);
        for (int i = 0; i < pl.k.rows; ++i) EXPECT_EQ(At(pl.k, i, 2), At(wl.k, k0 + i, 2));
        for (int i = 0; i < pl.v.rows; ++i) EXPECT_EQ(At(pl.v, i, 4), At(wl.v, k0 + i, 4));
        for (int i = 0; i < pl.o.cols; ++i) EXPECT_EQ(At(pl.o, 5, i), At(wl.o, 5, q0 + i));
        for (int i = 0; i < pl.up.rows; ++i) EXPECT_EQ(At(pl.up, i, 7), At(wl.up, i0 + i, 7));
        for (int i = 0; i < pl.down.cols; ++i) EXPECT_EQ(At(pl.down, 2, i), At(wl.down, 2, i0 + i));
        for (int i = 0; i < (*part)->embed.rows; ++i) {
          EXPECT_EQ(At((*part)->embed, i, 1), At((*whole)->embed, d.vocab.begin + i, 1));
        }
      }
    }
  }
  auto bad = LoadModelWeights(dir, LoadFormat::kDummy, 0, TensorParallel{0, 3});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not divide num_attention_heads = 8"),
            std::string::npos)
      << bad.status().ToString();
}

TEST(Sharding, SplitRangeCoversUnevenSizes) {
  int covered = 0;
  for (int p = 0; p < 4; ++p) {
    const ShardRange r = SplitRange(172, 4, p);
    EXPECT_EQ(r.begin, covered);
    covered = r.end;
  }
  EXPECT_EQ(covered, 172);
  EXPECT_EQ(SplitRange(10, 4, 3).size(), 1);  // 3, 3, 3, 1
}

}  // namespace
}  // namespace llm
