// VariableStore: the variables, optimizer slots and global step one ps task holds.
//
// Thread-safety: every method may be called from any server thread at once.
//  - Lookup by id takes no lock: ids index an append-only two-level table of atomic pointers,
//    and a Variable is never moved or freed while the store lives.
//  - Register takes registry_mu_ (never held while touching variable memory).
//  - Updates are Hogwild (no lock, as TF's use_locking=False) unless the variable was
//    registered with use_locking, in which case Variable::mu serializes them.
//  - int64 scalars (the global step) are read and written with atomic builtins.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels.h"
#include "memory_account.h"
#include "replication.h"
#include "status.h"
#include "table.h"
#include "wire.h"

namespace psrt {

// 64-byte aligned, zero-initialized bytes. Allocation is explicit (no allocating constructor),
// so every caller sees its failure.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  ~AlignedBuffer();
  // Replaces the contents with n zero bytes. False when out of memory; the old contents are
  // then kept.
  bool Allocate(size_t n);
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// The slot index Pull/Assign use for Adam's (beta1_power, beta2_power), float64[2].
constexpr uint8_t kOptimizerStateSlot = 255;

// The summed row-sparse gradients of one synchronous step.
struct RowSum {
  std::unordered_map<int64_t, size_t> pos;  // row index -> its position in ids/values
  std::vector<int64_t> ids;       // row indices, first-seen order
  std::vector<uint8_t> values;    // their summed values, row after row
  std::vector<uint32_t> count;    // how many of the gradients held each row
  std::vector<uint32_t> last;     // the gradient (1-based) that last counted each row

  void Clear();
  void Swap(RowSum& other) noexcept;
};

// Synchronous training state of one variable (SyncReplicasOptimizer's accumulator), guarded
// by mu. For an int64 scalar (the global step) only `count` is used: its value is its step.
struct SyncState {
  std::mutex mu;
  std::condition_variable cv;     // notified when the step advances or pending state drops
  int64_t step = 0;               // the step whose gradients are being collected
  uint32_t count = 0;             // fresh gradients collected for `step`
  bool has_dense = false;         // `dense` holds the sum of this step's dense gradients
  AlignedBuffer dense;
  RowSum rows;                    // this step's row-sparse gradients

  void DropPending();             // requires mu
};

// What a synchronous request found (see VariableStore::Sync*).
struct SyncResult {
  bool accepted = false;  // push/increment: counted for the current step (false: stale)
  bool ready = false;     // wait: the step was reached
  bool aborted = false;   // wait: the abort predicate became true
  int64_t step = 0;       // the variable's step (global step: its value) afterwards
  uint32_t count = 0;     // gradients collected for that step
};

struct Variable {
  uint32_t id = 0;
  VarSpec spec;
  size_t num_elements = 0;
  size_t nbytes = 0;
  AlignedBuffer value;
  std::vector<std::unique_ptr<AlignedBuffer>> slots;
  std::atomic<bool> initialized{false};
  std::mutex mu;                  // use_locking updates; Adam's beta powers
  double beta1_power = 0.0;       // Adam, guarded by mu
  double beta2_power = 0.0;
  int64_t applies = 0;            // AdagradDA: updates applied since initialization (mu)
  SyncState sync;                 // used when spec.replicas_to_aggregate > 0
  std::unique_ptr<HashTable> table;  // spec.table: the rows (value and slots stay empty)
  uint64_t reserved_bytes = 0;    // held in the store's MemoryAccount for value, slots, sum
  VarReplication repl;            // ps replication (replication.h): section, awaiting, marks

  bool is_sync() const { return spec.replicas_to_aggregate > 0; }
  bool is_step_counter() const {
    return spec.dtype == DType::kInt64 && num_elements == 1 && spec.shape.empty();
  }
  // Memory for slot index `slot` (0: the value), or nullptr when out of range.
  uint8_t* SlotData(uint8_t slot) const;
  std::string ShapeString() const;
};

class VariableStore {
 public:
  VariableStore();
  ~VariableStore();

  // Declares a variable (or finds the one with that name). A name that exists with another
  // dtype, shape or optimizer is InvalidArgument naming both declarations. When `init` is
  // non-null (spec.NumElements() values of spec.dtype), the value is assigned, the slots are
  // set to spec.slot_init and the variable becomes initialized. *created (when given) says
  // whether this call created the variable.
  Status Register(const VarSpec& spec, const void* init, Variable** out,
                  bool* created = nullptr);

  // Lock-free lookup; NotFound naming the id when absent.
  Status Find(uint32_t id, Variable** out) const;
  // Lookup by name (takes registry_mu_); NotFound naming it when absent.
  Status FindByName(const std::string& name, Variable** out) const;

  // Applies the variable's optimizer to a dense gradient of var->nbytes bytes.
  Status ApplyDense(Variable* var, const void* grad, double lr, bool has_lr);

  // A dense gradient applied in pieces as it arrives (a streamed PUSH): BeginDense checks the
  // variable (trainable, initialized) and takes Adam's beta powers once for the whole
  // gradient into *args; ApplyDenseRange then applies grad to elements [begin, begin + n)
  // and cannot fail. Each piece is applied whole (under the variable's mutex with
  // use_locking); pieces already applied stay applied if the rest never comes.
  Status BeginDense(Variable* var, double lr, bool has_lr, KernelArgs* args);
  void ApplyDenseRange(Variable* var, const KernelArgs& args, const void* grad, size_t begin,
                       size_t n);
  // Copies len bytes to byte offset `at` of slot `slot` (0: the value) without marking
  // anything initialized (a streamed ASSIGN or initial value); InvalidArgument when the range
  // or slot does not exist.
  Status AssignRange(Variable* var, uint8_t slot, const void* bytes, size_t at, size_t len);
  // After a streamed ASSIGN of slot 0: the variable is initialized.
  void MarkInitialized(Variable* var);
  // After a streamed initial value: slots reset to slot_init, Adam's powers reset, the
  // variable initialized and its synchronous state reset (as Register with init).
  void FinishInit(Variable* var);
  // Computes the value from `init` on this ps task (initializers.h), then FinishInit.
  void RunInitializer(Variable* var, const InitSpec& init);
  // Row-sparse update: var viewed as [shape[0], rest]; duplicate indices are summed. Every
  // index is checked (InvalidArgument naming it) before anything, Adam's beta powers included,
  // is written; n = 0 applies nothing but still advances Adam's beta powers, as TF.
  Status ApplySparse(Variable* var, const int64_t* indices, size_t n, const void* rows,
                     double lr, bool has_lr);
  // Copies `bytes` into slot `slot` (0: value; marks initialized). kOptimizerStateSlot sets
  // Adam's beta powers from float64[2].
  Status Assign(Variable* var, uint8_t slot, const void* bytes, size_t len);
  Status AssignAdd(Variable* var, const void* delta, size_t len);
  // int64 scalars only.
  Status StepRead(Variable* var, int64_t* value);
  Status StepIncrement(Variable* var, int64_t delta, int64_t* new_value);

  // ---- Synchronous training (SyncReplicasOptimizer) ----------------------------------------
  // A gradient tagged with step `tag` for a sync variable (dense when indices is null):
  // tag < step: dropped as stale; tag > step: the pending gradients are dropped and the
  // variable moves to `tag`; then it is summed in. When replicas_to_aggregate gradients are in,
  // their mean is applied with the variable's optimizer and the step advances. Indices are all
  // checked before anything is summed.
  // The checks of a tagged PUSH that do not depend on the step: a synchronous, trainable,
  // initialized variable; for `sparse`, a non-scalar one and every index in range.
  Status SyncCheckPush(const Variable* var, bool sparse, const int64_t* indices,
                       size_t n) const;
  // A tagged STEP_INCREMENT's: an initialized synchronous int64 scalar.
  Status SyncCheckStep(const Variable* var) const;
  // `sparse`: indices/rows hold the gradient (n = 0 is an empty gradient, counted like any
  // other); else grad holds var->nbytes bytes. A refused gradient changes nothing.
  Status SyncPush(Variable* var, int64_t tag, bool sparse, const void* grad,
                  const int64_t* indices, size_t n, const void* rows, double lr, bool has_lr,
                  SyncResult* out);
  // The global step's tagged increment: tag < value is stale; tag == value counts, and the
  // replicas_to_aggregate-th count sets value = tag + 1; tag > value is Aborted (the step was
  // restored under the worker).
  Status SyncStepIncrement(Variable* var, int64_t tag, SyncResult* out);
  // With ps replication on, a tagged PUSH or STEP_INCREMENT whose tag is ahead of the step
  // here first waits up to this many seconds (0: not at all) for the step to get there:
  // the worker read its step from another replica, and this one may still be applying the
  // other workers' requests of the step before (on their own connections). Only then is the
  // tag ahead for real (the rules above). Set by Replication::SetEnabled.
  void SetSyncCatchUp(double seconds) { sync_catch_up_s_.store(seconds); }
  // Waits until the variable's step (global step: value) >= need, at most wait_s seconds, or
  // until abort() is true (polled at least every 50 ms).
  Status SyncWait(Variable* var, int64_t need, double wait_s, const std::function<bool()>& abort,
                  SyncResult* out);
  // True when a gradient tagged `tag` would be dropped as stale (tag below the variable's
  // step, or the global step's value); fills out's step and count either way.
  bool SyncStale(Variable* var, int64_t tag, SyncResult* out);
  // Initialization or restore: step 0, nothing pending (the next push adopts its tag).
  void SyncReset(Variable* var);
  // Wakes every waiter of every sync variable (they re-check their abort predicate).
  void SyncWakeAll();
  // Drops every pending gradient of every sync variable and wakes their waiters.
  void SyncDropAllPending();
  // False when `finished` workers leave fewer than replicas_to_aggregate of some sync
  // variable's total_num_replicas.
  bool SyncCanComplete(size_t finished) const;

  // ---- Hash tables (spec.table; table.h) ---------------------------------------------------
  // Slot `slot` (0: value) of the rows of `ids` into out (n * row bytes), creating missing
  // rows; FailedPrecondition when the table is not initialized.
  Status GatherRows(Variable* var, const int64_t* ids, size_t n, uint8_t slot, uint8_t* out);
  // A page of the table's rows (HashTable::Export).
  Status TableExport(Variable* var, uint64_t cursor, size_t max_rows, std::vector<uint8_t>* out,
                     size_t* n, int64_t* next);
  // Rows written into the table (HashTable::Import); the table becomes initialized.
  Status TableImport(Variable* var, const uint8_t* records, size_t n, bool clear);
  // HashTable::Evict; FailedPrecondition for an uninitialized table.
  Status TableEvict(Variable* var, uint64_t unseen, uint64_t min_count, size_t* evicted);

  // ---- Memory limit (memory_account.h) -----------------------------------------------------
  // 0: none. Set before the server serves. Register and a table's growth reserve their bytes
  // first and are ResourceExhausted (naming the variable, the bytes asked and the limit)
  // before anything is allocated when they would pass it.
  void SetMemoryLimit(uint64_t limit) { memory_.SetLimit(limit); }
  const MemoryAccount& memory() const { return memory_; }

  // Snapshot of every variable, in id order.
  std::vector<Variable*> All() const;
  size_t size() const { return count_.load(std::memory_order_acquire); }

 private:
  // Waits (l held on st->mu, released while waiting) up to sync_catch_up_s_ for step() to
  // reach tag.
  template <typename Step>
  void CatchUp(SyncState* st, std::unique_lock<std::mutex>& l, int64_t tag, Step step) const;
  std::atomic<double> sync_catch_up_s_{0.0};
  // Allocates and publishes a new variable; requires registry_mu_. ResourceExhausted naming
  // the variable and the bytes asked for when memory runs out, and then nothing is registered.
  Status CreateLocked(const VarSpec& spec, Variable** out);
  // Adds a row-sparse gradient (indices checked) into *sum as gradient number `this_grad` of
  // its step. Either all of it is added or, out of memory (ResourceExhausted), nothing changes.
  static Status SumRows(const Variable* var, const int64_t* indices, size_t n, const void* rows,
                        uint32_t this_grad, RowSum* sum);
  // FailedPrecondition unless var has an optimizer and is initialized.
  static Status CheckTrainable(const Variable* var);
  // InvalidArgument unless var is an int64 scalar; FailedPrecondition when uninitialized.
  static Status CheckStepVariable(const Variable* var);
  // ApplySparse; `known_unique`: the caller guarantees no index repeats.
  Status ApplyRows(Variable* var, const int64_t* indices, size_t n, const void* rows, double lr,
                   bool has_lr, bool known_unique);

  static constexpr size_t kChunkBits = 10;
  static constexpr size_t kChunkSize = size_t{1} << kChunkBits;
  static constexpr size_t kMaxChunks = 4096;  // 4M variables per ps task

  std::atomic<std::atomic<Variable*>*> chunks_[kMaxChunks];
  std::atomic<size_t> count_{0};

  MemoryAccount memory_;
  mutable std::mutex registry_mu_;  // guards by_name_, owned_ and appends
  std::unordered_map<std::string, uint32_t> by_name_;
  std::vector<std::unique_ptr<Variable>> owned_;
  std::vector<std::unique_ptr<std::atomic<Variable*>[]>> owned_chunks_;
};

}  // namespace psrt
