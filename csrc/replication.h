// Replication: a ps task's part in ps replication (wire version 7, docs/protocol.md
// "Replication"). A shard's variables live on two ps tasks; every worker writes each mutation to
// both with the same request id, flagged SEQUENCED. This file holds what a ps task keeps for
// that:
//  - the marks: per variable and client id, the highest request id of a SEQUENCED request it
//    applied to that variable (VarReplication::applied), so a request seen again is a
//    DUPLICATE (answered, not applied); the task-wide table (Marks(), Server.marks()) is the
//    same per client over all variables, kept for inspection;
//  - per variable (VarReplication, a member of Variable): the replication section, a shared
//    mutex that every mutation holds shared for its whole application (only while replication
//    is on: off, no lock is taken) and REPLICA_READ / REPLICA_INSTALL hold exclusive, so a
//    snapshot never sees half of a request and its marks say exactly which requests it holds;
//    the awaiting state (a variable registered without a value, or marked STALE, waits for a
//    copy: mutations wait for it, reads answer AWAITING); the install marks (a copy's marks:
//    the requests already in it);
//  - the ReplicaState record (encode under the exclusive section, check in full, then install).
//
// Thread-safety: every method may be called from any connection thread at once. marks_mu_
// guards the marks; await_mu_ the awaiting transitions and their condition variable. Lock
// order: a variable's section, then marks_mu_ / the variable's own locks (Variable::mu, its
// SyncState::mu, its table's mutex); await_mu_ is never held while another is taken. Nothing
// here calls Python.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "status.h"

namespace psrt {

struct Variable;
class VariableStore;

// (client id, request id).
using Mark = std::pair<uint64_t, uint64_t>;

// One variable's replication state (Variable::repl).
struct VarReplication {
  // The replication section: shared for a mutation, exclusive for REPLICA_READ/INSTALL and a
  // STALE REGISTER. glibc's rwlock prefers readers, so an exclusive holder first takes `gate`
  // and sets `draining`: a mutation that sees draining queues at the gate instead of taking
  // the section, and the exclusive holder gets it once the mutations already inside end.
  std::shared_mutex mu;
  std::mutex gate;
  std::atomic<bool> draining{false};
  // Awaiting a copy (see Replication::SetAwaiting); changes under Replication::await_mu_.
  std::atomic<bool> awaiting{false};
  // The marks of the last ReplicaState installed, sorted by client id; read in a section,
  // written only in the exclusive one.
  std::vector<Mark> install_marks;
  // Per client, the highest SEQUENCED request id applied to this variable here (sorted by
  // client id; guarded by applied_mu: mutations complete in the shared section).
  mutable std::mutex applied_mu;
  std::vector<Mark> applied;
  // What a copy must hold before it may be installed (sorted by client id; written and read
  // in the exclusive section): a STALE REGISTER sets it to `applied`, since a request this
  // task applied may not have reached the other replica yet when it is read, and installing
  // a copy without it would lose it here. Cleared by an install.
  std::vector<Mark> required;
};

// A mutation's hold on a variable's section: shared, or nothing when replication is off.
class SharedSection {
 public:
  SharedSection() = default;
  SharedSection(const SharedSection&) = delete;
  SharedSection& operator=(const SharedSection&) = delete;
  ~SharedSection() {
    if (r_ != nullptr) r_->mu.unlock_shared();
  }
  // Blocks while an exclusive holder drains the section, then enters shared. Once only.
  void Enter(VarReplication* r) {
    if (r->draining.load(std::memory_order_acquire)) std::lock_guard<std::mutex> g(r->gate);
    r->mu.lock_shared();
    r_ = r;
  }
  bool held() const { return r_ != nullptr; }

 private:
  VarReplication* r_ = nullptr;
};

// The exclusive hold (REPLICA_READ, REPLICA_INSTALL, STALE): blocks until the mutations
// inside have ended; new ones wait until it is released.
class ExclusiveSection {
 public:
  explicit ExclusiveSection(VarReplication* r) : r_(r), gate_(r->gate) {
    r_->draining.store(true, std::memory_order_release);
    r_->mu.lock();
  }
  ~ExclusiveSection() {
    r_->mu.unlock();
    r_->draining.store(false, std::memory_order_release);
  }
  ExclusiveSection(const ExclusiveSection&) = delete;
  ExclusiveSection& operator=(const ExclusiveSection&) = delete;

 private:
  VarReplication* r_;
  std::lock_guard<std::mutex> gate_;
};

class Replication {
 public:
  // The marks of at most this many clients are kept; past it the least recently used one is
  // dropped (a request of that client seen again would then be applied again).
  static constexpr size_t kMaxClients = 4096;
  // The ReplicaState record's format: the wire version that defined it.
  static constexpr uint16_t kStateFormat = 7;
  static constexpr uint32_t kStateTag = 0x53525350;  // "PSRS" as little-endian bytes
  // How long a tagged request ahead of a replica's step waits for it (VariableStore::
  // SetSyncCatchUp), seconds.
  static constexpr double kSyncCatchUpSeconds = 1.0;

  // Off by default: no section is taken, no variable awaits. Turned on before serving (a
  // mutation already under way when it turns on holds no section). Turning it off ends every
  // awaiting state (waiting mutations proceed).
  void SetEnabled(bool on, VariableStore* store);
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  // How long a mutation of an awaiting variable waits for its copy (seconds, default 30).
  // InvalidArgument outside [0, 3600].
  Status SetWaitSeconds(double s);
  double wait_seconds() const { return wait_s_.load(std::memory_order_relaxed); }

  // ---- Marks ---------------------------------------------------------------------------
  // True when request `id` of `client` is already applied to `var` here (id <= var's applied
  // mark of client) or in the copy it holds (id <= its install mark). Requires var's section.
  bool IsDuplicate(uint64_t client, uint64_t id, const VarReplication& var) const;
  // mark[client] = max(mark[client], id); the client becomes the most recently used. With
  // `var` (the variable the request applied to, in its section) its `applied` mark too.
  void Complete(uint64_t client, uint64_t id, VarReplication* var = nullptr);
  // var.required = max(var.required, var.applied) per client: a STALE REGISTER's (in var's
  // exclusive section).
  static void RequireApplied(VarReplication* var);
  // Every (client, mark), sorted by client.
  std::vector<Mark> Marks() const;

  // ---- Awaiting a copy -----------------------------------------------------------------
  // The variable awaits a copy (it is also marked uninitialized by the caller when STALE).
  void SetAwaiting(Variable* var);
  // It was installed or initialized: it awaits no more; waiting mutations wake.
  void EndAwaiting(Variable* var);
  // Blocks while var awaits, at most wait_seconds() or until `stopping`; true when it awaits
  // no more.
  bool WaitWhileAwaiting(Variable* var, const std::atomic<bool>& stopping);
  // Names of the awaiting variables, in id order (cheap when none awaits).
  std::vector<std::string> AwaitingNames(const VariableStore& store) const;

  // ---- ReplicaState (docs/protocol.md, "ReplicaState") -----------------------------------
  // Everything the store holds for var, with the marks, under its exclusive section:
  // FailedPrecondition when it holds no value (uninitialized or awaiting), ResourceExhausted
  // naming it when the record would pass max_bytes or memory.
  Status Read(Variable* var, uint64_t max_bytes, std::vector<uint8_t>* out);
  // Checks the whole record against var (same name, dtype, shape, optimizer, synchronous and
  // table settings: InvalidArgument naming both otherwise; every count, index and length),
  // then, under var's exclusive section, writes value, slots, optimizer state, synchronous
  // state or table rows and the install marks; var becomes initialized and awaits no more.
  // A refused record changes nothing. FailedPrecondition when replication is off;
  // Unavailable when the copy's marks are below var's `required` ones (the other replica has
  // not applied yet a request this task did: read it again shortly).
  Status Install(Variable* var, const uint8_t* p, size_t n);

 private:
  std::atomic<bool> enabled_{false};
  std::atomic<double> wait_s_{30.0};

  struct Entry {
    uint64_t mark = 0;
    std::list<uint64_t>::iterator lru;  // its place in lru_
  };
  mutable std::mutex marks_mu_;
  std::unordered_map<uint64_t, Entry> marks_;  // guarded by marks_mu_
  std::list<uint64_t> lru_;                    // client ids, most recently used first

  mutable std::mutex await_mu_;
  std::condition_variable await_cv_;
  std::atomic<size_t> num_awaiting_{0};
};

}  // namespace psrt
