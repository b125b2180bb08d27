// psrt._core.Client: the requests of a training step. Pulls into preallocated arrays, pushes
// of dense and row-sparse gradients (with the global step's increment in the same batch),
// synchronous training's tagged step, assigns and step reads; every one a batch of requests
// sent to all shards in one parallel round trip, with the GIL released.
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "py_client.h"
#include "py_convert.h"
#include "store.h"

namespace psrt {

Call PyClient::DensePush(const RemoteVar& v, const py::array& grad,
                         std::optional<double> lr) const {
  CheckArray(grad, "gradient", v.spec.name, v.spec.dtype, v.spec.shape, false);
  Call c = MakeCall(Op::kPush, v);
  c.send[0] = grad.data();
  c.send_len[0] = v.nbytes;
  if (lr) {
    c.flags |= kFlagHasLr;
    c.arg0 = *lr;
  }
  if (client_.atomic_pushes()) c.flags |= kFlagAtomic;
  return c;
}

Call PyClient::RowCall(Op op, const RemoteVar& v, const py::array& indices,
                       const py::array& rows) const {
  const bool pull = op == Op::kPull;
  if (v.spec.shape.empty())
    Raise(InvalidArgument(std::string(pull ? "row pull from" : "row-sparse push to") +
                          " scalar variable '" + v.spec.name + "'"));
  if (ArrayDType(indices) != DType::kInt64 || indices.ndim() != 1 || !CContiguous(indices))
    Raise(InvalidArgument("indices for variable '" + v.spec.name +
                          "' must be a 1-D C-contiguous int64 array; got " +
                          DTypeStr(indices) + ShapeOf(indices)));
  std::vector<int64_t> row_shape = v.spec.shape;
  row_shape[0] = indices.size();
  CheckArray(rows, pull ? "row output" : "gradient rows", v.spec.name, v.spec.dtype,
             row_shape, pull);
  Call c = MakeCall(op, v);
  c.flags |= kFlagSparse;
  c.count = static_cast<uint32_t>(indices.size());
  c.send[0] = indices.data();
  c.send_len[0] = static_cast<size_t>(indices.size()) * 8;
  if (pull) {
    c.recv = const_cast<void*>(rows.data());
    c.recv_len = static_cast<size_t>(rows.nbytes());
  } else {
    c.send[1] = rows.data();
    c.send_len[1] = static_cast<size_t>(rows.nbytes());
  }
  return c;
}

Call PyClient::SparsePush(const RemoteVar& v, const py::array& indices,
                          const py::array& rows, std::optional<double> lr) const {
  Call c = RowCall(Op::kPush, v, indices, rows);
  if (lr) {
    c.flags |= kFlagHasLr;
    c.arg0 = *lr;
  }
  return c;
}

Call PyClient::RowPull(int handle, const py::array& indices, const py::array& out) {
  return RowCall(Op::kPull, Var(handle), indices, out);
}

void PyClient::pull(const std::vector<int>& handles, const std::vector<py::array>& outs,
                    int slot) {
  if (handles.size() != outs.size())
    Raise(InvalidArgument("pull: " + std::to_string(handles.size()) + " variables but " +
                          std::to_string(outs.size()) + " output arrays"));
  std::vector<Call> calls;
  calls.reserve(handles.size());
  for (size_t i = 0; i < handles.size(); ++i) {
    const RemoteVar& v = Var(handles[i]);
    CheckArray(outs[i], "pull output", v.spec.name, v.spec.dtype, v.spec.shape, true);
    Call c = MakeCall(Op::kPull, v);
    c.slot = static_cast<uint8_t>(slot);
    c.recv = const_cast<void*>(outs[i].data());
    c.recv_len = v.nbytes;
    calls.push_back(std::move(c));
  }
  Check(RunLocked(&calls));
}

int64_t PyClient::push(const std::vector<int>& handles, const std::vector<py::array>& grads,
                       std::optional<double> lr, int step_handle, int64_t step_delta,
                       std::optional<std::vector<py::array>> return_values,
                       const std::vector<int>& sparse_handles,
                       const std::vector<py::array>& sparse_indices,
                       const std::vector<py::array>& sparse_rows) {
  if (handles.size() != grads.size())
    Raise(InvalidArgument("push: " + std::to_string(handles.size()) + " variables but " +
                          std::to_string(grads.size()) + " gradients"));
  if (return_values && return_values->size() != handles.size())
    Raise(InvalidArgument("push: return_values must have one array per variable"));
  if (sparse_handles.size() != sparse_indices.size() ||
      sparse_handles.size() != sparse_rows.size())
    Raise(InvalidArgument("push: sparse_handles, sparse_indices and sparse_rows must have "
                          "the same length"));
  std::vector<Call> calls;
  calls.reserve(handles.size() + sparse_handles.size() + 1);
  // Row-sparse gradients go in the same batch, so every shard gets its dense and sparse
  // updates in one parallel round trip.
  for (size_t i = 0; i < sparse_handles.size(); ++i)
    calls.push_back(SparsePush(Var(sparse_handles[i]), sparse_indices[i], sparse_rows[i], lr));
  for (size_t i = 0; i < handles.size(); ++i) {
    const RemoteVar& v = Var(handles[i]);
    Call c = DensePush(v, grads[i], lr);
    if (return_values) {
      CheckArray((*return_values)[i], "return value", v.spec.name, v.spec.dtype, v.spec.shape,
                 true);
      c.flags |= kFlagReturnValue;
      c.recv = const_cast<void*>((*return_values)[i].data());
      c.recv_len = v.nbytes;
    }
    calls.push_back(std::move(c));
  }
  if (step_handle >= 0) {
    Call c = MakeCall(Op::kStepIncrement, Var(step_handle));
    c.step = step_delta;
    calls.push_back(std::move(c));
  }
  Check(RunLocked(&calls));
  return step_handle >= 0 ? calls.back().step_out : -1;
}

py::tuple PyClient::sync_step(const std::vector<int>& push_handles,
                              const std::vector<py::array>& grads,
                              const std::vector<int>& sparse_handles,
                              const std::vector<py::array>& sparse_indices,
                              const std::vector<py::array>& sparse_rows, std::optional<double> lr,
                              int64_t tag, int step_handle, bool increment,
                              const std::vector<int>& wait_handles,
                              const std::vector<py::array>& outs,
                              const std::vector<int64_t>& needs, int64_t step_need,
                              double wait_secs) {
  if (push_handles.size() != grads.size())
    Raise(InvalidArgument("sync_step: " + std::to_string(push_handles.size()) +
                          " variables but " + std::to_string(grads.size()) + " gradients"));
  if (sparse_handles.size() != sparse_indices.size() ||
      sparse_handles.size() != sparse_rows.size())
    Raise(InvalidArgument("sync_step: sparse_handles, sparse_indices and sparse_rows must "
                          "have the same length"));
  if (wait_handles.size() != outs.size() || wait_handles.size() != needs.size())
    Raise(InvalidArgument("sync_step: wait_handles, outs and needs must have the same "
                          "length"));
  if (!(wait_secs >= 0.0 && wait_secs <= kMaxWaitSeconds))
    Raise(InvalidArgument("sync_step: wait_secs must be in [0, 60]; got " +
                          std::to_string(wait_secs)));
  std::vector<Call> calls;
  calls.reserve(push_handles.size() + sparse_handles.size() + wait_handles.size() + 2);
  auto tagged = [&](Call* c) {
    c->flags |= kFlagStepTagged;
    c->step = tag;
    if (lr) {
      c->flags |= kFlagHasLr;
      c->arg0 = *lr;
    }
  };
  for (size_t i = 0; i < push_handles.size(); ++i) {
    Call c = DensePush(Var(push_handles[i]), grads[i], std::nullopt);
    tagged(&c);
    calls.push_back(std::move(c));
  }
  for (size_t i = 0; i < sparse_handles.size(); ++i) {
    Call c = SparsePush(Var(sparse_handles[i]), sparse_indices[i], sparse_rows[i],
                        std::nullopt);
    tagged(&c);
    calls.push_back(std::move(c));
  }
  const size_t num_pushes = calls.size();
  if (step_handle >= 0 && increment) {
    Call c = MakeCall(Op::kStepIncrement, Var(step_handle));
    c.flags |= kFlagStepTagged;
    c.step = tag;
    calls.push_back(std::move(c));
  }
  const size_t first_wait = calls.size();
  for (size_t i = 0; i < wait_handles.size(); ++i) {
    const RemoteVar& v = Var(wait_handles[i]);
    CheckArray(outs[i], "pull output", v.spec.name, v.spec.dtype, v.spec.shape, true);
    Call c = MakeCall(Op::kPull, v);
    c.flags |= kFlagWaitStep;
    c.step = needs[i];
    c.arg1 = wait_secs;
    c.recv = const_cast<void*>(outs[i].data());
    c.recv_len = v.nbytes;
    calls.push_back(std::move(c));
  }
  if (step_handle >= 0) {
    Call c = MakeCall(Op::kStepRead, Var(step_handle));
    c.flags |= kFlagWaitStep;
    c.step = step_need;
    c.arg1 = wait_secs;
    calls.push_back(std::move(c));
  }
  // A synchronous step is sent whole or not at all: gradients counted on some shards while
  // another shard's connection is already lost would land in a step the session abandons.
  for (const Call& c : calls) Check(client_.ShardStatus(c.shard));
  Check(RunLocked(&calls));
  py::list accepted, waits;
  for (size_t i = 0; i < num_pushes; ++i)
    accepted.append((calls[i].flags_out & kFlagAccepted) != 0);
  for (size_t i = 0; i < wait_handles.size(); ++i) {
    const Call& c = calls[first_wait + i];
    waits.append(py::make_tuple(!(c.flags_out & kFlagNotReady), c.step_out, c.count_out));
  }
  py::tuple step = py::make_tuple(true, -1, 0);
  if (step_handle >= 0) {
    const Call& c = calls.back();
    step = py::make_tuple(!(c.flags_out & kFlagNotReady), c.step_out, c.count_out);
  }
  return py::make_tuple(accepted, waits, step);
}

int64_t PyClient::push_sparse(int handle, py::array indices, py::array rows,
                              std::optional<double> lr, int step_handle, int64_t step_delta) {
  Call c = SparsePush(Var(handle), indices, rows, lr);
  std::vector<Call> calls;
  calls.push_back(std::move(c));
  if (step_handle >= 0) {
    Call s = MakeCall(Op::kStepIncrement, Var(step_handle));
    s.step = step_delta;
    calls.push_back(std::move(s));
  }
  Check(RunLocked(&calls));
  return step_handle >= 0 ? calls.back().step_out : -1;
}

void PyClient::pull_rows_batch(const std::vector<int>& handles,
                               const std::vector<py::array>& indices,
                               const std::vector<py::array>& outs) {
  if (handles.size() != indices.size() || handles.size() != outs.size())
    Raise(InvalidArgument("pull_rows_batch: handles, indices and outs must have the same "
                          "length"));
  std::vector<Call> calls;
  calls.reserve(handles.size());
  for (size_t i = 0; i < handles.size(); ++i) calls.push_back(RowPull(handles[i], indices[i], outs[i]));
  Check(RunLocked(&calls));
}

void PyClient::pull_rows(int handle, py::array indices, py::array out) {
  std::vector<Call> calls;
  calls.push_back(RowPull(handle, indices, out));
  Check(RunLocked(&calls));
}

void PyClient::assign(const std::vector<int>& handles, const std::vector<py::array>& values,
                      int slot, bool add, bool restore) {
  if (handles.size() != values.size())
    Raise(InvalidArgument("assign: " + std::to_string(handles.size()) + " variables but " +
                          std::to_string(values.size()) + " values"));
  std::vector<Call> calls;
  for (size_t i = 0; i < handles.size(); ++i) {
    const RemoteVar& v = Var(handles[i]);
    Call c = MakeCall(add ? Op::kAssignAdd : Op::kAssign, v);
    c.slot = static_cast<uint8_t>(slot);
    if (restore && !add && slot == 0) c.flags |= kFlagInit;
    if (slot == kOptimizerStateSlot) {
      CheckArray(values[i], "optimizer state", v.spec.name, DType::kFloat64, {2}, false);
      c.dtype = v.spec.dtype;
      c.send_len[0] = 16;
    } else {
      CheckArray(values[i], "value", v.spec.name, v.spec.dtype, v.spec.shape, false);
      c.send_len[0] = v.nbytes;
    }
    c.send[0] = values[i].data();
    calls.push_back(std::move(c));
  }
  Check(RunLocked(&calls));
}

int64_t PyClient::step(int handle, int64_t delta, bool increment) {
  Call c = MakeCall(increment ? Op::kStepIncrement : Op::kStepRead, Var(handle));
  c.step = delta;
  std::vector<Call> calls;
  calls.push_back(std::move(c));
  Check(RunLocked(&calls));
  return calls[0].step_out;
}

std::vector<bool> PyClient::is_initialized(const std::vector<int>& handles) {
  std::vector<Call> calls;
  for (int h : handles) calls.push_back(MakeCall(Op::kIsInitialized, Var(h)));
  Check(RunLocked(&calls));
  std::vector<bool> out;
  for (auto& c : calls) out.push_back((c.flags_out & kFlagInitialized) != 0);
  return out;
}

}  // namespace psrt
