// One streaming OpenAI request over HTTP/1.1 (Boost.Beast, blocking, every read and write
// under a deadline) with the timings a serving benchmark needs: when each piece of text
// arrived, and the usage the server reported. Used by llm-bench-serve.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace llm::bench {

using Clock = std::chrono::steady_clock;

struct Endpoint {
  std::string host = "127.0.0.1";
  int port = 2000;
  std::string path = "/v1/completions";  // or /v1/chat/completions
  std::string api_key;                   // sent as Authorization: Bearer when not empty
};

struct StreamOutcome {
  bool ok = false;
  std::string error;                     // when !ok: the HTTP status, server error or I/O error
  Clock::time_point start;               // before connecting
  std::vector<Clock::time_point> texts;  // arrival of each event that carried text
  Clock::time_point end;
  int64_t prompt_tokens = -1;      // from the usage chunk; -1: the server sent none
  int64_t completion_tokens = -1;  // from the usage chunk; -1: none
  std::string text;                // the generated text, concatenated
};

// POSTs `body` (a JSON request with "stream": true) and reads the SSE stream to its end.
StreamOutcome RunStreamingRequest(const Endpoint& endpoint, const std::string& body,
                                  std::chrono::seconds timeout);

// GET /v1/models: the first model id, or "" (the error in *error).
std::string FirstModelId(const Endpoint& endpoint, std::chrono::seconds timeout,
                         std::string* error);

}  // namespace llm::bench
