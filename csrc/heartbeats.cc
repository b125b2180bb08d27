#include "heartbeats.h"

namespace psrt {

void Heartbeats::Note(const std::string& job, int task) {
  std::lock_guard<std::mutex> l(mu_);
  last_[{job, task}] = std::chrono::steady_clock::now();
}

bool Heartbeats::SeenSince(const std::string& job, int task,
                           std::chrono::steady_clock::time_point since) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = last_.find({job, task});
  return it != last_.end() && it->second >= since;
}

}  // namespace psrt
