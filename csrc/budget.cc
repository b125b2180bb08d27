#include "budget.h"

#include <algorithm>
#include <chrono>
#include <new>

namespace psrt {

void Budget::Init(uint64_t capacity, size_t chunk) {
  capacity_ = std::max<uint64_t>(capacity, chunk);
  chunk_ = chunk;
}

uint8_t* Budget::Acquire(size_t n, const std::function<bool()>& abort) {
  std::unique_lock<std::mutex> l(mu_);
  while (used_ + n > capacity_) {
    if (abort()) return nullptr;
    cv_.wait_for(l, std::chrono::milliseconds(100));
  }
  uint8_t* p = nullptr;
  if (n == chunk_ && !free_.empty()) {
    p = free_.back().release();
    free_.pop_back();
  } else {
    // Default-initialized (not zeroed): every byte is overwritten by the read.
    p = new (std::nothrow) uint8_t[n == 0 ? 1 : n];
    if (p == nullptr) return nullptr;
  }
  used_ += n;
  peak_ = std::max(peak_, used_);
  return p;
}

void Budget::Release(uint8_t* p, size_t n) {
  if (p == nullptr) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    used_ -= n;
    // Pooled for the next chunk while the pool stays within the budget; else freed.
    if (n == chunk_ && (free_.size() + 1) * chunk_ <= capacity_) {
      try {
        free_.emplace_back(p);
        p = nullptr;
      } catch (const std::bad_alloc&) {
      }
    }
  }
  delete[] p;
  cv_.notify_all();
}

bool Budget::AcquireChunks(size_t count, std::vector<uint8_t*>* out,
                           const std::function<bool()>& abort) {
  out->clear();
  const uint64_t n = uint64_t{count} * chunk_;
  std::unique_lock<std::mutex> l(mu_);
  while (used_ + n > capacity_) {
    if (abort()) return false;
    cv_.wait_for(l, std::chrono::milliseconds(100));
  }
  try {
    out->reserve(count);
    while (out->size() < count) {
      if (!free_.empty()) {
        out->push_back(free_.back().release());
        free_.pop_back();
      } else {
        uint8_t* p = new (std::nothrow) uint8_t[chunk_];
        if (p == nullptr) break;
        out->push_back(p);
      }
    }
  } catch (const std::bad_alloc&) {
  }
  if (out->size() < count) {  // out of memory: give back what was taken
    for (uint8_t* p : *out) delete[] p;
    out->clear();
    return false;
  }
  used_ += n;
  peak_ = std::max(peak_, used_);
  return true;
}

void Budget::ReleaseChunks(std::vector<uint8_t*>* bufs) {
  for (uint8_t* p : *bufs) Release(p, chunk_);
  bufs->clear();
}

uint64_t Budget::peak() const {
  std::lock_guard<std::mutex> l(mu_);
  return peak_;
}

}  // namespace psrt
