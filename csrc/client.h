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
//
// Request ids (version 7): every request of every connection takes its id from one counter
// per Client, so each connection sees increasing ids, and a reply is checked against the id
// sent for its own call. Every HELLO carries the Client's random non-zero client_id: with
// it, a ps task recognizes a SEQUENCED request it already applied (docs/protocol.md).
//
// Replication (SetReplicas, replica_set.h): a logical shard's variables may live on a group
// of ps tasks; Run then sends each mutation to every live replica and each read to the
// group's primary, and a background thread reconnects to a lost replica every 0.5 s.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "call.h"
#include "replica_set.h"
#include "status.h"
#include "wire.h"

namespace psrt {


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
  // the shard is not connected. A replicated shard: OK until its group lost its last whole
  // replica, then that failure.
  Status ShardStatus(int shard) const;

  // Runs a batch; see the file comment. Returns the first failed call's status (calls keep
  // their own). timeout_s < 0: no deadline. A read answered AWAITING by every replica it
  // went to is FailedPrecondition (uninitialized), as a PULL of an uninitialized variable.
  Status Run(std::vector<Call>* calls, double timeout_s);

  // Version 7: the id every HELLO of this Client carries (random, non-zero).
  uint64_t client_id() const { return client_id_; }
  // Replication (replica_set.h): logical shard `shard`'s variables live on `replicas`
  // (connected shards, preference order, starting with `shard`). Before a variable of the
  // shard is registered: FailedPrecondition otherwise; InvalidArgument naming a bad list.
  Status SetReplicas(int shard, const std::vector<int>& replicas);
  std::vector<std::pair<int, ReplicaState>> ReplicaStatus() const { return replicas_.States(); }
  // Lost replicas whose groups' reads moved to another whole replica; any thread, lock-free.
  uint64_t failovers() const { return replicas_.failovers(); }
  // Log lines of the replica groups since the last call; each starts with its level, 'W'
  // (warning) or 'I' (info). Any thread.
  std::vector<std::string> TakeReplicaEvents() { return replicas_.TakeEvents(); }
  // The physical shard a read of logical shard `shard` goes to now (-1: none is live).
  int ReadShard(int shard) const { return replicas_.Primary(shard); }
  // The shard is a replica this Client lost and has not reconnected yet.
  bool ShardDown(int shard) const { return replicas_.Dead(shard); }

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

  // Connects to `address` and exchanges HELLO on the request connection and (with a
  // heartbeat timeout) a heartbeat connection, within timeout_s; `retry`: refused
  // connections are retried with backoff until then. Any thread (reads only what the
  // constructor and SetCluster set).
  Status Dial(const std::string& address, const std::string& name, double timeout_s,
              bool retry, const std::string& expect_job, int expect_task,
              ReplicaSet::Dialed* out);
  // The reconnect thread's dial of a lost replica: one attempt within 1 s.
  Status Redial(const ReplicaSet::Target& t, ReplicaSet::Dialed* out);
  // Sends every call and reads every reply (the file comment); ids are the calls' own, or the
  // next of the counter where 0.
  void RunBatch(const std::vector<Call*>& calls, double timeout_s);
  // Run with replica groups (client_replicas.cc).
  Status RunReplicated(std::vector<Call>* calls, double timeout_s);
  // The status of every shard's connection (heartbeat verdicts applied).
  std::vector<Status> Links();
  // Adopts the connections the reconnect thread made and registers the variables there again.
  void Adopt(double timeout_s);
  // A read's AWAITING reply as the logical result: FailedPrecondition (uninitialized).
  void FinishAwaiting(Call* c) const;
  // The connection of a connected shard, as the replica code needs it (client.cc owns Conn).
  ReplicaSet::Target TargetOf(int shard) const;
  const Status& ConnError(int shard) const;
  void FailConn(int shard, const Status& st);
  // Replaces the shard's connection with a dialed one (heartbeat watch included); true when
  // the ps task kept its incarnation. *old_incarnation: the one before.
  bool Replace(const ReplicaSet::Dialed& d, int64_t* old_incarnation);
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
  mutable std::mutex hello_mu_;  // guards the two below: the reconnect thread reads them
  std::vector<JobDigest> cluster_jobs_;
  std::string cluster_description_;
  bool atomic_pushes_ = false;
  double heartbeat_timeout_s_ = 0;
  double timeout_s_ = -1.0;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<RemoteVar> vars_;
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};
  uint64_t client_id_ = 0;
  uint64_t next_request_id_ = 1;  // the one counter of every request's id
  bool closed_ = false;

  std::mutex hb_mu_;
  std::vector<Watch> hb_;
  std::vector<int> hb_retired_;  // heartbeat fds for the heartbeat thread to close
  bool hb_stop_ = false;
  int hb_wake_[2] = {-1, -1};
  std::thread hb_thread_;
  // Last: destroyed (its reconnect thread joined) before the members its dials read.
  ReplicaSet replicas_;
};

}  // namespace psrt
