// One step's flat batch, as every rank's model sees it: sequences in prefill (a whole prompt
// or a chunk of it) and sequences in decode (one token) side by side.
#pragma once

#include <cstdint>
#include <vector>

namespace llm {

struct ForwardBatch {
  std::vector<int32_t> token_ids;     // [T] all new tokens, sequence after sequence
  std::vector<int32_t> positions;     // [T] position of each token in its sequence
  std::vector<int32_t> slot_mapping;  // [T] KV cache slot (block * block_size + offset)
  std::vector<int32_t> query_start;   // [S + 1] row range of each sequence
  std::vector<int32_t> context_len;   // [S] tokens in the cache after this step
  // [S] the length that picks a sequence's LongRoPE factors (RopeUsesLongFactors):
  // max(prompt length, context_len), so every chunk of a prompt prefilled in several steps
  // rotates as the whole prompt in one step would. Empty: context_len (batches built by hand).
  std::vector<int32_t> rope_len;
  std::vector<int32_t> block_tables;  // [S, max_blocks_per_seq], unused entries 0
  int max_blocks_per_seq = 0;
  // Rows whose logits are wanted, ascending (usually the last row of each sequence that
  // samples this step; every row for scoring a prompt).
  std::vector<int32_t> logit_rows;

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int num_seqs() const { return static_cast<int>(context_len.size()); }
  void Clear();
};

}  // namespace llm
