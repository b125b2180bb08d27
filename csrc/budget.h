// Budget: a ps task's in-flight memory budget, the payload bytes that all its connections
// together hold received but not yet applied, and the pool of chunk-sized buffers they reuse.
// Past the budget a reader waits (and so stops reading its socket): senders block instead of
// the ps growing (backpressure, DESIGN.md "Wire rules").
//
// Thread-safe: every method may be called from any connection thread at once (mu_).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace psrt {

class Budget {
 public:
  // Before first use: at most `capacity` bytes out at once (raised to one chunk if below),
  // buffers of `chunk` bytes pooled for reuse.
  void Init(uint64_t capacity, size_t chunk);
  // Waits until n bytes fit (n <= capacity) or `abort` returns true (polled every 100 ms):
  // a buffer of n bytes, or null (aborted, or out of memory).
  uint8_t* Acquire(size_t n, const std::function<bool()>& abort);
  // Gives back a buffer of n bytes from Acquire (null: nothing) and wakes the waiters.
  void Release(uint8_t* p, size_t n);
  // Reserves `count` chunk-sized buffers at once (an atomic PUSH holds its whole gradient
  // before applying it): waits until all of them fit (count x chunk <= capacity, checked by
  // the caller) or `abort` returns true. Taking them all in one step means two such
  // reservations never hold part of the budget each while waiting for the rest. False (and
  // nothing held) when aborted or out of memory.
  bool AcquireChunks(size_t count, std::vector<uint8_t*>* out,
                     const std::function<bool()>& abort);
  // Gives back every buffer of AcquireChunks and clears *bufs.
  void ReleaseChunks(std::vector<uint8_t*>* bufs);
  size_t chunk() const { return chunk_; }
  uint64_t capacity() const { return capacity_; }
  // The most bytes held out at once since Init.
  uint64_t peak() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t capacity_ = 0;
  uint64_t used_ = 0;
  uint64_t peak_ = 0;
  size_t chunk_ = 0;
  std::vector<std::unique_ptr<uint8_t[]>> free_;  // chunk-sized buffers for reuse
};

}  // namespace psrt
