#include "worker/engine/step_plan.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace llm {

namespace {

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>* out) : out_(out) {}
  template <typename T>
  void Put(T v) {
    const size_t at = out_->size();
    out_->resize(at + sizeof(T));
    std::memcpy(out_->data() + at, &v, sizeof(T));
  }
  void Ints(const std::vector<int32_t>& v) {
    Put(static_cast<uint32_t>(v.size()));
    const size_t at = out_->size();
    out_->resize(at + v.size() * sizeof(int32_t));
    if (!v.empty()) std::memcpy(out_->data() + at, v.data(), v.size() * sizeof(int32_t));
  }

 private:
  std::vector<uint8_t>* out_;
};

class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& in) : in_(in) {}
  template <typename T>
  bool Get(T* v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  // A count of items of at least `min_item_bytes` each: bounded by what is left.
  bool Count(uint32_t* n, size_t min_item_bytes) {
    return Get(n) && static_cast<size_t>(*n) * min_item_bytes <= in_.size() - pos_;
  }
  bool Ints(std::vector<int32_t>* v) {
    uint32_t n = 0;
    if (!Count(&n, sizeof(int32_t))) return false;
    v->resize(n);
    if (n) std::memcpy(v->data(), in_.data() + pos_, n * sizeof(int32_t));
    pos_ += n * sizeof(int32_t);
    return true;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  const std::vector<uint8_t>& in_;
  size_t pos_ = 0;
};

bool ParseSampling(Reader& r, SamplingParams* p, uint64_t* seed) {
  return r.Get(&p->temperature) && r.Get(&p->top_k) && r.Get(&p->top_p) && r.Get(&p->min_p) &&
         r.Get(&p->repetition_penalty) && r.Get(&p->presence_penalty) &&
         r.Get(&p->frequency_penalty) && r.Get(&p->logprobs) && r.Get(seed);
}

bool ParseStepBody(Reader& r, StepPlan* p) {
  uint32_t n = 0;
  if (!r.Get(&p->step) || !r.Count(&n, 52)) return false;
  p->new_sequences.resize(n);
  for (auto& s : p->new_sequences) {
    if (!r.Get(&s.id) || !r.Ints(&s.prompt) || !ParseSampling(r, &s.sampling, &s.seed)) {
      return false;
    }
  }
  if (!r.Count(&n, 12)) return false;
  p->sampled.resize(n);
  for (auto& t : p->sampled) {
    if (!r.Get(&t.id) || !r.Get(&t.token)) return false;
  }
  for (auto* ids : {&p->finished, &p->preempted}) {
    if (!r.Count(&n, 8)) return false;
    ids->resize(n);
    for (auto& id : *ids) {
      if (!r.Get(&id)) return false;
    }
  }
  if (!r.Count(&n, 16)) return false;
  p->blocks.resize(n);
  for (auto& b : p->blocks) {
    if (!r.Get(&b.id) || !r.Get(&b.first) || !r.Ints(&b.blocks)) return false;
  }
  if (!r.Count(&n, 21)) return false;
  p->scheduled.resize(n);
  for (auto& s : p->scheduled) {
    uint8_t samples = 0;
    uint32_t words = 0;
    if (!r.Get(&s.id) || !r.Get(&s.start) || !r.Get(&s.num_new_tokens) || !r.Get(&samples) ||
        !r.Count(&words, sizeof(uint64_t))) {
      return false;
    }
    s.samples = samples != 0;
    s.allowed.resize(words);
    for (auto& w : s.allowed) {
      if (!r.Get(&w)) return false;
    }
  }
  return true;
}

Status Desync(const std::string& what, int64_t id) {
  return DataLoss("step plan out of sync with this rank: " + what + " (sequence " +
                  std::to_string(id) + ")");
}

}  // namespace

void StepPlan::Clear() {
  kind = StepMessageKind::kStep;
  num_blocks = block_size = graph_max_batch = graph_max_blocks = 0;
  kv_dtype = DType::kF32;
  step = 0;
  new_sequences.clear();
  sampled.clear();
  finished.clear();
  preempted.clear();
  blocks.clear();
  scheduled.clear();
}

void SerializeStepPlan(const StepPlan& p, std::vector<uint8_t>* out) {
  out->clear();
  Writer w(out);
  w.Put(kStepPlanVersion);
  w.Put(static_cast<uint8_t>(p.kind));
  if (p.kind == StepMessageKind::kStart) {
    w.Put(p.num_blocks);
    w.Put(p.block_size);
    w.Put(p.graph_max_batch);
    w.Put(p.graph_max_blocks);
    w.Put(static_cast<uint8_t>(p.kv_dtype));
  }
  if (p.kind != StepMessageKind::kStep) return;
  w.Put(p.step);
  w.Put(static_cast<uint32_t>(p.new_sequences.size()));
  for (const auto& s : p.new_sequences) {
    w.Put(s.id);
    w.Ints(s.prompt);
    const SamplingParams& sp = s.sampling;
    w.Put(sp.temperature);
    w.Put(sp.top_k);
    w.Put(sp.top_p);
    w.Put(sp.min_p);
    w.Put(sp.repetition_penalty);
    w.Put(sp.presence_penalty);
    w.Put(sp.frequency_penalty);
    w.Put(sp.logprobs);
    w.Put(s.seed);
  }
  w.Put(static_cast<uint32_t>(p.sampled.size()));
  for (const auto& t : p.sampled) {
    w.Put(t.id);
    w.Put(t.token);
  }
  for (const auto* ids : {&p.finished, &p.preempted}) {
    w.Put(static_cast<uint32_t>(ids->size()));
    for (int64_t id : *ids) w.Put(id);
  }
  w.Put(static_cast<uint32_t>(p.blocks.size()));
  for (const auto& b : p.blocks) {
    w.Put(b.id);
    w.Put(b.first);
    w.Ints(b.blocks);
  }
  w.Put(static_cast<uint32_t>(p.scheduled.size()));
  for (const auto& s : p.scheduled) {
    w.Put(s.id);
    w.Put(s.start);
    w.Put(s.num_new_tokens);
    w.Put(static_cast<uint8_t>(s.samples));
    w.Put(static_cast<uint32_t>(s.allowed.size()));
    for (uint64_t word : s.allowed) w.Put(word);
  }
}

Status ParseStepPlan(const std::vector<uint8_t>& bytes, StepPlan* plan) {
  plan->Clear();
  Reader r(bytes);
  uint8_t version = 0, kind = 0;
  if (!r.Get(&version) || !r.Get(&kind)) return DataLoss("step plan: message too short");
  if (version != kStepPlanVersion) {
    return DataLoss("step plan: version " + std::to_string(version) + ", this build speaks " +
                    std::to_string(kStepPlanVersion));
  }
  bool ok = true;
  switch (static_cast<StepMessageKind>(kind)) {
    case StepMessageKind::kStart: {
      uint8_t kv = 0;
      ok = r.Get(&plan->num_blocks) && r.Get(&plan->block_size) && r.Get(&plan->graph_max_batch) &&
           r.Get(&plan->graph_max_blocks) && r.Get(&kv) && plan->graph_max_batch >= 0 &&
           plan->graph_max_batch <= kMaxGraphBatch && plan->graph_max_blocks >= 0 &&
           (kv == static_cast<uint8_t>(DType::kF32) || kv == static_cast<uint8_t>(DType::kF16));
      if (ok) plan->kv_dtype = static_cast<DType>(kv);
      break;
    }
    case StepMessageKind::kStep:
      ok = ParseStepBody(r, plan);
      break;
    case StepMessageKind::kShutdown:
      break;
    default:
      return DataLoss("step plan: unknown message kind " + std::to_string(kind));
  }
  plan->kind = static_cast<StepMessageKind>(kind);
  if (!ok || !r.done()) return DataLoss("step plan: truncated or malformed message");
  return Status::Ok();
}

void BuildForwardBatch(const std::vector<BatchEntry>& entries, int block_size, ForwardBatch* out) {
  ForwardBatch& b = *out;
  b.Clear();
  int max_blocks = 0;
  for (const auto& e : entries) {
    max_blocks = std::max(max_blocks, static_cast<int>(e.seq->block_table.size()));
  }
  b.max_blocks_per_seq = max_blocks;
  b.block_tables.assign(entries.size() * max_blocks, 0);
  for (size_t i = 0; i < entries.size(); ++i) {
    const Sequence& seq = *entries[i].seq;
    const int begin = seq.num_computed, end = begin + entries[i].num_new_tokens;
    for (int p = begin; p < end; ++p) {
      b.token_ids.push_back(seq.token_at(p));
      b.positions.push_back(p);
      b.slot_mapping.push_back(seq.block_table[p / block_size] * block_size + p % block_size);
    }
    b.query_start.push_back(b.num_tokens());
    b.context_len.push_back(end);
    b.rope_len.push_back(std::max(end, static_cast<int>(seq.prompt.size())));
    std::copy(seq.block_table.begin(), seq.block_table.end(),
              b.block_tables.begin() + static_cast<long>(i) * max_blocks);
    if (entries[i].samples) b.logit_rows.push_back(b.num_tokens() - 1);
  }
}

std::vector<uint8_t>& StepPlanWriter::Write(const SchedulePlan& plan) {
  plan_.kind = StepMessageKind::kStep;
  plan_.step = ++step_;
  for (const auto& s : plan.scheduled) {
    const Sequence& seq = *s.seq;
    auto it = sent_blocks_.find(seq.id);
    if (it == sent_blocks_.end()) {
      PlanNewSequence n{seq.id, seq.prompt, {}, 0};
      if (auto a = added_.find(seq.id); a != added_.end()) {
        n.sampling = a->second.first;
        n.seed = a->second.second;
        added_.erase(a);
      }
      plan_.new_sequences.push_back(std::move(n));
      it = sent_blocks_.emplace(seq.id, 0).first;
    }
    const int size = static_cast<int>(seq.block_table.size());
    if (size != it->second) {
      const int first = std::min(size, it->second);
      plan_.blocks.push_back(
          {seq.id, first,
           std::vector<int32_t>(seq.block_table.begin() + first, seq.block_table.end())});
      it->second = size;
    }
    PlanScheduled& ps = plan_.scheduled.emplace_back(
        PlanScheduled{seq.id, seq.num_computed, s.num_new_tokens, s.samples, {}});
    if (auto a = allowed_.find(seq.id); a != allowed_.end()) ps.allowed = std::move(a->second);
  }
  allowed_.clear();
  SerializeStepPlan(plan_, &bytes_);
  plan_.Clear();
  return bytes_;
}

void StepPlanWriter::OnAdded(int64_t id, const SamplingParams& sampling, uint64_t seed) {
  added_[id] = {sampling, seed};
}

void StepPlanWriter::SetAllowed(int64_t id, const uint64_t* words, size_t count) {
  allowed_[id].assign(words, words + count);
}

void StepPlanWriter::OnPreempted(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    auto it = sent_blocks_.find(id);
    if (it == sent_blocks_.end()) continue;  // never ran: the followers do not know it
    plan_.preempted.push_back(id);
    it->second = 0;
  }
}

void StepPlanWriter::OnSampled(int64_t id, int32_t token) {
  plan_.sampled.push_back({id, token});
}

void StepPlanWriter::OnRemoved(int64_t id) {
  added_.erase(id);  // aborted before it ever ran
  if (sent_blocks_.erase(id)) plan_.finished.push_back(id);
}

Status SequenceMirror::Apply(const StepPlan& plan, std::vector<BatchEntry>* entries) {
  if (plan.step != step_ + 1) {
    return DataLoss("step plan " + std::to_string(plan.step) + " follows step " +
                    std::to_string(step_) + ": a message was lost");
  }
  step_ = plan.step;
  for (const auto& n : plan.new_sequences) {
    Sequence s;
    s.id = n.id;
    s.prompt = n.prompt;
    if (s.prompt.empty() || !seqs_.emplace(n.id, std::move(s)).second) {
      return Desync("new sequence is empty or already known", n.id);
    }
  }
  for (const auto& t : plan.sampled) {
    auto it = seqs_.find(t.id);
    if (it == seqs_.end()) return Desync("token for an unknown sequence", t.id);
    it->second.output.push_back(t.token);
  }
  for (int64_t id : plan.finished) {
    if (!seqs_.erase(id)) return Desync("unknown sequence finished", id);
  }
  for (int64_t id : plan.preempted) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) return Desync("unknown sequence preempted", id);
    it->second.block_table.clear();
    it->second.num_computed = 0;
  }
  LLM_RETURN_IF_ERROR(ApplyBlocks(plan));
  entries->clear();
  for (const auto& s : plan.scheduled) {
    auto it = seqs_.find(s.id);
    if (it == seqs_.end()) return Desync("unknown sequence scheduled", s.id);
    Sequence& seq = it->second;
    // A sequence with nothing computed may start at a cached prefix of whole blocks.
    const bool cached_start = seq.num_computed == 0 && s.start > 0 && s.start % block_size_ == 0 &&
                              s.start < seq.num_tokens();
    if (s.start != seq.num_computed && !cached_start) {
      return Desync("scheduled start differs from this rank's computed tokens", s.id);
    }
    seq.num_computed = s.start;
    const int64_t end = int64_t{seq.num_computed} + s.num_new_tokens;  // no int overflow
    const bool fits = static_cast<int64_t>(seq.block_table.size()) * block_size_ >= end;
    if (s.num_new_tokens < 1 || end > seq.num_tokens() || !fits ||
        s.samples != (end == seq.num_tokens())) {
      return Desync("scheduled tokens outside the sequence or its blocks", s.id);
    }
    entries->push_back({&seq, s.num_new_tokens, s.samples});
  }
  return Status::Ok();
}

Status SequenceMirror::ApplyBlocks(const StepPlan& plan) {
  for (const auto& b : plan.blocks) {
    auto it = seqs_.find(b.id);
    if (it == seqs_.end()) return Desync("blocks for an unknown sequence", b.id);
    auto& table = it->second.block_table;
    if (b.first < 0 || b.first > static_cast<int>(table.size())) {
      return Desync("block table change past its end", b.id);
    }
    for (int32_t block : b.blocks) {
      if (block < 0 || block >= num_blocks_) return Desync("block id out of range", b.id);
    }
    table.resize(b.first);
    table.insert(table.end(), b.blocks.begin(), b.blocks.end());
  }
  return Status::Ok();
}

void SequenceMirror::Commit(const StepPlan& plan) {
  for (const auto& s : plan.scheduled) seqs_[s.id].num_computed += s.num_new_tokens;
}

}  // namespace llm
