// Logging of every process (router, worker ranks): spdlog to stderr, one line per event, as
// text (the default) or JSON lines for log shippers (log.format: json). Events about a request
// carry its id as a field (`request_id`), so `grep <id>` (text) or a query on the field (JSON)
// finds every line about that request on every process.
//
//   text: [2026-11-24 08:45:16.123] [router] [info] request finished request_id=abc status=200
//   json: {"time":"2026-11-24T08:45:16.123Z","level":"info","process":"router",
//          "msg":"request finished","request_id":"abc","status":200}
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace llm {

// log.* of cluster.yaml (the same keys for every process).
struct LogSection {
  std::string level = "info";   // trace, debug, info, warn, error, critical, off
  std::string format = "text";  // text or json
};

// Installs the stderr logger named `process` ("router", "worker") with the text format at info;
// call first thing in main so that configuration errors are logged too.
void InitLogging(const std::string& process);

// Applies log.level and log.format (validated by the config schema; an unknown value is an
// InvalidArgument naming the key).
Status ConfigureLogging(const LogSection& log);

// One event with fields: text appends ` key=value` pairs (strings with spaces or quotes are
// JSON-quoted), JSON adds them as members of the line. Field values are JSON scalars.
enum class LogLevel { kDebug, kInfo, kWarn, kError };
void LogEvent(LogLevel level, std::string_view message, const nlohmann::ordered_json& fields);

// The text form of `fields` (` key=value ...`); exposed for tests.
std::string FormatLogFields(const nlohmann::ordered_json& fields);

}  // namespace llm
