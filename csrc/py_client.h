// PyClient: psrt._core.Client, a worker's connections to every ps task (client.h) as Python
// sees them. Arguments are converted and checked with the GIL held; every batch of requests
// then runs with the GIL released (RunLocked), one batch at a time under mu_. Arrays are used
// in place and no pointer to them is kept after a call returns. Methods are bound in
// RegisterClient (py_client.cc); their bodies live by family in py_client*.cc.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client.h"
#include "py_convert.h"
#include "wire.h"

namespace psrt {

class PyClient {
 public:
  PyClient(const std::string& job, int task, const py::bytes& secret, double heartbeat_timeout)
      : client_(job, task, secret, heartbeat_timeout) {}

  // ---- Setup and session (py_client.cc) ----
  void connect(int shard, const std::string& address, double timeout_s,
               const std::string& expect_job, int expect_task);
  // jobs: (job name, digest) of this worker's cluster (docs/protocol.md, "Cluster digests").
  void set_cluster(const std::vector<std::pair<std::string, uint64_t>>& jobs,
                   const std::string& description);
  bool atomic_pushes() const { return client_.atomic_pushes(); }
  void set_atomic_pushes(bool on) { client_.set_atomic_pushes(on); }
  // specs: (shard, name, dtype, shape, optimizer, hyper-parameters dict, init or None)
  std::vector<std::pair<int, bool>> register_vars(const py::list& specs);
  py::tuple var_info(int handle) const;
  py::list list_variables(int shard);
  void ping(const std::vector<int>& shards);
  void worker_done(const std::string& job, int task);
  py::bytes cluster_info(int shard);
  // REPLICA_READ (version 7): the ReplicaState of variable var_id (list_variables' id) on
  // shard, raw, for a ps task's copier (Server.replica_install).
  py::bytes replica_read(int shard, uint32_t var_id);
  void close();

  // ---- The requests of a training step (py_client_train.cc) ----
  void pull(const std::vector<int>& handles, const std::vector<py::array>& outs, int slot);
  // Pushes dense gradients (and row-sparse ones) and, when step_handle >= 0, increments that
  // int64 variable by step_delta in the same batch. Returns the new step (or -1).
  int64_t push(const std::vector<int>& handles, const std::vector<py::array>& grads,
               std::optional<double> lr, int step_handle, int64_t step_delta,
               std::optional<std::vector<py::array>> return_values,
               const std::vector<int>& sparse_handles,
               const std::vector<py::array>& sparse_indices,
               const std::vector<py::array>& sparse_rows);
  // One synchronous training step in one parallel round trip: the tagged pushes (dense, then
  // row-sparse), the global step's tagged increment, then the waits. See _core.pyi.
  py::tuple sync_step(const std::vector<int>& push_handles, const std::vector<py::array>& grads,
                      const std::vector<int>& sparse_handles,
                      const std::vector<py::array>& sparse_indices,
                      const std::vector<py::array>& sparse_rows, std::optional<double> lr,
                      int64_t tag, int step_handle, bool increment,
                      const std::vector<int>& wait_handles, const std::vector<py::array>& outs,
                      const std::vector<int64_t>& needs, int64_t step_need, double wait_secs);
  int64_t push_sparse(int handle, py::array indices, py::array rows, std::optional<double> lr,
                      int step_handle, int64_t step_delta);
  // Rows of several variables in one parallel round trip (one request per variable).
  void pull_rows_batch(const std::vector<int>& handles, const std::vector<py::array>& indices,
                       const std::vector<py::array>& outs);
  void pull_rows(int handle, py::array indices, py::array out);
  void assign(const std::vector<int>& handles, const std::vector<py::array>& values, int slot,
              bool add, bool restore = false);
  int64_t step(int handle, int64_t delta, bool increment);
  std::vector<bool> is_initialized(const std::vector<int>& handles);

  // ---- Hash tables (py_client_tables.cc) ----
  // A page of a hash table's rows: (ids int64[n], counts int64[n], values [n, row...],
  // [slot arrays], next cursor or -1).
  py::tuple table_export(int handle, int64_t cursor, uint32_t max_rows);
  void table_import(int handle, py::array ids, py::array counts, py::array values,
                    const std::vector<py::array>& slots, bool clear);
  // (rows evicted, rows left)
  std::pair<uint32_t, int64_t> table_evict(int handle, uint64_t unseen, uint64_t min_count);

  // ---- Replication (py_client.cc) ----
  void set_replicas(int shard, const std::vector<int>& replicas);
  std::vector<std::pair<int, std::string>> replica_status();
  uint64_t failovers() const { return client_.failovers(); }
  uint64_t client_id() const { return client_.client_id(); }

  int num_shards() const { return client_.num_shards(); }
  // Lock-free: read by a progress thread while another thread is inside a call.
  uint64_t bytes_sent() const { return client_.bytes_sent(); }
  uint64_t bytes_received() const { return client_.bytes_received(); }
  std::string shard_name(int s) const { return client_.ShardName(s); }
  int64_t incarnation(int s) const { return client_.Incarnation(s); }
  double timeout() const { return client_.timeout(); }
  void set_timeout(double t) { client_.set_timeout(t); }

 private:
  // The variable of handle h (register's answer); InvalidArgument raised for an unknown one.
  const RemoteVar& Var(int h) const;
  // A request of `op` to v, on its shard, by its id and dtype.
  Call MakeCall(Op op, const RemoteVar& v) const;
  // Runs one batch (client_.Run) under mu_, with the GIL released, then logs what the
  // replica groups reported meanwhile.
  Status RunLocked(std::vector<Call>* calls);
  // The replica groups' log lines, to the "psrt" logger (GIL held).
  void LogReplicaEvents();
  // A PUSH of a dense gradient (checked against the variable), with `lr` when given.
  Call DensePush(const RemoteVar& v, const py::array& grad, std::optional<double> lr) const;
  // A row request of `indices` (1-D C-contiguous int64) to variable v: a PULL into `rows` or
  // a PUSH of `rows` (count x the variable's row shape, its dtype), both checked first.
  Call RowCall(Op op, const RemoteVar& v, const py::array& indices, const py::array& rows) const;
  // A row-sparse PUSH of `indices` and `rows`, with `lr` when given.
  Call SparsePush(const RemoteVar& v, const py::array& indices, const py::array& rows,
                  std::optional<double> lr) const;
  // A row PULL of `indices` of handle's variable into `out`.
  Call RowPull(int handle, const py::array& indices, const py::array& out);

  Client client_;
  std::mutex mu_;  // one batch at a time; taken only with the GIL released
};

}  // namespace psrt
