// DecodeSession and Python's clean-up (see tokenizer_decoder.h).
#include "common/tokenizer_decoder.h"

#include "common/tokenizer_pipeline.h"

namespace llm {
namespace {

// A cut between bytes x = s[p-1] and y = s[p] is safe for clean-up when no pattern of
// CleanUpTokenization can span it, in this or any intermediate string of the replacement chain:
// the patterns only ever remove spaces, so two non-space neighbours stay neighbours, and no
// pattern holds a pair of non-space neighbours starting with a byte outside {', n, v, r}.
bool SafeCut(char x, char y) {
  if (y == ' ' || (static_cast<uint8_t>(y) & 0xC0) == 0x80) return false;
  return x != ' ' && x != '\'' && x != 'n' && x != 'v' && x != 'r';
}

}  // namespace

std::string CleanUpTokenization(std::string_view text) {
  static constexpr std::pair<const char*, const char*> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  std::string s(text);
  for (const auto& [from, to] : kRules) {
    if (s.find(from) != std::string::npos) s = ReplaceAll(s, from, to);
  }
  return s;
}

DecodeSession::DecodeSession(const std::vector<std::unique_ptr<DecoderSpec>>& specs, bool clean_up,
                             bool raw_bytes)
    : clean_up_(clean_up) {
  stages_.reserve(specs.size());
  for (const auto& spec : specs) stages_.push_back(spec->NewStage(raw_bytes));
}

std::string DecodeSession::Push(std::string_view token) {
  if (finished_) return std::string();
  std::vector<DecodePiece> pieces;
  pieces.push_back({std::string(token), true});
  std::vector<DecodePiece> next;
  for (auto& stage : stages_) {
    next.clear();
    for (auto& p : pieces) stage->Push(std::move(p), &next);
    pieces.swap(next);
  }
  std::string text;
  for (const auto& p : pieces) text += p.text;
  return Clean(std::move(text), false);
}

std::string DecodeSession::Finish() {
  if (finished_) return std::string();
  finished_ = true;
  std::vector<DecodePiece> carry;
  std::vector<DecodePiece> next;
  for (auto& stage : stages_) {
    next.clear();
    for (auto& p : carry) stage->Push(std::move(p), &next);
    stage->Finish(&next);
    carry.swap(next);
  }
  std::string text;
  for (const auto& p : carry) text += p.text;
  return Clean(std::move(text), true);
}

std::string DecodeSession::Clean(std::string text, bool last) {
  if (!clean_up_) return text;
  clean_held_ += text;
  size_t cut = clean_held_.size();
  if (!last) {
    while (cut > 0 &&
           !(cut < clean_held_.size() && SafeCut(clean_held_[cut - 1], clean_held_[cut]))) {
      --cut;
    }
  }
  std::string out = CleanUpTokenization(std::string_view(clean_held_).substr(0, cut));
  clean_held_.erase(0, cut);
  return out;
}

}  // namespace llm
