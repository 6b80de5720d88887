#include "worker/model/forward_batch.h"

namespace llm {

void ForwardBatch::Clear() {
  token_ids.clear();
  positions.clear();
  slot_mapping.clear();
  query_start.assign(1, 0);
  context_len.clear();
  rope_len.clear();
  block_tables.clear();
  max_blocks_per_seq = 0;
  logit_rows.clear();
}

}  // namespace llm
