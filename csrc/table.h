// HashTable: the rows of a dynamic embedding table, keyed by arbitrary int64 ids, on one ps
// task (VarSpec.table = 1, wire version 5).
//
// A row is created the first time its id is pulled or pushed: its value from the table's
// initializer, seeded per id (element j of the row of id k is element k * row_elements + j of
// the initializer's counter-based stream, initializers.h, so a row's first value depends on its
// id and the seed only: not on the order ids arrive, nor on which ps task holds it), and its
// optimizer slots from the optimizer's initial slot values. Rows live in arenas of
// [capacity, row_elements] (one for the value, one per slot) grown by doubling, so the fused
// sparse kernels (kernels.h) update them as rows of an ordinary variable. Evicted rows go to a
// free list and are reused.
//
// Each row keeps two counters for eviction: how many gradients updated it, and the table's
// update clock (one tick per applied gradient, of any number of rows) when it was last pulled
// or updated.
//
// Thread-safety: every method takes the table's mutex for its whole duration (lookups that
// create rows, row updates, export, import, eviction), so an update never sees a half-created
// row and an arena never moves under a reader. Updates are therefore serialized per table
// (as TF's use_locking=True), whatever the VarSpec says.
// Errors: ResourceExhausted when the row limit (max_rows), the ps task's memory limit
// (memory_account.h) or memory would be exceeded; then nothing is created or changed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels.h"
#include "memory_account.h"
#include "status.h"
#include "wire.h"

namespace psrt {

class HashTable {
 public:
  // spec: the table's declaration (shape [0, row dims...], dtype, optimizer, init, max_rows).
  // memory: the ps task's account every growth of the arenas reserves its bytes in first
  // (null: none); it must outlive the table.
  explicit HashTable(const VarSpec& spec, MemoryAccount* memory = nullptr);
  ~HashTable();
  HashTable(const HashTable&) = delete;
  HashTable& operator=(const HashTable&) = delete;

  size_t row_elements() const { return row_elements_; }
  size_t row_bytes() const { return row_bytes_; }
  int num_slots() const { return num_slots_; }
  // Bytes of one TABLE_EXPORT/TABLE_IMPORT record: id, update count, value, every slot.
  size_t record_bytes() const { return 16 + row_bytes_ * (1 + num_slots_); }

  // Copies slot `slot` (0: the value) of the rows of `ids` to out (n * row_bytes bytes),
  // creating missing rows first. Marks every row seen at the current clock.
  Status Gather(const int64_t* ids, size_t n, uint8_t slot, uint8_t* out);

  // Applies a row-sparse gradient (rows: n * row_bytes bytes, duplicate ids summed) with the
  // kernel `args`, creating missing rows first. `before_apply` runs once the update is
  // validated and cannot fail any more (the store advances Adam's beta powers there).
  Status Apply(KernelArgs args, const int64_t* ids, size_t n, const void* rows,
               const std::function<void(KernelArgs*)>& before_apply);

  // Writes up to max_rows records of live rows at arena positions >= cursor to *out (ids,
  // then update counts, then values, then each slot: column blocks, docs/protocol.md
  // "TableRows"); *n the rows written, *next the cursor of the next page, -1 when done.
  Status Export(uint64_t cursor, size_t max_rows, std::vector<uint8_t>* out, size_t* n,
                int64_t* next);

  // Writes n records (Export's layout) into the table, creating rows as needed and
  // overwriting existing ones; `clear` empties the table first. Rows imported are seen now.
  Status Import(const uint8_t* records, size_t n, bool clear);

  // Removes rows not seen for at least `unseen` clock ticks (0: no such rule) or updated
  // fewer than `min_count` times (0: no such rule); returns how many.
  size_t Evict(uint64_t unseen, uint64_t min_count);

  // Empties the table (initialization).
  void Clear();

  // ---- Replication (replication.h; docs/protocol.md, "ReplicaState") ---------------------
  // Appends the update clock and every live row (u64 clock, u64 rows t, then column blocks:
  // t ids, t update counts, t last-seen clocks, t values, t rows of each slot) to *out.
  // ResourceExhausted (naming the table) when that would pass max_bytes or memory; then
  // nothing is appended.
  Status Snapshot(uint64_t max_bytes, std::vector<uint8_t>* out) const;
  // Bytes of one row in Snapshot's blocks: id, count, last seen, value, every slot.
  size_t snapshot_row_bytes() const { return 24 + row_bytes_ * (1 + num_slots_); }
  // Replaces every row by the n rows of Snapshot's column blocks at `cols` (ids unique, last
  // seen <= clock: the caller checked) and the clock by `clock`. All or nothing: past max_rows
  // or out of memory (ResourceExhausted) the table is left as it was.
  Status Restore(uint64_t clock, size_t n, const uint8_t* cols);

  size_t rows() const;
  // Memory held by the rows' arenas and metadata (bytes), free rows included.
  size_t bytes() const;

 private:
  struct Arena;
  // Finds or creates the rows of ids into pos (arena positions); requires mu_. Either every
  // row exists afterwards or, on ResourceExhausted, nothing was created.
  Status Locate(const int64_t* ids, size_t n, std::vector<int64_t>* pos);
  Status Reserve(size_t rows);  // requires mu_
  void InitRow(size_t pos, int64_t id);  // requires mu_
  void ClearLocked();                    // requires mu_
  std::string LimitMessage(size_t want) const;

  // Bytes one row of capacity holds: value, slots and per-position metadata, map entry.
  size_t capacity_row_bytes() const;

  VarSpec spec_;
  MemoryAccount* memory_;
  size_t row_elements_;
  size_t row_bytes_;
  int num_slots_;

  mutable std::mutex mu_;
  std::unordered_map<int64_t, size_t> pos_;   // id -> arena position
  std::vector<std::unique_ptr<Arena>> arenas_;  // [0]: values, [1..]: slots
  size_t capacity_ = 0;                       // rows each arena holds
  size_t high_ = 0;                           // positions ever used
  std::vector<int64_t> ids_;                  // per position: its id
  std::vector<uint64_t> counts_;              // per position: gradients that updated it
  std::vector<uint64_t> seen_;                // per position: clock when last used
  std::vector<uint8_t> live_;                 // per position: 1 while the row exists
  std::vector<size_t> free_;                  // evicted positions
  uint64_t clock_ = 0;
};

}  // namespace psrt
