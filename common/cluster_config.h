// The one configuration of a cluster (cluster.yaml), shared by the router and the worker job.
// Every key is declared once in a schema (type, default, range, help); the YAML is parsed and
// validated at start-up, command-line overrides (`--section.key value`) are applied on top, and
// the result is immutable. Unknown keys and bad values are errors that name the key.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "common/config_sections.h"
#include "common/log.h"
#include "common/status.h"

namespace llm {

struct ClusterConfig {
  ModelSection model;
  EngineSection engine;
  CoordinatorSection coordinator;
  RouterSection router;
  LogSection log;
};

// One key of the schema, for help texts and command-line layers (common/cli.h).
struct ConfigKeyInfo {
  std::string name;  // "section.key"
  std::string type;  // int, number, bool, string, enum, list (comma-separated on a command line)
  std::string range;
  std::string help;
  std::string default_value;
};
const std::vector<ConfigKeyInfo>& ClusterConfigKeys();

// Describes every key: "section.key  type  default  range  help" lines.
std::string ClusterConfigHelp();

// Parses YAML text (`source` names it in errors), then applies overrides of the form
// {"engine.block_size", "32"} in order.
StatusOr<ClusterConfig> ParseClusterConfig(
    const std::string& yaml_text, const std::string& source,
    const std::vector<std::pair<std::string, std::string>>& overrides = {});

// The environment variable of a key: "engine.block_size" -> LLM_ENGINE_BLOCK_SIZE.
std::string ConfigEnvName(const std::string& key);

// Looks up an environment variable (nullptr: unset).
using EnvLookup = std::function<const char*(const std::string&)>;
inline const char* SystemEnv(const std::string& name) {
  return std::getenv(name.c_str());
}

// Reads the YAML file `path` (empty: defaults only), then applies the keys set in the
// environment (LLM_SECTION_KEY, see ConfigEnvName), then the overrides (values of list keys
// comma-separated): command line > environment > YAML > default.
StatusOr<ClusterConfig> LoadClusterConfig(
    const std::string& path, const std::vector<std::pair<std::string, std::string>>& overrides,
    const EnvLookup& env = SystemEnv);

}  // namespace llm
