// EventLog: the security and housekeeping events of a ps task (failed authentication with the
// peer's address, refused or idle connections closed, stalled peers dropped), kept for
// Server::TakeEvents. Bounded: past max_events the oldest are dropped and counted.
//
// Thread-safe (mu_); never blocks on anything but mu_.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace psrt {

class EventLog {
 public:
  explicit EventLog(size_t max_events) : max_events_(max_events) {}
  void Add(const std::string& what);
  // Every event since the last call, oldest first, led by "N earlier event(s) dropped" when
  // some were dropped.
  std::vector<std::string> Take();

 private:
  const size_t max_events_;
  std::mutex mu_;
  std::vector<std::string> events_;  // guarded by mu_
  size_t dropped_ = 0;               // guarded by mu_
};

}  // namespace psrt
