// API keys for the OpenAI endpoints: `Authorization: Bearer <key>` checked against every key
// from cluster.yaml (router.api_keys), a key file (router.api_key_file: one key per line,
// blank lines and lines starting with '#' ignored) and the LLM_API_KEY environment variable.
// No key anywhere: authentication is off (and the router binds to loopback by default).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace llm::router {

class ApiKeys {
 public:
  ApiKeys() = default;  // no keys: every request is accepted
  explicit ApiKeys(std::vector<std::string> keys);

  // Collects the keys of the three sources. A key file that cannot be read, or that holds no
  // key, is an error naming it (an operator who names a file expects protection).
  static StatusOr<ApiKeys> Load(const std::vector<std::string>& config_keys,
                                const std::string& key_file, const char* env_key);

  bool enabled() const { return !keys_.empty(); }
  size_t size() const { return keys_.size(); }

  // True when authentication is off or `authorization` is "Bearer <one of the keys>". The
  // comparison takes the same time whichever key matches and wherever a wrong key differs
  // (every key is compared in full), so timing does not reveal a key.
  bool Accepts(std::string_view authorization) const;

 private:
  std::vector<std::string> keys_;
};

// The router's bind address: `configured` when set; otherwise 0.0.0.0 (every interface) when
// keys protect the API, 127.0.0.1 when nothing does.
std::string BindHost(const std::string& configured, const ApiKeys& keys);

// Constant-time equality: the time depends on the lengths only, not on where they differ.
bool ConstantTimeEquals(std::string_view presented, std::string_view secret);

}  // namespace llm::router
