// Step ops: STEP_READ (and its wait for a synchronous step) and STEP_INCREMENT (plain, or
// step-tagged in synchronous training), on an int64 scalar such as the global step.
#include <string>

#include "connection.h"
#include "handlers.h"
#include "server_impl.h"

namespace psrt {

bool HandleStepRead(ServerImpl& s, Connection* conn, const Request& r) {
  const Header& h = r.h;
  Variable* var = r.var;
  int64_t v = 0;
  Status st = s.store.StepRead(var, &v);
  if (!st.ok() || !(h.flags & kFlagWaitStep)) return conn->Reply(h, st, v, 0, var->id);
  SyncResult sr;
  st = s.sync.WaitForStep(&conn->sync, var, h.step, h.arg1, &sr);
  return conn->Reply(h, st, sr.step, sr.ready ? 0 : kFlagNotReady, var->id, nullptr, 0,
                     sr.count);
}

bool HandleStepIncrement(ServerImpl& s, Connection* conn, const Request& r) {
  const Header& h = r.h;
  Variable* var = r.var;
  Status st;
  int64_t v = 0;
  if (h.flags & kFlagStepTagged) {
    SyncResult sr;
    st = s.store.SyncCheckStep(var);
    if (!st.ok()) return conn->Reply(h, st, 0, 0, var->id);
    if (s.sync.Preamble(&conn->sync, var, h.step, &sr, &st))
      return conn->Reply(h, st, sr.step, 0, var->id, nullptr, 0, sr.count);
    st = s.store.SyncStepIncrement(var, h.step, &sr);
    return conn->Reply(h, st, sr.step, sr.accepted ? kFlagAccepted : 0, var->id, nullptr, 0,
                       sr.count);
  }
  if (var->is_sync())
    return conn->Reply(h, FailedPrecondition(
                              "global step '" + var->spec.name +
                              "' is advanced by synchronous training (replicas_to_aggregate " +
                              std::to_string(var->spec.replicas_to_aggregate) +
                              "): send step-tagged increments (SyncReplicasOptimizer)"));
  st = s.store.StepIncrement(var, h.step, &v);
  return conn->Reply(h, st, v, 0, var->id);
}

}  // namespace psrt
