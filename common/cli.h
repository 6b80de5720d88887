// The one command-line layer of every binary (CLI11, Debian's libcli11-dev): each program
// declares its flags on a CLI::App, and ParseCommandLine gives the same --help, the same error
// messages naming the flag, and the same exit codes everywhere. Servers add the cluster.yaml
// keys as flags with ClusterFlags: `--config FILE` plus one `--section.key VALUE` per schema
// key (common/cluster_config.h), checked by the schema so a flag and a YAML key share one rule.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/cluster_config.h"
#include "common/status.h"

namespace llm {

// Exit code of a command line that could not be parsed (CLI11's message is on stderr).
constexpr int kUsageExitCode = 2;

// Parses argv (adding --version to `app`). nullopt: go on; otherwise the program exits with the
// returned code: 0 after --help or --version (printed to stdout), kUsageExitCode after an error
// (printed to stderr with a hint to
// --help).
std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv);

// vLLM's names for the common keys ("tensor-parallel-size" -> "engine.tensor_parallel_size").
const std::vector<std::pair<std::string, std::string>>& VllmFlagAliases();

// The cluster.yaml flags on `app`, plus vLLM-style aliases (--port, --tensor-parallel-size ...;
// see VllmFlagAliases). Load() after parsing: the file, then LLM_SECTION_KEY environment
// variables, then the flags given (a --section.key wins over its alias).
class ClusterFlags {
 public:
  explicit ClusterFlags(CLI::App& app);
  ClusterFlags(const ClusterFlags&) = delete;
  ClusterFlags& operator=(const ClusterFlags&) = delete;

  StatusOr<ClusterConfig> Load() const;

 private:
  std::string config_path_;
  // One per schema key: the key and the value given on the command line (if any).
  std::vector<std::pair<std::string, std::string>> values_;
  std::vector<CLI::Option*> options_;
  std::vector<std::pair<std::string, std::string>> aliases_;  // key, value
  std::vector<CLI::Option*> alias_options_;
};

}  // namespace llm
