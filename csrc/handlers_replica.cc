// Replication ops and rules (wire version 7, docs/protocol.md "Replication"): the flags2 checks,
// the prologue every request to a variable passes on a replicating ps task (reads of an
// awaiting variable answered AWAITING, mutations waiting for its copy and entering its
// replication section, SEQUENCED duplicates answered without being applied), a replicated
// REGISTER, REPLICA_READ and REPLICA_INSTALL.
#include <cstdio>
#include <string>
#include <vector>

#include "connection.h"
#include "handlers.h"
#include "server_impl.h"

namespace psrt {

bool IsMutation(const Header& h) {
  switch (static_cast<Op>(h.op)) {
    case Op::kRegister: return (h.flags & kFlagInit) != 0;
    case Op::kPush:
    case Op::kAssign:
    case Op::kAssignAdd:
    case Op::kStepIncrement:
    case Op::kTableImport:
    case Op::kTableEvict: return true;
    default: return false;
  }
}

namespace {

// Reads that answer AWAITING for an awaiting variable.
bool IsVariableRead(uint8_t op) {
  switch (static_cast<Op>(op)) {
    case Op::kPull:
    case Op::kStepRead:
    case Op::kIsInitialized:
    case Op::kTableExport: return true;
    default: return false;
  }
}

// Mutations of an awaiting variable that do not wait for its copy: the ones that give it a
// value the normal way (ASSIGN of slot 0 or any restore, a restoring TABLE_IMPORT).
bool WritesWithoutCopy(const Header& h) {
  const Op op = static_cast<Op>(h.op);
  return (op == Op::kAssign && (h.slot == 0 || (h.flags & kFlagInit))) ||
         (op == Op::kTableImport && (h.flags & kFlagInit));
}

// The reply to a SEQUENCED request already applied: OK, DUPLICATE, and what the op's reply
// carries (the value for RETURN_VALUE, the step for a step increment, the current step and
// count for a synchronous one); the payload was read and dropped.
bool ReplyDuplicate(ServerImpl& s, Connection* conn, const Header& h, Variable* var) {
  const Op op = static_cast<Op>(h.op);
  if ((h.flags & kFlagStepTagged) && (op == Op::kPush || op == Op::kStepIncrement)) {
    SyncResult sr;
    s.store.SyncStale(var, h.step, &sr);
    return conn->Reply(h, Status::Ok(), sr.step, 0, var->id, nullptr, 0, sr.count,
                       kFlag2Duplicate);
  }
  if (op == Op::kPush && (h.flags & kFlagReturnValue))
    return conn->Reply(h, Status::Ok(), 0, kFlagReturnValue, var->id, var->value.data(),
                       var->nbytes, 0, kFlag2Duplicate);
  if (op == Op::kStepIncrement) {
    int64_t v = 0;
    Status st = s.store.StepRead(var, &v);
    return conn->Reply(h, st, v, 0, var->id, nullptr, 0, 0, st.ok() ? kFlag2Duplicate : 0);
  }
  if (op == Op::kTableEvict)
    return conn->Reply(h, Status::Ok(), static_cast<int64_t>(var->table->rows()), 0, var->id,
                       nullptr, 0, 0, kFlag2Duplicate);
  return conn->Reply(h, Status::Ok(), 0, 0, var->id, nullptr, 0, 0, kFlag2Duplicate);
}

}  // namespace

Status CheckFlags2(ServerImpl& s, const Connection* conn, const Header& h) {
  if (h.flags2 & kFlag2Sequenced) {
    if (!IsMutation(h))
      return InvalidArgument("flags2 SEQUENCED (0x01) is not valid for " + OpName(h.op) +
                             std::string(h.op == static_cast<uint8_t>(Op::kRegister)
                                             ? " without INIT" : "") +
                             "; valid for the mutations: REGISTER with INIT, PUSH, ASSIGN, "
                             "ASSIGN_ADD, STEP_INCREMENT, TABLE_IMPORT, TABLE_EVICT");
    if (conn->client_id == 0)
      return FailedPrecondition("SEQUENCED " + OpName(h.op) + " on a connection whose HELLO "
                                "gave no client id (0): a sequenced request needs one");
  }
  if (h.flags2 & kFlag2Stale) {
    if (h.op != static_cast<uint8_t>(Op::kRegister) || (h.flags & kFlagInit))
      return InvalidArgument("flags2 STALE (0x08) is not valid for " + OpName(h.op) +
                             std::string((h.flags & kFlagInit) ? " with INIT" : "") +
                             "; valid for REGISTER without INIT only");
    if (!s.repl.enabled())
      return FailedPrecondition("STALE REGISTER: replication is off on /job:" + s.options.job +
                                "/task:" + std::to_string(s.options.task) +
                                ", so no copy would ever come");
  }
  return Status::Ok();
}

bool ReplicaPrologue(ServerImpl& s, Connection* conn, const Header& h, Variable* var,
                     SharedSection* section, bool* done) {
  *done = false;
  const bool mutation = IsMutation(h);
  if (var->repl.awaiting.load(std::memory_order_acquire) && IsVariableRead(h.op)) {
    *done = true;
    if (!conn->Discard(h.payload_len).ok()) return false;
    return conn->Reply(h, Status::Ok(), 0, 0, var->id, nullptr, 0, 0, kFlag2Awaiting);
  }
  if (mutation && s.repl.enabled()) {
    // A mutation of a variable awaiting its copy waits for it (not holding the section the
    // install needs); past replica_wait_s it goes on and fails as uninitialized.
    if (var->repl.awaiting.load(std::memory_order_acquire) && !WritesWithoutCopy(h))
      s.repl.WaitWhileAwaiting(var, s.stopping);
    section->Enter(&var->repl);
  }
  if (h.flags2 & kFlag2Sequenced) {
    if (s.repl.IsDuplicate(conn->client_id, h.request_id, var->repl)) {
      *done = true;
      if (!conn->Discard(h.payload_len).ok()) return false;
      return ReplyDuplicate(s, conn, h, var);
    }
    conn->mark_pending = true;
    conn->mark_var = &var->repl;
  }
  return true;
}

void ReplicaEpilogue(ServerImpl& s, Connection* conn, Variable* var) {
  conn->mark_pending = false;
  conn->mark_var = nullptr;
  // An ASSIGN of slot 0 or a restoring TABLE_IMPORT initialized it the normal way.
  if (var != nullptr && var->repl.awaiting.load(std::memory_order_acquire) &&
      var->initialized.load(std::memory_order_acquire))
    s.repl.EndAwaiting(var);
}

bool RegisterReplicated(ServerImpl& s, Connection* conn, const Header& h, const VarSpec& spec,
                        const void* init, bool run_init) {
  Variable* var = nullptr;
  bool created = false;
  Status st = s.store.Register(spec, nullptr, &var, &created);
  if (!st.ok()) return conn->Reply(h, st);
  if (h.flags2 & kFlag2Stale) {
    // The sender missed updates of this ps task: what it holds must be copied again.
    {
      // In the exclusive section, so no mutation is half applied when it stops counting.
      ExclusiveSection section(&var->repl);
      var->initialized.store(false, std::memory_order_release);
      // The copy that ends this must hold what this task applied (replication.h, required).
      Replication::RequireApplied(&var->repl);
      s.repl.SetAwaiting(var);
    }
    return conn->Reply(h, st, 0, 0, var->id, nullptr, 0, 0, kFlag2Awaiting);
  }
  if (init == nullptr && !run_init) {
    if (created && s.repl.enabled()) s.repl.SetAwaiting(var);
    const bool awaiting = var->repl.awaiting.load();
    const uint8_t f = var->initialized.load() ? kFlagInitialized : 0;
    return conn->Reply(h, st, 0, f, var->id, nullptr, 0, 0, awaiting ? kFlag2Awaiting : 0);
  }
  bool ok = true;
  {
    SharedSection section;
    if (s.repl.enabled()) section.Enter(&var->repl);
    if ((h.flags2 & kFlag2Sequenced) &&
        s.repl.IsDuplicate(conn->client_id, h.request_id, var->repl)) {
      const uint8_t f = var->initialized.load() ? kFlagInitialized : 0;
      return conn->Reply(h, st, 0, f, var->id, nullptr, 0, 0, kFlag2Duplicate);
    }
    conn->mark_pending = (h.flags2 & kFlag2Sequenced) != 0;
    conn->mark_var = &var->repl;
    if (run_init) s.store.RunInitializer(var, spec.init);
    else st = s.store.Register(spec, init, &var);
    if (st.ok()) s.sync.ModelWritten(&conn->sync);
    ok = conn->Reply(h, st, 0, var->initialized.load() ? kFlagInitialized : 0, var->id);
  }
  ReplicaEpilogue(s, conn, var);
  return ok;
}

bool HandleReplicaRead(ServerImpl& s, Connection* conn, const Request& r) {
  Variable* var = r.var;
  if (!s.repl.enabled())
    return conn->Reply(r.h, FailedPrecondition(
                                "REPLICA_READ of '" + var->spec.name + "': replication is off "
                                "on /job:" + s.options.job + "/task:" +
                                std::to_string(s.options.task) + ", so its state is not kept "
                                "consistent for copying"));
  Status st = s.repl.Read(var, s.options.max_payload, &conn->out);
  const bool ok = st.ok() ? conn->Reply(r.h, st, 0, 0, var->id, conn->out.data(),
                                        conn->out.size())
                          : conn->Reply(r.h, st, 0, 0, var->id);
  // A copy can be large: the connection does not keep its buffer.
  if (conn->out.capacity() > (size_t{1} << 20)) std::vector<uint8_t>().swap(conn->out);
  return ok;
}

bool HandleReplicaInstall(ServerImpl& s, Connection* conn, const Request& r) {
  return conn->Reply(r.h, s.repl.Install(r.var, r.p, r.h.payload_len), 0, 0, r.var->id);
}

}  // namespace psrt
