// Stop strings over streamed text. Text arrives in pieces (one per detokenized token); a stop
// string may span pieces. The matcher holds back any tail that could still become a stop
// string, so emitted text never has to be taken back and never contains a stop string (unless
// include_stop is set, then the text ends with it). Pieces must be whole UTF-8 characters;
// the held-back tail then never splits a character either.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace llm::router {

class StopMatcher {
 public:
  StopMatcher(std::vector<std::string> stops, bool include_stop);
  // Shares the stop strings of a request between its choices; none may be empty.
  StopMatcher(std::shared_ptr<const std::vector<std::string>> stops, bool include_stop);

  // Appends `text`; returns the text that is now final. After a stop string was found,
  // stopped() is true and further pieces are dropped.
  std::string Push(std::string_view text);
  // At the end of generation: the held-back tail (nothing after a stop).
  std::string Flush();

  bool stopped() const { return stopped_; }
  size_t held_back() const { return pending_.size(); }

 private:
  std::shared_ptr<const std::vector<std::string>> stops_;
  bool include_stop_;
  bool stopped_ = false;
  std::string pending_;
};

}  // namespace llm::router
