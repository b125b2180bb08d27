// MemoryAccount: the bytes a ps task's variables hold (values, optimizer slots, synchronous
// sums, hash-table arenas) against its memory limit (ServerOptions::memory_limit_bytes,
// Python's ConfigProto.ps_memory_limit_bytes / PSRT_PS_MEMORY_LIMIT).
//
// Every allocation that a request can make grow with the variable's size reserves its bytes
// here first, and is refused (ResourceExhausted naming the variable, the bytes asked and the
// limit) before anything is allocated when they would pass the limit. The in-flight budget
// (budget.h) is separate: it bounds received payload, not what the store keeps.
//
// Thread-safe: Reserve and Release may be called from any thread at once (one atomic counter).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "status.h"

namespace psrt {

class MemoryAccount {
 public:
  // 0: no limit. Set before the server serves.
  void SetLimit(uint64_t limit) { limit_ = limit; }
  uint64_t limit() const { return limit_; }
  uint64_t reserved() const { return reserved_.load(std::memory_order_relaxed); }

  // Reserves n bytes for `what` (e.g. "the value and 2 slot(s)") of variable `name`, or
  // ResourceExhausted when they would pass the limit; then nothing is reserved.
  Status Reserve(uint64_t n, const std::string& name, const std::string& what) {
    uint64_t cur = reserved_.load(std::memory_order_relaxed);
    do {
      if (limit_ != 0 && (n > limit_ || cur > limit_ - n))
        return Status(Code::kResourceExhausted,
                      "variable '" + name + "' asks for " + std::to_string(n) + " bytes (" +
                          what + ") but this ps task's memory limit is " +
                          std::to_string(limit_) + " bytes, of which " + std::to_string(cur) +
                          " are already held (ps_memory_limit_bytes / PSRT_PS_MEMORY_LIMIT); "
                          "nothing was allocated");
    } while (!reserved_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
    return Status::Ok();
  }
  void Release(uint64_t n) { reserved_.fetch_sub(n, std::memory_order_relaxed); }

 private:
  uint64_t limit_ = 0;
  std::atomic<uint64_t> reserved_{0};
};

}  // namespace psrt
