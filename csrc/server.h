// Server: the ps side of the transport. Accepts connections on one port and serves each
// with its own thread: read a frame, validate it, apply it to the VariableStore, reply.
//
// Threads: one acceptor plus one per connection. None of them ever takes the Python GIL.
// Replies on a connection are sent in request order. Stop() shuts every socket down, joins
// every thread and closes the listening port, so the port can be bound again at once.
//
// This is the public face; the state and the parts that serve (acceptor, connections, the
// synchronous-training lifecycle, the op handlers) are private to csrc/ (server_impl.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "status.h"
#include "wire.h"

namespace psrt {

class VariableStore;
struct ServerImpl;

// Version 6: one job of the cluster this task was given, as HELLO compares it.
struct ClusterJob {
  std::string job;
  uint64_t digest = 0;  // docs/protocol.md, "Cluster digests"
  std::string tasks;    // its addresses in task order, for messages ("h:1, h:2")
};

struct ServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;                                 // 0: the OS picks
  std::string job = "ps";
  int task = 0;
  // Largest frame the server reads whole before using it (bytes): every frame except the
  // streamed ones below. Larger ones are refused with RESOURCE_EXHAUSTED.
  uint64_t max_payload = kDefaultMaxPayload;
  // Dense PUSH, dense ASSIGN and REGISTER's initial value larger than one chunk are read and
  // applied chunk by chunk (bytes; rounded down to whole elements): no frame size limit caps
  // a variable, and each chunk is applied whole while the next one arrives.
  uint64_t chunk_bytes = uint64_t{512} << 10;
  // In-flight budget (bytes): all connections together hold at most this much received
  // payload not yet applied; past it the server stops reading sockets until memory is
  // released, so senders block (backpressure) instead of the ps growing. Frames of at most
  // 64 KiB use a small per-connection buffer outside the budget.
  uint64_t max_inflight_bytes = uint64_t{256} << 20;
  // A peer that stops sending in the middle of a frame for this long (seconds) is dropped
  // and its buffers released; <= 0: never.
  double stall_timeout_s = 60.0;
  // The job's shared secret; empty: no authentication. With one, every connection must
  // answer HELLO's challenge (AUTH) before any other request is served.
  std::string secret;
  // Seconds a new connection has to complete HELLO (and AUTH); <= 0: no limit.
  double hello_timeout_s = 10.0;
  // Seconds without a frame after which a connection is closed: a heartbeat connection, or a
  // request connection whose task's heartbeat is silent as long; <= 0: never.
  double idle_timeout_s = 600.0;
  // Connections served at once; past it new peers get RESOURCE_EXHAUSTED; <= 0: no limit.
  int max_connections = 1024;
  // Bytes the variables (values, slots, synchronous sums, table arenas) may hold at most;
  // registrations and table growth past it are RESOURCE_EXHAUSTED before allocating
  // (memory_account.h). 0: no limit.
  uint64_t memory_limit_bytes = 0;
  // The cluster this task belongs to (UTF-8 JSON: {"cluster": {job: [addresses]}, "job_name":
  // ..., "task_index": ...}), returned by CLUSTER_INFO; empty: unknown. At most 1 MiB.
  std::string cluster_def;
  // Version 6: the jobs of that cluster whose every task is known (no port 0, no gap in the
  // indices), compared with a HELLO's digests; empty: nothing to compare.
  std::vector<ClusterJob> cluster_jobs;
  // Failed authentications per peer address (auth_throttle.h): a burst of
  // auth_failure_burst, then at most auth_failures_per_s (<= 0: unlimited); what was refused
  // is summarized once per auth_summary_s in the events.
  double auth_failures_per_s = 1.0;
  double auth_failure_burst = 10.0;
  double auth_summary_s = 10.0;
  // Version 7: ps replication (replication.h, docs/protocol.md "Replication"): mutations hold
  // their variable's replication section, new variables registered without a value await a
  // copy, and REPLICA_READ / REPLICA_INSTALL are served. Off: none of it, no lock taken.
  bool replication = false;
};

class Server {
 public:
  // Binds, listens and starts serving. Unavailable "address H:P already in use" when the
  // port is taken.
  static Status Create(const ServerOptions& options, std::unique_ptr<Server>* out);
  ~Server();

  int port() const;
  int64_t incarnation() const;
  VariableStore* store();
  // Replaces what CLUSTER_INFO answers (a server started on port 0 learns its own address
  // only once bound). InvalidArgument past 1 MiB.
  Status SetClusterDef(const std::string& cluster_def);
  // Replaces the jobs HELLO compares (options.cluster_jobs).
  void SetClusterJobs(const std::vector<ClusterJob>& jobs);

  // Ends every thread and closes the port. Idempotent; blocks until the threads have exited.
  void Stop();
  // Waits up to timeout_s seconds (< 0: forever) for Stop(); true when stopped.
  bool Wait(double timeout_s);
  bool stopped() const;

  // Tasks that sent WorkerDone, as (job, task) pairs.
  std::vector<std::pair<std::string, int>> DoneWorkers() const;
  // Bytes the variables hold against memory_limit_bytes (memory_account.h).
  uint64_t ReservedBytes() const;
  // Number of connections currently open.
  int NumConnections() const;
  // The most in-flight payload bytes held at once since the start (<= max_inflight_bytes).
  uint64_t PeakInflightBytes() const;
  // Security and housekeeping events (failed authentication with the peer's address, refused
  // or idle connections closed) since the last call, oldest first; at most kMaxEvents kept.
  std::vector<std::string> TakeEvents();
  static constexpr size_t kMaxEvents = 1000;

  // ---- Replication (version 7; replication.h) ----------------------------------------------
  // On before serving (options.replication); off ends every awaiting state.
  void SetReplication(bool on);
  bool replication() const;
  // Seconds a mutation of an awaiting variable waits for its copy (default 30); InvalidArgument
  // outside 0..3600.
  Status SetReplicaWaitSeconds(double s);
  double replica_wait_s() const;
  // Names of the variables awaiting a copy, in id order.
  std::vector<std::string> AwaitingVariables() const;
  // REPLICA_INSTALL of a ReplicaState (REPLICA_READ's reply) into the variable `name`, in
  // process: NotFound naming it; else as the op (replication.h, Replication::Install).
  Status ReplicaInstall(const std::string& name, const uint8_t* state, size_t n);
  // The marks: (client id, highest SEQUENCED request id completed), sorted by client id.
  std::vector<std::pair<uint64_t, uint64_t>> Marks() const;

 private:
  explicit Server(const ServerOptions& options);
  std::unique_ptr<ServerImpl> impl_;
};

}  // namespace psrt
