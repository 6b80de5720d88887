// End to end through HTTP: real `router` → gRPC → real `worker` serving stories260K.
// Golden greedy text, stream vs non-stream, seeded sampling, stop strings, usage, every bad
// input with its status and error JSON (and the server keeps serving).
#include <gtest/gtest.h>

#include "common/version.h"
#include "tests/integration/router_harness.h"

namespace llm::e2e {
namespace {

class RouterE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(SharedPath(Cluster::kModel))) return;
    cluster_ = new Cluster({}, {"--router.max_body_bytes", "65536", "--router.max_n", "4"});
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    LLM_E2E_REQUIRE_SHARED();
    ASSERT_TRUE(cluster_->ok()) << cluster_->Logs();
  }
  static int port() { return cluster_->port(); }

  static inline Cluster* cluster_ = nullptr;
};

json Completion(json extra) {
  json body = {{"model", "stories260K"}, {"prompt", "Once upon a time"}, {"temperature", 0}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body;
}

json Chat(json extra) {
  json body = {{"model", "stories260K"},
               {"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
               {"temperature", 0}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = it.value();
  return body;
}

// Concatenates the streamed text of choice `index` and returns its finish_reason.
std::string StreamText(const StreamResult& s, bool chat, int index, std::string* finish) {
  std::string text;
  for (const json& e : s.events) {
    if (!e.contains("choices")) continue;
    for (const json& c : e["choices"]) {
      if (c["index"] != index) continue;
      if (chat && c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
      if (!chat) text += c["text"].get<std::string>();
      if (!c["finish_reason"].is_null()) *finish = c["finish_reason"];
    }
  }
  return text;
}

TEST_F(RouterE2E, HealthModelsTokenize) {
  EXPECT_EQ(Http(port(), "GET", "/health").status, 200);
  const HttpResult version = Http(port(), "GET", "/version");
  ASSERT_EQ(version.status, 200) << version.body;
  EXPECT_EQ(version.Json()["version"], llm::Version());
  EXPECT_EQ(version.Json()["commit"], llm::GitCommit());
  const HttpResult models = Http(port(), "GET", "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(models.Json()["object"], "list");
  EXPECT_EQ(models.Json()["data"][0]["id"], "stories260K");
  EXPECT_EQ(models.Json()["data"][0]["object"], "model");
  EXPECT_EQ(models.Json()["data"][0]["max_model_len"], 512);

  const HttpResult tok = Post(port(), "/tokenize", {{"prompt", "Once upon a time"}});
  ASSERT_EQ(tok.status, 200) << tok.body;
  EXPECT_EQ(tok.Json()["tokens"], json({1, 403, 407, 261, 378}));
  EXPECT_EQ(tok.Json()["count"], 5);
  const HttpResult chat_tok = Post(
      port(), "/tokenize", {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}}});
  ASSERT_EQ(chat_tok.status, 200) << chat_tok.body;
  EXPECT_EQ(chat_tok.Json()["tokens"], json({1, 403, 407, 261, 378}));  // <s> + content
  const HttpResult detok = Post(port(), "/detokenize", {{"tokens", {403, 407, 261, 378}}});
  ASSERT_EQ(detok.status, 200) << detok.body;
  EXPECT_EQ(detok.Json()["prompt"], "Once upon a time");
}

TEST_F(RouterE2E, GoldenGreedyTokenIdPrompts) {
  std::ifstream golden(SharedPath("golden/stories260K_greedy.jsonl"));
  if (!golden) GTEST_SKIP() << "missing " << SharedPath("golden/stories260K_greedy.jsonl");
  int cases = 0;
  for (std::string line; std::getline(golden, line);) {
    const json g = json::parse(line);
    const size_t steps = g["greedy_token_ids"].size();
    for (bool stream : {false, true}) {
      const json body = {{"model", "stories260K"},
                         {"prompt", g["prompt_token_ids"]},
                         {"max_tokens", steps},
                         {"temperature", 0},
                         {"ignore_eos", true},
                         {"stream", stream},
                         {"stream_options", {{"include_usage", true}}}};
      std::string text;
      std::string finish;
      json usage;
      if (stream) {
        const StreamResult s = PostStream(port(), "/v1/completions", body);
        ASSERT_EQ(s.http.status, 200) << s.http.body;
        ASSERT_TRUE(s.done);
        text = StreamText(s, false, 0, &finish);
        usage = s.events.back()["usage"];
      } else {
        const HttpResult r = Post(port(), "/v1/completions", body);
        ASSERT_EQ(r.status, 200) << r.body;
        text = r.Json()["choices"][0]["text"];
        finish = r.Json()["choices"][0]["finish_reason"];
        usage = r.Json()["usage"];
      }
      EXPECT_EQ(text, g["greedy_text"].get<std::string>()) << g["prompt"] << " stream=" << stream;
      EXPECT_EQ(finish, "length");
      EXPECT_EQ(usage["prompt_tokens"], g["prompt_token_ids"].size());
      EXPECT_EQ(usage["completion_tokens"], steps);
      EXPECT_EQ(usage["total_tokens"], g["prompt_token_ids"].size() + steps);
    }
    ++cases;
  }
  EXPECT_GE(cases, 1);
}

TEST_F(RouterE2E, StreamAndNonStreamGiveTheSameText) {
  for (bool chat : {true, false}) {
    const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    json body = chat ? Chat({{"max_tokens", 40}}) : Completion({{"max_tokens", 40}});
    const HttpResult plain = Post(port(), path, body);
    ASSERT_EQ(plain.status, 200) << plain.body;
    const json p = plain.Json();
    EXPECT_EQ(p["object"], chat ? "chat.completion" : "text_completion");
    const std::string expected =
        chat ? p["choices"][0]["message"]["content"] : p["choices"][0]["text"];
    body["stream"] = true;
    const StreamResult s = PostStream(port(), path, body);
    ASSERT_EQ(s.http.status, 200) << s.http.body;
    EXPECT_EQ(s.http.content_type, "text/event-stream");
    ASSERT_TRUE(s.done);
    ASSERT_GE(s.events.size(), 2u);
    std::string finish;
    EXPECT_EQ(StreamText(s, chat, 0, &finish), expected);
    EXPECT_EQ(finish, p["choices"][0]["finish_reason"]);
    for (const json& e : s.events) {
      EXPECT_EQ(e["id"], s.events[0]["id"]);
      EXPECT_EQ(e["object"], chat ? "chat.completion.chunk" : "text_completion");
      EXPECT_FALSE(e.contains("usage"));  // no include_usage
    }
    if (chat) {
      EXPECT_EQ(s.events[0]["choices"][0]["delta"]["role"], "assistant");
    }
    EXPECT_FALSE(s.events.back()["choices"][0]["finish_reason"].is_null());
  }
}

TEST_F(RouterE2E, SeededSamplingIsReproducible) {
  const json body = Completion(
      {{"temperature", 1.0}, {"seed", 1234}, {"max_tokens", 48}, {"ignore_eos", true}, {"n", 2}});
  const HttpResult a = Post(port(), "/v1/completions", body);
  const HttpResult b = Post(port(), "/v1/completions", body);
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(a.Json()["choices"], b.Json()["choices"]);
  json streamed = body;
  streamed["stream"] = true;
  const StreamResult s = PostStream(port(), "/v1/completions", streamed);
  ASSERT_TRUE(s.done);
  for (int i = 0; i < 2; ++i) {
    std::string finish;
    EXPECT_EQ(StreamText(s, false, i, &finish), a.Json()["choices"][i]["text"]);
  }
  // Another seed samples something else (48 tokens at temperature 1).
  json other = body;
  other["seed"] = 99;
  const HttpResult c = Post(port(), "/v1/completions", other);
  EXPECT_NE(c.Json()["choices"][0]["text"], a.Json()["choices"][0]["text"]);
}

TEST_F(RouterE2E, StopStringsAcrossTokens) {
  const HttpResult base =
      Post(port(), "/v1/completions", Completion({{"max_tokens", 64}, {"ignore_eos", true}}));
  ASSERT_EQ(base.status, 200) << base.body;
  const std::string full = base.Json()["choices"][0]["text"];
  // " named Lily" spans several tokens (" named" is "▁n" "amed" or similar, then "▁Lily").
  for (const std::string stop : {"girl na", "Lily. She", "park"}) {
    const size_t at = full.find(stop);
    ASSERT_NE(at, std::string::npos) << full;
    for (bool stream : {false, true}) {
      json body = Completion(
          {{"max_tokens", 64}, {"ignore_eos", true}, {"stop", {"zzz", stop}}, {"stream", stream}});
      std::string text;
      std::string finish;
      if (stream) {
        const StreamResult s = PostStream(port(), "/v1/completions", body);
        ASSERT_TRUE(s.done) << s.http.body;
        text = StreamText(s, false, 0, &finish);
      } else {
        const HttpResult r = Post(port(), "/v1/completions", body);
        ASSERT_EQ(r.status, 200) << r.body;
        text = r.Json()["choices"][0]["text"];
        finish = r.Json()["choices"][0]["finish_reason"];
      }
      EXPECT_EQ(text, full.substr(0, at)) << stop << " stream=" << stream;
      EXPECT_EQ(finish, "stop");
    }
    json with_stop =
        Completion({{"max_tokens", 64}, {"stop", stop}, {"include_stop_str_in_output", true}});
    EXPECT_EQ(Post(port(), "/v1/completions", with_stop).Json()["choices"][0]["text"],
              full.substr(0, at + stop.size()));
  }
}

TEST_F(RouterE2E, UsageEchoAndChoiceOrder) {
  const json body = {{"prompt", {"Once upon a time", "The cat"}},
                     {"n", 2},
                     {"max_tokens", 5},
                     {"temperature", 0.8},
                     {"seed", 7},
                     {"ignore_eos", true},
                     {"echo", true},
                     {"logprobs", 2}};
  const HttpResult r = Post(port(), "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.Json();
  const int a = Post(port(), "/tokenize", {{"prompt", "Once upon a time"}}).Json()["count"];
  const int b = Post(port(), "/tokenize", {{"prompt", "The cat"}}).Json()["count"];
  EXPECT_EQ(j["usage"]["prompt_tokens"], a + b);
  EXPECT_EQ(j["usage"]["completion_tokens"], 4 * 5);
  ASSERT_EQ(j["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const json& c = j["choices"][i];
    EXPECT_EQ(c["index"], i);
    const std::string prompt = i < 2 ? "Once upon a time" : "The cat";  // prompt-major
    EXPECT_EQ(c["text"].get<std::string>().rfind(prompt, 0), 0u) << c["text"];
    EXPECT_EQ(c["logprobs"]["tokens"].size(), 5u);
    EXPECT_EQ(c["logprobs"]["text_offset"][0], prompt.size());
    for (const json& top : c["logprobs"]["top_logprobs"]) EXPECT_LE(top.size(), 2u);
  }
}

TEST_F(RouterE2E, BadInputsGetErrorJsonAndServerKeepsServing) {
  struct Case {
    const char* name;
    std::string method, path, body;
    int status;
    json param;
  };
  const std::string big(70000, 'x');
  const std::vector<Case> cases = {
      {"invalid json", "POST", "/v1/completions", "{\"prompt\":", 400, nullptr},
      {"missing prompt", "POST", "/v1/completions", "{}", 400, "prompt"},
      {"missing messages", "POST", "/v1/chat/completions", "{}", 400, "messages"},
      {"mistyped messages", "POST", "/v1/chat/completions", R"({"messages":"hi"})", 400,
       "messages"},
      {"temperature", "POST", "/v1/completions", Completion({{"temperature", 2.5}}).dump(), 400,
       "temperature"},
      {"top_p", "POST", "/v1/completions", Completion({{"top_p", 0}}).dump(), 400, "top_p"},
      {"n too big", "POST", "/v1/completions", Completion({{"n", 5}}).dump(), 400, "n"},
      {"n zero", "POST", "/v1/chat/completions", Chat({{"n", 0}}).dump(), 400, "n"},
      {"max_tokens", "POST", "/v1/completions", Completion({{"max_tokens", 0}}).dump(), 400,
       "max_tokens"},
      {"context", "POST", "/v1/completions", Completion({{"max_tokens", 600}}).dump(), 400,
       "max_tokens"},
      {"token id", "POST", "/v1/completions", Completion({{"prompt", {1, 100000}}}).dump(), 400,
       "prompt"},
      {"unknown model", "POST", "/v1/chat/completions", Chat({{"model", "gpt-4o"}}).dump(), 404,
       "model"},
      {"unknown route", "GET", "/v1/nothing", "", 404, nullptr},
      {"wrong method", "GET", "/v1/completions", "", 405, nullptr},
      {"body too large", "POST", "/v1/completions", "{\"prompt\":\"" + big + "\"}", 413, nullptr},
  };
  for (const Case& c : cases) {
    const HttpResult r = Http(port(), c.method, c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.name << ": " << r.body << r.error;
    const json j = r.Json();
    ASSERT_TRUE(j.is_object() && j.contains("error")) << c.name << ": " << r.body;
    EXPECT_EQ(j["error"]["param"], c.param) << c.name;
    EXPECT_TRUE(j["error"]["message"].is_string()) << c.name;
    EXPECT_TRUE(j["error"]["type"].is_string()) << c.name;
    EXPECT_TRUE(j["error"].contains("code")) << c.name;
  }
  const HttpResult ctx =
      Post(port(), "/v1/completions", Completion({{"prompt", json(std::vector<int>(600, 5))}}));
  EXPECT_EQ(ctx.status, 400);
  EXPECT_NE(ctx.body.find("512"), std::string::npos) << ctx.body;
  EXPECT_NE(ctx.body.find("600"), std::string::npos) << ctx.body;
  // Garbage that is not HTTP closes that connection only.
  HttpClient raw(port());
  ASSERT_TRUE(raw.SendRaw("GET / HTTP/1.1\r\nthis is not a header\r\n\r\n"));
  const HttpResult garbage = raw.Receive();
  EXPECT_EQ(garbage.status, 400) << garbage.error;
  EXPECT_TRUE(garbage.Json().contains("error")) << garbage.body;
  const HttpResult good = Post(port(), "/v1/completions", Completion({{"max_tokens", 4}}));
  EXPECT_EQ(good.status, 200) << good.body;
  EXPECT_EQ(Http(port(), "GET", "/health").status, 200);
}

TEST_F(RouterE2E, KeepAliveServesSeveralRequestsOnOneConnection) {
  HttpClient c(port());
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.Send("POST", "/v1/completions", Completion({{"max_tokens", 3}}).dump()));
    const HttpResult r = c.Receive();
    EXPECT_EQ(r.status, 200) << r.error;
    ASSERT_TRUE(c.Send("GET", "/v1/nothing", ""));
    EXPECT_EQ(c.Receive().status, 404);
  }
  // Pipelined: three requests in one write, answered in order.
  const std::string body = Completion({{"max_tokens", 3}, {"stream", true}}).dump();
  const std::string post =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  ASSERT_TRUE(c.SendRaw(post + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + post));
  for (int i = 0; i < 3; ++i) {
    const HttpResult r = c.Receive();
    EXPECT_EQ(r.status, 200) << i << r.error;
    if (i != 1) {
      EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos) << r.body;
    }
  }
}

// engine.kv_cache_dtype float16 through the real worker and router: the golden prompts still
// give the NumPy reference's greedy text, the worker's start-up line says the cache is float16,
// and every block is free afterwards. A value outside auto|float32|float16 stops the worker at
// start-up with a message naming the key.
TEST(RouterE2EHalfKvCache, GoldenTextAndTheCacheTypeInTheLog) {
  const std::string golden_path = SharedPath("golden/stories260K_greedy.jsonl");
  std::ifstream golden(golden_path);
  if (!golden || !std::filesystem::exists(SharedPath(Cluster::kModel))) {
    GTEST_SKIP() << "missing " << golden_path << " or " << SharedPath(Cluster::kModel);
  }
  Cluster cluster({"--engine.kv_cache_dtype", "float16"});
  ASSERT_TRUE(cluster.ok()) << cluster.Logs();
  int cases = 0;
  for (std::string line; std::getline(golden, line);) {
    const json g = json::parse(line);
    const json body = GoldenRequest(g);
    const HttpResult r = Post(cluster.port(), "/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Json()["choices"][0]["text"], g["greedy_text"]) << g["prompt"];
    ++cases;
  }
  EXPECT_GE(cases, 1);
  EXPECT_TRUE(cluster.WaitAllBlocksFree(10.0));
  // The harness's 8 MiB hold twice the blocks of a float cache: a block of 16 tokens is
  // 2 (K, V) x 2 bytes x 16 x 4 kv heads x 8 dims x 5 layers = 10240 bytes, 819 of them
  // (409 in float32).
  EXPECT_EQ(cluster.Stats().kv_blocks_total(), 819);
  EXPECT_EQ(cluster.Stats().kv_cache_dtype(), "float16");
  // vLLM's cache_config_info gauge, with the cache's shape as labels.
  const HttpResult metrics = Http(cluster.port(), "GET", "/metrics", "", 10.0);
  EXPECT_NE(metrics.body.find("llmserve:cache_config_info{model_name=\"stories260K\",upstream=\"" +
                              cluster.upstream() +
                              "\",block_size=\"16\",cache_dtype=\"float16\",num_blocks=\"819\"} 1"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(cluster.worker().Log().find("max_model_len sequences of 512), float16"),
            std::string::npos)
      << cluster.Logs();

  ChildProcess bad(
      {LLM_WORKER_BIN, "--model.path", SharedPath(Cluster::kModel), "--coordinator.port",
       std::to_string(FreePort()), "--engine.kv_cache_dtype", "fp8"},
      "e2e_bad_kv_dtype");
  ASSERT_TRUE(bad.WaitExit(30.0));
  EXPECT_NE(bad.exit_status(), std::optional<int>(0));
  EXPECT_NE(bad.Log().find("engine.kv_cache_dtype"), std::string::npos) << bad.Log();
}

}  // namespace
}  // namespace llm::e2e
