// Request bodies nested deeper than the limit are rejected while parsing (issue 6: a body
// nested 200,000 deep overflowed the stack when it was copied or rendered).
#include "router/json_body.h"

#include <gtest/gtest.h>

#include <string>

#include "router/openai_request.h"

namespace llm::router {
namespace {

using nlohmann::json;

std::string Nested(int depth, char open = '[', char close = ']') {
  return std::string(static_cast<size_t>(depth), open) +
         std::string(static_cast<size_t>(depth), close);
}

TEST(JsonBody, AcceptsNestingUpToTheLimit) {
  // The body's object is level 1, so a value at "x" may hold kMaxJsonDepth - 1 levels.
  json out;
  const std::string body = "{\"x\":" + Nested(kMaxJsonDepth - 1) + "}";
  EXPECT_FALSE(ParseJsonObjectBody(body, &out).has_value());
  EXPECT_TRUE(out.is_object());
}

TEST(JsonBody, RejectsOneLevelTooDeepNamingTheLimit) {
  json out;
  const std::string body = "{\"x\":" + Nested(kMaxJsonDepth) + "}";
  auto e = ParseJsonObjectBody(body, &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 400);
  EXPECT_EQ(e->type, "invalid_request_error");
  EXPECT_NE(e->message.find("64"), std::string::npos) << e->message;
  EXPECT_TRUE(out.is_null());
}

TEST(JsonBody, RejectsTwoHundredThousandLevelsWithoutRecursion) {
  json out;
  const std::string body =
      "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\",\"x\":" + Nested(200000) + "}]}";
  auto e = ParseJsonObjectBody(body, &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find("nested deeper"), std::string::npos) << e->message;
  // Objects count too.
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(100000, '}');
  EXPECT_TRUE(ParseJsonObjectBody(objects, &out).has_value());
}

TEST(JsonBody, InvalidJsonAndNonObjects) {
  json out;
  auto bad = ParseJsonObjectBody("{\"model\":", &out);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->message, "The request body is not valid JSON");
  auto array = ParseJsonObjectBody("[1,2]", &out);
  ASSERT_TRUE(array.has_value());
  EXPECT_EQ(array->message, "The request body must be a JSON object");
}

TEST(JsonBody, EveryParserAppliesTheLimit) {
  RequestLimits limits;
  limits.served_model_name = "stories260K";
  limits.max_n = 4;
  const std::string deep_kwargs =
      "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"chat_template_kwargs\":{\"a\":" +
      Nested(100000) + "}}";
  TokenizeRequest tokenize;
  auto e = ParseTokenizeRequest(deep_kwargs, limits, &tokenize);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 400);
  ChatRequest chat;
  EXPECT_TRUE(ParseChatRequest(deep_kwargs, limits, &chat).has_value());
  CompletionRequest completion;
  EXPECT_TRUE(
      ParseCompletionRequest("{\"prompt\":" + Nested(1000) + "}", limits, &completion).has_value());
  DetokenizeRequest detokenize;
  EXPECT_TRUE(
      ParseDetokenizeRequest("{\"tokens\":" + Nested(1000) + "}", limits, &detokenize).has_value());
}

TEST(JsonBody, ChatMessagesAreMovedWithTheirExtraFields) {
  RequestLimits limits;
  limits.served_model_name = "stories260K";
  limits.max_n = 4;
  ChatRequest chat;
  const std::string body =
      "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
      "{\"type\":\"text\",\"text\":\"b\"}],\"name\":\"x\"}],\"chat_template_kwargs\":{\"k\":[1]}}";
  ASSERT_FALSE(ParseChatRequest(body, limits, &chat).has_value());
  EXPECT_EQ(chat.messages[0]["content"], "a\nb");
  EXPECT_EQ(chat.messages[0]["name"], "x");
  EXPECT_EQ(chat.template_kwargs["k"][0], 1);
}

}  // namespace
}  // namespace llm::router
