// The per-step message from rank 0 (the coordinator) to the other ranks of a tensor-parallel
// engine, and both ends of it. It carries changes, not state (STYLE.md #4): a sequence's prompt
// once, when it is first scheduled; then per step the tokens sampled last step, finished /
// aborted and preempted ids, newly appended block ids and what runs now (id, token count).
// Followers keep a mirror of sequences and block tables from it and rebuild exactly the
// ForwardBatch rank 0 runs (both call BuildForwardBatch).
//
// Wire format (little-endian, fixed width): u8 version, u8 kind, then the kind's body. Counts
// are u32; ids i64; tokens, blocks and lengths i32. A version or kind this build does not know,
// or a truncated message, is a DataLoss error.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/config_sections.h"
#include "common/sampling_params.h"
#include "common/status.h"
#include "worker/engine/scheduler.h"
#include "worker/model/forward_batch.h"

namespace llm {

// 2: PlanScheduled.start (prefix caching); 3: sampling parameters and grammar masks (the last
// pipeline stage samples); 4: decode graph sizes in the start message; 5: the KV cache's element
// type in the start message.
constexpr uint8_t kStepPlanVersion = 5;
// The largest decode graph batch a start message may carry (engine.cuda_graph_max_batch).
constexpr int32_t kMaxGraphBatch = kMaxCudaGraphBatch;

enum class StepMessageKind : uint8_t {
  kStart = 1,     // the engine on rank 0 is up: allocate the KV cache (num_blocks, block_size)
  kStep = 2,      // run one step
  kShutdown = 3,  // leave the follower loop
};

struct PlanNewSequence {
  int64_t id = 0;
  std::vector<int32_t> prompt;
  // How its tokens are sampled (the seed resolved: the engine's draw when the request had none),
  // for the rank that samples when it is not rank 0 (the last pipeline stage).
  SamplingParams sampling;
  uint64_t seed = 0;
};
struct PlanToken {
  int64_t id = 0;
  int32_t token = 0;
};
// Sets the sequence's block table to table[:first] + blocks (an append when first == size).
struct PlanBlocks {
  int64_t id = 0;
  int32_t first = 0;
  std::vector<int32_t> blocks;
};
struct PlanScheduled {
  int64_t id = 0;
  // Tokens already computed when the step starts: the mirror's count, or, for a sequence that
  // holds no computed tokens yet, the whole blocks it took from rank 0's prefix cache.
  int32_t start = 0;
  int32_t num_new_tokens = 0;
  bool samples = false;  // its last new row's logits are wanted
  // Structured output: the tokens it may sample this step (a vocabulary bit mask); empty: any.
  std::vector<uint64_t> allowed;
};

struct StepPlan {
  StepMessageKind kind = StepMessageKind::kStep;
  // kStart
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  // Decode graphs every rank records alike (TransformerModel::EnableGraphs); 0: none.
  int32_t graph_max_batch = 0;
  int32_t graph_max_blocks = 0;
  // The KV cache's element type rank 0 resolved (engine.kv_cache_dtype): kF32 or kF16.
  DType kv_dtype = DType::kF32;
  // kStep, applied in this order
  uint64_t step = 0;  // counts kStep messages from 1; a gap means a lost message
  std::vector<PlanNewSequence> new_sequences;
  std::vector<PlanToken> sampled;  // appended to the outputs (last step's samples)
  std::vector<int64_t> finished;   // finished or aborted: forgotten
  std::vector<int64_t> preempted;  // blocks gone, recomputed from token 0 later
  std::vector<PlanBlocks> blocks;  // block table changes
  std::vector<PlanScheduled> scheduled;

  void Clear();
};

void SerializeStepPlan(const StepPlan& plan, std::vector<uint8_t>* out);
Status ParseStepPlan(const std::vector<uint8_t>& bytes, StepPlan* plan);

// One sequence of a step, as BuildForwardBatch reads it.
struct BatchEntry {
  const Sequence* seq = nullptr;
  int num_new_tokens = 0;  // starting at seq->num_computed
  bool samples = false;
};
// The flat batch of a step; the one function every rank builds its batch with. rope_len comes
// from each sequence's prompt length, which followers mirror from PlanNewSequence, so the
// message needs nothing more for it.
void BuildForwardBatch(const std::vector<BatchEntry>& entries, int block_size, ForwardBatch* out);

// Rank 0: turns the scheduler's plans and the sampler's results into StepPlans.
class StepPlanWriter {
 public:
  // Records what the schedule runs (new sequences, block table changes, token counts) and
  // serializes the step's message with every change queued since the last one (valid until the
  // next call).
  std::vector<uint8_t>& Write(const SchedulePlan& plan);
  // Queues the changes of a schedule, of the sampler and of aborts (call for every schedule,
  // even one that runs nothing).
  void OnAdded(int64_t id, const SamplingParams& sampling, uint64_t seed);  // before its Write
  // The mask of a sequence that samples in the next Write (structured output).
  void SetAllowed(int64_t id, const uint64_t* words, size_t count);
  void OnPreempted(const std::vector<int64_t>& ids);
  void OnSampled(int64_t id, int32_t token);  // a token for a sequence that goes on
  void OnRemoved(int64_t id);                 // finished or aborted

 private:
  StepPlan plan_;
  uint64_t step_ = 0;
  std::unordered_map<int64_t, int> sent_blocks_;  // sequences the followers know -> table size
  std::unordered_map<int64_t, std::pair<SamplingParams, uint64_t>> added_;  // not sent yet
  std::unordered_map<int64_t, std::vector<uint64_t>> allowed_;              // for the next Write
  std::vector<uint8_t> bytes_;
};

// Ranks != 0: the mirror of the sequences rank 0 runs.
class SequenceMirror {
 public:
  SequenceMirror(int num_blocks, int block_size)
      : num_blocks_(num_blocks), block_size_(block_size) {}
  // Applies a kStep plan and lists what runs this step. Checks everything it indexes (ids,
  // block ids, token ranges), so a mismatch is a DataLoss error, never a bad memory access.
  Status Apply(const StepPlan& plan, std::vector<BatchEntry>* entries);
  // Marks the step's tokens as computed (after the forward pass ran).
  void Commit(const StepPlan& plan);
  size_t size() const { return seqs_.size(); }

 private:
  Status ApplyBlocks(const StepPlan& plan);
  int num_blocks_, block_size_;
  uint64_t step_ = 0;
  std::unordered_map<int64_t, Sequence> seqs_;
};

}  // namespace llm
