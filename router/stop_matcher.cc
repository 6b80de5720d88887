#include "router/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace llm::router {

StopMatcher::StopMatcher(std::vector<std::string> stops, bool include_stop)
    : include_stop_(include_stop) {
  stops.erase(std::remove(stops.begin(), stops.end(), std::string()), stops.end());
  stops_ = std::make_shared<const std::vector<std::string>>(std::move(stops));
}

StopMatcher::StopMatcher(std::shared_ptr<const std::vector<std::string>> stops, bool include_stop)
    : stops_(std::move(stops)), include_stop_(include_stop) {}

std::string StopMatcher::Push(std::string_view text) {
  if (stopped_) return {};
  pending_.append(text);
  if (stops_->empty()) return std::exchange(pending_, {});
  // The earliest stop string in the pending text wins (ties: the longer one).
  size_t best = std::string::npos;
  size_t best_len = 0;
  for (const std::string& s : *stops_) {
    const size_t pos = pending_.find(s);
    if (pos != std::string::npos && (pos < best || (pos == best && s.size() > best_len))) {
      best = pos;
      best_len = s.size();
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, best + (include_stop_ ? best_len : 0));
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : *stops_) {
    const size_t max_k = std::min(s.size() - 1, pending_.size());
    for (size_t k = max_k; k > hold; --k) {
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::Flush() {
  if (stopped_) return {};
  return std::exchange(pending_, {});
}

}  // namespace llm::router
