// AuthThrottle: a ps task's limit on failed authentications per peer address (host, without
// the port). Each failed AUTH proof takes a token from its address's bucket (`burst` tokens,
// refilled at `rate_per_s`); an address with no whole token left is refused at accept, before
// a thread, a challenge or an HMAC is spent on it, until a token grows back. So a peer
// guessing the secret gets at most burst + rate_per_s x seconds proofs checked, while the
// authenticated connections (each on its own thread) are served as before. A peer that
// authenticates never takes a token.
//
// What it refused is summed per address and reported once per `summary_s` ("refused N failed
// authentications from ADDR in the last S s"); the first `burst` failures of an address are
// reported one by one by the caller (Failed returns true for those).
//
// Thread-safe (mu_): the acceptor calls Admit and TakeSummaries, connection threads Failed.
// Never blocks on anything but mu_. At most kMaxPeers addresses are tracked; past it the
// ones back to a full bucket with nothing to report are forgotten, and an address that finds
// no room is not limited (fail open: a flood from that many addresses is not this limit's).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace psrt {

class AuthThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxPeers = 4096;

  // rate_per_s <= 0: no limit (Admit always true; failures still reported).
  AuthThrottle(double rate_per_s, double burst, double summary_s);

  // A new connection from `host`: true when it may try to authenticate. False (and counted
  // for the summary) while the address has less than one token; *retry_s then says when the
  // next one grows back.
  bool Admit(const std::string& host, Clock::time_point now, double* retry_s);
  // A failed AUTH proof from `host`: takes a token. True when the caller should report this
  // failure on its own (the first `burst` of the address since its bucket was last full);
  // false when it is counted for the summary instead.
  bool Failed(const std::string& host, Clock::time_point now);
  // The summary lines whose period ended by `now`, one per address with something counted.
  std::vector<std::string> TakeSummaries(Clock::time_point now);

  double rate_per_s() const { return rate_; }
  double burst() const { return burst_; }

 private:
  struct Peer {
    double tokens = 0;
    Clock::time_point refilled;
    uint64_t reported = 0;        // failures reported one by one since the bucket was full
    uint64_t counted = 0;         // refusals + unreported failures in the current period
    Clock::time_point period_start;
  };
  // The address's entry, refilled to `now`; null when none can be made (kMaxPeers).
  Peer* Get(const std::string& host, Clock::time_point now);
  void Count(Peer* p, Clock::time_point now);

  const double rate_;
  const double burst_;
  const double summary_s_;
  std::mutex mu_;
  std::unordered_map<std::string, Peer> peers_;  // guarded by mu_
};

}  // namespace psrt
