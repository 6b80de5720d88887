#include "common/cli_args.h"

#include <cstdlib>

namespace llm {

CliArgs::CliArgs(std::string program, std::map<std::string, std::string> spec)
    : program_(std::move(program)), spec_(std::move(spec)) {
  spec_.emplace("help", "[flag] print this help");
}

bool CliArgs::IsBool(const std::string& name) const {
  auto it = spec_.find(name);
  return it != spec_.end() && it->second.rfind("[flag]", 0) == 0;
}

Status CliArgs::Parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) return InvalidArgument("unexpected argument '" + arg + "'");
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (!spec_.count(name)) return InvalidArgument("unknown flag --" + name);
    if (IsBool(name)) {
      if (inline_value) return InvalidArgument("flag --" + name + " takes no value");
    } else if (!inline_value) {
      if (i + 1 >= argc) return InvalidArgument("flag --" + name + " needs a value");
      value = argv[++i];
    }
    values_.emplace(name, value);
  }
  return Status::Ok();
}

std::string CliArgs::Usage() const {
  std::string s = "usage: " + program_ + " [flags]\n";
  for (const auto& [name, help] : spec_) {
    s += "  --" + name + (IsBool(name) ? "" : " VALUE") + "\n      " +
         (IsBool(name) ? help.substr(7) : help) + "\n";
  }
  return s;
}

std::vector<std::string> CliArgs::All(const std::string& name) const {
  std::vector<std::string> out;
  auto [b, e] = values_.equal_range(name);
  for (auto it = b; it != e; ++it) out.push_back(it->second);
  return out;
}

std::string CliArgs::Str(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

StatusOr<long> CliArgs::Int(const std::string& name, long fallback, long min, long max) const {
  if (!Has(name)) return fallback;
  const std::string s = Str(name);
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < min || v > max) {
    return InvalidArgument("--" + name + " must be an integer in [" + std::to_string(min) + ", " +
                           std::to_string(max) + "], got '" + s + "'");
  }
  return v;
}

StatusOr<double> CliArgs::Double(const std::string& name, double fallback, double min,
                                 double max) const {
  if (!Has(name)) return fallback;
  const std::string s = Str(name);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v >= min && v <= max)) {
    return InvalidArgument("--" + name + " must be a number in [" + std::to_string(min) + ", " +
                           std::to_string(max) + "], got '" + s + "'");
  }
  return v;
}

}  // namespace llm
