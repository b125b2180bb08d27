// Server: the ps side of the transport. Accepts connections on one port and serves each
// with its own thread: read a frame, validate it, apply it to the VariableStore, reply.
//
// Threads: one acceptor plus one per connection. None of them ever takes the Python GIL.
// Replies on a connection are sent in request order. Stop() shuts every socket down, joins
// every thread and closes the listening port, so the port can be bound again at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "budget.h"
#include "events.h"
#include "heartbeats.h"
#include "status.h"
#include "store.h"
#include "sync_lifecycle.h"

namespace psrt {

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
  // The cluster this task belongs to (UTF-8 JSON: {"cluster": {job: [addresses]}, "job_name":
  // ..., "task_index": ...}), returned by CLUSTER_INFO; empty: unknown. At most 1 MiB.
  std::string cluster_def;
};

class Server {
 public:
  // Binds, listens and starts serving. Unavailable "address H:P already in use" when the
  // port is taken.
  static Status Create(const ServerOptions& options, std::unique_ptr<Server>* out);
  ~Server();

  int port() const { return port_; }
  int64_t incarnation() const { return incarnation_; }
  VariableStore* store() { return &store_; }
  // Replaces what CLUSTER_INFO answers (a server started on port 0 learns its own address
  // only once bound). InvalidArgument past 1 MiB.
  Status SetClusterDef(const std::string& cluster_def);

  // Ends every thread and closes the port. Idempotent; blocks until the threads have exited.
  void Stop();
  // Waits up to timeout_s seconds (< 0: forever) for Stop(); true when stopped.
  bool Wait(double timeout_s);
  bool stopped() const { return stopped_.load(); }

  // Tasks that sent WorkerDone, as (job, task) pairs.
  std::vector<std::pair<std::string, int>> DoneWorkers() const;
  // Number of connections currently open.
  int NumConnections() const;
  // The most in-flight payload bytes held at once since the start (<= max_inflight_bytes).
  uint64_t PeakInflightBytes() const { return budget_.peak(); }
  // Security and housekeeping events (failed authentication with the peer's address, refused
  // or idle connections closed) since the last call, oldest first; at most kMaxEvents kept.
  std::vector<std::string> TakeEvents();
  static constexpr size_t kMaxEvents = 1000;

 private:
  struct Connection;
  explicit Server(const ServerOptions& options);
  void AcceptLoop();
  // accept() failed with `err` (EMFILE and the like): frees the reserve descriptor to accept
  // one pending peer, answers its HELLO with UNAVAILABLE naming the reason, closes it and
  // takes the reserve again.
  void ShedPending(int err);
  // Answers the HELLO a fresh peer is about to send with `code` and `msg`, and closes fd.
  static void Refuse(int fd, Code code, const std::string& msg);
  // Waits until a frame starts arriving on conn; false when the connection must close (the
  // server stops, HELLO/AUTH took too long, or it idled past idle_timeout_s).
  bool AwaitFrame(Connection* conn);
  // After HELLO (no secret) or AUTH: a request connection starts a session of its task.
  void Admit(Connection* conn);
  void Serve(Connection* conn);
  // Handles one validated frame; returns false when the connection must close.
  bool Handle(Connection* conn, const Header& h);
  // Sizes conn->out for the reply of a row PULL of h.count rows; ResourceExhausted past
  // max_payload or memory.
  Status RowReplyBuffer(Connection* conn, const Header& h, const Variable* var,
                        size_t row_bytes);
  // A row-sparse PULL of a hash table (rows created on first use); ids: h.count int64s.
  bool PullTableRows(Connection* conn, const Header& h, Variable* var, const int64_t* ids);
  // Streamed frames (larger than one chunk); each returns false when the connection must
  // close (the peer vanished or stalled mid-frame: the chunks applied so far stay applied).
  bool StreamPush(Connection* conn, const Header& h, Variable* var);
  bool StreamAssign(Connection* conn, const Header& h, Variable* var);
  bool StreamRegister(Connection* conn, const Header& h);
  // Reads `n` payload bytes through the budget in chunks of at most chunk_bytes (whole
  // elements of `elem` bytes) and calls use(chunk, byte offset, length) for each.
  bool ReadChunks(Connection* conn, uint64_t n, size_t elem,
                  const std::function<void(const uint8_t*, uint64_t, size_t)>& use);
  bool Reply(Connection* conn, const Header& req, const Status& st, int64_t step = 0,
             uint8_t flags = 0, uint32_t var_id = 0, const void* payload = nullptr,
             size_t len = 0, uint32_t count = 0);
  ServerOptions options_;
  int listen_fd_ = -1;
  int port_ = 0;
  int wake_pipe_[2] = {-1, -1};   // written by Stop() to wake the acceptor's poll
  int reserve_fd_ = -1;           // /dev/null, given up to shed a peer when fds run out
  int64_t incarnation_ = 0;
  VariableStore store_;
  Budget budget_;
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> stopped_{false};
  SyncLifecycle sync_;

  mutable std::mutex mu_;           // guards conns_, stopped condition
  std::mutex cluster_mu_;           // guards options_.cluster_def
  std::condition_variable stopped_cv_;
  std::vector<std::unique_ptr<Connection>> conns_;
  EventLog events_{kMaxEvents};
  Heartbeats heartbeats_;
  std::mutex stop_mu_;              // serializes Stop()
};

}  // namespace psrt
