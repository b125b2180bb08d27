// Dispatch: a request frame's checks against its op and variable, its payload read (whole, or
// streamed), and the call of its op's handler (handlers.h).
#include <climits>
#include <cstdio>
#include <cstring>

#include "connection.h"
#include "handlers.h"
#include "net.h"
#include "replication.h"
#include "server_impl.h"

namespace psrt {

std::string OpName(uint8_t op) {
  static const char* names[] = {"?",    "HELLO",      "REGISTER",       "PULL",
                                "PUSH", "ASSIGN",     "ASSIGN_ADD",     "STEP_READ",
                                "STEP_INCREMENT", "IS_INITIALIZED", "LIST", "PING",
                                "WORKER_DONE", "AUTH", "TABLE_EXPORT", "TABLE_IMPORT",
                                "TABLE_EVICT", "CLUSTER_INFO", "REPLICA_READ",
                                "REPLICA_INSTALL"};
  static_assert(sizeof names / sizeof names[0] == kMaxOp + 1, "a name for every op");
  return op <= kMaxOp ? names[op] : "op " + std::to_string(op);
}

namespace {

// What a frame's payload may be: exactly `bytes`, or at most `bytes` when !exact.
struct PayloadBound {
  uint64_t bytes = 0;
  bool exact = true;
};

// Step 1 of an op: finds and checks the variable the frame addresses (ops that have one) and
// bounds its payload, before a byte of it is read. A non-OK status is the frame's answer.
using Bound = Status (*)(ServerImpl& s, const Header& h, Variable** var, PayloadBound* b);

// WORKER_DONE: a job name.
Status JobNameBound(ServerImpl& s, const Header& h, Variable** var, PayloadBound* b) {
  *b = {kMaxJobName, false};
  return Status::Ok();
}

// HELLO: a HelloRecord (version 6).
Status HelloBound(ServerImpl& s, const Header& h, Variable** var, PayloadBound* b) {
  *b = {kMaxHelloPayload, false};
  return Status::Ok();
}

// AUTH: the worker's nonce and proof.
Status ProofBound(ServerImpl& s, const Header& h, Variable** var, PayloadBound* b) {
  *b = {2 * kNonceSize, true};
  return Status::Ok();
}

// LIST, PING, CLUSTER_INFO.
Status NoPayload(ServerImpl& s, const Header& h, Variable** var, PayloadBound* b) {
  *b = {0, true};
  return Status::Ok();
}

Status RegisterBound(ServerImpl& s, const Header& h, Variable** var, PayloadBound* b) {
  // With an initial value the spec fixes the exact length (checked as it is read).
  *b = {(h.flags & kFlagInit) ? kMaxStreamPayload : s.options.max_payload, false};
  return Status::Ok();
}

// Every op addressed to a variable (h.var_id): it exists, it is a table for table ops and
// not for dense access, the dtype matches, and the flags fit the op.
Status VariableBound(ServerImpl& s, const Header& h, Variable** out, PayloadBound* b) {
  const Op op = static_cast<Op>(h.op);
  const bool sparse = (h.flags & kFlagSparse) != 0;
  Variable* var = nullptr;
  *b = {0, true};
  Status st = s.store.Find(h.var_id, &var);
  *out = var;
  if (!st.ok()) return st;
  const size_t dsize = DTypeSize(var->spec.dtype);
  const size_t rows = var->spec.shape.empty() ? 0 : static_cast<size_t>(var->spec.shape[0]);
  const size_t width = var->table ? var->table->row_elements()
                       : rows == 0 ? 0 : var->num_elements / rows;
  const bool table_op =
      op == Op::kTableExport || op == Op::kTableImport || op == Op::kTableEvict;
  if (table_op && !var->table) {
    return InvalidArgument(OpName(h.op) + " of '" + var->spec.name +
                           "': it is a variable, not a hash table");
  }
  // (Adam's beta powers, slot 255, are the table's as a variable's: dense access works.)
  const bool state = h.slot == kOptimizerStateSlot;
  if (var->table && ((op == Op::kPush && !sparse) || (op == Op::kAssign && !state) ||
                     op == Op::kAssignAdd || (op == Op::kPull && !sparse && !state))) {
    return InvalidArgument(std::string(sparse ? "" : "dense ") + OpName(h.op) +
                           " of hash table '" + var->spec.name +
                           "': a table's rows are addressed by id (row-sparse PULL and "
                           "PUSH, TABLE_EXPORT, TABLE_IMPORT)");
  }
  if ((op == Op::kTableImport) && h.dtype != static_cast<uint8_t>(var->spec.dtype)) {
    return InvalidArgument(std::string("dtype ") + DTypeName(static_cast<DType>(h.dtype)) +
                           " does not match table '" + var->spec.name + "' of dtype " +
                           DTypeName(var->spec.dtype));
  }
  if ((op == Op::kPush || op == Op::kAssign || op == Op::kAssignAdd) &&
      h.dtype != static_cast<uint8_t>(var->spec.dtype)) {
    return InvalidArgument(std::string("dtype ") + DTypeName(static_cast<DType>(h.dtype)) +
                           " does not match variable '" + var->spec.name + "' of dtype " +
                           DTypeName(var->spec.dtype));
  }
  if (sparse && op != Op::kPull && op != Op::kPush) {
    return InvalidArgument("the sparse flag is only valid for PULL and PUSH");
  }
  if ((h.flags & kFlagWaitStep) &&
      ((op != Op::kPull && op != Op::kStepRead) || sparse ||
       !(h.arg1 >= 0.0 && h.arg1 <= kMaxWaitSeconds))) {
    return InvalidArgument("the wait flag is only valid for dense PULL and STEP_READ, with a "
                           "wait of 0.." + std::to_string(static_cast<int>(kMaxWaitSeconds)) +
                           " s; got " + OpName(h.op) + " with " + std::to_string(h.arg1) +
                           " s");
  }
  if ((h.flags & kFlagStepTagged) && op != Op::kPush && op != Op::kStepIncrement) {
    return InvalidArgument("the step-tag flag is only valid for PUSH and STEP_INCREMENT");
  }
  if (sparse && var->spec.shape.empty()) {
    return InvalidArgument("row-sparse access to scalar variable '" + var->spec.name + "'");
  }
  if (op == Op::kPull) {
    b->bytes = sparse ? uint64_t{h.count} * 8 : 0;
  } else if (op == Op::kPush) {
    b->bytes = sparse ? uint64_t{h.count} * (8 + width * dsize) : var->nbytes;
  } else if (op == Op::kAssign) {
    b->bytes = h.slot == kOptimizerStateSlot ? 16 : var->nbytes;
  } else if (op == Op::kAssignAdd) {
    b->bytes = var->nbytes;
  } else if (op == Op::kTableImport) {
    b->bytes = uint64_t{h.count} * var->table->record_bytes();
  } else if (op == Op::kReplicaInstall) {
    *b = {s.options.max_payload, false};  // a ReplicaState, checked in full once read
  } else if (op == Op::kTableEvict &&
             !(h.arg0 >= 0 && h.arg0 <= 9e18 && h.arg1 >= 0 && h.arg1 <= 9e18)) {
    return InvalidArgument("TABLE_EVICT of '" + var->spec.name + "': thresholds " +
                           std::to_string(h.arg0) + " and " + std::to_string(h.arg1) +
                           " must be >= 0 (0: rule off)");
  }
  return Status::Ok();
}

struct OpEntry {
  Op op;
  Bound bound;
  Handler handle;
};

// Indexed by op code - 1.
constexpr OpEntry kOps[] = {
    {Op::kHello, HelloBound, HandleHello},
    {Op::kRegister, RegisterBound, HandleRegister},
    {Op::kPull, VariableBound, HandlePull},
    {Op::kPush, VariableBound, HandlePush},
    {Op::kAssign, VariableBound, HandleAssign},
    {Op::kAssignAdd, VariableBound, HandleAssignAdd},
    {Op::kStepRead, VariableBound, HandleStepRead},
    {Op::kStepIncrement, VariableBound, HandleStepIncrement},
    {Op::kIsInitialized, VariableBound, HandleIsInitialized},
    {Op::kList, NoPayload, HandleList},
    {Op::kPing, NoPayload, HandlePing},
    {Op::kWorkerDone, JobNameBound, HandleWorkerDone},
    {Op::kAuth, ProofBound, HandleAuth},
    {Op::kTableExport, VariableBound, HandleTableExport},
    {Op::kTableImport, VariableBound, HandleTableImport},
    {Op::kTableEvict, VariableBound, HandleTableEvict},
    {Op::kClusterInfo, NoPayload, HandleClusterInfo},
    {Op::kReplicaRead, VariableBound, HandleReplicaRead},
    {Op::kReplicaInstall, VariableBound, HandleReplicaInstall},
};
static_assert(sizeof kOps / sizeof kOps[0] == kMaxOp, "an entry for every op");

constexpr bool IndexedByOpCode() {
  for (size_t i = 0; i < sizeof kOps / sizeof kOps[0]; ++i)
    if (static_cast<size_t>(kOps[i].op) != i + 1) return false;
  return true;
}
static_assert(IndexedByOpCode(), "kOps[i] must be op code i + 1");

}  // namespace

bool Dispatch(ServerImpl& s, Connection* conn, const Header& h) {
  // Connection::Serve's CheckHeader lets ops 1..kMaxOp through only; this is a backstop.
  if (h.op == 0 || h.op > kMaxOp) {
    conn->Reply(h, InvalidArgument("unknown op " + std::to_string(h.op)));
    return false;
  }
  const OpEntry& entry = kOps[h.op - 1];
  const Op op = entry.op;
  const bool sparse = (h.flags & kFlagSparse) != 0;
  Variable* var = nullptr;

  // 1. Check the payload length against what this op and variable allow, before reading it.
  PayloadBound bound;
  Status st = entry.bound(s, h, &var, &bound);
  const uint64_t expect = bound.bytes;
  const bool exact = bound.exact;
  if (st.ok() && (h.flags & ~AllowedFlags(h.op)) != 0) {
    char buf[8];
    snprintf(buf, sizeof buf, "0x%02x", h.flags & ~AllowedFlags(h.op));
    st = InvalidArgument("flags " + std::string(buf) + " are not valid for " + OpName(h.op) +
                         " (docs/protocol.md, Flags)");
  }
  if (st.ok() && h.flags2 != 0) st = CheckFlags2(s, conn, h);
  if (st.ok() && sparse && h.slot == kOptimizerStateSlot)
    st = InvalidArgument("the optimizer state (slot 255) has no rows: a sparse " + OpName(h.op) +
                         " cannot address it");
  if (st.ok() && (h.flags & kFlagStepTagged) && (h.step < 0 || h.step == INT64_MAX))
    st = InvalidArgument("step tag " + std::to_string(h.step) + " is out of range [0, " +
                         std::to_string(INT64_MAX - 1) + "]");
  if (st.ok() && (exact ? h.payload_len != expect : h.payload_len > expect)) {
    st = InvalidArgument(OpName(h.op) +
                         (var ? " of '" + var->spec.name + "' " + DTypeName(var->spec.dtype) +
                                    var->ShapeString()
                              : std::string()) +
                         ": payload of " + std::to_string(h.payload_len) + " bytes; expected " +
                         (exact ? "" : "at most ") + std::to_string(expect));
  }
  // Frames bigger than a chunk that the server can apply piece by piece are streamed; every
  // other frame is read whole first, so it must fit max_payload (and the budget).
  const bool big = h.payload_len > s.options.chunk_bytes;
  const bool tagged = (h.flags & kFlagStepTagged) != 0;
  const bool streamed =
      st.ok() && big &&
      ((op == Op::kPush && !sparse && !tagged) ||
       (op == Op::kAssign && h.slot != kOptimizerStateSlot) ||
       (op == Op::kRegister && (h.flags & kFlagInit)));
  if (st.ok() && !streamed && h.payload_len > s.options.max_payload) {
    // Too big to read whole; the stream cannot be kept in step cheaply: answer, then close.
    conn->Reply(h, Status(Code::kResourceExhausted,
                          OpName(h.op) + (var ? " of '" + var->spec.name + "'" : std::string()) +
                              ": payload of " + std::to_string(h.payload_len) +
                              " bytes exceeds the maximum of " +
                              std::to_string(s.options.max_payload) +
                              " bytes for a frame read whole (max_payload, max_inflight_bytes)"));
    return false;
  }
  if (!st.ok()) {
    // Keep the stream in step when the length is plausible; otherwise drop the connection.
    if (h.payload_len > s.options.max_payload) {
      conn->Reply(h, st);
      return false;
    }
    if (!conn->Discard(h.payload_len).ok()) return false;
    return conn->Reply(h, st);
  }
  // Version 7, replication (handlers_replica.cc): with it off and no flags2, nothing is
  // taken here. On: a mutation holds the variable's section until its handler returns.
  SharedSection section;
  const bool replica_rules = var != nullptr && (s.repl.enabled() || h.flags2 != 0);
  if (replica_rules) {
    bool done = false;
    const bool keep = ReplicaPrologue(s, conn, h, var, &section, &done);
    if (done) return keep;
  }
  if (streamed) {
    bool keep;
    if (op == Op::kPush) keep = StreamPush(s, conn, h, var);
    else if (op == Op::kAssign) keep = StreamAssign(s, conn, h, var);
    else keep = StreamRegister(s, conn, h);
    if (replica_rules) ReplicaEpilogue(s, conn, var);
    return keep;
  }

  // 2. Read the whole payload before touching any variable: a truncated frame never
  //    writes anything. Small payloads use the connection's buffer; larger ones wait for
  //    room in the in-flight budget (backpressure) and give it back when handled.
  // p is never null, so no empty payload reaches memcpy or the store as a null pointer.
  uint8_t empty[8] = {0};
  uint8_t* p = empty;
  struct BudgetLease {
    Budget* budget;
    uint8_t* p = nullptr;
    size_t n = 0;
    ~BudgetLease() { budget->Release(p, n); }
  } lease{&s.budget};
  if (h.payload_len > 0) {
    if (h.payload_len <= kSmallPayload) {
      p = conn->Small();
    } else {
      lease.n = static_cast<size_t>(h.payload_len);
      lease.p = s.budget.Acquire(lease.n, [&s] { return s.stopping.load(); });
      p = lease.p;
      if (p == nullptr) lease.n = 0;
    }
    if (p == nullptr) {
      if (s.stopping.load() || !conn->Discard(h.payload_len).ok()) return false;
      return conn->Reply(h, Status(Code::kResourceExhausted,
                                   "cannot allocate " + std::to_string(h.payload_len) + " bytes"));
    }
    if (!conn->ReadFrameBytes(p, static_cast<size_t>(h.payload_len)).ok()) return false;
  }

  if (op == Op::kWorkerDone && !IsUtf8(p, h.payload_len))
    return conn->Reply(h, InvalidArgument(OpName(h.op) + ": job name is not valid UTF-8"));

  // 3. Apply (the budget lease above is given back once the handler returns).
  const bool initialized = var && var->initialized.load(std::memory_order_acquire);
  const bool keep = entry.handle(s, conn, Request{h, var, p, sparse, initialized});
  if (replica_rules) ReplicaEpilogue(s, conn, var);
  return keep;
}

}  // namespace psrt
