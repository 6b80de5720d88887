// Fuzz target (g): step-plan messages -> ParseStepPlan, then a follower's SequenceMirror::Apply,
// BuildForwardBatch and Commit on every plan it accepts (worker/engine/step_plan.h). The input is
// a stream of messages, each a u16 little-endian length and its bytes, so the mirror sees
// sequences over several steps. The mirror's block count and size come from the first two bytes.
// Apply documents that a mismatch is a DataLoss error, never a bad memory access.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "worker/engine/step_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int num_blocks = 1 + data[0] % 64;
  const int block_size = 1 + data[1] % 32;
  llm::SequenceMirror mirror(num_blocks, block_size);
  llm::StepPlan plan, again;
  std::vector<llm::BatchEntry> entries;
  llm::ForwardBatch batch;
  std::vector<uint8_t> bytes, round_trip;
  size_t pos = 2;
  while (pos + 2 <= size) {
    const size_t len = data[pos] | (static_cast<size_t>(data[pos + 1]) << 8);
    pos += 2;
    const size_t take = len < size - pos ? len : size - pos;
    bytes.assign(data + pos, data + pos + take);
    pos += take;
    if (!llm::ParseStepPlan(bytes, &plan).ok()) continue;
    // What parses must serialize to a message that parses to the same message.
    llm::SerializeStepPlan(plan, &round_trip);
    if (!llm::ParseStepPlan(round_trip, &again).ok()) std::abort();
    llm::SerializeStepPlan(again, &bytes);
    if (bytes != round_trip) std::abort();
    if (plan.kind != llm::StepMessageKind::kStep) continue;
    if (!mirror.Apply(plan, &entries).ok()) return 0;  // a follower stops at the first error
    llm::BuildForwardBatch(entries, block_size, &batch);
    mirror.Commit(plan);
  }
  return 0;
}
