// Boost's assertion handler for the router's builds without NDEBUG (tools/fuzz.sh's build, a
// Debug build): llm_router compiles with BOOST_ENABLE_ASSERT_DEBUG_HANDLER (router/CMakeLists.txt),
// so a failed BOOST_ASSERT comes here instead of to assert(). Release builds define NDEBUG, and
// there BOOST_ASSERT is compiled out as before: nothing here runs.
//
// Why: Beast's request parser in Boost 1.81 (Debian 12) asserts `n >= 5` in parse_chunk_header
// when a chunked body's last chunk "0\r\n" and its closing "\r\n" arrive in separate reads of
// fewer bytes (`0\r\n`, then `\r`): a client sending one byte at a time ends the router of a
// build with assertions. The assertion is wrong and the code after it asks for more bytes, as
// it should (Beast's fix: boostorg/beast pull request 2861, "fix asserts, it's possible that we
// reach code only with 3 symbols", 2024). So that one assertion is let through, as a Release
// build and a fixed Beast do; every other failed assertion aborts with its message.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <boost/assert.hpp>

namespace {

// Beast's known-false assertion (above), and only it.
bool KnownFalseBeastAssertion(std::string_view expr, std::string_view function,
                              std::string_view file) {
  return expr == "n >= 5" && function.find("parse_chunk_header") != std::string_view::npos &&
         file.ends_with("beast/http/impl/basic_parser.ipp");
}

}  // namespace

namespace boost {

void assertion_failed_msg(const char* expr, const char* msg, const char* function, const char* file,
                          long line) {
  if (KnownFalseBeastAssertion(expr, function, file)) return;
  std::fprintf(stderr, "%s:%ld: %s: Assertion `%s' failed%s%s.\n", file, line, function, expr,
               msg != nullptr ? ": " : "", msg != nullptr ? msg : "");
  std::abort();
}

void assertion_failed(const char* expr, const char* function, const char* file, long line) {
  assertion_failed_msg(expr, nullptr, function, file, line);
}

}  // namespace boost
