// Decode steps as CUDA graphs replay them: a graph is recorded for a fixed number of sequences
// and block-table width, so a decode batch is padded up to the next recorded size (vLLM's sizes:
// 1, 2, 4, 8, then every multiple of 8). Pure host logic, tested on the CPU.
#pragma once

#include "worker/model/forward_batch.h"

namespace llm {

// The recorded batch size for `seqs` sequences: the smallest of 1, 2, 4, 8, 16, 24, ... that
// holds them, or 0 when that exceeds `max_batch` (or seqs < 1).
int GraphBatchSize(int seqs, int max_batch);

// A step a decode graph can run: every sequence has exactly one new token whose logits are
// wanted (logit_rows = 0, 1, ..., S - 1) and a block table of at most `max_blocks_per_seq`.
bool IsGraphableDecode(const ForwardBatch& batch, int max_blocks_per_seq);

// `batch` (graphable) padded to `size` sequences and `max_blocks_per_seq` table columns into
// `out`. Padding sequences have one token (id 0 at position 0) with slot -1 (nothing is written
// to the cache) and context 1 through block 0 (read, never used); their rows follow the real
// ones, so the first batch.num_seqs() logit rows are the batch's.
void PadDecodeBatch(const ForwardBatch& batch, int size, int max_blocks_per_seq, ForwardBatch* out);

}  // namespace llm
