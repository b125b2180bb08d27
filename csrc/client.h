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
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
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

class Client {
 public:
  Client(std::string job, int task);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Connects shard index `shard` (its ps task index) to `address`, retrying refused
  // connections with backoff (10 ms doubling to 500 ms) until timeout_s, then exchanges
  // HELLO. Unavailable naming /job:ps/task:K and the address when the deadline passes;
  // FailedPrecondition with both versions on a wire version mismatch.
  Status Connect(int shard, const std::string& address, double timeout_s);
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

  void set_timeout(double s) { timeout_s_ = s; }
  double timeout() const { return timeout_s_; }

  // Closes every connection (idempotent).
  void Close();

 private:
  struct Conn;
  std::string job_;
  int task_;
  double timeout_s_ = -1.0;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<RemoteVar> vars_;
};

}  // namespace psrt
