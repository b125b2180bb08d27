#include "server_impl.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <new>
#include <random>
#include <system_error>

#include "auth.h"
#include "net.h"

namespace psrt {

namespace {
// The longest REGISTER spec: name, rank and dims, the fixed fields (docs/protocol.md).
constexpr size_t kMaxSpecBytes = 2 + kMaxNameLength + 2 + 8 * kMaxRank + 3 + 64;
}  // namespace

namespace {

constexpr size_t kMaxClusterDef = size_t{1} << 20;

Status ClusterDefTooBig(const std::string& def) {
  return InvalidArgument("cluster definition of " + std::to_string(def.size()) +
                         " bytes exceeds the maximum of 1048576 bytes");
}

}  // namespace

Status Server::SetClusterDef(const std::string& cluster_def) {
  if (cluster_def.size() > kMaxClusterDef) return ClusterDefTooBig(cluster_def);
  std::lock_guard<std::mutex> l(impl_->cluster_mu);
  impl_->options.cluster_def = cluster_def;
  return Status::Ok();
}

Status Server::Create(const ServerOptions& options, std::unique_ptr<Server>* out) {
  if (options.cluster_def.size() > kMaxClusterDef) return ClusterDefTooBig(options.cluster_def);
  std::unique_ptr<Server> s(new Server(options));
  ServerImpl* m = s->impl_.get();
  m->options.chunk_bytes = std::max<uint64_t>(m->options.chunk_bytes, 4096) / 8 * 8;
  // A frame read whole must fit the in-flight budget too.
  m->options.max_payload = std::min(m->options.max_payload,
                                    std::max(m->options.max_inflight_bytes,
                                             m->options.chunk_bytes));
  m->budget.Init(m->options.max_inflight_bytes, m->options.chunk_bytes);
  PSRT_RETURN_IF_ERROR(m->acceptor.Listen(options.host, options.port));
  std::random_device rd;
  m->incarnation = static_cast<int64_t>(
      ((static_cast<uint64_t>(rd()) << 32) ^ rd() ^
       static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())) &
      0x7fffffffffffffffULL);
  if (m->incarnation == 0) m->incarnation = 1;
  PSRT_RETURN_IF_ERROR(m->acceptor.Start());
  *out = std::move(s);
  return Status::Ok();
}

ServerImpl::ServerImpl(const ServerOptions& o)
    : options(o),
      sync(&store, &stopping, "/job:" + o.job + "/task:" + std::to_string(o.task)),
      acceptor(this) {}

Server::Server(const ServerOptions& options) : impl_(std::make_unique<ServerImpl>(options)) {}

Server::~Server() { Stop(); }

int Server::port() const { return impl_->acceptor.port(); }
int64_t Server::incarnation() const { return impl_->incarnation; }
VariableStore* Server::store() { return &impl_->store; }
bool Server::stopped() const { return impl_->stopped.load(); }
uint64_t Server::PeakInflightBytes() const { return impl_->budget.peak(); }

void Server::Stop() {
  ServerImpl* m = impl_.get();
  std::lock_guard<std::mutex> stop_lock(m->stop_mu);
  if (m->stopped.load()) return;
  m->stopping.store(true);
  m->acceptor.Stop();
  {
    std::lock_guard<std::mutex> l(m->stopped_mu);
    m->stopped.store(true);
  }
  m->stopped_cv.notify_all();
}

bool Server::Wait(double timeout_s) {
  ServerImpl* m = impl_.get();
  std::unique_lock<std::mutex> l(m->stopped_mu);
  if (timeout_s < 0) {
    m->stopped_cv.wait(l, [m] { return m->stopped.load(); });
    return true;
  }
  return m->stopped_cv.wait_for(l, std::chrono::duration<double>(timeout_s),
                                [m] { return m->stopped.load(); });
}

std::vector<std::pair<std::string, int>> Server::DoneWorkers() const {
  return impl_->sync.DoneWorkers();
}

int Server::NumConnections() const { return impl_->acceptor.NumOpen(); }


std::string OpName(uint8_t op) {
  static const char* names[] = {"?",    "HELLO",      "REGISTER",       "PULL",
                                "PUSH", "ASSIGN",     "ASSIGN_ADD",     "STEP_READ",
                                "STEP_INCREMENT", "IS_INITIALIZED", "LIST", "PING",
                                "WORKER_DONE", "AUTH", "TABLE_EXPORT", "TABLE_IMPORT",
                                "TABLE_EVICT", "CLUSTER_INFO"};
  static_assert(sizeof names / sizeof names[0] == kMaxOp + 1, "a name for every op");
  return op <= kMaxOp ? names[op] : "op " + std::to_string(op);
}

void ServerImpl::Admit(Connection* conn) {
  if (conn->channel != kChannelRequests) return;
  // A request connection starts a session of this task (synchronous training's bookkeeping).
  sync.BeginSession(conn->job, conn->task, &conn->sync);
}

std::vector<std::string> Server::TakeEvents() { return impl_->events.Take(); }

bool ServerImpl::StreamPush(Connection* conn, const Header& h, Variable* var) {
  // Checked before a byte is read, as for a whole frame; then every chunk is applied as soon
  // as it is in, while the next one arrives in the socket buffer.
  KernelArgs& args = conn->stream_args;
  Status st = var->is_sync()
                  ? FailedPrecondition("variable '" + var->spec.name +
                                       "' is trained synchronously (replicas_to_aggregate " +
                                       std::to_string(var->spec.replicas_to_aggregate) +
                                       "): push step-tagged gradients (SyncReplicasOptimizer)")
                  : store.BeginDense(var, h.arg0, (h.flags & kFlagHasLr) != 0, &args);
  if (!st.ok()) {
    if (!conn->Discard(h.payload_len).ok()) return false;
    return conn->Reply(h, st);
  }
  const size_t elem = DTypeSize(var->spec.dtype);
  if (!conn->ReadChunks(h.payload_len, elem, [&](const uint8_t* g, uint64_t at, size_t len) {
        store.ApplyDenseRange(var, args, g, static_cast<size_t>(at / elem), len / elem);
      }))
    return false;
  if (h.flags & kFlagReturnValue)
    return conn->Reply(h, st, 0, kFlagReturnValue, var->id, var->value.data(), var->nbytes);
  return conn->Reply(h, st, 0, 0, var->id);
}

bool ServerImpl::StreamAssign(Connection* conn, const Header& h, Variable* var) {
  if (var->SlotData(h.slot) == nullptr) {
    if (!conn->Discard(h.payload_len).ok()) return false;
    return conn->Reply(h, InvalidArgument("variable '" + var->spec.name + "' has " +
                                          std::to_string(var->slots.size()) +
                                          " optimizer slots; slot index " +
                                          std::to_string(h.slot - 1) + " does not exist"));
  }
  if (!conn->ReadChunks(h.payload_len, DTypeSize(var->spec.dtype),
                  [&](const uint8_t* b, uint64_t at, size_t len) {
                    (void)store.AssignRange(var, h.slot, b, static_cast<size_t>(at), len);
                  }))
    return false;
  if (h.slot == 0) {
    store.MarkInitialized(var);
    if (h.flags & kFlagInit) {  // a restore starts the synchronous state afresh
      store.SyncReset(var);
      sync.ModelWritten(&conn->sync);
    }
  }
  return conn->Reply(h, Status::Ok(), 0, 0, var->id);
}

bool ServerImpl::StreamRegister(Connection* conn, const Header& h) {
  // The spec first (at most kMaxSpecBytes), then the initial value straight into the
  // variable's memory; it is initialized only once every byte is in.
  const size_t head = static_cast<size_t>(std::min<uint64_t>(h.payload_len, kMaxSpecBytes));
  uint8_t* p = conn->Small();
  if (p == nullptr) return false;
  if (!ReadFullWithin(conn->fd, p, head, conn->peer, options.stall_timeout_s).ok()) return false;
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
  if (st.ok()) st = store.Register(spec, nullptr, &var);
  if (!st.ok()) {
    if (h.payload_len - head > options.max_payload) {
      conn->Reply(h, st);
      return false;
    }
    if (!conn->Discard(h.payload_len - head).ok()) return false;
    return conn->Reply(h, st);
  }
  // What the spec prefix already holds of the value, then the rest in chunks.
  const size_t have = r.remaining();
  (void)store.AssignRange(var, 0, r.cursor(), 0, have);
  if (!conn->ReadChunks(want - have, DTypeSize(spec.dtype),
                  [&](const uint8_t* b, uint64_t at, size_t len) {
                    (void)store.AssignRange(var, 0, b, static_cast<size_t>(have + at), len);
                  }))
    return false;
  store.FinishInit(var);
  sync.ModelWritten(&conn->sync);
  return conn->Reply(h, Status::Ok(), 0, kFlagInitialized, var->id);
}

Status ServerImpl::RowReplyBuffer(Connection* conn, const Header& h, const Variable* var,
                              size_t row_bytes) {
  // The reply is count x row bytes (ids may repeat), which a small request could make far
  // larger than memory: checked against max_payload before anything is allocated.
  const uint64_t reply_bytes = uint64_t{h.count} * row_bytes;
  if (reply_bytes > options.max_payload)
    return Status(Code::kResourceExhausted,
                  "PULL of " + std::to_string(h.count) + " rows of '" + var->spec.name +
                      "': reply of " + std::to_string(reply_bytes) +
                      " bytes exceeds the maximum of " + std::to_string(options.max_payload) +
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

bool ServerImpl::PullTableRows(Connection* conn, const Header& h, Variable* var,
                           const int64_t* ids) {
  Status st = RowReplyBuffer(conn, h, var, var->table->row_bytes());
  if (st.ok()) st = store.GatherRows(var, ids, h.count, h.slot, conn->out.data());
  if (!st.ok()) return conn->Reply(h, st, 0, 0, var->id);
  return conn->Reply(h, st, 0, 0, var->id, conn->out.data(), conn->out.size());
}

bool ServerImpl::Handle(Connection* conn, const Header& h) {
  const Op op = static_cast<Op>(h.op);
  const bool sparse = (h.flags & kFlagSparse) != 0;
  Variable* var = nullptr;
  Status st;

  // 1. Check the payload length against what this op and variable allow, before reading it.
  uint64_t expect = 0;
  bool exact = true;
  switch (op) {
    case Op::kHello:
    case Op::kWorkerDone:
      expect = 256;
      exact = false;
      break;
    case Op::kRegister:
      // With an initial value the spec fixes the exact length (checked as it is read).
      expect = (h.flags & kFlagInit) ? kMaxStreamPayload : options.max_payload;
      exact = false;
      break;
    case Op::kAuth:
      expect = 2 * kNonceSize;
      break;
    case Op::kList:
    case Op::kPing:
    case Op::kClusterInfo:
      break;
    default: {
      st = store.Find(h.var_id, &var);
      if (!st.ok()) break;
      const size_t dsize = DTypeSize(var->spec.dtype);
      const size_t rows = var->spec.shape.empty() ? 0 : static_cast<size_t>(var->spec.shape[0]);
      const size_t width = var->table ? var->table->row_elements()
                           : rows == 0 ? 0 : var->num_elements / rows;
      const bool table_op =
          op == Op::kTableExport || op == Op::kTableImport || op == Op::kTableEvict;
      if (table_op && !var->table) {
        st = InvalidArgument(OpName(h.op) + " of '" + var->spec.name +
                             "': it is a variable, not a hash table");
        break;
      }
      // (Adam's beta powers, slot 255, are the table's as a variable's: dense access works.)
      const bool state = h.slot == kOptimizerStateSlot;
      if (var->table && ((op == Op::kPush && !sparse) || (op == Op::kAssign && !state) ||
                         op == Op::kAssignAdd || (op == Op::kPull && !sparse && !state))) {
        st = InvalidArgument(std::string(sparse ? "" : "dense ") + OpName(h.op) +
                             " of hash table '" + var->spec.name +
                             "': a table's rows are addressed by id (row-sparse PULL and "
                             "PUSH, TABLE_EXPORT, TABLE_IMPORT)");
        break;
      }
      if ((op == Op::kTableImport) && h.dtype != static_cast<uint8_t>(var->spec.dtype)) {
        st = InvalidArgument(std::string("dtype ") + DTypeName(static_cast<DType>(h.dtype)) +
                             " does not match table '" + var->spec.name + "' of dtype " +
                             DTypeName(var->spec.dtype));
        break;
      }
      if ((op == Op::kPush || op == Op::kAssign || op == Op::kAssignAdd) &&
          h.dtype != static_cast<uint8_t>(var->spec.dtype)) {
        st = InvalidArgument(std::string("dtype ") + DTypeName(static_cast<DType>(h.dtype)) +
                             " does not match variable '" + var->spec.name + "' of dtype " +
                             DTypeName(var->spec.dtype));
        break;
      }
      if (sparse && op != Op::kPull && op != Op::kPush) {
        st = InvalidArgument("the sparse flag is only valid for PULL and PUSH");
        break;
      }
      if ((h.flags & kFlagWaitStep) &&
          ((op != Op::kPull && op != Op::kStepRead) || sparse ||
           !(h.arg1 >= 0.0 && h.arg1 <= kMaxWaitSeconds))) {
        st = InvalidArgument("the wait flag is only valid for dense PULL and STEP_READ, with a "
                             "wait of 0.." + std::to_string(static_cast<int>(kMaxWaitSeconds)) +
                             " s; got " + OpName(h.op) + " with " + std::to_string(h.arg1) +
                             " s");
        break;
      }
      if ((h.flags & kFlagStepTagged) && op != Op::kPush && op != Op::kStepIncrement) {
        st = InvalidArgument("the step-tag flag is only valid for PUSH and STEP_INCREMENT");
        break;
      }
      if (sparse && var->spec.shape.empty()) {
        st = InvalidArgument("row-sparse access to scalar variable '" + var->spec.name + "'");
        break;
      }
      if (op == Op::kPull) {
        expect = sparse ? uint64_t{h.count} * 8 : 0;
      } else if (op == Op::kPush) {
        expect = sparse ? uint64_t{h.count} * (8 + width * dsize) : var->nbytes;
      } else if (op == Op::kAssign) {
        expect = h.slot == kOptimizerStateSlot ? 16 : var->nbytes;
      } else if (op == Op::kAssignAdd) {
        expect = var->nbytes;
      } else if (op == Op::kTableImport) {
        expect = uint64_t{h.count} * var->table->record_bytes();
      } else if (op == Op::kTableEvict &&
                 !(h.arg0 >= 0 && h.arg0 <= 9e18 && h.arg1 >= 0 && h.arg1 <= 9e18)) {
        st = InvalidArgument("TABLE_EVICT of '" + var->spec.name + "': thresholds " +
                             std::to_string(h.arg0) + " and " + std::to_string(h.arg1) +
                             " must be >= 0 (0: rule off)");
        break;
      }
    }
  }
  if (st.ok() && (h.flags & ~AllowedFlags(h.op)) != 0) {
    char buf[8];
    snprintf(buf, sizeof buf, "0x%02x", h.flags & ~AllowedFlags(h.op));
    st = InvalidArgument("flags " + std::string(buf) + " are not valid for " + OpName(h.op) +
                         " (docs/protocol.md, Flags)");
  }
  if (st.ok() && sparse && h.slot == kOptimizerStateSlot)
    st = InvalidArgument("the optimizer state (slot 255) has no rows: a sparse " + OpName(h.op) +
                         " cannot address it");
  if (st.ok() && (h.flags & kFlagStepTagged) && (h.step < 0 || h.step == INT64_MAX))
    st = InvalidArgument("step tag " + std::to_string(h.step) + " is out of range [0, " +
                         std::to_string(INT64_MAX - 1) + "]");
  if (st.ok() && (exact ? h.payload_len != expect : h.payload_len > expect)) {
    st = InvalidArgument(OpName(h.op) + (var ? " of '" + var->spec.name + "' " + DTypeName(var->spec.dtype) + var->ShapeString() : std::string()) +
                         ": payload of " + std::to_string(h.payload_len) + " bytes; expected " +
                         (exact ? "" : "at most ") + std::to_string(expect));
  }
  // Frames bigger than a chunk that the server can apply piece by piece are streamed; every
  // other frame is read whole first, so it must fit max_payload (and the budget).
  const bool big = h.payload_len > options.chunk_bytes;
  const bool tagged = (h.flags & kFlagStepTagged) != 0;
  const bool streamed =
      st.ok() && big &&
      ((op == Op::kPush && !sparse && !tagged) ||
       (op == Op::kAssign && h.slot != kOptimizerStateSlot) ||
       (op == Op::kRegister && (h.flags & kFlagInit)));
  if (st.ok() && !streamed && h.payload_len > options.max_payload) {
    // Too big to read whole; the stream cannot be kept in step cheaply: answer, then close.
    conn->Reply(h, Status(Code::kResourceExhausted,
                          OpName(h.op) + (var ? " of '" + var->spec.name + "'" : std::string()) +
                              ": payload of " + std::to_string(h.payload_len) +
                              " bytes exceeds the maximum of " +
                              std::to_string(options.max_payload) +
                              " bytes for a frame read whole (max_payload, max_inflight_bytes)"));
    return false;
  }
  if (!st.ok()) {
    // Keep the stream in step when the length is plausible; otherwise drop the connection.
    if (h.payload_len > options.max_payload) {
      conn->Reply(h, st);
      return false;
    }
    if (!conn->Discard(h.payload_len).ok()) return false;
    return conn->Reply(h, st);
  }
  if (streamed) {
    if (op == Op::kPush) return StreamPush(conn, h, var);
    if (op == Op::kAssign) return StreamAssign(conn, h, var);
    return StreamRegister(conn, h);
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
  } lease{&budget};
  if (h.payload_len > 0) {
    if (h.payload_len <= kSmallPayload) {
      p = conn->Small();
    } else {
      lease.n = static_cast<size_t>(h.payload_len);
      lease.p = budget.Acquire(lease.n, [this] { return stopping.load(); });
      p = lease.p;
      if (p == nullptr) lease.n = 0;
    }
    if (p == nullptr) {
      if (stopping.load() || !conn->Discard(h.payload_len).ok()) return false;
      return conn->Reply(h, Status(Code::kResourceExhausted,
                                   "cannot allocate " + std::to_string(h.payload_len) + " bytes"));
    }
    Status rs = ReadFullWithin(conn->fd, p, h.payload_len, conn->peer, options.stall_timeout_s);
    if (!rs.ok()) {
      if (rs.code() == Code::kDeadlineExceeded) events.Add("dropped " + rs.message());
      return false;
    }
  }

  if ((op == Op::kHello || op == Op::kWorkerDone) && !IsUtf8(p, h.payload_len))
    return conn->Reply(h, InvalidArgument(OpName(h.op) + ": job name is not valid UTF-8"));

  // 3. Apply.
  const bool initialized = var && var->initialized.load(std::memory_order_acquire);
  switch (op) {
    case Op::kHello: {
      if (h.count > kChannelHeartbeat)
        return conn->Reply(h, InvalidArgument("HELLO: unknown channel " + std::to_string(h.count) +
                                              "; valid: 0 (requests), 1 (heartbeat)"));
      conn->job.assign(reinterpret_cast<const char*>(p), h.payload_len);
      conn->task = static_cast<int>(h.var_id);
      conn->channel = h.count;
      conn->hello_done = true;
      const std::string& me = options.job;
      if (!options.secret.empty()) {
        // Challenge: the peer proves it knows the secret (AUTH) before anything else counts.
        conn->authenticated = false;
        if (!RandomNonce(conn->nonce)) {
          conn->Reply(h, Internal("no random source for an authentication challenge"));
          return false;
        }
        std::string payload(reinterpret_cast<const char*>(conn->nonce), kNonceSize);
        payload += me;
        return conn->Reply(h, Status::Ok(), incarnation, kFlagAuthRequired,
                     static_cast<uint32_t>(options.task), payload.data(), payload.size(),
                     static_cast<uint32_t>(kNonceSize));
      }
      conn->authenticated = true;
      Admit(conn);
      return conn->Reply(h, Status::Ok(), incarnation, 0, static_cast<uint32_t>(options.task),
                   me.data(), me.size());
    }
    case Op::kAuth: {
      if (options.secret.empty())
        return conn->Reply(h, FailedPrecondition("this ps task has no secret: AUTH is not used"));
      if (conn->authenticated)
        return conn->Reply(h, FailedPrecondition("AUTH answers the challenge of a HELLO; send "
                                                 "HELLO first"));
      const Digest want = WorkerProof(options.secret, conn->nonce, p, conn->job,
                                      static_cast<uint32_t>(conn->task));
      Digest got;
      std::memcpy(got.data(), p + kNonceSize, got.size());
      if (!DigestEqual(want, got)) {
        events.Add("authentication failed for peer " + conn->peer + " (claiming /job:" +
              conn->job + "/task:" + std::to_string(conn->task) + ")");
        conn->Reply(h, Status(Code::kUnauthenticated,
                              "authentication failed: the proof does not match this job's "
                              "secret (PSRT_AUTH_SECRET)"));
        return false;
      }
      conn->authenticated = true;
      Admit(conn);
      const Digest proof = ServerProof(options.secret, conn->nonce, p);
      return conn->Reply(h, Status::Ok(), 0, 0, static_cast<uint32_t>(options.task),
                   proof.data(), proof.size());
    }
    case Op::kRegister: {
      VarSpec spec;
      Reader r(p, h.payload_len);
      st = spec.Decode(&r);
      const void* init = nullptr;
      const bool run_init = st.ok() && (h.flags & kFlagInit) && spec.init.kind != InitKind::kNone;
      if (run_init) {
        // The ps computes the initial value: no value bytes follow the spec.
        if (r.remaining() != 0)
          st = InvalidArgument("register '" + spec.name + "': " +
                               std::to_string(r.remaining()) + " bytes after a spec whose "
                               "initializer runs on the ps task; expected none");
      } else if (st.ok() && (h.flags & kFlagInit)) {
        uint64_t want = static_cast<uint64_t>(spec.NumElements()) * DTypeSize(spec.dtype);
        if (r.remaining() != want)
          st = InvalidArgument("register '" + spec.name + "': initial value of " +
                               std::to_string(r.remaining()) + " bytes; expected " +
                               std::to_string(want));
        else
          init = r.cursor();
      } else if (st.ok() && r.remaining() != 0) {
        st = InvalidArgument("register '" + spec.name + "': " + std::to_string(r.remaining()) +
                             " unexpected bytes after the spec");
      }
      if (st.ok()) st = store.Register(spec, init, &var);
      if (!st.ok()) return conn->Reply(h, st);
      if (run_init) store.RunInitializer(var, spec.init);
      if (init != nullptr || run_init) sync.ModelWritten(&conn->sync);
      uint8_t f = var->initialized.load() ? kFlagInitialized : 0;
      return conn->Reply(h, st, 0, f, var->id);
    }
    case Op::kPull: {
      if (!initialized)
        return conn->Reply(h, FailedPrecondition("Attempting to use uninitialized value " +
                                                 var->spec.name));
      SyncResult sr;
      if (h.flags & kFlagWaitStep) {
        st = sync.WaitForStep(&conn->sync, var, h.step, h.arg1, &sr);
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
      if (!sparse) return conn->Reply(h, st, 0, kFlagInitialized, var->id, src, var->nbytes);
      if (var->table) return PullTableRows(conn, h, var, reinterpret_cast<const int64_t*>(p));
      const size_t rows = static_cast<size_t>(var->spec.shape[0]);
      const size_t row_bytes = rows ? var->nbytes / rows : 0;
      const auto* idx = reinterpret_cast<const int64_t*>(p);
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
      st = RowReplyBuffer(conn, h, var, row_bytes);
      if (!st.ok()) return conn->Reply(h, st);
      for (uint32_t j = 0; row_bytes > 0 && j < h.count; ++j) {
        int64_t i;
        std::memcpy(&i, idx + j, 8);
        std::memcpy(conn->out.data() + j * row_bytes, src + static_cast<size_t>(i) * row_bytes,
                    row_bytes);
      }
      return conn->Reply(h, st, 0, 0, var->id, conn->out.data(), conn->out.size());
    }
    case Op::kPush: {
      const bool has_lr = (h.flags & kFlagHasLr) != 0;
      if (h.flags & kFlagStepTagged) {
        SyncResult sr;
        // The gradient is checked in full first: after training ended a stale one is still
        // answered (dropped), but never one that would have been refused.
        st = store.SyncCheckPush(var, sparse, reinterpret_cast<const int64_t*>(p),
                                  sparse ? h.count : 0);
        if (!st.ok()) return conn->Reply(h, st, 0, 0, var->id);
        if (sync.Preamble(&conn->sync, var, h.step, &sr, &st))
          return conn->Reply(h, st, sr.step, 0, var->id, nullptr, 0, sr.count);
        if (sparse) {
          // An empty row-sparse gradient (count 0, no payload) is legal, as in TF: it counts
          // as this replica's gradient and touches no row.
          st = store.SyncPush(var, h.step, true, nullptr, reinterpret_cast<const int64_t*>(p),
                               h.count, p + size_t{h.count} * 8, h.arg0, has_lr, &sr);
        } else {
          st = store.SyncPush(var, h.step, false, p, nullptr, 0, nullptr, h.arg0, has_lr, &sr);
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
        st = store.ApplySparse(var, idx, h.count, p + size_t{h.count} * 8, h.arg0, has_lr);
      } else {
        st = store.ApplyDense(var, p, h.arg0, has_lr);
      }
      if (st.ok() && (h.flags & kFlagReturnValue))
        return conn->Reply(h, st, 0, kFlagReturnValue, var->id, var->value.data(), var->nbytes);
      return conn->Reply(h, st, 0, 0, var->id);
    }
    case Op::kAssign:
      st = store.Assign(var, h.slot, p, h.payload_len);
      // A restore (kFlagInit) starts the variable's synchronous state afresh.
      if (st.ok() && h.slot == 0 && (h.flags & kFlagInit)) {
        store.SyncReset(var);
        sync.ModelWritten(&conn->sync);
      }
      return conn->Reply(h, st, 0, 0, var->id);
    case Op::kAssignAdd:
      return conn->Reply(h, store.AssignAdd(var, p, h.payload_len), 0, 0, var->id);
    case Op::kStepRead: {
      int64_t v = 0;
      st = store.StepRead(var, &v);
      if (!st.ok() || !(h.flags & kFlagWaitStep)) return conn->Reply(h, st, v, 0, var->id);
      SyncResult sr;
      st = sync.WaitForStep(&conn->sync, var, h.step, h.arg1, &sr);
      return conn->Reply(h, st, sr.step, sr.ready ? 0 : kFlagNotReady, var->id, nullptr, 0,
                   sr.count);
    }
    case Op::kStepIncrement: {
      int64_t v = 0;
      if (h.flags & kFlagStepTagged) {
        SyncResult sr;
        st = store.SyncCheckStep(var);
        if (!st.ok()) return conn->Reply(h, st, 0, 0, var->id);
        if (sync.Preamble(&conn->sync, var, h.step, &sr, &st))
          return conn->Reply(h, st, sr.step, 0, var->id, nullptr, 0, sr.count);
        st = store.SyncStepIncrement(var, h.step, &sr);
        return conn->Reply(h, st, sr.step, sr.accepted ? kFlagAccepted : 0, var->id, nullptr, 0,
                     sr.count);
      }
      if (var->is_sync())
        return conn->Reply(h, FailedPrecondition(
                                  "global step '" + var->spec.name +
                                  "' is advanced by synchronous training (replicas_to_aggregate " +
                                  std::to_string(var->spec.replicas_to_aggregate) +
                                  "): send step-tagged increments (SyncReplicasOptimizer)"));
      st = store.StepIncrement(var, h.step, &v);
      return conn->Reply(h, st, v, 0, var->id);
    }
    case Op::kIsInitialized:
      return conn->Reply(h, st, 0, initialized ? kFlagInitialized : 0, var->id);
    case Op::kTableExport: {
      const size_t record = var->table->record_bytes();
      const size_t page = static_cast<size_t>(
          std::max<uint64_t>(1, std::min<uint64_t>(h.count, options.max_payload / record)));
      size_t n = 0;
      int64_t next = -1;
      st = store.TableExport(var, h.step < 0 ? 0 : static_cast<uint64_t>(h.step), page,
                              &conn->out, &n, &next);
      if (!st.ok()) return conn->Reply(h, st, 0, 0, var->id);
      return conn->Reply(h, st, next, 0, var->id, conn->out.data(), conn->out.size(),
                   static_cast<uint32_t>(n));
    }
    case Op::kTableImport:
      st = store.TableImport(var, p, h.count, (h.flags & kFlagInit) != 0);
      if (st.ok()) sync.ModelWritten(&conn->sync);
      return conn->Reply(h, st, 0, 0, var->id);
    case Op::kTableEvict: {
      size_t evicted = 0;
      st = store.TableEvict(var, static_cast<uint64_t>(h.arg0), static_cast<uint64_t>(h.arg1),
                             &evicted);
      return conn->Reply(h, st, st.ok() ? static_cast<int64_t>(var->table->rows()) : 0, 0,
                   var->id, nullptr, 0, static_cast<uint32_t>(evicted));
    }
    case Op::kClusterInfo: {
      std::string def;
      {
        std::lock_guard<std::mutex> l(cluster_mu);
        def = options.cluster_def;
      }
      return conn->Reply(h, st, 0, 0, 0, def.data(), def.size());
    }
    case Op::kList: {
      Writer w;
      try {
        for (Variable* v : store.All()) {
          w.Put<uint32_t>(v->id);
          w.Put<uint8_t>(static_cast<uint8_t>(v->spec.dtype));
          w.Put<uint8_t>(v->initialized.load() ? 1 : 0);
          w.Put<uint8_t>(static_cast<uint8_t>(v->spec.optimizer));
          w.Put<uint8_t>(static_cast<uint8_t>(v->spec.shape.size()));
          for (int64_t d : v->spec.shape) w.Put<int64_t>(d);
          w.PutString(v->spec.name);
          // Version 5: u8 table, u64 rows, u64 bytes (a table's rows and memory; a
          // variable's element count and value bytes).
          w.Put<uint8_t>(v->spec.table);
          w.Put<uint64_t>(v->table ? v->table->rows() : v->num_elements);
          w.Put<uint64_t>(v->table ? v->table->bytes()
                                   : v->nbytes * (1 + v->slots.size()));
        }
      } catch (const std::bad_alloc&) {
        return conn->Reply(h, Status(Code::kResourceExhausted,
                                     "out of memory listing " + std::to_string(store.size()) +
                                         " variables"));
      }
      auto& b = w.buffer();
      return conn->Reply(h, st, 0, 0, 0, b.data(), b.size());
    }
    case Op::kPing:
      if (conn->channel == kChannelHeartbeat) heartbeats.Note(conn->job, conn->task);
      return conn->Reply(h, st);
    case Op::kWorkerDone: {
      sync.WorkerDone(std::string(reinterpret_cast<const char*>(p), h.payload_len), h.var_id);
      return conn->Reply(h, st);
    }
  }
  return conn->Reply(h, InvalidArgument("unknown op " + std::to_string(h.op)));
}

}  // namespace psrt
