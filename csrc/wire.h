// THE psrt wire format. Every frame is a 64-byte little-endian Header followed by
// `payload_len` raw bytes. docs/protocol.md documents it byte by byte; bump kWireVersion and
// that document together on every change. Nothing here is executable data: names are UTF-8
// strings, values are raw little-endian arrays.
#pragma once

#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "status.h"

namespace psrt {

constexpr uint32_t kWireMagic = 0x54525350;  // "PSRT" as little-endian bytes
constexpr uint16_t kWireVersion = 7;
constexpr size_t kHeaderSize = 64;
constexpr uint64_t kDefaultMaxPayload = uint64_t{1} << 31;  // 2 GiB
// The most a frame may announce at all: the largest variable (2^40 elements of 8 bytes) and
// its REGISTER spec. Streamed frames (server.h) are bounded only by their variable's size.
constexpr uint64_t kMaxStreamPayload = (uint64_t{1} << 43) + (uint64_t{1} << 16);
constexpr size_t kMaxNameLength = 1024;
constexpr int kMaxRank = 8;

enum class Op : uint8_t {
  kHello = 1,          // connect-time negotiation; payload: HelloRecord (versions 6, 7);
                       // var_id: task index; count: channel (kChannel*)
  kRegister = 2,       // payload: VarSpec (+ initial value when kFlagInit); reply var_id
  kPull = 3,           // reply payload: value (or rows when kFlagSparse)
  kPush = 4,           // payload: gradient (or indices + rows); applies the optimizer
  kAssign = 5,         // payload: value of `slot` (0: the variable itself)
  kAssignAdd = 6,      // payload: delta of the variable's dtype
  kStepRead = 7,       // int64 scalar variable: reply step = value
  kStepIncrement = 8,  // int64 scalar variable += step (atomic); reply step = new value
  kIsInitialized = 9,  // reply flags & kFlagInitialized
  kList = 10,          // reply payload: VarInfo records of every variable on this shard
  kPing = 11,
  kWorkerDone = 12,    // a worker task closed its session (payload: job name; var_id: task)
  kAuth = 13,          // answers HELLO's challenge: client nonce + proof (auth.h)
  // Version 5: hash tables (VarSpec.table) and the cluster a task belongs to.
  kTableExport = 14,   // step: cursor (0 first); count: most rows wanted. Reply count: rows
                       // sent, step: next cursor (-1: done); payload: TableRows records
  kTableImport = 15,   // count rows of TableRows; kFlagInit: clear the table first (restore)
  kTableEvict = 16,    // arg0: evict rows unseen for >= arg0 updates (0: no such rule); arg1:
                       // rows updated fewer than arg1 times (0: none). Reply count: evicted,
                       // step: rows left
  kClusterInfo = 17,   // reply payload: the cluster definition the task was started with
                       // (UTF-8 JSON, docs/protocol.md), empty when it has none
  // Version 7: ps replication (docs/protocol.md, "Replication"; replication.h).
  kReplicaRead = 18,     // reply payload: the variable's ReplicaState, taken in its exclusive
                         // replication section
  kReplicaInstall = 19,  // payload: a ReplicaState from REPLICA_READ, written into the variable
};
constexpr uint8_t kMaxOp = 19;

// HELLO request `count`: what the connection carries.
constexpr uint32_t kChannelRequests = 0;   // every op
constexpr uint32_t kChannelHeartbeat = 1;  // PING only: the worker's liveness watch

// Header.flags bits.
constexpr uint8_t kFlagReply = 1 << 0;         // set on every reply frame
constexpr uint8_t kFlagSparse = 1 << 1;        // row-sparse request: `count` int64 indices lead
constexpr uint8_t kFlagInit = 1 << 2;          // Register: initial value follows the spec
constexpr uint8_t kFlagInitialized = 1 << 3;   // reply: the variable is initialized
constexpr uint8_t kFlagHasLr = 1 << 4;         // Push: arg0 overrides the learning rate
constexpr uint8_t kFlagReturnValue = 1 << 5;   // Push: reply carries the value after update
constexpr uint8_t kFlagStepTagged = 1 << 6;    // Push/StepIncrement: `step` tags the gradient
                                               // of synchronous training (see below)
constexpr uint8_t kFlagWaitStep = 1 << 7;      // Pull/StepRead: hold the reply until the sync
                                               // step >= `step`, at most arg1 seconds
// Version 6. Push: apply the gradient only once every byte of it arrived (a streamed dense
// push is held in the in-flight budget until then); a request bit, so it shares bit 3 with
// the reply-only kFlagInitialized.
constexpr uint8_t kFlagAtomic = 1 << 3;
// The flags each request op may carry (anything else is INVALID_ARGUMENT).
inline uint8_t AllowedFlags(uint8_t op) {
  switch (static_cast<Op>(op)) {
    case Op::kRegister: return kFlagInit;
    case Op::kPull: return kFlagSparse | kFlagWaitStep;
    case Op::kPush:
      return kFlagSparse | kFlagHasLr | kFlagReturnValue | kFlagStepTagged | kFlagAtomic;
    case Op::kAssign: return kFlagInit;
    case Op::kStepRead: return kFlagWaitStep;
    case Op::kStepIncrement: return kFlagStepTagged;
    case Op::kTableImport: return kFlagInit;
    default: return 0;
  }
}

// Version 7: Header.flags2 bits (docs/protocol.md, "Flags2").
constexpr uint8_t kFlag2Sequenced = 0x01;  // request: request_id is the client's update sequence
                                           // number (mutations only; HELLO gave a client_id)
constexpr uint8_t kFlag2Duplicate = 0x02;  // reply: a SEQUENCED request already applied (or in
                                           // an installed copy); not applied again
constexpr uint8_t kFlag2Awaiting = 0x04;   // reply: the variable awaits a copy (REPLICA_INSTALL);
                                           // a read got no value
constexpr uint8_t kFlag2Stale = 0x08;      // REGISTER request: the sender missed updates of this
                                           // ps task; its variable awaits a copy again
constexpr uint8_t kFlag2RequestBits = kFlag2Sequenced | kFlag2Stale;
constexpr uint8_t kFlag2ReplyBits = kFlag2Duplicate | kFlag2Awaiting;

// Reply meanings of the same bits (a reply and a request never share a frame):
constexpr uint8_t kFlagAccepted = kFlagStepTagged;  // tagged push/increment: counted (fresh);
                                                    // clear: dropped as stale
constexpr uint8_t kFlagNotReady = kFlagWaitStep;    // waiting request: the step was not
                                                    // reached in time; no payload
constexpr uint8_t kFlagAuthRequired = kFlagInit;    // HELLO: the job has a secret; the payload
                                                    // starts with a `count`-byte challenge
constexpr double kMaxWaitSeconds = 60.0;            // bound of a waiting request's arg1

enum class DType : uint8_t { kInvalid = 0, kFloat32 = 1, kFloat64 = 2, kInt64 = 3 };

inline size_t DTypeSize(DType d) {
  switch (d) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kInt64: return 8;
    default: return 0;
  }
}
inline const char* DTypeName(DType d) {
  switch (d) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt64: return "int64";
    default: return "invalid";
  }
}

enum class Optimizer : uint8_t {
  kNone = 0,
  kGradientDescent = 1,
  kAdagrad = 2,
  kMomentum = 3,
  kAdam = 4,
  // 5..11 take their hyper-parameters from VarSpec's rho, l1, l2, l2_shrinkage, lr_power and
  // epsilon/momentum, and up to three slots (kMaxSlots) initialized from slot_init..slot_init3.
  kAdadelta = 5,
  kAdagradDA = 6,
  kFtrl = 7,                     // FtrlV2 (l2_shrinkage) too, as TF's FtrlOptimizer
  kProximalGradientDescent = 8,
  kProximalAdagrad = 9,
  kRMSProp = 10,
  kCenteredRMSProp = 11,         // RMSProp with centered=True: TF's ApplyCenteredRMSProp
};
constexpr uint8_t kMaxOptimizer = 11;

// The frame header. Field order is the byte order on the wire (offsets in comments).
struct Header {
  uint32_t magic = kWireMagic;     //  0
  uint16_t version = kWireVersion; //  4
  uint8_t op = 0;                  //  6  Op
  uint8_t flags = 0;               //  7  kFlag* bits
  uint64_t request_id = 0;         //  8  echoed in the reply
  uint32_t var_id = 0;             // 16  variable id (Hello/WorkerDone: task index)
  uint8_t dtype = 0;               // 20  DType of the payload values
  uint8_t status = 0;              // 21  reply: Code; non-OK payload is the message
  uint8_t slot = 0;                // 22  0: variable, k >= 1: optimizer slot k-1
  uint8_t flags2 = 0;              // 23  kFlag2* bits (version 7; was `reserved`)
  uint64_t payload_len = 0;        // 24  bytes following the header
  int64_t step = 0;                // 32  step tag / global step value / increment
  double arg0 = 0.0;               // 40  Push: learning rate (kFlagHasLr)
  double arg1 = 0.0;               // 48  kFlagWaitStep: seconds to wait (0..60)
  uint32_t count = 0;              // 56  Sparse: number of indices; sync replies: gradients
                                   //     collected for the current step
  uint32_t reserved2 = 0;          // 60  must be 0
};
static_assert(sizeof(Header) == kHeaderSize, "wire header must be 64 bytes");
static_assert(std::is_trivially_copyable<Header>::value, "header must be trivially copyable");
static_assert(std::is_standard_layout<Header>::value, "header must be standard layout");
static_assert(offsetof(Header, var_id) == 16 && offsetof(Header, payload_len) == 24 &&
                  offsetof(Header, step) == 32 && offsetof(Header, count) == 56,
              "wire header offsets changed: update docs/protocol.md and kWireVersion");

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "psrt supports little-endian hosts only; add byte swapping to EncodeHeader/DecodeHeader"
#endif

// On a little-endian host the in-memory layout is the wire layout, so encoding is a copy.
inline void EncodeHeader(const Header& h, uint8_t* out) { std::memcpy(out, &h, kHeaderSize); }
inline Header DecodeHeader(const uint8_t* in) {
  Header h;
  std::memcpy(&h, in, kHeaderSize);
  return h;
}

// Checks the fixed fields of a received header, in the order docs/protocol.md lists them:
// magic, version, op, dtype, status (a request must carry 0), flags2 (a request: SEQUENCED and
// STALE only; a reply: DUPLICATE and AWAITING only), reserved2 and the payload length against
// `max_payload`. Per-op checks against the variable are the server's.
inline Status CheckHeader(const Header& h, uint64_t max_payload, bool request = false) {
  if (h.magic != kWireMagic) {
    return InvalidArgument("bad frame magic 0x" + [](uint32_t m) {
      char buf[16];
      snprintf(buf, sizeof buf, "%08x", m);
      return std::string(buf);
    }(h.magic) + "; expected 0x54525350 (\"PSRT\")");
  }
  if (h.version != kWireVersion) {
    return FailedPrecondition("wire protocol version mismatch: peer speaks version " +
                              std::to_string(h.version) + ", this side speaks version " +
                              std::to_string(kWireVersion));
  }
  if (h.op == 0 || h.op > kMaxOp) {
    return InvalidArgument("unknown op " + std::to_string(h.op) + "; valid ops are 1.." +
                           std::to_string(kMaxOp));
  }
  if (h.dtype > static_cast<uint8_t>(DType::kInt64)) {
    return InvalidArgument("unknown dtype code " + std::to_string(h.dtype) +
                           "; valid: 1 float32, 2 float64, 3 int64");
  }
  if (request && h.status != 0) {
    return InvalidArgument("request frame has status code " + std::to_string(h.status) +
                           "; requests must carry 0 (OK)");
  }
  if (h.status > kMaxCode) {
    return InvalidArgument("unknown status code " + std::to_string(h.status));
  }
  const uint8_t flags2_allowed = request ? kFlag2RequestBits : kFlag2ReplyBits;
  if ((h.flags2 & ~flags2_allowed) != 0) {
    char buf[8];
    snprintf(buf, sizeof buf, "0x%02x", h.flags2 & ~flags2_allowed);
    return InvalidArgument(std::string("flags2 bits ") + buf + " are not valid on a " +
                           (request ? "request; valid: 0x01 SEQUENCED, 0x08 STALE"
                                    : "reply; valid: 0x02 DUPLICATE, 0x04 AWAITING"));
  }
  if (h.reserved2 != 0) return InvalidArgument("reserved header bytes (reserved2) not 0");
  if (h.payload_len > max_payload) {
    return Status(Code::kResourceExhausted,
                  "payload of " + std::to_string(h.payload_len) +
                      " bytes exceeds the maximum of " + std::to_string(max_payload) + " bytes");
  }
  return Status::Ok();
}

// True when s[0, n) is well-formed UTF-8 (no overlongs, surrogates or code points past
// U+10FFFF). Names reach Python as str: one that cannot be decoded there is refused at the
// wire instead of raising later (in list_variables, or the ps task's join() loop).
inline bool IsUtf8(const uint8_t* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// ---- Payload records -------------------------------------------------------------------
// A small append/read cursor for the variable-length records (VarSpec, VarInfo). All integers
// little-endian, no padding.

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable<T>::value, "POD only");
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof(T));
  }
  void PutBytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  void PutString(const std::string& s) {
    Put<uint16_t>(static_cast<uint16_t>(s.size()));
    PutBytes(s.data(), s.size());
  }
  std::vector<uint8_t>& buffer() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  template <typename T>
  bool Get(T* v) {
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) return false;
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  bool GetString(std::string* s, size_t max_len) {
    uint16_t n;
    if (!Get(&n) || n > max_len || static_cast<size_t>(end_ - p_) < n) return false;
    s->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  const uint8_t* cursor() const { return p_; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// Version 6: the HELLO payload. Who is connecting (job, task index in the header's var_id),
// which task it means to reach, and digests of the jobs of its cluster, so a task given
// another cluster (a swapped --ps_hosts order, another job's spec) is refused at connect
// (docs/protocol.md, "Connection set-up"). Version 7 appends the client id.
constexpr size_t kMaxJobName = 256;
constexpr size_t kMaxHelloJobs = 16;
constexpr uint32_t kAnyTask = 0xFFFFFFFFu;
// The largest HELLO payload: two job names, the task, kMaxHelloJobs digests, the client id.
constexpr size_t kMaxHelloPayload =
    2 + kMaxJobName + 2 + kMaxJobName + 4 + 1 + kMaxHelloJobs * (2 + kMaxJobName + 8) + 8;

struct JobDigest {
  std::string job;
  uint64_t digest = 0;  // first 8 bytes (little-endian) of SHA-256 of the job's canonical text
};

struct HelloRecord {
  std::string job;                  // u16 + UTF-8: the sender's job (<= 256 bytes)
  std::string expect_job;           // u16 + UTF-8: the job of the task it means to reach; empty:
                                    // no expectation (the task is not checked)
  uint32_t expect_task = kAnyTask;  // u32: that task's index
  std::vector<JobDigest> jobs;      // u8 count (<= 16), then per job: u16 + name, u64 digest
  uint64_t client_id = 0;           // u64 (version 7): the sending Client's random id, the
                                    // key of its SEQUENCED requests' marks; 0: none

  void Encode(Writer* w) const {
    w->PutString(job);
    w->PutString(expect_job);
    w->Put<uint32_t>(expect_task);
    w->Put<uint8_t>(static_cast<uint8_t>(jobs.size()));
    for (const JobDigest& j : jobs) {
      w->PutString(j.job);
      w->Put<uint64_t>(j.digest);
    }
    w->Put<uint64_t>(client_id);
  }
  Status Decode(Reader* r) {
    uint8_t n = 0;
    if (!r->GetString(&job, kMaxJobName) || !r->GetString(&expect_job, kMaxJobName) ||
        !r->Get(&expect_task) || !r->Get(&n))
      return InvalidArgument("HELLO: truncated payload (job, expected job, expected task, "
                             "number of job digests)");
    if (n > kMaxHelloJobs)
      return InvalidArgument("HELLO: " + std::to_string(n) + " job digests; at most " +
                             std::to_string(kMaxHelloJobs));
    jobs.resize(n);
    for (JobDigest& j : jobs) {
      if (!r->GetString(&j.job, kMaxJobName) || j.job.empty() || !r->Get(&j.digest))
        return InvalidArgument("HELLO: truncated or empty job digest entry");
    }
    if (!r->Get(&client_id))
      return InvalidArgument("HELLO: truncated payload (the client id after the job digests)");
    if (r->remaining() != 0)
      return InvalidArgument("HELLO: " + std::to_string(r->remaining()) +
                             " bytes after the client id");
    for (const std::string* s : {&job, &expect_job})
      if (!IsUtf8(reinterpret_cast<const uint8_t*>(s->data()), s->size()))
        return InvalidArgument("HELLO: job name is not valid UTF-8");
    for (const JobDigest& j : jobs)
      if (!IsUtf8(reinterpret_cast<const uint8_t*>(j.job.data()), j.job.size()))
        return InvalidArgument("HELLO: job name is not valid UTF-8");
    return Status::Ok();
  }
};

// An initializer run on the ps task (docs/protocol.md, "Initializers"): the value of element
// i of a part starting at element `offset` of a variable of shape `full_shape` depends only
// on the kind, its parameters, `seed` and offset + i, so it is the same however the variable
// is partitioned over ps tasks.
enum class InitKind : uint8_t {
  kNone = 0,             // no initializer: the REGISTER's INIT (if any) carries the value
  kZeros = 1,
  kOnes = 2,
  kConstant = 3,         // a
  kRandomUniform = 4,    // [a, b)
  kRandomNormal = 5,     // mean a, stddev b
  kTruncatedNormal = 6,  // mean a, stddev b, redrawn beyond 2 stddev (TF's truncated_normal)
  kVarianceScaling = 7,  // scale a; fan_mode, distribution (glorot_* are special cases)
};
constexpr uint8_t kMaxInitKind = 7;

struct InitSpec {
  InitKind kind = InitKind::kNone;  // u8
  double a = 0.0;                  // f64
  double b = 0.0;                  // f64
  uint8_t fan_mode = 0;            // u8: 0 fan_in, 1 fan_out, 2 fan_avg (variance_scaling)
  uint8_t distribution = 0;        // u8: 0 truncated_normal, 1 untruncated_normal, 2 uniform
  uint64_t seed = 0;               // u64
  uint64_t offset = 0;             // u64: this part's first element in the whole variable
  std::vector<int64_t> full_shape; // u8 rank + i64 dims: the whole variable (fans)
};

// Register payload: the variable's declaration. When kFlagInit is set the initial value
// (num_elements * dtype size bytes) follows the spec.
struct VarSpec {
  std::string name;                // u16 length + UTF-8 bytes, 1..kMaxNameLength
  DType dtype = DType::kFloat32;   // u8
  std::vector<int64_t> shape;      // u8 rank (<= kMaxRank), then rank x i64 dims (>= 0)
  Optimizer optimizer = Optimizer::kNone;  // u8
  uint8_t use_locking = 0;         // u8
  uint8_t use_nesterov = 0;        // u8
  double learning_rate = 0.0;      // f64
  double momentum = 0.0;           // f64
  double beta1 = 0.9;              // f64
  double beta2 = 0.999;            // f64
  double epsilon = 1e-8;           // f64
  double slot_init = 0.0;          // f64: initial value of every slot element (Adagrad 0.1)
  uint32_t replicas_to_aggregate = 0;  // u32: synchronous training; 0: asynchronous
  uint32_t total_num_replicas = 0;     // u32: workers of synchronous training (0 when async)
  // Version 4. Hyper-parameters of TF1's other optimizers (Adadelta's and RMSProp's rho, Ftrl's
  // and the proximal ones' l1/l2, Ftrl's l2_shrinkage and lr_power) and the initial values of
  // slots 2 and 3; every optimizer ignores the fields it has no use for.
  double rho = 0.0;                // f64
  double l1 = 0.0;                 // f64
  double l2 = 0.0;                 // f64
  double l2_shrinkage = 0.0;       // f64
  double lr_power = -0.5;          // f64
  double slot_init2 = 0.0;         // f64: initial value of slot 2's elements
  double slot_init3 = 0.0;         // f64: initial value of slot 3's elements
  InitSpec init;                   // the initializer the ps task runs (REGISTER with INIT)
  // Version 5. table = 1: a hash table of rows keyed by arbitrary int64 ids (table.h). Its
  // shape is [0, row dims...]: rows are created on first use from `init` (element j of the
  // row of id k is element k * row_elements + j of the initializer's stream), at most
  // max_rows of them (0: no limit).
  uint8_t table = 0;               // u8: 0 variable, 1 hash table
  uint64_t max_rows = 0;           // u64

  bool is_table() const { return table != 0; }
  // Elements of one row: the product of shape[1:] (0 for a scalar).
  int64_t RowElements() const {
    if (shape.empty()) return 0;
    int64_t n = 1;
    for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
    return n;
  }

  int64_t NumElements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  void Encode(Writer* w) const {
    w->PutString(name);
    w->Put<uint8_t>(static_cast<uint8_t>(dtype));
    w->Put<uint8_t>(static_cast<uint8_t>(shape.size()));
    for (int64_t d : shape) w->Put<int64_t>(d);
    w->Put<uint8_t>(static_cast<uint8_t>(optimizer));
    w->Put<uint8_t>(use_locking);
    w->Put<uint8_t>(use_nesterov);
    w->Put<double>(learning_rate);
    w->Put<double>(momentum);
    w->Put<double>(beta1);
    w->Put<double>(beta2);
    w->Put<double>(epsilon);
    w->Put<double>(slot_init);
    w->Put<uint32_t>(replicas_to_aggregate);
    w->Put<uint32_t>(total_num_replicas);
    for (double v : {rho, l1, l2, l2_shrinkage, lr_power, slot_init2, slot_init3}) w->Put(v);
    w->Put<uint8_t>(static_cast<uint8_t>(init.kind));
    w->Put<double>(init.a);
    w->Put<double>(init.b);
    w->Put<uint8_t>(init.fan_mode);
    w->Put<uint8_t>(init.distribution);
    w->Put<uint64_t>(init.seed);
    w->Put<uint64_t>(init.offset);
    w->Put<uint8_t>(static_cast<uint8_t>(init.full_shape.size()));
    for (int64_t d : init.full_shape) w->Put<int64_t>(d);
    w->Put<uint8_t>(table);
    w->Put<uint64_t>(max_rows);
  }
  Status Decode(Reader* r) {
    uint8_t dt, rank, opt;
    if (!r->GetString(&name, kMaxNameLength) || name.empty())
      return InvalidArgument("register: bad variable name (empty or longer than 1024 bytes)");
    if (!IsUtf8(reinterpret_cast<const uint8_t*>(name.data()), name.size())) {
      std::string shown;  // printable ASCII as is, every other byte as \xNN
      for (unsigned char c : name) {
        if (c >= 0x20 && c < 0x7f && c != '\\') {
          shown += static_cast<char>(c);
        } else {
          char buf[8];
          snprintf(buf, sizeof buf, "\\x%02x", c);
          shown += buf;
        }
      }
      name.clear();
      return InvalidArgument("register: variable name '" + shown + "' is not valid UTF-8");
    }
    if (!r->Get(&dt) || !r->Get(&rank)) return InvalidArgument("register: truncated spec");
    if (dt < 1 || dt > 3)
      return InvalidArgument("register '" + name + "': unknown dtype code " + std::to_string(dt));
    dtype = static_cast<DType>(dt);
    if (rank > kMaxRank)
      return InvalidArgument("register '" + name + "': rank " + std::to_string(rank) +
                             " exceeds the maximum of 8");
    shape.resize(rank);
    int64_t n = 1;
    for (auto& d : shape) {
      if (!r->Get(&d)) return InvalidArgument("register '" + name + "': truncated shape");
      if (d < 0 || (d > 0 && n > (int64_t{1} << 40) / d))
        return InvalidArgument("register '" + name + "': bad dimension " + std::to_string(d));
      n *= d;
    }
    if (!r->Get(&opt) || !r->Get(&use_locking) || !r->Get(&use_nesterov) ||
        !r->Get(&learning_rate) || !r->Get(&momentum) || !r->Get(&beta1) || !r->Get(&beta2) ||
        !r->Get(&epsilon) || !r->Get(&slot_init) || !r->Get(&replicas_to_aggregate) ||
        !r->Get(&total_num_replicas) || !r->Get(&rho) || !r->Get(&l1) || !r->Get(&l2) ||
        !r->Get(&l2_shrinkage) || !r->Get(&lr_power) || !r->Get(&slot_init2) ||
        !r->Get(&slot_init3))
      return InvalidArgument("register '" + name + "': truncated optimizer spec");
    uint8_t kind, full_rank;
    if (!r->Get(&kind) || !r->Get(&init.a) || !r->Get(&init.b) || !r->Get(&init.fan_mode) ||
        !r->Get(&init.distribution) || !r->Get(&init.seed) || !r->Get(&init.offset) ||
        !r->Get(&full_rank))
      return InvalidArgument("register '" + name + "': truncated initializer spec");
    if (kind > kMaxInitKind || init.fan_mode > 2 || init.distribution > 2)
      return InvalidArgument("register '" + name + "': initializer kind " +
                             std::to_string(kind) + ", fan mode " +
                             std::to_string(init.fan_mode) + ", distribution " +
                             std::to_string(init.distribution) +
                             "; valid: kinds 0..7, fan modes 0..2, distributions 0..2");
    init.kind = static_cast<InitKind>(kind);
    if (full_rank > kMaxRank)
      return InvalidArgument("register '" + name + "': initializer rank " +
                             std::to_string(full_rank) + " exceeds the maximum of 8");
    init.full_shape.resize(full_rank);
    int64_t full_n = 1;
    for (auto& d : init.full_shape) {
      if (!r->Get(&d)) return InvalidArgument("register '" + name + "': truncated initializer");
      if (d < 0 || (d > 0 && full_n > (int64_t{1} << 40) / d))
        return InvalidArgument("register '" + name + "': bad initializer dimension " +
                               std::to_string(d));
      full_n *= d;
    }
    if (!r->Get(&table) || !r->Get(&max_rows))
      return InvalidArgument("register '" + name + "': truncated table spec");
    if (table > 1)
      return InvalidArgument("register '" + name + "': table code " + std::to_string(table) +
                             "; valid: 0 (variable), 1 (hash table)");
    if (table) {
      if (shape.size() < 2 || shape[0] != 0)
        return InvalidArgument("register '" + name + "': a hash table's shape is [0, row "
                               "dims...] with no zero row dimension; got rank " +
                               std::to_string(shape.size()));
      // The row's elements obey the variables' bound (the first dimension, 0, hid them).
      int64_t row = 1;
      for (size_t i = 1; i < shape.size(); ++i) {
        if (shape[i] == 0 || row > (int64_t{1} << 40) / shape[i])
          return InvalidArgument("register '" + name + "': hash table row dimension " +
                                 std::to_string(shape[i]) + " is 0 or makes a row of more "
                                 "than 2^40 elements");
        row *= shape[i];
      }
      if (dtype == DType::kInt64)
        return InvalidArgument("register '" + name + "': a hash table holds float32 or "
                               "float64 rows, not int64");
      if (replicas_to_aggregate != 0 || total_num_replicas != 0)
        return InvalidArgument("register '" + name + "': hash tables are trained "
                               "asynchronously; replicas_to_aggregate must be 0");
      if (!(std::isfinite(init.a) && std::isfinite(init.b)))
        return InvalidArgument("register '" + name + "': initializer parameters must be finite");
      if (full_rank == 0) init.full_shape.assign(shape.begin() + 1, shape.end());
      return CheckOptimizer(opt);
    }
    if (max_rows != 0)
      return InvalidArgument("register '" + name + "': max_rows " + std::to_string(max_rows) +
                             " is for hash tables only");
    if (init.kind != InitKind::kNone) {
      if (full_rank == 0 && !shape.empty()) {
        init.full_shape = shape;  // not partitioned: the variable is the whole
        full_n = NumElements();
      }
      if (init.offset > static_cast<uint64_t>(full_n) ||
          static_cast<uint64_t>(NumElements()) > static_cast<uint64_t>(full_n) - init.offset)
        return InvalidArgument("register '" + name + "': a part of " +
                               std::to_string(NumElements()) + " elements at offset " +
                               std::to_string(init.offset) + " does not fit the whole of " +
                               std::to_string(full_n) + " elements");
      if (!(std::isfinite(init.a) && std::isfinite(init.b)))
        return InvalidArgument("register '" + name + "': initializer parameters must be finite");
      if (dtype == DType::kInt64 && init.kind > InitKind::kConstant)
        return InvalidArgument("register '" + name + "': a random initializer needs float32 "
                               "or float64, got int64");
    }
    if ((replicas_to_aggregate == 0) != (total_num_replicas == 0))
      return InvalidArgument("register '" + name + "': replicas_to_aggregate " +
                             std::to_string(replicas_to_aggregate) + " and total_num_replicas " +
                             std::to_string(total_num_replicas) +
                             " must be both 0 (asynchronous) or both >= 1");
    return CheckOptimizer(opt);
  }

 private:
  Status CheckOptimizer(uint8_t opt) {
    if (opt > kMaxOptimizer)
      return InvalidArgument("register '" + name + "': unknown optimizer code " +
                             std::to_string(opt));
    optimizer = static_cast<Optimizer>(opt);
    if (optimizer != Optimizer::kNone && dtype == DType::kInt64)
      return InvalidArgument("register '" + name + "': optimizers need float32 or float64, got int64");
    return Status::Ok();
  }
};

}  // namespace psrt
