// Streamed frames: a dense PUSH, an ASSIGN or a REGISTER's initial value larger than one
// chunk (chunk_bytes) is checked before a byte of it is read, then read through the in-flight
// budget and applied chunk by chunk as it arrives: no frame size limit caps a variable.
#include <algorithm>
#include <string>
#include <vector>

#include "connection.h"
#include "handlers.h"
#include "net.h"
#include "replication.h"
#include "server_impl.h"

namespace psrt {

namespace {
// The longest REGISTER spec: name, rank and dims, the fixed fields (docs/protocol.md).
constexpr size_t kMaxSpecBytes = 2 + kMaxNameLength + 2 + 8 * kMaxRank + 3 + 64;
}  // namespace

namespace {

Status NotSync(const Variable* var) {
  if (!var->is_sync()) return Status::Ok();
  return FailedPrecondition("variable '" + var->spec.name +
                            "' is trained synchronously (replicas_to_aggregate " +
                            std::to_string(var->spec.replicas_to_aggregate) +
                            "): push step-tagged gradients (SyncReplicasOptimizer)");
}

// An ATOMIC push (version 6): every chunk is held in the in-flight budget until the last one
// is in, then the gradient is applied; a push that breaks off changes nothing (not even
// Adam's beta powers).
bool AtomicPush(ServerImpl& s, Connection* conn, const Header& h, Variable* var) {
  const size_t chunk = s.budget.chunk();
  const size_t elem = DTypeSize(var->spec.dtype);
  const size_t count = static_cast<size_t>((h.payload_len + chunk - 1) / chunk);
  if (uint64_t{count} * chunk > s.budget.capacity()) {
    // It can never fit: answer, then close instead of reading it all.
    conn->Reply(h, Status(Code::kResourceExhausted,
                          "atomic PUSH of '" + var->spec.name + "': " +
                              std::to_string(h.payload_len) + " bytes (" +
                              std::to_string(count) + " chunks of " + std::to_string(chunk) +
                              ") exceed the in-flight budget of " +
                              std::to_string(s.budget.capacity()) +
                              " bytes (max_inflight_bytes); raise it or push non-atomically"));
    return false;
  }
  std::vector<uint8_t*> bufs;
  if (!s.budget.AcquireChunks(count, &bufs, [&s] { return s.stopping.load(); })) return false;
  struct Lease {
    Budget* budget;
    std::vector<uint8_t*>* bufs;
    ~Lease() { budget->ReleaseChunks(bufs); }
  } lease{&s.budget, &bufs};
  for (size_t i = 0; i < count; ++i) {
    const size_t len =
        static_cast<size_t>(std::min<uint64_t>(chunk, h.payload_len - uint64_t{i} * chunk));
    Status st = ReadFullWithin(conn->fd, bufs[i], len, conn->peer, s.options.stall_timeout_s);
    if (!st.ok()) {
      if (st.code() == Code::kDeadlineExceeded) s.events.Add("dropped " + st.message());
      return false;
    }
  }
  // Every byte is in: checked and applied now (the checks ran before the read for a
  // streamed push; here a refused gradient costs its transfer, and changes nothing).
  KernelArgs& args = conn->stream_args;
  Status st = NotSync(var);
  if (st.ok()) st = s.store.BeginDense(var, h.arg0, (h.flags & kFlagHasLr) != 0, &args);
  if (!st.ok()) return conn->Reply(h, st, 0, 0, var->id);
  for (size_t i = 0; i < count; ++i) {
    const size_t len =
        static_cast<size_t>(std::min<uint64_t>(chunk, h.payload_len - uint64_t{i} * chunk));
    s.store.ApplyDenseRange(var, args, bufs[i], i * (chunk / elem), len / elem);
  }
  if (h.flags & kFlagReturnValue)
    return conn->Reply(h, st, 0, kFlagReturnValue, var->id, var->value.data(), var->nbytes);
  return conn->Reply(h, st, 0, 0, var->id);
}

}  // namespace

bool StreamPush(ServerImpl& s, Connection* conn, const Header& h, Variable* var) {
  if (h.flags & kFlagAtomic) return AtomicPush(s, conn, h, var);
  // Checked before a byte is read, as for a whole frame; then every chunk is applied as soon
  // as it is in, while the next one arrives in the socket buffer.
  KernelArgs& args = conn->stream_args;
  Status st = NotSync(var);
  if (st.ok()) st = s.store.BeginDense(var, h.arg0, (h.flags & kFlagHasLr) != 0, &args);
  if (!st.ok()) {
    if (!conn->Discard(h.payload_len).ok()) return false;
    return conn->Reply(h, st);
  }
  const size_t elem = DTypeSize(var->spec.dtype);
  if (!conn->ReadChunks(h.payload_len, elem, [&](const uint8_t* g, uint64_t at, size_t len) {
        s.store.ApplyDenseRange(var, args, g, static_cast<size_t>(at / elem), len / elem);
      }))
    return false;
  if (h.flags & kFlagReturnValue)
    return conn->Reply(h, st, 0, kFlagReturnValue, var->id, var->value.data(), var->nbytes);
  return conn->Reply(h, st, 0, 0, var->id);
}

bool StreamAssign(ServerImpl& s, Connection* conn, const Header& h, Variable* var) {
  if (var->SlotData(h.slot) == nullptr) {
    if (!conn->Discard(h.payload_len).ok()) return false;
    return conn->Reply(h, InvalidArgument("variable '" + var->spec.name + "' has " +
                                          std::to_string(var->slots.size()) +
                                          " optimizer slots; slot index " +
                                          std::to_string(h.slot - 1) + " does not exist"));
  }
  if (!conn->ReadChunks(h.payload_len, DTypeSize(var->spec.dtype),
                        [&](const uint8_t* b, uint64_t at, size_t len) {
                          (void)s.store.AssignRange(var, h.slot, b, static_cast<size_t>(at), len);
                        }))
    return false;
  if (h.slot == 0) {
    s.store.MarkInitialized(var);
    if (h.flags & kFlagInit) {  // a restore starts the synchronous state afresh
      s.store.SyncReset(var);
      s.sync.ModelWritten(&conn->sync);
    }
  }
  return conn->Reply(h, Status::Ok(), 0, 0, var->id);
}

bool StreamRegister(ServerImpl& s, Connection* conn, const Header& h) {
  // The spec first (at most kMaxSpecBytes), then the initial value straight into the
  // variable's memory; it is initialized only once every byte is in.
  const size_t head = static_cast<size_t>(std::min<uint64_t>(h.payload_len, kMaxSpecBytes));
  uint8_t* p = conn->Small();
  if (p == nullptr) return false;
  if (!ReadFullWithin(conn->fd, p, head, conn->peer, s.options.stall_timeout_s).ok()) return false;
  VarSpec spec;
  Reader r(p, head);
  Status st = spec.Decode(&r);
  if (st.ok() && spec.init.kind != InitKind::kNone)
    st = InvalidArgument("register '" + spec.name + "': a spec whose initializer runs on the "
                         "ps task carries no value bytes; got " +
                         std::to_string(h.payload_len - (head - r.remaining())));
  const size_t spec_len = head - r.remaining();
  const uint64_t want = st.ok() ? static_cast<uint64_t>(spec.NumElements()) * DTypeSize(spec.dtype)
                                : 0;
  if (st.ok() && h.payload_len - spec_len != want)
    st = InvalidArgument("register '" + spec.name + "': initial value of " +
                         std::to_string(h.payload_len - spec_len) + " bytes; expected " +
                         std::to_string(want));
  Variable* var = nullptr;
  if (st.ok()) st = s.store.Register(spec, nullptr, &var);
  if (!st.ok()) {
    if (h.payload_len - head > s.options.max_payload) {
      conn->Reply(h, st);
      return false;
    }
    if (!conn->Discard(h.payload_len - head).ok()) return false;
    return conn->Reply(h, st);
  }
  // Replication (handlers_replica.cc): the value is written in the variable's section, once.
  SharedSection section;
  const bool replica_rules = s.repl.enabled() || h.flags2 != 0;
  if (replica_rules) {
    if (s.repl.enabled()) section.Enter(&var->repl);
    if ((h.flags2 & kFlag2Sequenced) &&
        s.repl.IsDuplicate(conn->client_id, h.request_id, var->repl)) {
      if (!conn->Discard(h.payload_len - head).ok()) return false;
      return conn->Reply(h, Status::Ok(), 0, var->initialized.load() ? kFlagInitialized : 0,
                         var->id, nullptr, 0, 0, kFlag2Duplicate);
    }
    conn->mark_pending = (h.flags2 & kFlag2Sequenced) != 0;
    conn->mark_var = &var->repl;
  }
  // What the spec prefix already holds of the value, then the rest in chunks.
  const size_t have = r.remaining();
  (void)s.store.AssignRange(var, 0, r.cursor(), 0, have);
  if (!conn->ReadChunks(want - have, DTypeSize(spec.dtype),
                        [&](const uint8_t* b, uint64_t at, size_t len) {
                          (void)s.store.AssignRange(var, 0, b, static_cast<size_t>(have + at),
                                                    len);
                        }))
    return false;
  s.store.FinishInit(var);
  s.sync.ModelWritten(&conn->sync);
  const bool ok = conn->Reply(h, Status::Ok(), 0, kFlagInitialized, var->id);
  if (replica_rules) ReplicaEpilogue(s, conn, var);
  return ok;
}

}  // namespace psrt
