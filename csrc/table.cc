#include "table.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "initializers.h"

namespace psrt {

// One column of rows: `capacity` rows of row_bytes, 64-byte aligned.
struct HashTable::Arena {
  uint8_t* data = nullptr;
  ~Arena() { std::free(data); }
};

namespace {

uint8_t* AllocRows(size_t bytes) {
  size_t alloc = (bytes + 63) / 64 * 64;
  if (alloc == 0) alloc = 64;
  return static_cast<uint8_t*>(std::aligned_alloc(64, alloc));
}

void Fill(uint8_t* dst, DType dtype, size_t n, double v) {
  if (dtype == DType::kFloat32) {
    auto* p = reinterpret_cast<float*>(dst);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(v);
  } else {
    auto* p = reinterpret_cast<double*>(dst);
    for (size_t i = 0; i < n; ++i) p[i] = v;
  }
}

double SlotInitial(const VarSpec& spec, int k) {
  return k == 0 ? spec.slot_init : k == 1 ? spec.slot_init2 : spec.slot_init3;
}

// An approximation of one unordered_map node plus its bucket (bytes), for bytes().
constexpr size_t kMapEntryBytes = 48;

}  // namespace

HashTable::HashTable(const VarSpec& spec, MemoryAccount* memory)
    : spec_(spec),
      memory_(memory),
      row_elements_(static_cast<size_t>(spec.RowElements())),
      row_bytes_(static_cast<size_t>(spec.RowElements()) * DTypeSize(spec.dtype)),
      num_slots_(NumSlots(spec.optimizer)) {}

HashTable::~HashTable() {
  if (memory_ != nullptr) memory_->Release(uint64_t{capacity_} * capacity_row_bytes());
}

size_t HashTable::capacity_row_bytes() const {
  return row_bytes_ * (1 + num_slots_) + 8 + 8 + 8 + 1 + sizeof(size_t) + kMapEntryBytes;
}

size_t HashTable::rows() const {
  std::lock_guard<std::mutex> l(mu_);
  return pos_.size();
}

size_t HashTable::bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return capacity_ * (row_bytes_ * (1 + num_slots_) + 8 + 8 + 8 + 1 + sizeof(size_t)) +
         pos_.size() * kMapEntryBytes;  // (the memory limit charges a map entry per capacity row)
}

std::string HashTable::LimitMessage(size_t want) const {
  return "table '" + spec_.name + "' holds " + std::to_string(pos_.size()) +
         " rows; creating " + std::to_string(want) + " more would exceed its limit of " +
         std::to_string(spec_.max_rows) + " rows (max_rows); nothing was created";
}

Status HashTable::Reserve(size_t need) {
  if (need <= capacity_) return Status::Ok();
  size_t cap = std::max<size_t>({need, capacity_ * 2, 64});
  if (spec_.max_rows != 0) cap = std::max<size_t>(need, std::min<size_t>(cap, spec_.max_rows));
  const int columns = 1 + num_slots_;
  auto exhausted = [&] {
    return Status(Code::kResourceExhausted,
                  "out of memory growing table '" + spec_.name + "' to " + std::to_string(cap) +
                      " rows (" + std::to_string(cap * row_bytes_ * columns) +
                      " bytes for the values and slots); nothing was created");
  };
  if (row_bytes_ != 0 && cap > SIZE_MAX / row_bytes_ / 2) return exhausted();
  // The memory limit before any allocation: the rows the arenas grow by, with their metadata.
  // (The old arenas are freed once copied, so the peak is briefly higher than what is held.)
  const uint64_t grow = uint64_t{cap - capacity_} * capacity_row_bytes();
  if (memory_ != nullptr)
    PSRT_RETURN_IF_ERROR(memory_->Reserve(
        grow, spec_.name,
        "growing the table from " + std::to_string(capacity_) + " to " + std::to_string(cap) +
            " rows of " + std::to_string(capacity_row_bytes()) +
            " bytes (value, slots, row metadata); nothing was created"));
  std::vector<uint8_t*> fresh(columns, nullptr);
  for (int c = 0; c < columns; ++c) {
    fresh[c] = AllocRows(cap * row_bytes_);
    if (fresh[c] == nullptr) {
      for (uint8_t* p : fresh) std::free(p);
      if (memory_ != nullptr) memory_->Release(grow);
      return exhausted();
    }
  }
  try {
    ids_.resize(cap);
    counts_.resize(cap);
    seen_.resize(cap);
    live_.resize(cap);
    free_.reserve(cap);
    if (arenas_.empty())
      for (int c = 0; c < columns; ++c) arenas_.push_back(std::make_unique<Arena>());
  } catch (const std::bad_alloc&) {
    for (uint8_t* p : fresh) std::free(p);
    if (memory_ != nullptr) memory_->Release(grow);
    return exhausted();
  }
  for (int c = 0; c < columns; ++c) {
    if (arenas_[c]->data != nullptr) std::memcpy(fresh[c], arenas_[c]->data, high_ * row_bytes_);
    std::free(arenas_[c]->data);
    arenas_[c]->data = fresh[c];
  }
  capacity_ = cap;
  return Status::Ok();
}

void HashTable::InitRow(size_t p, int64_t id) {
  uint8_t* value = arenas_[0]->data + p * row_bytes_;
  if (spec_.init.kind == InitKind::kNone) {
    std::memset(value, 0, row_bytes_);
  } else {
    InitSpec s = spec_.init;
    // The row of id k is slice [k * row_elements, (k + 1) * row_elements) of the stream
    // (modulo 2^64): deterministic per id and seed.
    s.offset = static_cast<uint64_t>(id) * row_elements_;
    FillInitializer(s, spec_.dtype, value, row_elements_);
  }
  for (int k = 0; k < num_slots_; ++k)
    Fill(arenas_[1 + k]->data + p * row_bytes_, spec_.dtype, row_elements_,
         SlotInitial(spec_, k));
  ids_[p] = id;
  counts_[p] = 0;
  seen_[p] = clock_;
  live_[p] = 1;
}

Status HashTable::Locate(const int64_t* ids, size_t n, std::vector<int64_t>* pos) {
  try {
    pos->resize(n);
    // One hash lookup per id: an existing row's position, or -1 - k for the k-th missing id.
    std::vector<int64_t> missing;
    std::unordered_map<int64_t, size_t> fresh;  // missing id -> index in `missing`
    for (size_t j = 0; j < n; ++j) {
      int64_t id;
      std::memcpy(&id, ids + j, 8);
      auto it = pos_.find(id);
      if (it != pos_.end()) {
        (*pos)[j] = static_cast<int64_t>(it->second);
        continue;
      }
      auto f = fresh.emplace(id, missing.size());
      if (f.second) missing.push_back(id);
      (*pos)[j] = -1 - static_cast<int64_t>(f.first->second);
    }
    std::vector<size_t> made_at(missing.size());
    if (!missing.empty()) {
      if (spec_.max_rows != 0 && pos_.size() + missing.size() > spec_.max_rows)
        return Status(Code::kResourceExhausted, LimitMessage(missing.size()));
      const size_t reuse = std::min(free_.size(), missing.size());
      PSRT_RETURN_IF_ERROR(Reserve(high_ + (missing.size() - reuse)));
      pos_.reserve(pos_.size() + missing.size());
      size_t made = 0;
      try {
        for (int64_t id : missing) {
          size_t p;
          if (!free_.empty()) {
            p = free_.back();
            free_.pop_back();
          } else {
            p = high_++;
          }
          InitRow(p, id);
          pos_.emplace(id, p);
          made_at[made++] = p;
        }
      } catch (const std::bad_alloc&) {
        // Undo: the rows made so far go back to the free list (capacity was reserved).
        for (size_t i = 0; i < made; ++i) {
          live_[made_at[i]] = 0;
          free_.push_back(made_at[i]);
          pos_.erase(missing[i]);
        }
        throw;
      }
    }
    for (size_t j = 0; j < n; ++j) {
      int64_t& q = (*pos)[j];
      if (q < 0) q = static_cast<int64_t>(made_at[static_cast<size_t>(-1 - q)]);
      const size_t p = static_cast<size_t>(q);
      seen_[p] = std::max(seen_[p], clock_);
    }
  } catch (const std::bad_alloc&) {
    return Status(Code::kResourceExhausted, "out of memory looking up " + std::to_string(n) +
                                                " ids in table '" + spec_.name +
                                                "'; nothing was created");
  }
  return Status::Ok();
}

Status HashTable::Gather(const int64_t* ids, size_t n, uint8_t slot, uint8_t* out) {
  if (slot > num_slots_)
    return InvalidArgument("table '" + spec_.name + "' has " + std::to_string(num_slots_) +
                           " optimizer slots; slot index " + std::to_string(slot - 1) +
                           " does not exist");
  std::lock_guard<std::mutex> l(mu_);
  std::vector<int64_t> pos;
  PSRT_RETURN_IF_ERROR(Locate(ids, n, &pos));
  const uint8_t* src = arenas_.empty() ? nullptr : arenas_[slot]->data;
  for (size_t j = 0; j < n; ++j)
    std::memcpy(out + j * row_bytes_, src + static_cast<size_t>(pos[j]) * row_bytes_, row_bytes_);
  return Status::Ok();
}

Status HashTable::Apply(KernelArgs args, const int64_t* ids, size_t n, const void* rows,
                        const std::function<void(KernelArgs*)>& before_apply) {
  // The kernel's checks (optimizer, dtype, hyper-parameters) first, on an empty update: a
  // refused gradient creates no row.
  SparseUpdate probe;
  Status st = PrepareSparse(args, 0, row_elements_, nullptr, 0, rows, false, &probe);
  if (!st.ok()) return Status(st.code(), "table '" + spec_.name + "': " + st.message());
  std::lock_guard<std::mutex> l(mu_);
  std::vector<int64_t> pos;
  PSRT_RETURN_IF_ERROR(Locate(ids, n, &pos));
  SparseUpdate update;
  // Positions are in [0, high_): PrepareSparse's range check cannot fail; it sums duplicates.
  st = PrepareSparse(args, high_, row_elements_, pos.data(), n, rows, false, &update);
  if (!st.ok()) return Status(st.code(), "table '" + spec_.name + "': " + st.message());
  before_apply(&args);
  void* slots[kMaxSlots] = {nullptr, nullptr, nullptr};
  if (n > 0) {  // n > 0: Locate made the arenas
    for (int k = 0; k < num_slots_; ++k) slots[k] = arenas_[1 + k]->data;
    ApplyPrepared(args, arenas_[0]->data, slots, update);
  }
  const uint64_t now = clock_ + 1;
  for (size_t j = 0; j < n; ++j) {
    const size_t p = static_cast<size_t>(pos[j]);
    if (seen_[p] != now) {  // an id repeated in one gradient counts once
      seen_[p] = now;
      ++counts_[p];
    }
  }
  clock_ = now;
  return Status::Ok();
}

Status HashTable::Export(uint64_t cursor, size_t max_rows, std::vector<uint8_t>* out, size_t* n,
                         int64_t* next) {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<size_t> take;
  size_t p = static_cast<size_t>(std::min<uint64_t>(cursor, high_));
  try {
    for (; p < high_ && take.size() < max_rows; ++p)
      if (live_[p]) take.push_back(p);
    out->resize(take.size() * record_bytes());
  } catch (const std::bad_alloc&) {
    return Status(Code::kResourceExhausted,
                  "out of memory exporting rows of table '" + spec_.name + "'");
  }
  const size_t k = take.size();
  uint8_t* w = out->data();
  for (size_t j = 0; j < k; ++j) std::memcpy(w + j * 8, &ids_[take[j]], 8);
  w += k * 8;
  for (size_t j = 0; j < k; ++j) {
    const int64_t c = static_cast<int64_t>(counts_[take[j]]);
    std::memcpy(w + j * 8, &c, 8);
  }
  w += k * 8;
  for (int c = 0; c < 1 + num_slots_; ++c) {
    for (size_t j = 0; j < k; ++j)
      std::memcpy(w + j * row_bytes_, arenas_[c]->data + take[j] * row_bytes_, row_bytes_);
    w += k * row_bytes_;
  }
  // Skip trailing free positions so the last page says "done".
  while (p < high_ && !live_[p]) ++p;
  *n = k;
  *next = p >= high_ ? -1 : static_cast<int64_t>(p);
  return Status::Ok();
}

Status HashTable::Import(const uint8_t* records, size_t n, bool clear) {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<int64_t> ids(n);
  if (n > 0) std::memcpy(ids.data(), records, n * 8);
  if (clear) {
    if (spec_.max_rows != 0) {
      std::vector<int64_t> sorted = ids;
      std::sort(sorted.begin(), sorted.end());
      const size_t distinct = static_cast<size_t>(
          std::unique(sorted.begin(), sorted.end()) - sorted.begin());
      if (distinct > spec_.max_rows)
        return Status(Code::kResourceExhausted,
                      "restoring " + std::to_string(distinct) + " rows into table '" +
                          spec_.name + "' would exceed its limit of " +
                          std::to_string(spec_.max_rows) +
                          " rows (max_rows); the table was left as it was");
    }
    ClearLocked();
  }
  std::vector<int64_t> pos;
  PSRT_RETURN_IF_ERROR(Locate(ids.data(), n, &pos));
  const uint8_t* counts = records + n * 8;
  const uint8_t* cols = counts + n * 8;
  for (size_t j = 0; j < n; ++j) {
    const size_t p = static_cast<size_t>(pos[j]);
    int64_t c;
    std::memcpy(&c, counts + j * 8, 8);
    counts_[p] = c < 0 ? 0 : static_cast<uint64_t>(c);
    seen_[p] = clock_;
    for (int k = 0; k < 1 + num_slots_; ++k)
      std::memcpy(arenas_[k]->data + p * row_bytes_, cols + (k * n + j) * row_bytes_, row_bytes_);
  }
  return Status::Ok();
}

size_t HashTable::Evict(uint64_t unseen, uint64_t min_count) {
  std::lock_guard<std::mutex> l(mu_);
  size_t evicted = 0;
  for (size_t p = 0; p < high_; ++p) {
    if (!live_[p]) continue;
    const bool stale = unseen != 0 && clock_ - seen_[p] >= unseen;
    const bool rare = min_count != 0 && counts_[p] < min_count;
    if (!stale && !rare) continue;
    live_[p] = 0;
    pos_.erase(ids_[p]);
    free_.push_back(p);  // capacity reserved by Reserve: cannot throw
    ++evicted;
  }
  return evicted;
}

Status HashTable::Snapshot(uint64_t max_bytes, std::vector<uint8_t>* out) const {
  std::lock_guard<std::mutex> l(mu_);
  const size_t t = pos_.size();
  const uint64_t bytes = 16 + uint64_t{t} * snapshot_row_bytes();
  if (bytes > max_bytes)
    return Status(Code::kResourceExhausted,
                  "table '" + spec_.name + "': its " + std::to_string(t) + " rows take " +
                      std::to_string(bytes) + " bytes, more than the " +
                      std::to_string(max_bytes) + " bytes left for them (max_payload)");
  const size_t at = out->size();
  try {
    out->resize(at + static_cast<size_t>(bytes));
  } catch (const std::bad_alloc&) {
    return Status(Code::kResourceExhausted, "out of memory copying the " + std::to_string(t) +
                                                " rows of table '" + spec_.name + "'");
  }
  uint8_t* w = out->data() + at;
  const uint64_t n = t;
  std::memcpy(w, &clock_, 8);
  std::memcpy(w + 8, &n, 8);
  w += 16;
  // Column blocks in arena order; a position's block index is its rank among live rows.
  size_t j = 0;
  for (size_t p = 0; p < high_; ++p) {
    if (!live_[p]) continue;
    std::memcpy(w + j * 8, &ids_[p], 8);
    std::memcpy(w + (t + j) * 8, &counts_[p], 8);
    std::memcpy(w + (2 * t + j) * 8, &seen_[p], 8);
    for (int c = 0; c < 1 + num_slots_; ++c)
      std::memcpy(w + 24 * t + (c * t + j) * row_bytes_, arenas_[c]->data + p * row_bytes_,
                  row_bytes_);
    ++j;
  }
  return Status::Ok();
}

Status HashTable::Restore(uint64_t clock, size_t n, const uint8_t* cols) {
  std::lock_guard<std::mutex> l(mu_);
  if (spec_.max_rows != 0 && n > spec_.max_rows)
    return Status(Code::kResourceExhausted,
                  "a copy of " + std::to_string(n) + " rows exceeds the limit of table '" +
                      spec_.name + "' of " + std::to_string(spec_.max_rows) +
                      " rows (max_rows); the table was left as it was");
  // Everything that can fail first: room for n rows, the new id map.
  PSRT_RETURN_IF_ERROR(Reserve(n));
  std::unordered_map<int64_t, size_t> fresh;
  try {
    fresh.reserve(n);
    for (size_t j = 0; j < n; ++j) {
      int64_t id;
      std::memcpy(&id, cols + j * 8, 8);
      fresh.emplace(id, j);
    }
  } catch (const std::bad_alloc&) {
    return Status(Code::kResourceExhausted, "out of memory indexing a copy of " +
                                                std::to_string(n) + " rows of table '" +
                                                spec_.name + "'; the table was left as it was");
  }
  pos_.swap(fresh);
  free_.clear();
  std::fill(live_.begin(), live_.end(), 0);
  for (size_t j = 0; j < n; ++j) {
    std::memcpy(&ids_[j], cols + j * 8, 8);
    std::memcpy(&counts_[j], cols + (n + j) * 8, 8);
    std::memcpy(&seen_[j], cols + (2 * n + j) * 8, 8);
    live_[j] = 1;
  }
  const uint8_t* blocks = cols + 24 * n;
  for (int c = 0; c < 1 + num_slots_ && n > 0; ++c)
    std::memcpy(arenas_[c]->data, blocks + c * n * row_bytes_, n * row_bytes_);
  high_ = n;
  clock_ = clock;
  return Status::Ok();
}

void HashTable::Clear() {
  std::lock_guard<std::mutex> l(mu_);
  ClearLocked();
}

void HashTable::ClearLocked() {
  pos_.clear();
  free_.clear();
  std::fill(live_.begin(), live_.end(), 0);
  high_ = 0;
  clock_ = 0;
}

}  // namespace psrt
