// Variable ops: REGISTER, PULL (dense, slot, optimizer state, rows, waiting), PUSH (dense,
// row-sparse, step-tagged), ASSIGN, ASSIGN_ADD, IS_INITIALIZED, on frames read whole.
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "connection.h"
#include "handlers.h"
#include "server_impl.h"

namespace psrt {

bool HandleRegister(ServerImpl& s, Connection* conn, const Request& r) {
  const Header& h = r.h;
  VarSpec spec;
  Reader rd(r.p, h.payload_len);
  Status st = spec.Decode(&rd);
  const void* init = nullptr;
  const bool run_init = st.ok() && (h.flags & kFlagInit) && spec.init.kind != InitKind::kNone;
  if (run_init) {
    // The ps computes the initial value: no value bytes follow the spec.
    if (rd.remaining() != 0)
      st = InvalidArgument("register '" + spec.name + "': " +
                           std::to_string(rd.remaining()) + " bytes after a spec whose "
                           "initializer runs on the ps task; expected none");
  } else if (st.ok() && (h.flags & kFlagInit)) {
    uint64_t want = static_cast<uint64_t>(spec.NumElements()) * DTypeSize(spec.dtype);
    if (rd.remaining() != want)
      st = InvalidArgument("register '" + spec.name + "': initial value of " +
                           std::to_string(rd.remaining()) + " bytes; expected " +
                           std::to_string(want));
    else
      init = rd.cursor();
  } else if (st.ok() && rd.remaining() != 0) {
    st = InvalidArgument("register '" + spec.name + "': " + std::to_string(rd.remaining()) +
                         " unexpected bytes after the spec");
  }
  if (st.ok() && (s.repl.enabled() || h.flags2 != 0))
    return RegisterReplicated(s, conn, h, spec, init, run_init);  // handlers_replica.cc
  Variable* var = nullptr;
  if (st.ok()) st = s.store.Register(spec, init, &var);
  if (!st.ok()) return conn->Reply(h, st);
  if (run_init) s.store.RunInitializer(var, spec.init);
  if (init != nullptr || run_init) s.sync.ModelWritten(&conn->sync);
  uint8_t f = var->initialized.load() ? kFlagInitialized : 0;
  return conn->Reply(h, st, 0, f, var->id);
}

Status RowReplyBuffer(ServerImpl& s, Connection* conn, const Header& h, const Variable* var,
                      size_t row_bytes) {
  // The reply is count x row bytes (ids may repeat), which a small request could make far
  // larger than memory: checked against max_payload before anything is allocated.
  const uint64_t reply_bytes = uint64_t{h.count} * row_bytes;
  if (reply_bytes > s.options.max_payload)
    return Status(Code::kResourceExhausted,
                  "PULL of " + std::to_string(h.count) + " rows of '" + var->spec.name +
                      "': reply of " + std::to_string(reply_bytes) +
                      " bytes exceeds the maximum of " + std::to_string(s.options.max_payload) +
                      " bytes");
  try {
    conn->out.resize(static_cast<size_t>(reply_bytes));
  } catch (const std::bad_alloc&) {
    return Status(Code::kResourceExhausted, "cannot allocate " + std::to_string(reply_bytes) +
                                                " bytes for a row PULL of '" + var->spec.name +
                                                "'");
  }
  return Status::Ok();
}

bool HandlePull(ServerImpl& s, Connection* conn, const Request& r) {
  const Header& h = r.h;
  Variable* var = r.var;
  Status st;
  if (!r.initialized)
    return conn->Reply(h, FailedPrecondition("Attempting to use uninitialized value " +
                                             var->spec.name));
  SyncResult sr;
  if (h.flags & kFlagWaitStep) {
    st = s.sync.WaitForStep(&conn->sync, var, h.step, h.arg1, &sr);
    if (!st.ok()) return conn->Reply(h, st);
    if (!sr.ready)
      return conn->Reply(h, st, sr.step, kFlagNotReady, var->id, nullptr, 0, sr.count);
    if (h.slot == 0)
      return conn->Reply(h, st, sr.step, kFlagInitialized, var->id, var->value.data(),
                         var->nbytes, sr.count);
  }
  if (h.slot == kOptimizerStateSlot) {
    if (var->spec.optimizer != Optimizer::kAdam)
      return conn->Reply(h, InvalidArgument("variable '" + var->spec.name + "' (optimizer " +
                                            OptimizerName(var->spec.optimizer) +
                                            ") has no optimizer state: slot 255 holds "
                                            "Adam's beta powers only"));
    double pw[2];
    {
      std::lock_guard<std::mutex> l(var->mu);
      pw[0] = var->beta1_power;
      pw[1] = var->beta2_power;
    }
    return conn->Reply(h, st, 0, 0, var->id, pw, sizeof pw);
  }
  uint8_t* src = var->SlotData(h.slot);
  if (src == nullptr && !var->table)
    return conn->Reply(h, InvalidArgument("variable '" + var->spec.name + "' has no slot " +
                                          std::to_string(h.slot - 1)));
  if (!r.sparse) return conn->Reply(h, st, 0, kFlagInitialized, var->id, src, var->nbytes);
  if (var->table) return PullTableRows(s, conn, h, var, reinterpret_cast<const int64_t*>(r.p));
  const size_t rows = static_cast<size_t>(var->spec.shape[0]);
  const size_t row_bytes = rows ? var->nbytes / rows : 0;
  const auto* idx = reinterpret_cast<const int64_t*>(r.p);
  // Every index, then the reply's size, is checked before anything is allocated: the
  // reply is count x row bytes (indices may repeat), which a small request could make
  // far larger than memory.
  for (uint32_t j = 0; j < h.count; ++j) {
    int64_t i;
    std::memcpy(&i, idx + j, 8);
    if (i < 0 || static_cast<size_t>(i) >= rows)
      return conn->Reply(h, InvalidArgument("variable '" + var->spec.name + "': index " +
                                            std::to_string(i) + " at position " +
                                            std::to_string(j) + " is out of range [0, " +
                                            std::to_string(rows) + ")"));
  }
  st = RowReplyBuffer(s, conn, h, var, row_bytes);
  if (!st.ok()) return conn->Reply(h, st);
  for (uint32_t j = 0; row_bytes > 0 && j < h.count; ++j) {
    int64_t i;
    std::memcpy(&i, idx + j, 8);
    std::memcpy(conn->out.data() + j * row_bytes, src + static_cast<size_t>(i) * row_bytes,
                row_bytes);
  }
  return conn->Reply(h, st, 0, 0, var->id, conn->out.data(), conn->out.size());
}

bool HandlePush(ServerImpl& s, Connection* conn, const Request& r) {
  const Header& h = r.h;
  Variable* var = r.var;
  const uint8_t* p = r.p;
  const bool sparse = r.sparse;
  Status st;
  const bool has_lr = (h.flags & kFlagHasLr) != 0;
  if (h.flags & kFlagStepTagged) {
    SyncResult sr;
    // The gradient is checked in full first: after training ended a stale one is still
    // answered (dropped), but never one that would have been refused.
    st = s.store.SyncCheckPush(var, sparse, reinterpret_cast<const int64_t*>(p),
                               sparse ? h.count : 0);
    if (!st.ok()) return conn->Reply(h, st, 0, 0, var->id);
    if (s.sync.Preamble(&conn->sync, var, h.step, &sr, &st))
      return conn->Reply(h, st, sr.step, 0, var->id, nullptr, 0, sr.count);
    if (sparse) {
      // An empty row-sparse gradient (count 0, no payload) is legal, as in TF: it counts
      // as this replica's gradient and touches no row.
      st = s.store.SyncPush(var, h.step, true, nullptr, reinterpret_cast<const int64_t*>(p),
                            h.count, p + size_t{h.count} * 8, h.arg0, has_lr, &sr);
    } else {
      st = s.store.SyncPush(var, h.step, false, p, nullptr, 0, nullptr, h.arg0, has_lr, &sr);
    }
    return conn->Reply(h, st, sr.step, sr.accepted ? kFlagAccepted : 0, var->id, nullptr, 0,
                       sr.count);
  }
  if (var->is_sync())
    return conn->Reply(h, FailedPrecondition(
                              "variable '" + var->spec.name +
                              "' is trained synchronously (replicas_to_aggregate " +
                              std::to_string(var->spec.replicas_to_aggregate) +
                              "): push step-tagged gradients (SyncReplicasOptimizer)"));
  if (sparse) {
    const auto* idx = reinterpret_cast<const int64_t*>(p);
    st = s.store.ApplySparse(var, idx, h.count, p + size_t{h.count} * 8, h.arg0, has_lr);
  } else {
    st = s.store.ApplyDense(var, p, h.arg0, has_lr);
  }
  if (st.ok() && (h.flags & kFlagReturnValue))
    return conn->Reply(h, st, 0, kFlagReturnValue, var->id, var->value.data(), var->nbytes);
  return conn->Reply(h, st, 0, 0, var->id);
}

bool HandleAssign(ServerImpl& s, Connection* conn, const Request& r) {
  const Header& h = r.h;
  Variable* var = r.var;
  Status st = s.store.Assign(var, h.slot, r.p, h.payload_len);
  // A restore (kFlagInit) starts the variable's synchronous state afresh.
  if (st.ok() && h.slot == 0 && (h.flags & kFlagInit)) {
    s.store.SyncReset(var);
    s.sync.ModelWritten(&conn->sync);
  }
  return conn->Reply(h, st, 0, 0, var->id);
}

bool HandleAssignAdd(ServerImpl& s, Connection* conn, const Request& r) {
  return conn->Reply(r.h, s.store.AssignAdd(r.var, r.p, r.h.payload_len), 0, 0, r.var->id);
}

bool HandleIsInitialized(ServerImpl& s, Connection* conn, const Request& r) {
  return conn->Reply(r.h, Status::Ok(), 0, r.initialized ? kFlagInitialized : 0, r.var->id);
}

}  // namespace psrt
