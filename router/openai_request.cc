#include "router/openai_request.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "common/json_schema_grammar.h"
#include "common/regex_grammar.h"
#include "common/sampling_params.h"
#include "router/json_body.h"

namespace llm::router {

namespace {

using nlohmann::json;

// Reads typed fields of a JSON object and keeps the first error. A field that is absent or
// null keeps its default; a field of the wrong type or out of range is an error naming it.
// Large values (messages, chat_template_kwargs) are moved out of the object, never copied.
class FieldReader {
 public:
  explicit FieldReader(json& obj) : obj_(obj) {}

  json* Get(const char* key) const {
    auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }
  void Fail(const std::string& param, const std::string& message) {
    if (!error) error = InvalidParam(param, message);
  }

  void Bool(const char* key, bool* out) {
    const json* v = Get(key);
    if (!v) return;
    if (!v->is_boolean()) return Fail(key, std::string("'") + key + "' must be a boolean");
    *out = v->get<bool>();
  }
  void String(const char* key, std::string* out) {
    const json* v = Get(key);
    if (!v) return;
    if (!v->is_string()) return Fail(key, std::string("'") + key + "' must be a string");
    *out = v->get<std::string>();
  }
  // lo/hi inclusive unless *_open; the message states the allowed range.
  void Number(const char* key, double* out, double lo, double hi, bool lo_open = false) {
    const json* v = Get(key);
    if (!v) return;
    if (!v->is_number()) return Fail(key, std::string("'") + key + "' must be a number");
    const double x = v->get<double>();
    const bool ok = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && x <= hi;
    if (!ok) {
      return Fail(key, std::string("'") + key + "' must be in " + (lo_open ? "(" : "[") + Fmt(lo) +
                           ", " + Fmt(hi) + "], got " + Fmt(x));
    }
    *out = x;
  }
  bool Int(const char* key, int64_t* out, int64_t lo, int64_t hi) {
    const json* v = Get(key);
    if (!v) return false;
    if (!v->is_number_integer()) {
      Fail(key, std::string("'") + key + "' must be an integer");
      return false;
    }
    const bool is_unsigned = v->is_number_unsigned();
    const int64_t x =
        is_unsigned && v->get<uint64_t>() > uint64_t{INT64_MAX} ? INT64_MAX : v->get<int64_t>();
    if (x < lo || x > hi) {
      Fail(key, std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "], got " + std::to_string(x));
      return false;
    }
    *out = x;
    return true;
  }
  template <typename T>
  void IntAs(const char* key, T* out, int64_t lo, int64_t hi) {
    int64_t x = 0;
    if (Int(key, &x, lo, hi)) *out = static_cast<T>(x);
  }

  std::optional<ApiError> error;

 private:
  static std::string Fmt(double x) {
    json j = x;
    return j.dump();
  }
  json& obj_;
};

std::optional<ApiError> ParseObject(std::string_view body, json* out) {
  return ParseJsonObjectBody(body, out);
}

// A client's string as an error message quotes it: its first 128 bytes (cut back to a UTF-8
// boundary) and "..." when longer, so an error never echoes a megabyte back.
std::string Clipped(const std::string& s) {
  constexpr size_t kMax = 128;
  if (s.size() <= kMax) return s;
  size_t n = kMax;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "...";
}

void ReadModel(FieldReader& r, const RequestLimits& limits, std::string* model) {
  *model = limits.served_model_name;
  r.String("model", model);
  if (!r.error && *model != limits.served_model_name) {
    r.error = ToApiError(
        NotFound("The model `" + Clipped(*model) + "` does not exist; this server serves `" +
                 limits.served_model_name + "`"),
        "model");
  }
}

// A list of token ids; `param` names it in errors.
bool ReadTokenIds(FieldReader& r, const json& v, const std::string& param,
                  std::vector<int32_t>* out) {
  if (!v.is_array()) {
    r.Fail(param, "'" + param + "' must be a list of token ids");
    return false;
  }
  for (const json& id : v) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      r.Fail(param, "'" + param + "' must contain non-negative integer token ids");
      return false;
    }
    out->push_back(id.get<int32_t>());
  }
  return true;
}

void ReadStop(FieldReader& r, const RequestLimits& limits, GenerationOptions* o) {
  const json* v = r.Get("stop");
  if (!v) return;
  if (v->is_array() && v->size() > static_cast<size_t>(limits.max_stop_strings)) {
    return r.Fail("stop", "'stop' has " + std::to_string(v->size()) + " strings; at most " +
                              std::to_string(limits.max_stop_strings) +
                              " are allowed (router.max_stop_strings)");
  }
  if (v->is_string()) {
    o->stop.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const json& s : *v) {
      if (!s.is_string()) return r.Fail("stop", "'stop' must be a string or a list of strings");
      o->stop.push_back(s.get<std::string>());
    }
  } else {
    return r.Fail("stop", "'stop' must be a string or a list of strings");
  }
  size_t bytes = 0;
  for (const std::string& s : o->stop) {
    if (s.empty()) return r.Fail("stop", "'stop' strings must not be empty");
    bytes += s.size();
  }
  if (bytes > static_cast<size_t>(limits.max_stop_bytes)) {
    return r.Fail("stop", "'stop' strings total " + std::to_string(bytes) + " bytes; at most " +
                              std::to_string(limits.max_stop_bytes) +
                              " are allowed (router.max_stop_bytes)");
  }
}

// Fields the engine cannot honour get a 400 instead of a silent 200 that ignores them. Empty
// values (null, {}, [], "none", best_of 1, response_format text) mean "not used" and pass.
void RejectUnsupported(FieldReader& r) {
  const auto unsupported = [&](const char* key, const std::string& what) {
    r.Fail(key, what + " is not supported by this server");
  };
  if (const json* v = r.Get("logit_bias"); v && !(v->is_object() && v->empty())) {
    return unsupported("logit_bias", "'logit_bias'");
  }
  if (const json* v = r.Get("best_of")) {
    if (!v->is_number_integer() || v->get<int64_t>() < 1) {
      return r.Fail("best_of", "'best_of' must be a positive integer");
    }
    if (v->get<int64_t>() > 1) return unsupported("best_of", "'best_of' greater than 1");
  }
  // The deprecated function-calling fields; `tools` / `tool_choice` replace them.
  if (const json* v = r.Get("functions"); v && !(v->is_array() && v->empty())) {
    return unsupported("functions", "'functions' (deprecated; use 'tools')");
  }
  if (const json* v = r.Get("function_call"); v && *v != "none") {
    return unsupported("function_call", "'function_call' (deprecated; use 'tool_choice')");
  }
  if (const json* v = r.Get("parallel_tool_calls"); v && !v->is_boolean()) {
    return r.Fail("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
  }
}

void ReadGenerationOptions(FieldReader& r, const RequestLimits& limits, GenerationOptions* o) {
  o->sampling = limits.default_sampling;  // the model's generation_config.json, if any
  // Ranges from the one table the coordinator and the sampler validate with.
  SamplingParams& s = o->sampling;
  auto number = [&](const ParamRange& range, float* out) {
    double x = *out;
    r.Number(range.name, &x, range.lo, range.hi, range.lo_open);
    // The engine samples with floats: a value in range as a double but not as a float (a
    // top_p of 1e-50 rounds to 0) would pass here and fail at the coordinator.
    const float f = static_cast<float>(x);
    if (!r.error && !range.Contains(f)) {
      r.Fail(range.name, std::string("'") + range.name + "' is out of range as a 32-bit float");
    }
    *out = f;
  };
  number(kTemperatureRange, &s.temperature);
  number(kTopPRange, &s.top_p);
  r.IntAs("top_k", &s.top_k, kMinTopK, std::numeric_limits<int32_t>::max());
  if (s.top_k == -1) s.top_k = 0;
  number(kMinPRange, &s.min_p);
  number(kRepetitionPenaltyRange, &s.repetition_penalty);
  number(kPresencePenaltyRange, &s.presence_penalty);
  number(kFrequencyPenaltyRange, &s.frequency_penalty);
  // Any 64-bit integer, as vLLM takes it; the engine uses its bits.
  int64_t seed = 0;
  if (r.Int("seed", &seed, std::numeric_limits<int64_t>::min(), INT64_MAX)) {
    s.seed = static_cast<uint64_t>(seed);
  }
  r.IntAs("n", &o->n, 1, limits.max_n);
  r.Int("min_tokens", &o->min_tokens, 0, std::numeric_limits<int32_t>::max());
  r.Bool("ignore_eos", &o->ignore_eos);
  r.Bool("include_stop_str_in_output", &o->include_stop_str_in_output);
  r.Bool("skip_special_tokens", &o->skip_special_tokens);
  r.Bool("stream", &o->stream);
  r.IntAs("priority", &o->priority, std::numeric_limits<int32_t>::min(),
          std::numeric_limits<int32_t>::max());
  if (!r.error && o->priority != 0 && !limits.allow_priority) {
    r.Fail("priority",
           "'priority' is not enabled on this server (the operator can enable it with "
           "router.allow_priority)");
  }
  RejectUnsupported(r);
  ReadStop(r, limits, o);
  if (const json* ids = r.Get("stop_token_ids")) {
    if (ids->is_array() && ids->size() > static_cast<size_t>(limits.max_stop_token_ids)) {
      return r.Fail("stop_token_ids", "'stop_token_ids' has " + std::to_string(ids->size()) +
                                          " ids; at most " +
                                          std::to_string(limits.max_stop_token_ids) +
                                          " are allowed (router.max_stop_token_ids)");
    }
    ReadTokenIds(r, *ids, "stop_token_ids", &o->stop_token_ids);
  }
  if (json* so = r.Get("stream_options")) {
    if (!so->is_object()) return r.Fail("stream_options", "'stream_options' must be an object");
    FieldReader sr(*so);
    sr.Bool("include_usage", &o->include_usage);
    if (sr.error) r.Fail("stream_options.include_usage", sr.error->message);
  }
}

// max_tokens (>= 1); chat's max_completion_tokens wins over max_tokens.
void ReadMaxTokens(FieldReader& r, bool chat, GenerationOptions* o) {
  int64_t m = 0;
  if (r.Int("max_tokens", &m, 1, std::numeric_limits<int32_t>::max())) o->max_tokens = m;
  if (chat && r.Int("max_completion_tokens", &m, 1, std::numeric_limits<int32_t>::max())) {
    o->max_tokens = m;
  }
  if (!r.error && o->max_tokens && o->min_tokens > *o->max_tokens) {
    r.Fail("min_tokens", "'min_tokens' (" + std::to_string(o->min_tokens) +
                             ") must not exceed max_tokens (" + std::to_string(*o->max_tokens) +
                             ")");
  }
}

// Chat messages: a non-empty list of {role, content}; content is a string, null, or a list of
// text parts (joined with "\n"). The result keeps the other keys and has string contents.
void ReadMessages(FieldReader& r, const char* key, json* out) {
  static const std::set<std::string> kRoles = {"system", "user",      "assistant",
                                               "tool",   "developer", "function"};
  json* v = r.Get(key);
  if (!v) return r.Fail(key, std::string("'") + key + "' is required");
  if (!v->is_array() || v->empty()) {
    return r.Fail(key, std::string("'") + key + "' must be a non-empty list of messages");
  }
  *out = json::array();
  for (size_t i = 0; i < v->size(); ++i) {
    json& m = (*v)[i];
    const std::string where = std::string(key) + "[" + std::to_string(i) + "]";
    if (!m.is_object()) return r.Fail(where, "'" + where + "' must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string() || !kRoles.count(role->get<std::string>())) {
      return r.Fail(where + ".role", "'" + where +
                                         ".role' must be one of system, user, assistant, tool, "
                                         "developer");
    }
    auto calls = m.find("tool_calls");
    if (calls != m.end() && !calls->is_null()) {
      if (*role != "assistant" || !calls->is_array()) {
        return r.Fail(where + ".tool_calls",
                      "'" + where + ".tool_calls' must be a list, on an assistant message");
      }
      for (size_t k = 0; k < calls->size(); ++k) {
        const json& c = (*calls)[k];
        const std::string cw = where + ".tool_calls[" + std::to_string(k) + "]";
        auto f = c.is_object() ? c.find("function") : c.end();
        const bool ok = f != c.end() && f->is_object() && f->contains("name") &&
                        (*f)["name"].is_string() &&
                        (!f->contains("arguments") || (*f)["arguments"].is_string() ||
                         (*f)["arguments"].is_object());
        if (!ok) {
          return r.Fail(cw, "'" + cw +
                                "' must be {\"id\": ..., \"type\": \"function\", "
                                "\"function\": {\"name\": ..., \"arguments\": \"<JSON>\"}}");
        }
      }
    }
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      m["content"] = "";
    } else if (content->is_array()) {
      std::string text;
      for (const json& part : *content) {
        auto type = part.is_object() ? part.find("type") : part.end();
        auto t = part.is_object() ? part.find("text") : part.end();
        if (type == part.end() || *type != "text" || t == part.end() || !t->is_string()) {
          return r.Fail(where + ".content",
                        "only text content parts ({\"type\":\"text\",\"text\":...}) are "
                        "supported");
        }
        if (!text.empty()) text += "\n";
        text += t->get<std::string>();
      }
      m["content"] = std::move(text);
    } else if (!content->is_string()) {
      return r.Fail(where + ".content",
                    "'" + where + ".content' must be a string or a list of text parts");
    }
    out->push_back(std::move(m));
  }
}

using ojson = nlohmann::ordered_json;

// A schema as the coordinator gets it, once the router has compiled it (so a schema it cannot
// enforce is a 400 here, naming `where`).
void CheckedSchema(FieldReader& r, const ojson& schema, const std::string& param,
                   const std::string& where, GenerationOptions* o) {
  StatusOr<Grammar> g = JsonSchemaGrammar(schema);
  if (!g.ok()) return r.Fail(param, "'" + where + "': " + g.status().message());
  o->structured = StructuredOutput::kJsonSchema;
  o->json_schema = schema.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

// The request again with its objects' keys in the order sent (nlohmann::json sorts them), for
// the schemas whose property order becomes the output's. Only parsed when one is used.
ojson OrderedBody(std::string_view body) {
  return ojson::parse(body, nullptr, /*allow_exceptions=*/false);
}

// response_format: {"type": "text"} | {"type": "json_object"} |
// {"type": "json_schema", "json_schema": {"name"?, "schema", "strict"?, "description"?}}.
void ReadResponseFormat(FieldReader& r, std::string_view body, GenerationOptions* o) {
  const json* v = r.Get("response_format");
  if (!v || r.error) return;
  const char* kShape =
      "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
      "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": {...}}}";
  if (!v->is_object()) return r.Fail("response_format", kShape);
  const json type = v->value("type", json());
  if (type == "text") return;
  if (type == "json_object") {
    o->structured = StructuredOutput::kJsonObject;
    return;
  }
  if (type != "json_schema") return r.Fail("response_format", kShape);
  auto js = v->find("json_schema");
  if (js == v->end() || !js->is_object()) return r.Fail("response_format", kShape);
  auto schema = js->find("schema");
  if (schema == js->end() || !(schema->is_object() || schema->is_boolean())) {
    return r.Fail("response_format",
                  "'response_format.json_schema.schema' must be a JSON Schema object");
  }
  const ojson ordered = OrderedBody(body);
  CheckedSchema(r, ordered["response_format"]["json_schema"]["schema"], "response_format",
                "response_format.json_schema.schema", o);
}

// vLLM's names for the same: guided_json (a schema, or its JSON text), guided_choice (a list
// of strings), guided_regex (a pattern the whole output matches), and structured_outputs
// {"json" | "choice" | "regex" | "json_object"}. One way per request.
void ReadGuidedDecoding(FieldReader& r, std::string_view body, GenerationOptions* o) {
  if (r.error) return;
  const json* guided_json = r.Get("guided_json");
  const json* guided_choice = r.Get("guided_choice");
  const json* guided_regex = r.Get("guided_regex");
  const json* so = r.Get("structured_outputs");
  const int ways = (o->structured != StructuredOutput::kNone) + (guided_json != nullptr) +
                   (guided_choice != nullptr) + (guided_regex != nullptr) + (so != nullptr);
  const char* param = guided_json     ? "guided_json"
                      : guided_choice ? "guided_choice"
                      : guided_regex  ? "guided_regex"
                                      : "structured_outputs";
  if (ways > 1) {
    return r.Fail(param,
                  "set only one of 'response_format', 'guided_json', 'guided_choice', "
                  "'guided_regex' and 'structured_outputs'");
  }
  const json* choice = guided_choice;
  const json* regex = guided_regex;
  std::string where = param;  // the field named in errors
  bool json_object = false;
  const ojson ordered = (guided_json || so) ? OrderedBody(body) : ojson();
  const ojson* schema = guided_json ? &ordered["guided_json"] : nullptr;
  if (so != nullptr) {
    const char* kShape =
        "'structured_outputs' must be {\"json\": <schema>}, {\"choice\": [<strings>]}, "
        "{\"regex\": <pattern>} or {\"json_object\": true}";
    if (!so->is_object() || so->size() != 1) return r.Fail(param, kShape);
    if (so->contains("json")) {
      schema = &ordered["structured_outputs"]["json"];
    } else if (so->contains("choice")) {
      choice = &(*so)["choice"];
    } else if (so->contains("regex")) {
      regex = &(*so)["regex"];
      where = "structured_outputs.regex";
    } else if (so->contains("json_object") && (*so)["json_object"] == true) {
      json_object = true;
    } else {
      return r.Fail(param, kShape);
    }
  }
  if (json_object) {
    o->structured = StructuredOutput::kJsonObject;
  } else if (schema != nullptr) {
    ojson parsed = *schema;
    if (parsed.is_string()) parsed = ojson::parse(parsed.get<std::string>(), nullptr, false);
    if (!(parsed.is_object() || parsed.is_boolean())) {
      return r.Fail(param, std::string("'") + param + "' must be a JSON Schema");
    }
    CheckedSchema(r, parsed, param, param, o);
  } else if (regex != nullptr) {
    if (!regex->is_string()) return r.Fail(param, "'" + where + "' must be a string");
    if (auto g = RegexGrammar(regex->get<std::string>()); !g.ok()) {
      return r.Fail(param, "'" + where + "': " + g.status().message());
    }
    o->structured = StructuredOutput::kRegex;
    o->regex = regex->get<std::string>();
  } else if (choice != nullptr) {
    if (!choice->is_array())
      return r.Fail(param, std::string("'") + param + "' must be a list of strings");
    std::vector<std::string> values;
    for (const json& c : *choice) {
      if (!c.is_string())
        return r.Fail(param, std::string("'") + param + "' must be a list of strings");
      values.push_back(c.get<std::string>());
    }
    if (auto g = ChoiceGrammar(values); !g.ok()) {
      return r.Fail(param, std::string("'") + param + "': " + g.status().message());
    }
    o->structured = StructuredOutput::kChoice;
    o->choices = std::move(values);
  }
}

// tool_choice "required" / a named function: the calls as a JSON array that structured output
// enforces, [{"name": <a declared tool>, "parameters": <its parameters schema>}, ...] (one call
// when a function is named or parallel_tool_calls is false).
void ForceToolCalls(FieldReader& r, std::string_view body, ChatRequest* out) {
  if (r.error || (out->tool_choice != "required" && out->tool_choice != "function")) return;
  if (out->options.structured != StructuredOutput::kNone) {
    return r.Fail("response_format",
                  "structured output ('response_format', 'guided_json', 'guided_choice', "
                  "'guided_regex', 'structured_outputs') cannot be combined with tool_choice "
                  "\"required\" or a "
                  "named function");
  }
  const ojson ordered = OrderedBody(body);
  const bool parallel =
      !(ordered.contains("parallel_tool_calls") && ordered["parallel_tool_calls"].is_boolean() &&
        !ordered["parallel_tool_calls"].get<bool>());
  ojson alternatives = ojson::array();
  const ojson& tools = ordered["tools"];
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& f = tools[i]["function"];
    const std::string name = f["name"].get<std::string>();
    if (out->tool_choice == "function" && name != out->tool_choice_name) continue;
    ojson params = f.contains("parameters") && f["parameters"].is_object()
                       ? f["parameters"]
                       : ojson{{"type", "object"}, {"properties", ojson::object()}};
    if (auto g = JsonSchemaGrammar(params); !g.ok()) {
      const std::string where = "tools[" + std::to_string(i) + "].function.parameters";
      return r.Fail(where, "'" + where + "': " + g.status().message());
    }
    alternatives.push_back({{"type", "object"},
                            {"properties", {{"name", {{"const", name}}}, {"parameters", params}}},
                            {"required", {"name", "parameters"}}});
  }
  ojson schema = {{"type", "array"}, {"minItems", 1}};
  if (out->tool_choice == "function" || !parallel) schema["maxItems"] = 1;
  schema["items"] = {{"anyOf", alternatives}};
  CheckedSchema(r, schema, "tool_choice", "tools", &out->options);
  out->forced_tool_calls = !r.error;
}

// tools: a list of {"type":"function","function":{"name", "description"?, "parameters"?}}.
void ReadTools(FieldReader& r, std::string_view body, nlohmann::ordered_json* out) {
  json* v = r.Get("tools");
  if (!v) return;
  if (!v->is_array()) return r.Fail("tools", "'tools' must be a list of tools");
  if (v->size() > kMaxTools) {
    return r.Fail("tools", "'tools' has " + std::to_string(v->size()) + " tools; at most " +
                               std::to_string(kMaxTools) + " are allowed");
  }
  if (v->empty()) return;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& t = (*v)[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    const char* kShape = "' must be {\"type\": \"function\", \"function\": {\"name\": ...}}";
    if (!t.is_object() || t.value("type", json()) != "function") {
      return r.Fail(where, "'" + where + kShape);
    }
    auto f = t.find("function");
    if (f == t.end() || !f->is_object()) return r.Fail(where + ".function", "'" + where + kShape);
    auto name = f->find("name");
    if (name == f->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      return r.Fail(where + ".function.name",
                    "'" + where + ".function.name' must be a non-empty string");
    }
    auto desc = f->find("description");
    if (desc != f->end() && !desc->is_null() && !desc->is_string()) {
      return r.Fail(where + ".function.description",
                    "'" + where + ".function.description' must be a string");
    }
    auto params = f->find("parameters");
    if (params != f->end() && !params->is_null() && !params->is_object()) {
      return r.Fail(where + ".function.parameters",
                    "'" + where + ".function.parameters' must be a JSON Schema object");
    }
  }
  const size_t bytes = v->dump().size();
  if (bytes > kMaxToolsBytes) {
    return r.Fail("tools", "'tools' is " + std::to_string(bytes) + " bytes of JSON; at most " +
                               std::to_string(kMaxToolsBytes) + " are allowed");
  }
  // Validated above; kept with its keys in the order sent.
  *out = OrderedBody(body)["tools"];
}

// tool_choice: "auto" (default), "none", "required" or {"type":"function","function":{"name"}}
// naming a declared tool.
void ReadToolChoice(FieldReader& r, const nlohmann::ordered_json& tools, std::string* choice,
                    std::string* name) {
  const json* v = r.Get("tool_choice");
  if (!v || r.error) return;
  const char* kShape =
      "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
      "\"function\": {\"name\": ...}}";
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s != "auto" && s != "none" && s != "required") return r.Fail("tool_choice", kShape);
    if (s == "required" && tools.is_null()) {
      return r.Fail("tool_choice", "'tool_choice' \"required\" needs 'tools'");
    }
    *choice = s;
    return;
  }
  if (!v->is_object() || v->value("type", json()) != "function") {
    return r.Fail("tool_choice", kShape);
  }
  auto f = v->find("function");
  if (f == v->end() || !f->is_object()) return r.Fail("tool_choice", kShape);
  auto n = f->find("name");
  if (n == f->end() || !n->is_string()) return r.Fail("tool_choice", kShape);
  if (tools.is_array()) {
    for (const auto& t : tools) {
      if (t["function"]["name"].get<std::string>() == n->get<std::string>()) {
        *choice = "function";
        *name = n->get<std::string>();
        return;
      }
    }
  }
  r.Fail("tool_choice", "'tool_choice' names the function '" + n->get<std::string>() +
                            "', which is not in 'tools'");
}

void ReadTemplateKwargs(FieldReader& r, bool* add_generation_prompt, json* kwargs) {
  r.Bool("add_generation_prompt", add_generation_prompt);
  if (json* k = r.Get("chat_template_kwargs")) {
    if (!k->is_object())
      return r.Fail("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    *kwargs = std::move(*k);
  }
}

void ReadPrompt(FieldReader& r, const RequestLimits& limits, std::vector<CompletionPrompt>* out) {
  const json* v = r.Get("prompt");
  if (!v) return r.Fail("prompt", "'prompt' is required");
  const char* kShape =
      "'prompt' must be a string, a list of strings, a list of token ids or a list of lists of "
      "token ids";
  // A list of strings or of token lists is one prompt each (a list of numbers is one prompt).
  if (v->is_array() && !v->empty() && !v->front().is_number() &&
      v->size() > static_cast<size_t>(limits.max_prompts)) {
    return r.Fail("prompt", "'prompt' has " + std::to_string(v->size()) + " prompts; at most " +
                                std::to_string(limits.max_prompts) +
                                " are allowed in one request (router.max_prompts)");
  }
  auto add_ids = [&](const json& ids) {
    CompletionPrompt p;
    p.is_token_ids = true;
    if (!ReadTokenIds(r, ids, "prompt", &p.token_ids)) return;
    if (p.token_ids.empty()) return r.Fail("prompt", "'prompt' token lists must not be empty");
    out->push_back(std::move(p));
  };
  if (v->is_string()) {
    out->push_back({false, v->get<std::string>(), {}});
    return;
  }
  if (!v->is_array() || v->empty()) return r.Fail("prompt", kShape);
  const json& first = v->front();
  if (first.is_number()) return add_ids(*v);
  for (const json& p : *v) {
    if (p.is_string() && first.is_string()) {
      out->push_back({false, p.get<std::string>(), {}});
    } else if (p.is_array() && first.is_array()) {
      add_ids(p);
    } else {
      return r.Fail("prompt", kShape);
    }
    if (r.error) return;
  }
}

// prompts × n: each choice is one upstream call.
void CheckChoices(FieldReader& r, const RequestLimits& limits, size_t prompts, int n) {
  if (r.error) return;
  const uint64_t choices = static_cast<uint64_t>(prompts) * static_cast<uint64_t>(n);
  if (choices > static_cast<uint64_t>(limits.max_choices)) {
    r.Fail("n", std::to_string(prompts) + " prompt(s) × n=" + std::to_string(n) + " is " +
                    std::to_string(choices) + " choices; at most " +
                    std::to_string(limits.max_choices) +
                    " are allowed in one request (router.max_choices)");
  }
}

}  // namespace

std::optional<ApiError> ParseChatRequest(std::string_view body, const RequestLimits& limits,
                                         ChatRequest* out) {
  json j;
  if (auto e = ParseObject(body, &j)) return e;
  FieldReader r(j);
  ReadModel(r, limits, &out->model);
  if (r.error) return r.error;
  ReadMessages(r, "messages", &out->messages);
  ReadGenerationOptions(r, limits, &out->options);
  CheckChoices(r, limits, 1, out->options.n);
  ReadMaxTokens(r, /*chat=*/true, &out->options);
  ReadTemplateKwargs(r, &out->add_generation_prompt, &out->template_kwargs);
  ReadTools(r, body, &out->tools);
  ReadToolChoice(r, out->tools, &out->tool_choice, &out->tool_choice_name);
  ReadResponseFormat(r, body, &out->options);
  ReadGuidedDecoding(r, body, &out->options);
  ForceToolCalls(r, body, out);
  bool logprobs = false;
  int top_logprobs = -1;
  r.Bool("logprobs", &logprobs);
  r.IntAs("top_logprobs", &top_logprobs, 0, kMaxLogprobs);
  if (!r.error && top_logprobs >= 0 && !logprobs) {
    r.Fail("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
  }
  if (logprobs) out->options.sampling.logprobs = std::max(0, top_logprobs);
  return r.error;
}

std::optional<ApiError> ParseCompletionRequest(std::string_view body, const RequestLimits& limits,
                                               CompletionRequest* out) {
  json j;
  if (auto e = ParseObject(body, &j)) return e;
  FieldReader r(j);
  ReadModel(r, limits, &out->model);
  if (r.error) return r.error;
  ReadPrompt(r, limits, &out->prompts);
  out->options.max_tokens = 16;  // the OpenAI default for completions
  ReadGenerationOptions(r, limits, &out->options);
  CheckChoices(r, limits, out->prompts.size(), out->options.n);
  ReadMaxTokens(r, /*chat=*/false, &out->options);
  ReadResponseFormat(r, body, &out->options);
  ReadGuidedDecoding(r, body, &out->options);
  for (const char* key : {"tools", "tool_choice"}) {
    if (const json* v = r.Get(key); v && !(v->is_array() && v->empty()) && *v != "none") {
      r.Fail(key, std::string("'") + key + "' is not supported by /v1/completions (use chat)");
    }
  }
  r.Bool("echo", &out->echo);
  r.IntAs("logprobs", &out->options.sampling.logprobs, 0, kMaxLogprobs);
  if (!r.error && r.Get("suffix")) r.Fail("suffix", "'suffix' is not supported");
  return r.error;
}

std::optional<ApiError> ParseTokenizeRequest(std::string_view body, const RequestLimits& limits,
                                             TokenizeRequest* out) {
  json j;
  if (auto e = ParseObject(body, &j)) return e;
  FieldReader r(j);
  ReadModel(r, limits, &out->model);
  if (r.error) return r.error;
  if (r.Get("messages")) {
    out->has_messages = true;
    out->add_special_tokens = false;
    ReadMessages(r, "messages", &out->messages);
    ReadTemplateKwargs(r, &out->add_generation_prompt, &out->template_kwargs);
    ReadTools(r, body, &out->tools);
  } else if (r.Get("prompt")) {
    r.String("prompt", &out->prompt);
  } else {
    r.Fail("prompt", "'prompt' or 'messages' is required");
  }
  r.Bool("add_special_tokens", &out->add_special_tokens);
  return r.error;
}

std::optional<ApiError> ParseDetokenizeRequest(std::string_view body, const RequestLimits& limits,
                                               DetokenizeRequest* out) {
  json j;
  if (auto e = ParseObject(body, &j)) return e;
  FieldReader r(j);
  ReadModel(r, limits, &out->model);
  if (r.error) return r.error;
  const json* tokens = r.Get("tokens");
  if (!tokens) return InvalidParam("tokens", "'tokens' is required");
  ReadTokenIds(r, *tokens, "tokens", &out->tokens);
  return r.error;
}

StatusOr<SamplingParams> SamplingDefaultsFromModel(const std::string& model_path) {
  SamplingParams p;
  const std::filesystem::path file = std::filesystem::path(model_path) / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return p;  // a .gguf, or no file
  if (std::filesystem::file_size(file, ec) > (1u << 20)) {
    return InvalidArgument(file.string() + ": larger than 1 MiB");
  }
  std::ifstream in(file);
  const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument(file.string() + ": not a JSON object");
  }
  const auto number = [&](const char* key, float* out) -> Status {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status::Ok();
    if (!it->is_number()) return InvalidArgument(file.string() + ": '" + key + "' is not a number");
    *out = it->get<float>();
    return Status::Ok();
  };
  LLM_RETURN_IF_ERROR(number("temperature", &p.temperature));
  LLM_RETURN_IF_ERROR(number("top_p", &p.top_p));
  LLM_RETURN_IF_ERROR(number("min_p", &p.min_p));
  LLM_RETURN_IF_ERROR(number("repetition_penalty", &p.repetition_penalty));
  if (const auto it = j.find("top_k"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < -1 || it->get<int64_t>() > INT32_MAX) {
      return InvalidArgument(file.string() + ": 'top_k' is not an integer in [-1, 2^31)");
    }
    p.top_k = std::max(0, it->get<int>());
  }
  if (Status s = ValidateSamplingParams(p, INT32_MAX); !s.ok()) {
    return InvalidArgument(file.string() + ": " + s.message());
  }
  return p;
}

std::optional<ApiError> CheckContextLength(int64_t prompt_tokens, int64_t max_model_len,
                                           const std::string& prompt_param,
                                           GenerationOptions* options) {
  const int64_t wanted = options->max_tokens.value_or(1);
  if (prompt_tokens + wanted > max_model_len) {
    const std::string what = options->max_tokens ? std::to_string(wanted) : "at least 1";
    return InvalidParam(options->max_tokens ? "max_tokens" : prompt_param,
                        "This model's maximum context length is " + std::to_string(max_model_len) +
                            " tokens. However, you requested " +
                            std::to_string(prompt_tokens + wanted) + " tokens (" +
                            std::to_string(prompt_tokens) + " in the " + prompt_param + ", " +
                            what + " for the completion). Please reduce the length of the " +
                            prompt_param + " or completion.");
  }
  if (!options->max_tokens) options->max_tokens = max_model_len - prompt_tokens;
  if (options->min_tokens > *options->max_tokens) options->min_tokens = *options->max_tokens;
  return std::nullopt;
}

std::optional<ApiError> CheckTokenIds(const std::vector<int32_t>& ids, int64_t vocab_size,
                                      const std::string& param) {
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size) {
      return InvalidParam(param, "token id " + std::to_string(id) + " in '" + param +
                                     "' is outside the vocabulary [0, " +
                                     std::to_string(vocab_size) + ")");
    }
  }
  return std::nullopt;
}

}  // namespace llm::router
