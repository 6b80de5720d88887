// Regular expressions for the tokenizer pipeline (Split pre-tokenizer, Replace normalizer and
// decoder). These use Oniguruma on purpose: the Rust `tokenizers` crate compiles every pattern
// of tokenizer.json with Oniguruma (the `onig` crate, `SysRegex`), and details such as `\s`
// being Unicode White_Space, `\p{..}` classes, `(?i:...)` case folding and lookahead must behave
// exactly like it. Oniguruma stays out of this header.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace llm {

class TokRegex {
 public:
  // Compiles `pattern` (UTF-8, Oniguruma default syntax). `what` names the pattern in errors.
  static StatusOr<std::unique_ptr<TokRegex>> Compile(std::string_view pattern,
                                                     const std::string& what);
  ~TokRegex();
  TokRegex(const TokRegex&) = delete;
  TokRegex& operator=(const TokRegex&) = delete;

  // All non-overlapping, non-empty matches as byte ranges [begin, end), left to right, like
  // onig's find_iter: each search starts where the previous match ended and sees the whole
  // text (so lookarounds see the context).
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;

 private:
  TokRegex() = default;
  void* regex_ = nullptr;  // OnigRegex
};

}  // namespace llm
