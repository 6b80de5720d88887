#include "common/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <memory>

namespace llm {

namespace {

// The fields of the LogEvent being logged on this thread: spdlog's loggers are synchronous,
// so the formatter runs inside the spdlog call that LogEvent makes, on the same thread.
thread_local const nlohmann::ordered_json* tl_event_fields = nullptr;
std::atomic<bool> g_json_format{false};

std::string& ProcessName() {
  static std::string name = "llm";
  return name;
}

// One JSON object per line: time (UTC, milliseconds), level, process, msg, then the event's
// fields. Messages and fields are escaped by nlohmann::json (invalid UTF-8 is replaced, never
// thrown on: log text may quote what a client sent).
class JsonLineFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    nlohmann::ordered_json line;
    line["time"] = Timestamp(msg.time);
    line["level"] = std::string(spdlog::level::to_string_view(msg.level).data(),
                                spdlog::level::to_string_view(msg.level).size());
    line["process"] = ProcessName();
    line["msg"] = std::string(msg.payload.data(), msg.payload.size());
    if (tl_event_fields != nullptr && tl_event_fields->is_object()) {
      for (const auto& [key, value] : tl_event_fields->items()) line[key] = value;
    }
    const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(text.data(), text.data() + text.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLineFormatter>();
  }

 private:
  static std::string Timestamp(spdlog::log_clock::time_point t) {
    const auto since_epoch = t.time_since_epoch();
    const std::time_t secs = static_cast<std::time_t>(
        std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count());
    const int millis = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count() % 1000);
    std::tm utc{};
    gmtime_r(&secs, &utc);
    char buf[40];
    const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
    return std::string(buf, n) + "." + std::to_string(1000 + millis).substr(1) + "Z";
  }
};

std::string TextPattern() {
  return "[%Y-%m-%d %H:%M:%S.%e] [" + ProcessName() + "] [%^%l%$] %v";
}

bool NeedsQuoting(const std::string& s) {
  if (s.empty()) return true;
  for (const unsigned char c : s) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f) return true;
  }
  return false;
}

}  // namespace

void InitLogging(const std::string& process) {
  ProcessName() = process;
  auto logger = spdlog::get(process);
  if (!logger) logger = spdlog::stderr_color_mt(process);
  spdlog::set_default_logger(logger);
  spdlog::set_pattern(TextPattern());
  spdlog::set_level(spdlog::level::info);
}

Status ConfigureLogging(const LogSection& log) {
  const spdlog::level::level_enum level = spdlog::level::from_str(log.level);
  // from_str maps unknown names to off; only "off" itself may mean off.
  if (level == spdlog::level::off && log.level != "off") {
    return InvalidArgument("log.level: '" + log.level +
                           "' is not one of trace|debug|info|warn|error|critical|off");
  }
  if (log.format == "json") {
    spdlog::set_formatter(std::make_unique<JsonLineFormatter>());
    g_json_format = true;
  } else if (log.format == "text") {
    spdlog::set_pattern(TextPattern());
    g_json_format = false;
  } else {
    return InvalidArgument("log.format: '" + log.format + "' is not one of text|json");
  }
  spdlog::set_level(level);
  return Status::Ok();
}

std::string FormatLogFields(const nlohmann::ordered_json& fields) {
  std::string out;
  if (!fields.is_object()) return out;
  for (const auto& [key, value] : fields.items()) {
    out += ' ';
    out += key;
    out += '=';
    if (value.is_string()) {
      const std::string& s = value.get_ref<const std::string&>();
      out += NeedsQuoting(s) ? value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                             : s;
    } else {
      out += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
  return out;
}

void LogEvent(LogLevel level, std::string_view message, const nlohmann::ordered_json& fields) {
  static constexpr spdlog::level::level_enum kLevels[] = {spdlog::level::debug, spdlog::level::info,
                                                          spdlog::level::warn, spdlog::level::err};
  const spdlog::level::level_enum lvl = kLevels[static_cast<int>(level)];
  if (!spdlog::should_log(lvl)) return;
  if (!g_json_format.load(std::memory_order_relaxed)) {
    spdlog::log(lvl, "{}{}", message, FormatLogFields(fields));
    return;
  }
  tl_event_fields = &fields;
  spdlog::log(lvl, "{}", message);
  tl_event_fields = nullptr;
}

}  // namespace llm
