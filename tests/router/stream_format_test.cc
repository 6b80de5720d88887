// Stop strings across token boundaries, and the SSE / response JSON shapes.
#include <gtest/gtest.h>

#include "router/openai_format.h"
#include "router/stop_matcher.h"

namespace llm::router {
namespace {

using nlohmann::json;

// Feeds pieces one by one; returns everything emitted (and Flush at the end).
std::string Feed(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += m.Push(p);
  return out + m.Flush();
}

TEST(StopMatcher, NoStops) {
  StopMatcher m(std::vector<std::string>{}, false);
  EXPECT_EQ(m.Push("abc"), "abc");
  EXPECT_EQ(m.held_back(), 0u);
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, StopInsideOnePiece) {
  StopMatcher m({"END"}, false);
  EXPECT_EQ(Feed(m, {"hello END world"}), "hello ");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, StopSplitAcrossPieces) {
  StopMatcher m({"The end."}, false);
  EXPECT_EQ(m.Push("so it was. Th"), "so it was. ");  // "Th" might start the stop string
  EXPECT_EQ(m.held_back(), 2u);
  EXPECT_EQ(m.Push("e e"), "");
  EXPECT_EQ(m.Push("nd"), "");
  EXPECT_EQ(m.Push(". More"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Push("after"), "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"abc"}, false);
  EXPECT_EQ(m.Push("xa"), "x");
  EXPECT_EQ(m.Push("b"), "");
  EXPECT_EQ(m.Push("d"), "abd");
  EXPECT_EQ(m.Push("ab"), "");
  EXPECT_EQ(m.Flush(), "ab");  // generation ended: the held tail is real text
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, EarliestOfSeveralAndOverlaps) {
  StopMatcher m({"cd", "bcx", "\n\n"}, false);
  EXPECT_EQ(Feed(m, {"a", "b", "c", "d", "e"}), "ab");
  StopMatcher overlap({"aab"}, false);
  EXPECT_EQ(Feed(overlap, {"a", "a", "a", "b", "z"}), "a");
  StopMatcher single_chars({"\n\n"}, false);
  EXPECT_EQ(Feed(single_chars, {"line", "\n", "\n", "next"}), "line");
}

TEST(StopMatcher, IncludeStopString) {
  StopMatcher m({"STOP"}, true);
  EXPECT_EQ(Feed(m, {"go S", "TO", "P now"}), "go STOP");
}

TEST(StopMatcher, Utf8NeverSplit) {
  StopMatcher m({"é!"}, false);  // the stop starts with a two-byte character
  EXPECT_EQ(m.Push("caf"), "caf");
  EXPECT_EQ(m.Push("é"), "");  // held: could be the stop string
  EXPECT_EQ(m.Push("s"), "és");
}

ResponseMeta Meta() {
  return {"chatcmpl-1", 1700000000, "stories260K"};
}

TEST(StreamFormat, SseFraming) {
  EXPECT_EQ(SseData(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(SseDone(), "data: [DONE]\n\n");
  // Invalid UTF-8 never throws; it is replaced.
  EXPECT_NO_THROW(SseData(json{{"t", std::string("\xff")}}));
}

TEST(StreamFormat, ChatChunks) {
  const json first =
      ChatChunkJson(Meta(), 0, {{"role", "assistant"}, {"content", ""}}, nullptr, "");
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["id"], "chatcmpl-1");
  EXPECT_EQ(first["created"], 1700000000);
  EXPECT_EQ(first["model"], "stories260K");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const json last = ChatChunkJson(Meta(), 1, json::object(), nullptr, "length");
  EXPECT_EQ(last["choices"][0]["index"], 1);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  const json usage = UsageChunkJson(Meta(), true, {5, 7});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 12);
  EXPECT_EQ(
      SseData(ChatChunkJson(Meta(), 0, {{"content", "Hi"}}, nullptr, "")),
      "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null,\"index\":0,"
      "\"logprobs\":null}],\"created\":1700000000,\"id\":\"chatcmpl-1\",\"model\":"
      "\"stories260K\",\"object\":\"chat.completion.chunk\"}\n\n");
}

TEST(StreamFormat, CompletionChunksAndResponses) {
  const json chunk = CompletionChunkJson(Meta(), 2, "text", nullptr, "stop");
  EXPECT_EQ(chunk["object"], "text_completion");
  EXPECT_EQ(chunk["choices"][0]["text"], "text");
  EXPECT_EQ(chunk["choices"][0]["finish_reason"], "stop");

  ChoiceOutput c;
  c.index = 0;
  c.text = "Once upon";
  c.finish_reason = "length";
  c.with_logprobs = true;
  c.text_offset = 4;
  c.logprobs = {{"up", -0.5f, {{"up", -0.5f}, {"in", -1.0f}}}, {"on", -0.25f, {}}};
  const json resp = CompletionResponseJson(Meta(), {c}, {3, 2});
  EXPECT_EQ(resp["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(resp["usage"]["completion_tokens"], 2);
  EXPECT_EQ(resp["usage"]["total_tokens"], 5);
  const json& lp = resp["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"up", "on"}));
  EXPECT_EQ(lp["text_offset"], json({4, 6}));
  EXPECT_DOUBLE_EQ(lp["top_logprobs"][0]["in"].get<double>(), -1.0);

  const json chat = ChatResponseJson(Meta(), {c}, {3, 2});
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "Once upon");
  const json& content = chat["choices"][0]["logprobs"]["content"];
  EXPECT_EQ(content[0]["token"], "up");
  EXPECT_EQ(content[0]["bytes"], json({117, 112}));
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "in");
}

}  // namespace
}  // namespace llm::router
