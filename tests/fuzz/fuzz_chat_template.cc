// Fuzz target (d): the chat template engine (common/chat_template.h). Input: template text, a NUL
// byte, then a JSON context (messages, add_generation_prompt, ...). Without a NUL or with a
// context that is not a JSON object, the template renders a fixed conversation. Parse and Render
// must return a value or an error; never crash, never recurse without bound.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  const void* nul = std::memchr(data, 0, size);
  const size_t template_size = nul ? static_cast<const uint8_t*>(nul) - data : size;
  const std::string_view source(text, template_size);

  nlohmann::json context;
  if (nul) {
    // The router caps request nesting at 64 (router/json_body.h); do the same here.
    int depth = 0, max_depth = 0;
    context = nlohmann::json::parse(
        text + template_size + 1, text + size,
        [&](int, nlohmann::json::parse_event_t event, nlohmann::json&) {
          if (event == nlohmann::json::parse_event_t::object_start ||
              event == nlohmann::json::parse_event_t::array_start) {
            max_depth = std::max(max_depth, ++depth);
          } else if (event == nlohmann::json::parse_event_t::object_end ||
                     event == nlohmann::json::parse_event_t::array_end) {
            --depth;
          }
          return max_depth <= 64;
        },
        /*allow_exceptions=*/false);
  }
  if (!context.is_object()) {
    context = {{"messages",
                {{{"role", "system"}, {"content", "Be brief."}},
                 {{"role", "user"}, {"content", "Hello"}},
                 {{"role", "assistant"}, {"content", "Hi there"}},
                 {{"role", "user"}, {"content", "2+2?"}}}},
               {"add_generation_prompt", true},
               {"bos_token", "<s>"},
               {"eos_token", "</s>"}};
  }
  auto tmpl = llm::ChatTemplate::Parse(source);
  if (!tmpl.ok()) return 0;
  auto out = tmpl->Render(context);
  (void)out;
  return 0;
}
