// The value types a Client's batches are made of: one request and its result (Call), and what
// a worker knows of a variable it registered (RemoteVar), with its place on every replica of
// its group (replica_set.h). Plain values: no locks, no ownership of the memory they point to.
#pragma once

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "status.h"
#include "wire.h"

namespace psrt {

using Clock = std::chrono::steady_clock;

// One request of a batch and, after Run, its result.
struct Call {
  Op op = Op::kPing;
  int shard = 0;            // a variable's logical shard; else the ps task's shard index
  int handle = -1;          // the variable (Client::var) the request is for; -1: none
  uint32_t var_id = 0;
  uint8_t slot = 0;
  uint8_t flags = 0;
  uint8_t flags2 = 0;       // request kFlag2* bits; Run sets SEQUENCED on replicated mutations
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
  // Set by Run: the request id sent (0: Run picks the next of the Client's counter).
  uint64_t request_id = 0;
  // Results.
  Status status = Status(Code::kUnknown, "not run");
  int64_t step_out = 0;
  uint8_t flags_out = 0;
  uint8_t flags2_out = 0;   // reply kFlag2* bits (DUPLICATE, AWAITING)
  uint32_t var_id_out = 0;
  uint32_t count_out = 0;
  // A REGISTER of a replicated shard: (physical shard, variable id) of every replica that
  // registered it.
  std::vector<std::pair<int, uint32_t>> replica_ids;
};

// Where a replicated variable lives on one replica of its group.
struct ReplicaVar {
  int shard = 0;            // the physical shard (ps task's connection)
  uint32_t id = 0;          // the variable's id there
  bool registered = false;  // false: not registered there yet (the replica was lost)
};

// What a worker knows of a variable it registered.
struct RemoteVar {
  int handle = -1;          // its index in Client::var
  int shard = 0;            // the logical shard (the ps task its device names)
  uint32_t id = 0;          // its id there (the group's first replica when replicated)
  VarSpec spec;
  size_t nbytes = 0;
  bool initialized = false;
  std::vector<ReplicaVar> replicas;  // one per member of its group, in group order; empty:
                                     // not replicated
};

}  // namespace psrt
