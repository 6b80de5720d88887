#include "common/tokenizer_json.h"

#include "common/tokenizer.h"

namespace llm {
namespace {

using nlohmann::json;

class Handler : public nlohmann::json_sax<json> {
 public:
  explicit Handler(TokenizerJson* out) : out_(out) {}

  bool null() override { return Value(json()); }
  bool boolean(bool v) override { return Value(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::kVocab) return VocabEntry(v);
    return Value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab) return VocabEntry(static_cast<int64_t>(v));
    return Value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return Value(json(v)); }
  bool binary(binary_t&) override { return Fail("binary values are not allowed"); }
  bool string(string_t& v) override {
    if (mode_ == Mode::kMerges) return MergeString(v);
    if (mode_ == Mode::kMergePair) {
      pair_.push_back(std::move(v));
      return pair_.size() <= 2 || Fail("a merge pair must hold two strings");
    }
    return Value(json(std::move(v)));
  }
  bool start_object(std::size_t) override {
    if (mode_ != Mode::kDom) return Fail("unexpected object in model.vocab/merges");
    if (AtModelMember("vocab")) {
      mode_ = Mode::kVocab;
      out_->has_vocab = true;
      return true;
    }
    return Open(json::object());
  }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    return Close();
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::kDom) return Fail("unexpected array in model.vocab/merges");
    if (AtModelMember("merges")) {
      mode_ = Mode::kMerges;
      out_->has_merges = true;
      return true;
    }
    return Open(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      if (pair_.size() != 2) return Fail("a merge pair must hold two strings");
      out_->merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
      return true;
    }
    return Close();
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    return Fail("not valid JSON at byte " + std::to_string(position) + ": " + e.what());
  }

  const std::string& error() const { return error_; }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };

  bool Fail(const std::string& message) {
    if (error_.empty()) error_ = message;
    return false;
  }
  // True when the container about to open is root["model"][name].
  bool AtModelMember(const char* name) const {
    return stack_.size() == 2 && names_.size() == 2 && names_[1] == "model" &&
           stack_.back()->is_object() && key_ == name;
  }
  json* Place(json v) {
    if (stack_.empty()) {
      out_->root = std::move(v);
      return &out_->root;
    }
    json* top = stack_.back();
    if (top->is_array()) {
      top->push_back(std::move(v));
      return &top->back();
    }
    json& slot = (*top)[key_];
    slot = std::move(v);
    return &slot;
  }
  bool Value(json v) {
    if (mode_ == Mode::kVocab) return Fail("model.vocab values must be integer ids");
    if (mode_ != Mode::kDom) return Fail("model.merges must hold strings or pairs of strings");
    Place(std::move(v));
    return true;
  }
  bool Open(json v) {
    const std::string name = !stack_.empty() && stack_.back()->is_object() ? key_ : std::string();
    stack_.push_back(Place(std::move(v)));
    names_.push_back(name);
    return true;
  }
  bool Close() {
    if (stack_.empty()) return Fail("unbalanced JSON");
    stack_.pop_back();
    names_.pop_back();
    return true;
  }
  bool VocabEntry(int64_t id) {
    if (id < 0 || id > kMaxTokenId) {
      return Fail("model.vocab[\"" + key_ + "\"] = " + std::to_string(id) + " is outside [0, " +
                  std::to_string(kMaxTokenId) + "]");
    }
    out_->vocab.insert_or_assign(std::move(key_), static_cast<int32_t>(id));
    return true;
  }
  bool MergeString(std::string& s) {
    const size_t space = s.find(' ');
    if (space == std::string::npos) return Fail("merge \"" + s + "\" is not of the form \"a b\"");
    out_->merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    return true;
  }

  TokenizerJson* out_;
  std::vector<json*> stack_;
  std::vector<std::string> names_;  // key of each open container in its parent
  std::string key_;
  std::vector<std::string> pair_;
  Mode mode_ = Mode::kDom;
  std::string error_;
};

}  // namespace

StatusOr<TokenizerJson> ParseTokenizerJson(const std::string& text, const std::string& file) {
  TokenizerJson out;
  out.vocab.reserve(1 << 16);
  Handler handler(&out);
  const bool ok = json::sax_parse(text, &handler, json::input_format_t::json, /*strict=*/true);
  if (!ok) {
    const std::string& err = handler.error();
    if (err.rfind("not valid JSON", 0) == 0) return DataLoss(file + ": " + err);
    return InvalidArgument(file + ": " + (err.empty() ? std::string("bad JSON") : err));
  }
  return out;
}

}  // namespace llm
