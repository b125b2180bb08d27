#include "events.h"

namespace psrt {

void EventLog::Add(const std::string& what) {
  std::lock_guard<std::mutex> l(mu_);
  if (events_.size() >= max_events_) {
    events_.erase(events_.begin());
    ++dropped_;
  }
  events_.push_back(what);
}

std::vector<std::string> EventLog::Take() {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  out.swap(events_);
  if (dropped_ > 0) {
    out.insert(out.begin(), std::to_string(dropped_) + " earlier event(s) dropped");
    dropped_ = 0;
  }
  return out;
}

}  // namespace psrt
