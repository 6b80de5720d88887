#include "worker/model/graph_batch.h"

#include <algorithm>

namespace llm {

int GraphBatchSize(int seqs, int max_batch) {
  if (seqs < 1) return 0;
  int size = 1;
  while (size < seqs && size < 8) size *= 2;
  if (size < seqs) size = (seqs + 7) / 8 * 8;
  return size <= max_batch ? size : 0;
}

bool IsGraphableDecode(const ForwardBatch& batch, int max_blocks_per_seq) {
  const int seqs = batch.num_seqs();
  if (seqs < 1 || batch.num_tokens() != seqs || batch.max_blocks_per_seq > max_blocks_per_seq ||
      batch.logit_rows.size() != static_cast<size_t>(seqs) ||
      batch.query_start.size() != static_cast<size_t>(seqs) + 1 ||
      batch.block_tables.size() != static_cast<size_t>(seqs) * batch.max_blocks_per_seq) {
    return false;
  }
  for (int s = 0; s < seqs; ++s) {
    if (batch.query_start[s] != s || batch.logit_rows[s] != s) return false;
  }
  return batch.query_start[seqs] == seqs;
}

void PadDecodeBatch(const ForwardBatch& batch, int size, int max_blocks_per_seq,
                    ForwardBatch* out) {
  const int seqs = batch.num_seqs();
  out->token_ids.assign(batch.token_ids.begin(), batch.token_ids.end());
  out->positions.assign(batch.positions.begin(), batch.positions.end());
  out->slot_mapping.assign(batch.slot_mapping.begin(), batch.slot_mapping.end());
  out->context_len.assign(batch.context_len.begin(), batch.context_len.end());
  out->rope_len.assign(batch.rope_len.begin(), batch.rope_len.end());
  out->token_ids.resize(size, 0);
  out->positions.resize(size, 0);
  out->slot_mapping.resize(size, -1);
  out->context_len.resize(size, 1);
  if (!out->rope_len.empty()) out->rope_len.resize(size, 1);
  out->query_start.resize(size + 1);
  out->logit_rows.resize(size);
  for (int s = 0; s <= size; ++s) out->query_start[s] = s;
  for (int s = 0; s < size; ++s) out->logit_rows[s] = s;
  out->max_blocks_per_seq = max_blocks_per_seq;
  out->block_tables.assign(static_cast<size_t>(size) * max_blocks_per_seq, 0);
  for (int s = 0; s < seqs; ++s) {
    std::copy_n(batch.block_tables.begin() + static_cast<size_t>(s) * batch.max_blocks_per_seq,
                batch.max_blocks_per_seq,
                out->block_tables.begin() + static_cast<size_t>(s) * max_blocks_per_seq);
  }
}

}  // namespace llm
