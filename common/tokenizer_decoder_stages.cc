// The streaming decoder stages (see tokenizer_decoder.h).
#include <type_traits>

#include <nlohmann/json.hpp>

#include "common/tokenizer_decoder.h"
#include "common/tokenizer_pipeline.h"
#include "common/tokenizer_regex.h"
#include "common/unicode.h"
#include "common/utf8.h"

namespace llm {
namespace {

using nlohmann::json;

// decoders::Replace (token-local). Literal patterns keep a tail that could still begin a match
// split across pieces; regex patterns are applied per piece.
class ReplaceStage : public DecodeStage {
 public:
  ReplaceStage(const std::string& literal, const TokRegex* regex, const std::string& content)
      : literal_(literal), regex_(regex), content_(content) {}
  void Push(DecodePiece piece, std::vector<DecodePiece>* out) override {
    if (piece.new_token) {
      FlushHeld(out);
      held_.clear();
    }
    held_ += piece.text;
    std::string text = Process(false);
    if (piece.new_token || !text.empty()) out->push_back({std::move(text), piece.new_token});
  }
  void Finish(std::vector<DecodePiece>* out) override { FlushHeld(out); }

 private:
  void FlushHeld(std::vector<DecodePiece>* out) {
    std::string text = Process(true);
    if (!text.empty()) out->push_back({std::move(text), false});
  }
  // Replaces in held_ what is final; keeps the rest in held_.
  std::string Process(bool all) {
    std::string out;
    if (regex_ != nullptr) {
      size_t prev = 0;
      for (const auto& [b, e] : regex_->FindAll(held_)) {
        out.append(held_, prev, b - prev);
        out += content_;
        prev = e;
      }
      out.append(held_, prev);
      held_.clear();
      return out;
    }
    if (literal_.empty()) {
      out.swap(held_);
      return out;
    }
    // Matches starting before `limit` lie entirely inside held_, so they are final. Pieces hold
    // whole characters, so a one-character pattern never spans two pieces: nothing is held and
    // whole tokens stay whole for the stages after (ByteFallback needs them).
    size_t limit = held_.size();
    if (!all && utf8::CountChars(literal_) > 1)
      limit = held_.size() + 1 > literal_.size() ? held_.size() + 1 - literal_.size() : 0;
    size_t pos = 0;
    while (true) {
      const size_t hit = held_.find(literal_, pos);
      if (hit == std::string::npos || hit >= limit) break;
      out.append(held_, pos, hit - pos);
      out += content_;
      pos = hit + literal_.size();
    }
    size_t cut = std::max(pos, limit);
    while (cut > pos && cut < held_.size() && (static_cast<uint8_t>(held_[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    out.append(held_, pos, cut - pos);
    held_.erase(0, cut);
    return out;
  }

  const std::string& literal_;
  const TokRegex* regex_;
  const std::string& content_;
  std::string held_;
};

// decoders::ByteFallback: a run of <0xNN> tokens becomes its UTF-8 text when valid, else one
// U+FFFD per byte (raw_bytes: the bytes as they are).
class ByteFallbackStage : public DecodeStage {
 public:
  explicit ByteFallbackStage(bool raw_bytes) : raw_bytes_(raw_bytes) {}
  void Push(DecodePiece piece, std::vector<DecodePiece>* out) override {
    int byte = -1;
    if (piece.new_token) byte = ParseByteToken(piece.text);
    if (byte >= 0) {
      run_.push_back(static_cast<char>(byte));
      return;
    }
    FlushRun(out);
    out->push_back(std::move(piece));
  }
  void Finish(std::vector<DecodePiece>* out) override { FlushRun(out); }

 private:
  static int ParseByteToken(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; ++i) {
      const char c = t[i];
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    return v;
  }
  void FlushRun(std::vector<DecodePiece>* out) {
    if (run_.empty()) return;
    if (raw_bytes_ || utf8::IsValid(run_)) {
      out->push_back({run_, true});
    } else {
      for (size_t i = 0; i < run_.size(); ++i) out->push_back({utf8::Encode(0xFFFD), true});
    }
    run_.clear();
  }
  bool raw_bytes_;
  std::string run_;
};

// decoders::Fuse: everything becomes one token.
class FuseStage : public DecodeStage {
 public:
  void Push(DecodePiece piece, std::vector<DecodePiece>* out) override {
    out->push_back({std::move(piece.text), first_});
    first_ = false;
  }
  void Finish(std::vector<DecodePiece>*) override {}

 private:
  bool first_ = true;
};

// decoders::Strip: per token, up to `start` leading and `stop` trailing `content` characters.
class StripStage : public DecodeStage {
 public:
  StripStage(const std::string& content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void Push(DecodePiece piece, std::vector<DecodePiece>* out) override {
    if (piece.new_token) {
      held_ = 0;
      lead_left_ = start_;
      out->push_back({std::string(), true});
    }
    std::string text;
    const std::string_view s = piece.text;
    for (size_t pos = 0; pos < s.size();) {
      const size_t begin = pos;
      utf8::Next(s, &pos);
      const std::string_view c = s.substr(begin, pos - begin);
      const bool is_content = c == content_;
      if (lead_left_ > 0) {
        if (is_content) {
          --lead_left_;
          continue;
        }
        lead_left_ = 0;
      }
      if (stop_ > 0 && is_content) {
        if (++held_ > stop_) {
          text += content_;
          --held_;
        }
        continue;
      }
      for (; held_ > 0; --held_) text += content_;
      text.append(c);
    }
    if (!text.empty()) out->push_back({std::move(text), false});
  }
  void Finish(std::vector<DecodePiece>*) override {}

 private:
  std::string content_;
  size_t start_, stop_;
  size_t lead_left_ = 0;
  size_t held_ = 0;  // trailing content characters not yet emitted (dropped at token end)
};

// decoders::Metaspace: the replacement char becomes " "; in the first token it is removed
// (unless prepend_scheme is "never").
class MetaspaceStage : public DecodeStage {
 public:
  MetaspaceStage(const std::string& replacement, bool strip_first)
      : replacement_(replacement), strip_first_(strip_first) {}
  void Push(DecodePiece piece, std::vector<DecodePiece>* out) override {
    if (piece.new_token) ++index_;
    const bool drop = index_ == 0 && strip_first_;
    out->push_back({ReplaceAll(piece.text, replacement_, drop ? "" : " "), piece.new_token});
  }
  void Finish(std::vector<DecodePiece>*) override {}

 private:
  std::string replacement_;
  bool strip_first_;
  long index_ = -1;
};

// decoders::ByteLevel: characters back to bytes (tokens with a character outside the alphabet
// keep their own UTF-8 bytes), all joined, decoded lossily (raw_bytes: passed on as they are).
// An unfinished character is held.
class ByteLevelStage : public DecodeStage {
 public:
  explicit ByteLevelStage(bool raw_bytes) : raw_bytes_(raw_bytes) {}
  void Push(DecodePiece piece, std::vector<DecodePiece>* out) override {
    std::string bytes;
    bool all_mapped = true;
    for (size_t pos = 0; pos < piece.text.size() && all_mapped;) {
      const int b = unicode::CharToByte(utf8::Next(piece.text, &pos));
      if (b < 0) all_mapped = false;
      bytes.push_back(static_cast<char>(b));
    }
    buf_ += all_mapped ? bytes : piece.text;
    if (raw_bytes_) {
      Emit(std::move(buf_), out);
      buf_.clear();
      return;
    }
    const size_t n = utf8::StablePrefixLen(buf_);
    std::string text = utf8::DecodeLossy(std::string_view(buf_).substr(0, n));
    buf_.erase(0, n);
    Emit(std::move(text), out);
  }
  void Finish(std::vector<DecodePiece>* out) override {
    if (!buf_.empty()) Emit(utf8::DecodeLossy(buf_), out);
    buf_.clear();
  }

 private:
  void Emit(std::string text, std::vector<DecodePiece>* out) {
    if (!first_ && text.empty()) return;
    out->push_back({std::move(text), first_});
    first_ = false;
  }
  bool raw_bytes_;
  std::string buf_;
  bool first_ = true;
};

// No decoder: Rust joins the tokens with " ".
class JoinSpaceStage : public DecodeStage {
 public:
  void Push(DecodePiece piece, std::vector<DecodePiece>* out) override {
    if (piece.new_token && !first_) piece.text.insert(0, 1, ' ');
    first_ = false;
    out->push_back(std::move(piece));
  }
  void Finish(std::vector<DecodePiece>*) override {}

 private:
  bool first_ = true;
};

template <typename Stage>
class SimpleSpec : public DecoderSpec {
 public:
  std::unique_ptr<DecodeStage> NewStage(bool raw_bytes) const override {
    if constexpr (std::is_constructible_v<Stage, bool>) {
      return std::make_unique<Stage>(raw_bytes);
    } else {
      return std::make_unique<Stage>();
    }
  }
};

class ReplaceSpec : public DecoderSpec {
 public:
  ReplaceSpec(std::string literal, std::unique_ptr<TokRegex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}
  std::unique_ptr<DecodeStage> NewStage(bool) const override {
    return std::make_unique<ReplaceStage>(literal_, regex_.get(), content_);
  }

 private:
  std::string literal_;
  std::unique_ptr<TokRegex> regex_;
  std::string content_;
};

class StripSpec : public DecoderSpec {
 public:
  StripSpec(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  std::unique_ptr<DecodeStage> NewStage(bool) const override {
    return std::make_unique<StripStage>(content_, start_, stop_);
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class MetaspaceSpec : public DecoderSpec {
 public:
  MetaspaceSpec(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  std::unique_ptr<DecodeStage> NewStage(bool) const override {
    return std::make_unique<MetaspaceStage>(replacement_, strip_first_);
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

using Specs = std::vector<std::unique_ptr<DecoderSpec>>;

Status AddReplace(const json& j, const std::string& where, Specs* specs) {
  const auto p = j.find("pattern");
  const std::string content = j.value("content", std::string());
  if (p != j.end() && p->is_object() && p->contains("String") && (*p)["String"].is_string()) {
    specs->push_back(
        std::make_unique<ReplaceSpec>((*p)["String"].get<std::string>(), nullptr, content));
    return Status::Ok();
  }
  if (p != j.end() && p->is_object() && p->contains("Regex") && (*p)["Regex"].is_string()) {
    LLM_ASSIGN_OR_RETURN(auto re, TokRegex::Compile((*p)["Regex"].get<std::string>(), where));
    specs->push_back(std::make_unique<ReplaceSpec>(std::string(), std::move(re), content));
    return Status::Ok();
  }
  return InvalidArgument(where + ": \"pattern\" must hold \"String\" or \"Regex\"");
}

Status AddDecoder(const json& j, const std::string& where, Specs* specs) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return InvalidArgument(where + ": decoder without a \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  const std::string here = where + " (" + type + ")";
  if (type == "Sequence") {
    const auto list = j.find("decoders");
    if (list == j.end() || !list->is_array()) {
      return InvalidArgument(here + ": \"decoders\" must be an array");
    }
    for (const auto& item : *list) LLM_RETURN_IF_ERROR(AddDecoder(item, where, specs));
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    specs->push_back(std::make_unique<SimpleSpec<ByteLevelStage>>());
  } else if (type == "ByteFallback") {
    specs->push_back(std::make_unique<SimpleSpec<ByteFallbackStage>>());
  } else if (type == "Fuse") {
    specs->push_back(std::make_unique<SimpleSpec<FuseStage>>());
  } else if (type == "Replace") {
    return AddReplace(j, here, specs);
  } else if (type == "Strip") {
    const std::string content = j.value("content", std::string(" "));
    if (utf8::CountChars(content) != 1) return InvalidArgument(here + ": content must be 1 char");
    specs->push_back(std::make_unique<StripSpec>(content, j.value("start", size_t{0}),
                                                 j.value("stop", size_t{0})));
  } else if (type == "Metaspace") {
    bool strip_first = j.value("add_prefix_space", true);
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      strip_first = j["prepend_scheme"].get<std::string>() != "never";
    }
    specs->push_back(std::make_unique<MetaspaceSpec>(
        j.value("replacement", std::string("\xE2\x96\x81")), strip_first));
  } else {
    return Unimplemented(here + ": unsupported decoder type");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Specs> MakeDecoderSpecs(const json& j, const std::string& where) {
  Specs specs;
  if (j.is_null()) {
    specs.push_back(std::make_unique<SimpleSpec<JoinSpaceStage>>());
    return specs;
  }
  LLM_RETURN_IF_ERROR(AddDecoder(j, where, &specs));
  return specs;
}

}  // namespace llm
