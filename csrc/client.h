// Client: a worker's connections to every ps task, and batched requests over them.
//
// A batch (Run) sends every request of every shard before it waits for any reply, and
// drives all shards at once from one thread with non-blocking sockets and poll(): shards
// transfer in parallel and no extra thread is woken. Reply payloads land straight in the
// caller's memory (Call::recv); request payloads are sent from the caller's memory (no copy).
//
// Thread-safety: a Client is used by one thread at a time (the Python Session holds the GIL
// until it calls in, and the binding serializes calls with mu_). A connection's first I/O
// failure is kept and returned by every later call on that shard (sticky failure).
// Blocking: Connect and Run block up to their timeouts; callers release the GIL.
//
// Liveness: with a heartbeat timeout, Connect opens a second connection to each ps task that
// carries only PINGs, driven by one heartbeat thread per Client. A ps task that leaves a PING
// unanswered for the timeout (a stopped process, a vanished host) is condemned: its request
// connection is shut down, so a call waiting on it ends at once with UnavailableError naming
// the task and the silence, and so does every later call until the next Connect. Long
// operations on the request connection (a big push, a synchronous wait) do not delay PINGs.
// The heartbeat state (hb_*) is guarded by hb_mu_, which is never held across blocking I/O.
//
// Authentication: with the job's secret, Connect answers the ps task's challenge (HMAC-SHA256
// over fresh nonces, auth.h) and checks the ps task's proof in turn.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "status.h"
#include "wire.h"

namespace psrt {

// One request of a batch and, after Run, its result.
struct Call {
  Op op = Op::kPing;
  int shard = 0;
  uint32_t var_id = 0;
  uint8_t slot = 0;
  uint8_t flags = 0;
  DType dtype = DType::kInvalid;
  uint32_t count = 0;
  int64_t step = 0;
  double arg0 = 0.0;
  double arg1 = 0.0;
  const void* send[2] = {nullptr, nullptr};   // payload parts, sent in order
  size_t send_len[2] = {0, 0};
  void* recv = nullptr;     // an OK reply's payload goes here and must be exactly recv_len
  size_t recv_len = 0;
  std::vector<uint8_t> recv_vec;   // used when recv is null
  // Results.
  Status status = Status(Code::kUnknown, "not run");
  int64_t step_out = 0;
  uint8_t flags_out = 0;
  uint32_t var_id_out = 0;
  uint32_t count_out = 0;
};

// What a worker knows of a variable it registered.
struct RemoteVar {
  int shard = 0;
  uint32_t id = 0;
  VarSpec spec;
  size_t nbytes = 0;
  bool initialized = false;
};

using Clock = std::chrono::steady_clock;

class Client {
 public:
  // secret: the job's shared secret (empty: none). heartbeat_timeout_s <= 0: no heartbeat.
  Client(std::string job, int task, std::string secret = "", double heartbeat_timeout_s = 0);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Connects shard index `shard` (its ps task index) to `address`, retrying refused
  // connections with backoff (10 ms doubling to 500 ms) until timeout_s, then exchanges
  // HELLO (and AUTH). Unavailable naming /job:ps/task:K and the address when the deadline
  // passes; FailedPrecondition with both versions on a wire version mismatch;
  // Unauthenticated when the secrets of the two sides do not match (or one side has none).
  //
  // Version 6: with expect_job, the task at `address` must be /job:expect_job/task:
  // expect_task (its HELLO reply says which task it is, and it checks the HELLO in turn),
  // and the jobs of SetCluster's cluster that both sides know must agree:
  // FailedPrecondition naming both tasks and this worker's cluster otherwise.
  Status Connect(int shard, const std::string& address, double timeout_s,
                 const std::string& expect_job = "", int expect_task = -1);
  // The digests of this worker's cluster that every HELLO carries (docs/protocol.md,
  // "Cluster digests"), and the cluster as messages show it. Before Connect.
  void SetCluster(std::vector<JobDigest> jobs, std::string description);
  // Dense PUSHes carry the ATOMIC flag (ConfigProto.atomic_pushes).
  void set_atomic_pushes(bool on) { atomic_pushes_ = on; }
  bool atomic_pushes() const { return atomic_pushes_; }
  int num_shards() const { return static_cast<int>(conns_.size()); }
  std::string ShardName(int shard) const;
  int64_t Incarnation(int shard) const;
  // The sticky failure of the shard's connection (OK while healthy); FailedPrecondition when
  // the shard is not connected.
  Status ShardStatus(int shard) const;

  // Runs a batch; see the file comment. Returns the first failed call's status (calls keep
  // their own). timeout_s < 0: no deadline.
  Status Run(std::vector<Call>* calls, double timeout_s);

  // Typed operations, all batched through Run. Handles index vars().
  Status Register(const std::vector<VarSpec>& specs, const std::vector<int>& shards,
                  const std::vector<const void*>& inits, std::vector<int>* handles);
  const RemoteVar& var(int handle) const { return vars_[handle]; }
  int num_vars() const { return static_cast<int>(vars_.size()); }

  // Bytes sent and received on the request connections since construction (headers and
  // payloads; not the handshakes, not the heartbeats). Any thread may read them at any time,
  // lock-free, also while a Run is under way (relaxed atomics: a progress report's figures).
  uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }
  uint64_t bytes_received() const { return bytes_received_.load(std::memory_order_relaxed); }

  void set_timeout(double s) { timeout_s_ = s; }
  double timeout() const { return timeout_s_; }

  // Closes every connection (idempotent).
  void Close();

 private:
  struct Conn;
  // The heartbeat watch of one shard; guarded by hb_mu_.
  struct Watch {
    int fd = -1;                 // the heartbeat connection (owned by the heartbeat thread)
    int data_fd = -1;            // the request connection, shut down on a verdict
    std::string name;
    bool waiting = false;        // a PING is unanswered
    Clock::time_point last_answer;  // or when the first unanswered PING went out
    Clock::time_point last_sent;
    uint64_t next_id = 0;
    uint8_t buf[kHeaderSize] = {};
    size_t got = 0;
    Status verdict;              // non-OK: the ps task stopped answering
  };

  // HELLO (+ AUTH when challenged) on a fresh blocking fd, which is left non-blocking.
  Status Handshake(int fd, const std::string& name, uint32_t channel, Clock::time_point deadline,
                   int64_t* incarnation, const std::string& expect_job, int expect_task);
  void WatchShard(int shard, int data_fd, int hb_fd, const std::string& name);
  Status HeartbeatVerdict(int shard);
  void HeartbeatLoop();
  void Condemn(Watch* w, const std::string& why);  // requires hb_mu_

  std::string job_;
  int task_;
  std::string secret_;
  std::vector<JobDigest> cluster_jobs_;
  std::string cluster_description_;
  bool atomic_pushes_ = false;
  double heartbeat_timeout_s_ = 0;
  double timeout_s_ = -1.0;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<RemoteVar> vars_;
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};

  std::mutex hb_mu_;
  std::vector<Watch> hb_;
  std::vector<int> hb_retired_;  // heartbeat fds for the heartbeat thread to close
  bool hb_stop_ = false;
  int hb_wake_[2] = {-1, -1};
  std::thread hb_thread_;
};

}  // namespace psrt
