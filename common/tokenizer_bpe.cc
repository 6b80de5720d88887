#include "common/tokenizer_bpe.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <queue>

#include "common/utf8.h"

namespace llm {
namespace {

constexpr size_t kMaxCacheEntries = 1 << 16;
constexpr size_t kMaxCachedWordLen = 256;

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

std::optional<std::string> OptionalString(const nlohmann::json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

bool OptionalBool(const nlohmann::json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() && it->get<bool>();
}

struct MergeEntry {
  uint32_t rank;
  size_t pos;
  int32_t new_id;
  // std::priority_queue is a max-heap: "less" means lower priority (higher rank, then later pos).
  bool operator<(const MergeEntry& o) const {
    if (rank != o.rank) return rank > o.rank;
    return pos > o.pos;
  }
};

}  // namespace

StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const nlohmann::json& model, TokVocab vocab,
                                                       const Merges& merges,
                                                       const std::string& file) {
  auto bpe = std::unique_ptr<BpeModel>(new BpeModel());
  bpe->unk_token_ = OptionalString(model, "unk_token");
  bpe->prefix_ = OptionalString(model, "continuing_subword_prefix");
  bpe->suffix_ = OptionalString(model, "end_of_word_suffix");
  bpe->fuse_unk_ = OptionalBool(model, "fuse_unk");
  bpe->byte_fallback_ = OptionalBool(model, "byte_fallback");
  bpe->ignore_merges_ = OptionalBool(model, "ignore_merges");
  const auto dropout = model.find("dropout");
  if (dropout != model.end() && dropout->is_number() && dropout->get<double>() > 0.0) {
    return Unimplemented(file + ": model.dropout > 0 is not supported");
  }
  bpe->TakeVocab(std::move(vocab));
  LLM_RETURN_IF_ERROR(bpe->LoadMerges(merges, file));
  bpe->byte_ids_.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    if (auto id = bpe->TokenToId(name)) bpe->byte_ids_[b] = *id;
  }
  return bpe;
}

void BpeModel::TakeVocab(TokVocab vocab) {
  vocab_ = std::move(vocab);
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab_) max_id = std::max(max_id, id);
  id_to_token_.assign(static_cast<size_t>(max_id + 1), nullptr);
  for (const auto& [token, id] : vocab_) id_to_token_[id] = &token;
}

Status BpeModel::LoadMerges(const Merges& merges, const std::string& file) {
  merges_.reserve(merges.size() * 2);
  const size_t prefix_len = prefix_ ? prefix_->size() : 0;
  uint32_t rank = 0;
  std::string merged;
  for (const auto& [a, b] : merges) {
    const auto ia = TokenToId(a);
    const auto ib = TokenToId(b);
    merged.assign(a);
    merged.append(b.size() >= prefix_len ? std::string_view(b).substr(prefix_len) : b);
    const auto im = TokenToId(merged);
    if (!ia || !ib || !im) {
      return InvalidArgument(file + ": merge \"" + a + " " + b +
                             "\" uses a token not in the vocab");
    }
    merges_[PairKey(*ia, *ib)] = {rank, *im};
    ++rank;
  }
  return Status::Ok();
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return nullptr;
  return id_to_token_[id];
}

const std::pair<uint32_t, int32_t>* BpeModel::FindMerge(int32_t a, int32_t b) const {
  const auto it = merges_.find(PairKey(a, b));
  return it == merges_.end() ? nullptr : &it->second;
}

// Rust BPE::merge_word, up to merge_all: one symbol per character (with prefix/suffix), byte
// fallback for characters not in the vocabulary, then unk (fused when fuse_unk).
void BpeModel::InitialSymbols(std::string_view word, std::vector<Symbol>* symbols) const {
  int32_t pending_unk = -1;  // pending unk token id (-1: none) and its byte length
  size_t pending_len = 0;
  const std::optional<int32_t> unk_id = unk_token_ ? TokenToId(*unk_token_) : std::nullopt;
  const auto add = [symbols](int32_t id, size_t len) {
    const auto n = static_cast<int32_t>(symbols->size());
    if (n > 0) symbols->back().next = n;
    symbols->push_back(Symbol{id, n - 1, -1, len});
  };
  std::string symbol;
  for (size_t pos = 0; pos < word.size();) {
    const size_t start = pos;
    utf8::Next(word, &pos);
    const size_t byte_len = pos - start;
    symbol.clear();
    if (start != 0 && prefix_) symbol += *prefix_;
    symbol.append(word.substr(start, byte_len));
    if (pos >= word.size() && suffix_) symbol += *suffix_;
    if (const auto id = TokenToId(symbol)) {
      if (pending_unk >= 0) add(pending_unk, pending_len);
      pending_unk = -1;
      add(*id, byte_len);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (const char c : symbol) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        for (const char c : symbol) add(byte_ids_[static_cast<uint8_t>(c)], 1);
        continue;
      }
    }
    if (!unk_id) continue;  // no unk token: the character is dropped, as in Rust
    if (pending_unk >= 0 && fuse_unk_) {
      pending_len += byte_len;
    } else {
      if (pending_unk >= 0) add(pending_unk, pending_len);
      pending_unk = *unk_id;
      pending_len = byte_len;
    }
  }
  if (pending_unk >= 0) add(pending_unk, pending_len);
}

// Rust Word::merge_all: always apply the lowest-rank merge (leftmost on ties).
void BpeModel::MergeAll(std::vector<Symbol>* symbols) const {
  auto& sym = *symbols;
  std::priority_queue<MergeEntry> queue;
  for (size_t i = 0; i + 1 < sym.size(); ++i) {
    if (const auto* m = FindMerge(sym[i].id, sym[i + 1].id)) queue.push({m->first, i, m->second});
  }
  while (!queue.empty()) {
    const MergeEntry top = queue.top();
    queue.pop();
    Symbol& cur = sym[top.pos];
    if (cur.len == 0 || cur.next == -1) continue;
    const auto next_pos = static_cast<size_t>(cur.next);
    const Symbol right = sym[next_pos];
    const auto* m = FindMerge(cur.id, right.id);
    if (m == nullptr || m->second != top.new_id) continue;
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    sym[next_pos].len = 0;
    if (right.next >= 0 && static_cast<size_t>(right.next) < sym.size()) {
      sym[right.next].prev = static_cast<int32_t>(top.pos);
    }
    if (cur.prev >= 0) {
      if (const auto* pm = FindMerge(sym[cur.prev].id, cur.id)) {
        queue.push({pm->first, static_cast<size_t>(cur.prev), pm->second});
      }
    }
    if (cur.next >= 0 && static_cast<size_t>(cur.next) < sym.size()) {
      if (const auto* nm = FindMerge(cur.id, sym[cur.next].id)) {
        queue.push({nm->first, top.pos, nm->second});
      }
    }
  }
}

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const auto id = TokenToId(word)) {
      out->push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordLen;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  InitialSymbols(word, &symbols);
  MergeAll(&symbols);
  std::vector<int32_t> ids;
  ids.reserve(symbols.size());
  for (const Symbol& s : symbols) {
    if (s.len != 0) ids.push_back(s.id);
  }
  out->insert(out->end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(word), std::move(ids));
  }
}

}  // namespace llm
