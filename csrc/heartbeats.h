// Heartbeats: when each worker task's heartbeat connection last sent a PING. A request
// connection idle past idle_timeout_s stays open while its task's heartbeat is heard.
//
// Thread-safe (mu_).
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace psrt {

class Heartbeats {
 public:
  // A PING from /job:job/task:task, now.
  void Note(const std::string& job, int task);
  // True when that task's last PING came at or after `since`.
  bool SeenSince(const std::string& job, int task,
                 std::chrono::steady_clock::time_point since) const;

 private:
  mutable std::mutex mu_;
  // Last heartbeat PING of each (job, task), guarded by mu_.
  std::map<std::pair<std::string, int>, std::chrono::steady_clock::time_point> last_;
};

}  // namespace psrt
