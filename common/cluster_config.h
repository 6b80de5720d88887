// The one configuration of a cluster (cluster.yaml), shared by the router and the worker job.
// Every key is declared once in a schema (type, default, range, help); the YAML is parsed and
// validated at start-up, command-line overrides (`--section.key value`) are applied on top, and
// the result is immutable. Unknown keys and bad values are errors that name the key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config_sections.h"
#include "common/status.h"

namespace llm {

struct ClusterConfig {
  ModelSection model;
  EngineSection engine;
  CoordinatorSection coordinator;
  RouterSection router;
};

// Describes every key: "section.key  type  default  range  help" lines.
std::string ClusterConfigHelp();

// Parses YAML text (`source` names it in errors), then applies overrides of the form
// {"engine.block_size", "32"} in order.
StatusOr<ClusterConfig> ParseClusterConfig(
    const std::string& yaml_text, const std::string& source,
    const std::vector<std::pair<std::string, std::string>>& overrides = {});

// Reads `path` (empty: defaults only) and applies the overrides taken from argv
// (`--section.key value` or `--section.key=value`; `--config PATH` names the file).
StatusOr<ClusterConfig> LoadClusterConfig(int argc, char** argv);

}  // namespace llm
