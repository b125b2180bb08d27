// SyncLifecycle: a ps task's part in synchronous training (SyncReplicasOptimizer) beyond one
// variable's accumulator (store.h): the sessions connections start, the workers that said
// WORKER_DONE and the end of training they can cause, and the model epoch that tells a
// session the model was initialized or restored under it.
//
// Thread-safe: any connection thread may call any method at once. mu_ guards the sessions,
// the finished workers and the end reason; it is held while asking the store whether the
// finished workers leave enough to complete a step (lock order: mu_, then the store's locks).
// A SyncSession belongs to one connection and is only touched by that connection's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "status.h"
#include "store.h"

namespace psrt {

// One connection's place in synchronous training.
struct SyncSession {
  uint64_t session = 0;  // this connection's HELLO number (0: no session started)
  uint64_t epoch = 0;    // the model epoch its sync requests saw first (0: none)
};

class SyncLifecycle {
 public:
  // `task_name` ("/job:ps/task:0") is what Aborted messages call this ps task. Neither
  // pointer is owned; both outlive this object.
  SyncLifecycle(VariableStore* store, const std::atomic<bool>* stopping, std::string task_name);

  // A request connection of /job:job/task:task starts a new session (after HELLO, or AUTH
  // with a secret): that task counts as running again.
  void BeginSession(const std::string& job, int task, SyncSession* s);
  // WORKER_DONE from /job:job/task:task. When the finished workers leave too few to complete
  // a step, training ends for every session begun so far and pending gradients are dropped.
  void WorkerDone(const std::string& job, uint32_t task);
  // Tasks that sent WORKER_DONE, as (job, task) pairs.
  std::vector<std::pair<std::string, int>> DoneWorkers() const;

  // Training ended for sessions that began before (WorkerDone).
  bool Ended(const SyncSession& s) const;
  // OutOfRange naming the reason once training ended for s; else OK.
  Status CheckOpen(const SyncSession& s) const;

  // The model epoch: bumped by every initialization and restore. A session adopts it at its
  // first synchronous request; Aborted when it changed since (the session must re-read).
  Status CheckModelEpoch(SyncSession* s);
  bool ModelChanged(const SyncSession& s) const;
  // An init or restore through s: the epoch is bumped, s keeps up, waiters re-check.
  void ModelWritten(SyncSession* s);

  // Before a tagged PUSH/STEP_INCREMENT: true when it is answered without being applied:
  // *st is Aborted when the model was initialized or restored by another connection since
  // this one's first synchronous request; after training ended, a stale gradient is OK (not
  // accepted) and a fresh one OutOfRange.
  bool Preamble(SyncSession* s, Variable* var, int64_t tag, SyncResult* out, Status* st);
  // A waiting PULL/STEP_READ: blocks until var's step >= need, at most wait_s seconds, the
  // model changes, training ends or the server stops (then Aborted, OutOfRange, Cancelled).
  Status WaitForStep(SyncSession* s, Variable* var, int64_t need, double wait_s,
                     SyncResult* out);

 private:
  VariableStore* const store_;
  const std::atomic<bool>* const stopping_;
  const std::string task_name_;

  mutable std::mutex mu_;
  std::set<std::pair<std::string, int>> done_;      // every WORKER_DONE so far
  // Workers that finished (WorkerDone) since their last HELLO; when they leave too few to
  // complete a step, sessions numbered <= end_session_ are ended.
  std::set<std::pair<std::string, int>> finished_;
  uint64_t sessions_ = 0;                           // guarded by mu_: sessions so far
  std::atomic<uint64_t> end_session_{0};
  std::atomic<uint64_t> model_epoch_{1};
  std::string end_reason_;                          // guarded by mu_
};

}  // namespace psrt
