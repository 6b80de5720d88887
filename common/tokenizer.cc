// llm::Tokenizer encode/decode and IncrementalDecoder (loading is in tokenizer_load.cc).
#include "common/tokenizer.h"

#include <algorithm>

#include "common/tokenizer_impl.h"

namespace llm {

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

namespace {

// The model's ids of the splits left by added-token extraction, framed by the post-processor.
std::vector<int32_t> EncodeSplits(const Tokenizer::Impl& m, std::vector<AddedSplit> splits,
                                  bool add_special_tokens) {
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = m.post_prefix;
  std::vector<PreToken> pieces;
  for (AddedSplit& split : splits) {
    if (split.id >= 0) {
      ids.push_back(split.id);
      continue;
    }
    pieces.clear();
    pieces.push_back({std::move(split.text), split.at_start});
    if (m.pre_tokenizer) m.pre_tokenizer->PreTokenize(&pieces);
    for (const PreToken& p : pieces) m.model->Tokenize(p.text, &ids);
  }
  if (add_special_tokens) ids.insert(ids.end(), m.post_suffix.begin(), m.post_suffix.end());
  return ids;
}

}  // namespace

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special_tokens,
                                       bool parse_special) const {
  return EncodeSplits(
      *impl_, impl_->added.ExtractAndNormalize(text, impl_->normalizer.get(), parse_special),
      add_special_tokens);
}

std::vector<int32_t> Tokenizer::EncodeWithPlainRanges(std::string_view text,
                                                      std::span<const TextRange> plain,
                                                      bool add_special_tokens) const {
  std::vector<ByteRange> ranges;
  ranges.reserve(plain.size());
  for (const TextRange& r : plain) ranges.push_back({r.begin, r.end});
  return EncodeSplits(*impl_,
                      impl_->added.ExtractAndNormalize(text, impl_->normalizer.get(), ranges),
                      add_special_tokens);
}

bool Tokenizer::ContainsSpecialTokenText(std::string_view text) const {
  for (const AddedSplit& split :
       impl_->added.ExtractAndNormalize(text, impl_->normalizer.get(), true)) {
    if (split.id >= 0 && IsSpecial(split.id)) return true;
  }
  return false;
}

const std::string* Tokenizer::Impl::TokenForDecode(int32_t id, bool skip_special) const {
  const std::string* token = nullptr;
  if (const AddedToken* t = added.ById(id)) {
    token = &t->content;
  } else {
    token = model->IdToToken(id);
  }
  if (token == nullptr) return nullptr;
  if (skip_special && special_contents.count(*token) != 0) return nullptr;
  return token;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  DecodeSession session(impl_->decoders, impl_->clean_up_spaces);
  std::string out;
  for (const int32_t id : ids) {
    if (const std::string* token = impl_->TokenForDecode(id, skip_special_tokens)) {
      out += session.Push(*token);
    }
  }
  out += session.Finish();
  return out;
}

std::vector<std::string> Tokenizer::TokenBytes(bool sequence_start) const {
  const Impl& m = *impl_;
  const auto raw = [&m](std::initializer_list<const std::string*> tokens) {
    DecodeSession session(m.decoders, /*clean_up=*/false, /*raw_bytes=*/true);
    std::string out;
    for (const std::string* t : tokens) out += session.Push(*t);
    return out + session.Finish();
  };
  // After other text: decode "a" + token and cut the "a" off, so a decoder's first-token rules
  // (Strip, Metaspace) see the token in the middle of a text.
  const std::string* anchor = nullptr;
  std::string anchor_text;
  if (!sequence_start) {
    const std::vector<int32_t> a = Encode("a", /*add_special_tokens=*/false);
    if (a.size() == 1 && !IsSpecial(a[0])) anchor = m.TokenForDecode(a[0], false);
    if (anchor != nullptr) anchor_text = raw({anchor});
  }
  std::vector<std::string> out(static_cast<size_t>(vocab_size()));
  for (int32_t id = 0; id < vocab_size(); ++id) {
    if (IsSpecial(id)) continue;
    const std::string* token = m.TokenForDecode(id, false);
    if (token == nullptr) continue;
    std::string text = raw({token});
    if (anchor != nullptr) {
      std::string both = raw({anchor, token});
      if (both.compare(0, anchor_text.size(), anchor_text) == 0)
        text = both.substr(anchor_text.size());
    }
    out[static_cast<size_t>(id)] = std::move(text);
  }
  return out;
}

int32_t Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}
std::optional<int32_t> Tokenizer::bos_id() const {
  return impl_->bos_id;
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return impl_->eos_id;
}
std::optional<int32_t> Tokenizer::pad_id() const {
  return impl_->pad_id;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  const AddedToken* t = impl_->added.ById(id);
  return t != nullptr && t->special;
}

std::string Tokenizer::IdToToken(int32_t id) const {
  if (const AddedToken* t = impl_->added.ById(id)) return t->content;
  const std::string* token = impl_->model->IdToToken(id);
  return token ? *token : std::string();
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  if (auto id = impl_->added.IdOf(token)) return id;
  return impl_->model->TokenToId(token);
}

const std::string& Tokenizer::chat_template() const {
  return impl_->chat_template;
}
std::string Tokenizer::bos_token() const {
  return impl_->bos_token;
}
std::string Tokenizer::eos_token() const {
  return impl_->eos_token;
}
std::string Tokenizer::pad_token() const {
  return impl_->pad_token;
}
std::string Tokenizer::unk_token() const {
  return impl_->unk_token;
}

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

IncrementalDecoder::~IncrementalDecoder() = default;

std::string IncrementalDecoder::Add(int32_t id) {
  const Tokenizer::Impl& m = *tokenizer_.impl_;
  if (!session_) session_ = std::make_unique<DecodeSession>(m.decoders, m.clean_up_spaces);
  const std::string* token = m.TokenForDecode(id, skip_special_tokens_);
  std::string text = token ? session_->Push(*token) : std::string();
  if (skip_ > 0) {
    const size_t drop = std::min(skip_, text.size());
    text.erase(0, drop);
    skip_ -= drop;
  }
  return text;
}

void IncrementalDecoder::Prime(std::span<const int32_t> ids) {
  size_t emitted = 0;
  for (int32_t id : ids) emitted += Add(id).size();
  // What the primed tokens decode to in full, less what already came out, is held inside the
  // session and will lead Add's next output.
  const size_t full = tokenizer_.Decode(ids, skip_special_tokens_).size();
  skip_ += full > emitted ? full - emitted : 0;
}

std::string IncrementalDecoder::Flush() {
  const Tokenizer::Impl& m = *tokenizer_.impl_;
  if (!session_) session_ = std::make_unique<DecodeSession>(m.decoders, m.clean_up_spaces);
  std::string rest = session_->Finish();
  session_.reset();
  return rest;
}

}  // namespace llm
