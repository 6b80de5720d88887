#include "router/api_keys.h"

#include <fstream>

namespace llm::router {

namespace {

std::string_view Trim(std::string_view s) {
  const char* kSpace = " \t\r\n";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

}  // namespace

bool ConstantTimeEquals(std::string_view presented, std::string_view secret) {
  // Walk the whole secret whatever `presented` holds; a length mismatch is folded in last.
  unsigned char diff = 0;
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char p =
        presented.empty() ? 0 : static_cast<unsigned char>(presented[i % presented.size()]);
    diff |= static_cast<unsigned char>(p ^ static_cast<unsigned char>(secret[i]));
  }
  return (diff == 0) & (presented.size() == secret.size());
}

ApiKeys::ApiKeys(std::vector<std::string> keys) {
  for (std::string& k : keys) {
    const std::string_view t = Trim(k);
    if (!t.empty()) keys_.emplace_back(t);
  }
}

StatusOr<ApiKeys> ApiKeys::Load(const std::vector<std::string>& config_keys,
                                const std::string& key_file, const char* env_key) {
  std::vector<std::string> keys = config_keys;
  if (!key_file.empty()) {
    std::ifstream in(key_file);
    if (!in) return NotFound("router.api_key_file: cannot open '" + key_file + "'");
    size_t found = 0;
    for (std::string line; std::getline(in, line);) {
      const std::string_view t = Trim(line);
      if (t.empty() || t.front() == '#') continue;
      keys.emplace_back(t);
      ++found;
    }
    if (found == 0) {
      return InvalidArgument("router.api_key_file: '" + key_file + "' holds no key");
    }
  }
  if (env_key != nullptr && !Trim(env_key).empty()) keys.emplace_back(env_key);
  return ApiKeys(std::move(keys));
}

std::string BindHost(const std::string& configured, const ApiKeys& keys) {
  if (!configured.empty()) return configured;
  return keys.enabled() ? "0.0.0.0" : "127.0.0.1";
}

bool ApiKeys::Accepts(std::string_view authorization) const {
  if (keys_.empty()) return true;
  // The scheme is case-insensitive (RFC 7235); the key follows one space.
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    const char c = authorization[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != kScheme[i]) {
      return false;
    }
  }
  const std::string_view presented = Trim(authorization.substr(kScheme.size()));
  bool match = false;
  for (const std::string& key : keys_) match |= ConstantTimeEquals(presented, key);
  return match;
}

}  // namespace llm::router
