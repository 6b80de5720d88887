#include "common/cli.h"

#include <cstdio>

#include "common/version.h"

namespace llm {

std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
  app.set_version_flag("--version", VersionLine());
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::printf("%s\n", VersionLine());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\nRun with --help for more information.\n", app.get_name().c_str(),
                 e.what());
    return kUsageExitCode;
  }
  return std::nullopt;
}

const std::vector<std::pair<std::string, std::string>>& VllmFlagAliases() {
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"model", "model.path"},
      {"served-model-name", "model.served_model_name"},
      {"load-format", "model.load_format"},
      {"max-model-len", "model.max_model_len"},
      {"chat-template", "model.chat_template"},
      {"tensor-parallel-size", "engine.tensor_parallel_size"},
      {"data-parallel-size", "engine.data_parallel_size"},
      {"pipeline-parallel-size", "engine.pipeline_parallel_size"},
      {"max-num-seqs", "engine.max_num_seqs"},
      {"max-num-batched-tokens", "engine.max_num_batched_tokens"},
      {"block-size", "engine.block_size"},
      {"seed", "engine.seed"},
      {"host", "router.host"},
      {"port", "router.port"},
      {"api-key", "router.api_keys"},
  };
  return aliases;
}

ClusterFlags::ClusterFlags(CLI::App& app) {
  app.add_option("--config", config_path_, "cluster.yaml: every key below as YAML sections")
      ->check(CLI::ExistingFile)
      ->group("Cluster configuration");
  const std::vector<ConfigKeyInfo>& keys = ClusterConfigKeys();
  values_.reserve(keys.size());  // the options hold pointers into it
  for (const ConfigKeyInfo& k : keys) {
    values_.emplace_back(k.name, "");
    std::string help = k.help + " [" + k.type + (k.range.empty() ? "" : " " + k.range) +
                       ", default '" + k.default_value + "']";
    if (k.type == "list") help += " (comma-separated)";
    options_.push_back(app.add_option("--" + k.name, values_.back().second, help)
                           ->type_name(k.type == "bool" ? "BOOL" : "VALUE")
                           ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                           ->group("Cluster configuration"));
  }
  aliases_.reserve(VllmFlagAliases().size());  // the options hold pointers into it
  for (const auto& [alias, key] : VllmFlagAliases()) {
    aliases_.emplace_back(key, "");
    alias_options_.push_back(app.add_option("--" + alias, aliases_.back().second, "--" + key)
                                 ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                                 ->group("vLLM-style aliases"));
  }
}

StatusOr<ClusterConfig> ClusterFlags::Load() const {
  std::vector<std::pair<std::string, std::string>> given;
  for (size_t i = 0; i < aliases_.size(); ++i) {  // first: --section.key wins over its alias
    if (alias_options_[i]->count() > 0) given.push_back(aliases_[i]);
  }
  for (size_t i = 0; i < options_.size(); ++i) {
    if (options_[i]->count() > 0) given.push_back(values_[i]);
  }
  return LoadClusterConfig(config_path_, given);
}

}  // namespace llm
