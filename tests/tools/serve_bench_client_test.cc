// tools/serve_bench_client (llm-bench-serve's HTTP client) against a real socket server that
// streams SSE events with pauses between them: the client must time each event when it arrives,
// not when the response ends (TTFT and ITL are what a serving benchmark reports).
#include "tools/serve_bench_client.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace llm::bench {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;

std::string Chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return size + data + "\r\n";
}

// Accepts one connection, reads the request head, answers with `events` SSE events (chunked
// encoding, one chunk each) `gap` apart, then [DONE].
void ServeOne(asio::ip::tcp::acceptor* acceptor, int events, milliseconds gap) {
  asio::ip::tcp::socket socket(acceptor->get_executor());
  acceptor->accept(socket);
  asio::streambuf head;
  asio::read_until(socket, head, "\r\n\r\n");
  asio::write(socket, asio::buffer(std::string("HTTP/1.1 200 OK\r\n"
                                               "Content-Type: text/event-stream\r\n"
                                               "Transfer-Encoding: chunked\r\n\r\n")));
  for (int i = 0; i < events; ++i) {
    if (i > 0) std::this_thread::sleep_for(gap);
    asio::write(socket, asio::buffer(Chunk("data: {\"choices\":[{\"text\":\"t" + std::to_string(i) +
                                           "\"}]}\n\n")));
  }
  asio::write(socket, asio::buffer(Chunk("data: [DONE]\n\n") + "0\r\n\r\n"));
  boost::system::error_code ignored;
  socket.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
}

TEST(ServeBenchClient, TimesEachStreamedEventWhenItArrives) {
  asio::io_context ioc;
  asio::ip::tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  const milliseconds gap(400);  // wide margins: a loaded CI machine may delay a read
  std::thread server(ServeOne, &acceptor, 3, gap);
  Endpoint e;
  e.port = acceptor.local_endpoint().port();
  const StreamOutcome out = RunStreamingRequest(e, "{\"stream\": true}", std::chrono::seconds(10));
  server.join();
  ASSERT_TRUE(out.ok) << out.error;
  ASSERT_EQ(out.texts.size(), 3u);
  EXPECT_EQ(out.text, "t0t1t2");
  // The first event came at once; the others about one gap apart (reading only at the end of
  // the response would put all three 2 gaps after the start, microseconds apart).
  EXPECT_LT(out.texts[0] - out.start, gap);
  EXPECT_GE(out.texts[1] - out.texts[0], gap / 4);
  EXPECT_GE(out.texts[2] - out.texts[1], gap / 4);
}

}  // namespace
}  // namespace llm::bench
