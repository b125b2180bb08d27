#include "auth_throttle.h"

#include <algorithm>
#include <cstdio>

namespace psrt {

namespace {
double Seconds(AuthThrottle::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}
}  // namespace

AuthThrottle::AuthThrottle(double rate_per_s, double burst, double summary_s)
    : rate_(rate_per_s), burst_(std::max(1.0, burst)), summary_s_(summary_s > 0 ? summary_s : 10.0) {}

AuthThrottle::Peer* AuthThrottle::Get(const std::string& host, Clock::time_point now) {
  auto it = peers_.find(host);
  if (it == peers_.end()) {
    if (peers_.size() >= kMaxPeers) {
      // Forget the addresses whose bucket grew back full with nothing left to report.
      for (auto j = peers_.begin(); j != peers_.end();) {
        Peer& p = j->second;
        const double t = std::min(burst_, p.tokens + rate_ * Seconds(now - p.refilled));
        if (t >= burst_ && p.counted == 0) {
          j = peers_.erase(j);
        } else {
          ++j;
        }
      }
      if (peers_.size() >= kMaxPeers) return nullptr;
    }
    Peer fresh;
    fresh.tokens = burst_;
    fresh.refilled = now;
    fresh.period_start = now;
    it = peers_.emplace(host, fresh).first;
  }
  Peer& p = it->second;
  if (rate_ > 0) {
    p.tokens = std::min(burst_, p.tokens + rate_ * Seconds(now - p.refilled));
    if (p.tokens >= burst_) p.reported = 0;  // full again: the next failures are news
  }
  p.refilled = now;
  return &p;
}

void AuthThrottle::Count(Peer* p, Clock::time_point now) {
  if (p->counted == 0) p->period_start = now;
  ++p->counted;
}

bool AuthThrottle::Admit(const std::string& host, Clock::time_point now, double* retry_s) {
  if (rate_ <= 0) return true;
  std::lock_guard<std::mutex> l(mu_);
  Peer* p = Get(host, now);
  if (p == nullptr || p->tokens >= 1.0) return true;
  Count(p, now);
  if (retry_s != nullptr) *retry_s = (1.0 - p->tokens) / rate_;
  return false;
}

bool AuthThrottle::Failed(const std::string& host, Clock::time_point now) {
  std::lock_guard<std::mutex> l(mu_);
  Peer* p = Get(host, now);
  if (p == nullptr) return true;
  if (rate_ > 0) p->tokens = std::max(0.0, p->tokens - 1.0);
  if (p->reported < static_cast<uint64_t>(burst_)) {
    ++p->reported;
    return true;
  }
  Count(p, now);
  return false;
}

std::vector<std::string> AuthThrottle::TakeSummaries(Clock::time_point now) {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [host, p] : peers_) {
    if (p.counted == 0 || Seconds(now - p.period_start) < summary_s_) continue;
    char buf[64];
    snprintf(buf, sizeof buf, "%g", summary_s_);
    char limit[96];
    snprintf(limit, sizeof limit, "at most %g per s after a burst of %g", rate_, burst_);
    out.push_back("refused " + std::to_string(p.counted) + " failed authentications from " +
                  host + " in the last " + buf + " s (" + limit + ")");
    p.counted = 0;
  }
  return out;
}

}  // namespace psrt
