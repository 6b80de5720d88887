// A small command-line parser for the tools: `--name value`, `--name=value` and boolean
// `--flag`. Unknown flags and bad values are errors that name the flag.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace llm {

class CliArgs {
 public:
  // `spec` maps each accepted flag (without "--") to its help text; flags whose help starts
  // with "[flag]" take no value.
  CliArgs(std::string program, std::map<std::string, std::string> spec);

  Status Parse(int argc, char** argv);
  std::string Usage() const;

  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  // Every value given for a repeatable flag, in order.
  std::vector<std::string> All(const std::string& name) const;
  std::string Str(const std::string& name, const std::string& fallback = "") const;
  StatusOr<long> Int(const std::string& name, long fallback, long min, long max) const;
  StatusOr<double> Double(const std::string& name, double fallback, double min, double max) const;

 private:
  bool IsBool(const std::string& name) const;
  std::string program_;
  std::map<std::string, std::string> spec_;
  std::multimap<std::string, std::string> values_;
};

}  // namespace llm
