// llm-tokenize: encode text or decode ids with a Hugging Face tokenizer folder, like llama.cpp's
// llama-tokenize.
//
//   llm-tokenize --model DIR (--text "..." | --ids 1,2,3 | --stdin)
//                [--no-special] [--no-parse-special] [--skip-special]
//
// Encoding prints {"ids":[...],"tokens":[...]}; decoding (--ids) prints {"text":"..."}.
// --stdin reads the text to encode from standard input. A missing folder or bad ids exit 1;
// bad arguments exit 2 (llm::kUsageExitCode) with CLI11's message naming the flag.
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/cli.h"
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

int Fail(const std::string& message) {
  std::cerr << "llm-tokenize: " << message << "\n";
  return 1;
}

void AddFlags(CLI::App& app, Args* args) {
  app.add_option("-m,--model", args->model, "tokenizer folder (tokenizer.json ...)")->required();
  auto* text = app.add_option("--text", args->text, "text to encode");
  auto* ids = app.add_option("--ids", args->ids, "ids to decode, comma-separated");
  auto* in = app.add_flag("--stdin", args->use_stdin, "encode the text read from standard input");
  text->excludes(ids, in);
  ids->excludes(in);
  app.add_flag("!--no-special", args->add_special, "do not add BOS/EOS");
  app.add_flag("!--no-parse-special", args->parse_special,
               "special-token text in the input stays text");
  app.add_flag("--skip-special", args->skip_special, "decoding leaves special tokens out");
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
  CLI::App app("Encode text or decode ids with a Hugging Face tokenizer folder.", "llm-tokenize");
  AddFlags(app, &args);
  if (auto rc = llm::ParseCommandLine(app, argc, argv)) return *rc;
  if ((args.text ? 1 : 0) + (args.ids ? 1 : 0) + (args.use_stdin ? 1 : 0) != 1) {
    return Fail("give exactly one of --text, --ids, --stdin");
  }
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
