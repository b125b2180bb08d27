#include "sync_lifecycle.h"

namespace psrt {

SyncLifecycle::SyncLifecycle(VariableStore* store, const std::atomic<bool>* stopping,
                             std::string task_name)
    : store_(store), stopping_(stopping), task_name_(std::move(task_name)) {}

void SyncLifecycle::BeginSession(const std::string& job, int task, SyncSession* s) {
  std::lock_guard<std::mutex> l(mu_);
  s->session = ++sessions_;
  finished_.erase({job, task});
}

void SyncLifecycle::WorkerDone(const std::string& job, uint32_t task) {
  bool end = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    done_.emplace(job, static_cast<int>(task));
    finished_.emplace(job, static_cast<int>(task));
    if (!store_->SyncCanComplete(finished_.size())) {
      // Too few workers remain to complete a step: end it for every session so far.
      end = true;
      end_reason_ = "/job:" + job + "/task:" + std::to_string(task) +
                    " finished, and the " + std::to_string(finished_.size()) +
                    " finished worker(s) leave too few to aggregate a step";
      end_session_.store(sessions_);
    }
  }
  if (end) store_->SyncDropAllPending();
}

std::vector<std::pair<std::string, int>> SyncLifecycle::DoneWorkers() const {
  std::lock_guard<std::mutex> l(mu_);
  return {done_.begin(), done_.end()};
}

bool SyncLifecycle::Ended(const SyncSession& s) const {
  return s.session <= end_session_.load();
}

Status SyncLifecycle::CheckOpen(const SyncSession& s) const {
  if (!Ended(s)) return Status::Ok();
  std::lock_guard<std::mutex> l(mu_);
  return Status(Code::kOutOfRange, "synchronous training ended: " + end_reason_);
}

bool SyncLifecycle::ModelChanged(const SyncSession& s) const {
  return s.epoch != 0 && s.epoch != model_epoch_.load();
}

Status SyncLifecycle::CheckModelEpoch(SyncSession* s) {
  if (s->epoch == 0) s->epoch = model_epoch_.load();
  if (!ModelChanged(*s)) return Status::Ok();
  return Status(Code::kAborted,
                "the model on " + task_name_ +
                    " was initialized or restored (by another session) after this session "
                    "read it; the session must read it again");
}

void SyncLifecycle::ModelWritten(SyncSession* s) {
  s->epoch = ++model_epoch_;
  store_->SyncWakeAll();
}

bool SyncLifecycle::Preamble(SyncSession* s, Variable* var, int64_t tag, SyncResult* out,
                             Status* st) {
  *st = CheckModelEpoch(s);
  if (!st->ok()) return true;
  if (!Ended(*s)) return false;
  // A stale gradient is dropped as always (the step it belongs to completed, and the
  // session's wait for that step must still be answered); a fresh one can no longer count.
  if (!store_->SyncStale(var, tag, out)) *st = CheckOpen(*s);
  return true;
}

Status SyncLifecycle::WaitForStep(SyncSession* s, Variable* var, int64_t need, double wait_s,
                                  SyncResult* out) {
  PSRT_RETURN_IF_ERROR(CheckModelEpoch(s));
  // A step already reached is answered even after training ended: only a wait that cannot
  // complete any more is ended (SyncWait checks readiness before the abort predicate).
  Status st = store_->SyncWait(
      var, need, wait_s,
      [this, s] { return stopping_->load() || Ended(*s) || ModelChanged(*s); }, out);
  if (st.ok() && out->aborted) st = CheckModelEpoch(s);
  if (st.ok() && out->aborted) st = CheckOpen(*s);
  if (st.ok() && out->aborted) st = Status(Code::kCancelled, "the ps task is stopping");
  return st;
}

}  // namespace psrt
