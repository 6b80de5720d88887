// Chat template engine: the public API (common/chat_template.h). The engine, by stage:
//   chat_template_lex.cc          segments, whitespace control, tokens
//   chat_template_parse.cc        statements       chat_template_expr_parser.cc  expressions
//   chat_template_eval.cc         rendering: statements, scopes, macros, expressions
//   chat_template_operators.cc    Python operators  chat_template_globals.cc     range() & co.
//   chat_template_filters.cc      filters and tests chat_template_methods.cc     attributes,
//                                                   items, str/dict methods, % formatting
//   chat_template_value.cc        values, equality, order, the work budget
//   chat_template_strings.cc      str(), repr(), tojson, case mapping, strip
#include "common/chat_template.h"

#include <stdexcept>

#include "common/chat_template_ast.h"

namespace llm {

StatusOr<ChatTemplate> ChatTemplate::Parse(std::string_view source) {
  using namespace chat_template_internal;
  try {
    auto program = std::make_shared<Program>();
    program->nodes = ParseTemplate(source);
    return ChatTemplate(std::move(program));
  } catch (const ParseError& e) {
    return e.unsupported ? Unimplemented(e.message) : InvalidArgument(e.message);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("chat template: ") + e.what());
  }
}

namespace {

template <typename Json>
StatusOr<std::string> RenderJson(const chat_template_internal::Program* program,
                                 const Json& context) {
  using namespace chat_template_internal;
  if (!program) return FailedPrecondition("chat template: not parsed");
  if (!context.is_object()) return InvalidArgument("chat template: the context must be an object");
  Value values;
  try {
    values = FromJson(context);
  } catch (const RenderError& e) {
    return InvalidArgument("chat template: " + e.message);
  }
  return RenderProgram(*program, std::move(values));
}

}  // namespace

StatusOr<std::string> ChatTemplate::Render(const nlohmann::json& context) const {
  return RenderJson(program_.get(), context);
}

StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context) const {
  return RenderJson(program_.get(), context);
}

}  // namespace llm
