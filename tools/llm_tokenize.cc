// llm-tokenize: encode text or decode ids with a Hugging Face tokenizer folder, like llama.cpp's
// llama-tokenize.
//
//   llm-tokenize --model DIR (--text "..." | --ids 1,2,3 | --stdin)
//                [--no-special] [--no-parse-special] [--skip-special]
//
// Encoding prints {"ids":[...],"tokens":[...]}; decoding (--ids) prints {"text":"..."}.
// --stdin reads the text to encode from standard input. Bad arguments or a missing folder print
// an error to stderr and exit with code 1.
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/tokenizer.h"

namespace {

struct Args {
  std::string model;
  std::optional<std::string> text;
  std::optional<std::string> ids;
  bool use_stdin = false;
  bool add_special = true;
  bool parse_special = true;
  bool skip_special = false;
};

constexpr const char* kUsage =
    "usage: llm-tokenize --model DIR (--text \"...\" | --ids 1,2,3 | --stdin)\n"
    "                    [--no-special] [--no-parse-special] [--skip-special]\n";

int Fail(const std::string& message) {
  std::cerr << "llm-tokenize: " << message << "\n" << kUsage;
  return 1;
}

std::optional<std::string> ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](std::string* out) -> bool {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--model" || a == "-m") {
      if (!value(&args->model)) return a + " needs a value";
    } else if (a == "--text") {
      if (!value(&v)) return a + " needs a value";
      args->text = v;
    } else if (a == "--ids") {
      if (!value(&v)) return a + " needs a value";
      args->ids = v;
    } else if (a == "--stdin") {
      args->use_stdin = true;
    } else if (a == "--no-special") {
      args->add_special = false;
    } else if (a == "--no-parse-special") {
      args->parse_special = false;
    } else if (a == "--skip-special") {
      args->skip_special = true;
    } else {
      return "unknown argument '" + a + "'";
    }
  }
  if (args->model.empty()) return std::string("--model DIR is required");
  const int modes = (args->text ? 1 : 0) + (args->ids ? 1 : 0) + (args->use_stdin ? 1 : 0);
  if (modes != 1) return std::string("give exactly one of --text, --ids, --stdin");
  return std::nullopt;
}

std::optional<std::vector<int32_t>> ParseIds(const std::string& s) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty() && end == s.size() && !ids.empty()) break;  // trailing comma
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < INT32_MIN || v > INT32_MAX) return std::nullopt;
      ids.push_back(static_cast<int32_t>(v));
    } catch (...) {
      return std::nullopt;
    }
    pos = end + 1;
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (auto err = ParseArgs(argc, argv, &args)) return Fail(*err);
  auto tok_or = llm::Tokenizer::FromDir(args.model);
  if (!tok_or.ok()) {
    std::cerr << "llm-tokenize: " << tok_or.status().ToString() << "\n";
    return 1;
  }
  const llm::Tokenizer& tok = **tok_or;
  nlohmann::json out;
  if (args.ids) {
    const auto ids = ParseIds(*args.ids);
    if (!ids)
      return Fail("--ids must be a comma-separated list of integers, got '" + *args.ids + "'");
    out["text"] = tok.Decode(*ids, args.skip_special);
  } else {
    std::string text;
    if (args.use_stdin) {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      text = *args.text;
    }
    const auto ids = tok.Encode(text, args.add_special, args.parse_special);
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (const int32_t id : ids) tokens.push_back(tok.IdToToken(id));
    out["ids"] = ids;
    out["tokens"] = tokens;
  }
  std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}
