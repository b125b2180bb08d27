// VariableStore's synchronous training (SyncReplicasOptimizer's accumulators, store.h): tagged
// gradients summed per step and their mean applied, the global step's tagged increments, waits
// for a step, and the lifecycle's resets. Split from store.cc, which keeps the rest.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <new>

#include "store.h"

namespace psrt {

void RowSum::Clear() {
  pos.clear();
  ids.clear();
  values.clear();
  count.clear();
  last.clear();
}

void RowSum::Swap(RowSum& other) noexcept {
  pos.swap(other.pos);
  ids.swap(other.ids);
  values.swap(other.values);
  count.swap(other.count);
  last.swap(other.last);
}

void SyncState::DropPending() {
  count = 0;
  has_dense = false;
  rows.Clear();
}

namespace {

template <typename T>
void AddInto(uint8_t* dst, const void* src, size_t n) {
  auto* d = reinterpret_cast<T*>(dst);
  const auto* s = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) d[i] += s[i];
}

template <typename T>
void DivideBy(uint8_t* dst, size_t n, double k) {
  auto* d = reinterpret_cast<T*>(dst);
  const T q = static_cast<T>(k);
  for (size_t i = 0; i < n; ++i) d[i] /= q;
}

void Add(DType dtype, uint8_t* dst, const void* src, size_t n) {
  if (dtype == DType::kFloat32) AddInto<float>(dst, src, n);
  else AddInto<double>(dst, src, n);
}

void Divide(DType dtype, uint8_t* dst, size_t n, double k) {
  if (dtype == DType::kFloat32) DivideBy<float>(dst, n, k);
  else DivideBy<double>(dst, n, k);
}

Status NotSync(const Variable* var) {
  return FailedPrecondition("variable '" + var->spec.name +
                            "' is not trained synchronously (it was registered without "
                            "replicas_to_aggregate)");
}

}  // namespace

Status VariableStore::SyncCheckPush(const Variable* var, bool sparse, const int64_t* indices,
                                    size_t n) const {
  if (!var->is_sync()) return NotSync(var);
  PSRT_RETURN_IF_ERROR(CheckTrainable(var));
  if (!sparse) return Status::Ok();
  if (var->spec.shape.empty())
    return InvalidArgument("row-sparse update of scalar variable '" + var->spec.name + "'");
  const size_t num_rows = static_cast<size_t>(var->spec.shape[0]);
  if (n > 0 && indices == nullptr)
    return InvalidArgument("row-sparse gradient of '" + var->spec.name + "': " +
                           std::to_string(n) + " indices but no index buffer");
  for (size_t j = 0; j < n; ++j) {
    if (indices[j] < 0 || static_cast<size_t>(indices[j]) >= num_rows)
      return InvalidArgument("variable '" + var->spec.name + "': index " +
                             std::to_string(indices[j]) + " at position " + std::to_string(j) +
                             " is out of range [0, " + std::to_string(num_rows) + ")");
  }
  return Status::Ok();
}

Status VariableStore::SyncCheckStep(const Variable* var) const {
  PSRT_RETURN_IF_ERROR(CheckStepVariable(var));
  if (!var->is_sync()) return NotSync(var);
  return Status::Ok();
}

template <typename Step>
void VariableStore::CatchUp(SyncState* st, std::unique_lock<std::mutex>& l, int64_t tag,
                            Step step) const {
  const double s = sync_catch_up_s_.load(std::memory_order_relaxed);
  if (s <= 0.0 || tag <= step()) return;
  st->cv.wait_for(l, std::chrono::duration<double>(s), [&] { return step() >= tag; });
}

Status VariableStore::SyncPush(Variable* var, int64_t tag, bool sparse, const void* grad,
                               const int64_t* indices, size_t n, const void* rows, double lr,
                               bool has_lr, SyncResult* out) {
  PSRT_RETURN_IF_ERROR(SyncCheckPush(var, sparse, indices, n));
  if (tag < 0 || tag == INT64_MAX)
    return InvalidArgument("step tag " + std::to_string(tag) + " of '" + var->spec.name +
                           "' is out of range");
  const DType dtype = var->spec.dtype;
  const size_t dsize = DTypeSize(dtype);
  size_t num_rows = 0, width = 0;
  if (sparse) {
    num_rows = static_cast<size_t>(var->spec.shape[0]);
    width = num_rows == 0 ? 0 : var->num_elements / num_rows;
    if (n > 0 && rows == nullptr)
      return InvalidArgument("row-sparse gradient of '" + var->spec.name + "': " +
                             std::to_string(n) + " indices but no row buffer");
  } else if (grad == nullptr && var->nbytes > 0) {
    return InvalidArgument("dense gradient of '" + var->spec.name + "': no gradient buffer");
  }
  const size_t row_bytes = width * dsize;
  SyncState& st = var->sync;
  std::unique_lock<std::mutex> l(st.mu);
  CatchUp(&st, l, tag, [&] { return st.step; });
  if (tag < st.step) {
    out->accepted = false;
    out->step = st.step;
    out->count = st.count;
    return Status::Ok();
  }
  // Everything that can fail comes first (memory for the sum); only then is pending state
  // dropped or summed into, so a refused gradient leaves the step's sum as it was.
  const bool new_step = tag > st.step;
  if (!sparse && st.dense.size() != var->nbytes && !st.dense.Allocate(var->nbytes))
    return Status(Code::kResourceExhausted, "cannot allocate " + std::to_string(var->nbytes) +
                                                " bytes to sum the gradients of '" +
                                                var->spec.name + "'; the gradient was refused");
  if (sparse && new_step) {
    // The rows go into a fresh sum first; the old step's are dropped only once that worked.
    RowSum fresh;
    PSRT_RETURN_IF_ERROR(SumRows(var, indices, n, rows, 1, &fresh));
    st.DropPending();
    st.rows.Swap(fresh);
  } else if (sparse) {
    PSRT_RETURN_IF_ERROR(SumRows(var, indices, n, rows, st.count + 1, &st.rows));
  } else {
    if (new_step) st.DropPending();
    if (st.has_dense) {
      Add(dtype, st.dense.data(), grad, var->num_elements);
    } else {
      if (var->nbytes > 0) std::memcpy(st.dense.data(), grad, var->nbytes);
      st.has_dense = true;
    }
  }
  if (new_step) {
    st.step = tag;
    st.cv.notify_all();
  }
  ++st.count;
  out->accepted = true;
  Status applied;
  if (st.count >= var->spec.replicas_to_aggregate) {
    // The mean of the collected gradients, as TF's ConditionalAccumulator.take_grad (dense
    // gradients; a row-sparse one in the same step is added in as zeros elsewhere).
    const double k = st.count;
    if (st.has_dense) {
      for (size_t j = 0; j < st.rows.ids.size(); ++j)
        Add(dtype, st.dense.data() + static_cast<size_t>(st.rows.ids[j]) * row_bytes,
            st.rows.values.data() + j * row_bytes, width);
      Divide(dtype, st.dense.data(), var->num_elements, k);
      applied = ApplyDense(var, st.dense.data(), lr, has_lr);
    } else {
      // Row by row, as TF's SparseConditionalAccumulator ("average element-wise"): each row
      // is divided by the number of gradients that held it. The row ids are unique, so the
      // apply needs no scratch memory and cannot fail for lack of it.
      for (size_t j = 0; j < st.rows.ids.size(); ++j)
        Divide(dtype, st.rows.values.data() + j * row_bytes, width, st.rows.count[j]);
      applied = ApplyRows(var, st.rows.ids.data(), st.rows.ids.size(), st.rows.values.data(),
                          lr, has_lr, true);
    }
    st.DropPending();
    if (applied.ok()) ++st.step;
    st.cv.notify_all();
  }
  out->step = st.step;
  out->count = st.count;
  return applied;
}

Status VariableStore::SumRows(const Variable* var, const int64_t* indices, size_t n,
                              const void* rows, uint32_t this_grad, RowSum* sum) {
  const DType dtype = var->spec.dtype;
  const size_t num_rows = static_cast<size_t>(var->spec.shape[0]);
  const size_t width = num_rows == 0 ? 0 : var->num_elements / num_rows;
  const size_t row_bytes = width * DTypeSize(dtype);
  const auto* src = static_cast<const uint8_t*>(rows);
  // Phase 1, may throw: new row ids enter `pos`, and every vector gets its final capacity.
  // On failure the new ids are taken out again and nothing else has changed.
  std::vector<int64_t> fresh;
  try {
    fresh.reserve(n);
    for (size_t j = 0; j < n; ++j) {
      if (sum->pos.emplace(indices[j], sum->ids.size() + fresh.size()).second)
        fresh.push_back(indices[j]);
    }
    const size_t total = sum->ids.size() + fresh.size();
    sum->ids.reserve(total);
    sum->values.reserve(total * row_bytes);
    sum->count.reserve(total);
    sum->last.reserve(total);
  } catch (const std::bad_alloc&) {
    for (int64_t id : fresh) sum->pos.erase(id);
    return Status(Code::kResourceExhausted,
                  "out of memory summing " + std::to_string(n) + " row gradients of '" +
                      var->spec.name + "'; the gradient was refused");
  }
  // Phase 2, cannot throw (capacity is reserved): new rows start at zero, then every row of
  // the gradient is added in.
  for (int64_t id : fresh) {
    sum->ids.push_back(id);
    sum->values.resize(sum->values.size() + row_bytes, 0);
    sum->count.push_back(0);
    sum->last.push_back(0);
  }
  for (size_t j = 0; j < n; ++j) {
    const size_t pos = sum->pos.find(indices[j])->second;
    Add(dtype, sum->values.data() + pos * row_bytes, src + j * row_bytes, width);
    if (sum->last[pos] != this_grad) {  // a row repeated in one gradient counts once
      sum->last[pos] = this_grad;
      ++sum->count[pos];
    }
  }
  return Status::Ok();
}

Status VariableStore::SyncStepIncrement(Variable* var, int64_t tag, SyncResult* out) {
  PSRT_RETURN_IF_ERROR(SyncCheckStep(var));
  if (tag < 0 || tag == INT64_MAX)
    return InvalidArgument("step tag " + std::to_string(tag) + " of '" + var->spec.name +
                           "' is out of range");
  auto* value = reinterpret_cast<int64_t*>(var->value.data());
  SyncState& st = var->sync;
  std::unique_lock<std::mutex> l(st.mu);
  CatchUp(&st, l, tag, [&] { return __atomic_load_n(value, __ATOMIC_SEQ_CST); });
  int64_t cur = __atomic_load_n(value, __ATOMIC_SEQ_CST);
  if (tag > cur)
    return Status(Code::kAborted,
                  "global step '" + var->spec.name + "' is " + std::to_string(cur) +
                      " but this worker's step is " + std::to_string(tag) +
                      ": the model was restored or re-initialized under it; re-read it");
  if (tag < cur) {
    out->accepted = false;
  } else {
    out->accepted = true;
    if (++st.count >= var->spec.replicas_to_aggregate) {
      // A concurrent assign (restore) wins: only tag -> tag + 1 is written.
      __atomic_compare_exchange_n(value, &cur, tag + 1, false, __ATOMIC_SEQ_CST,
                                  __ATOMIC_SEQ_CST);
      st.count = 0;
      st.cv.notify_all();
    }
  }
  out->step = __atomic_load_n(value, __ATOMIC_SEQ_CST);
  out->count = st.count;
  return Status::Ok();
}

Status VariableStore::SyncWait(Variable* var, int64_t need, double wait_s,
                               const std::function<bool()>& abort, SyncResult* out) {
  if (!var->initialized.load(std::memory_order_acquire))
    return FailedPrecondition("Attempting to use uninitialized value " + var->spec.name);
  if (!var->is_sync() && need > 0) return NotSync(var);
  const bool counter = var->is_step_counter();
  const auto* value = reinterpret_cast<const int64_t*>(var->value.data());
  SyncState& st = var->sync;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(wait_s));
  std::unique_lock<std::mutex> l(st.mu);
  for (;;) {
    const int64_t cur = counter ? __atomic_load_n(value, __ATOMIC_SEQ_CST) : st.step;
    out->step = cur;
    out->count = st.count;
    if (cur >= need) {
      out->ready = true;
      return Status::Ok();
    }
    if (abort()) {
      out->aborted = true;
      return Status::Ok();
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return Status::Ok();
    st.cv.wait_until(l, std::min(deadline, now + std::chrono::milliseconds(50)));
  }
}

bool VariableStore::SyncStale(Variable* var, int64_t tag, SyncResult* out) {
  std::lock_guard<std::mutex> l(var->sync.mu);
  out->step = var->is_step_counter()
                  ? __atomic_load_n(reinterpret_cast<const int64_t*>(var->value.data()),
                                    __ATOMIC_SEQ_CST)
                  : var->sync.step;
  out->count = var->sync.count;
  out->accepted = false;
  return tag < out->step;
}

void VariableStore::SyncReset(Variable* var) {
  std::lock_guard<std::mutex> l(var->sync.mu);
  var->sync.DropPending();
  var->sync.step = 0;
  var->sync.cv.notify_all();
}

void VariableStore::SyncWakeAll() {
  for (Variable* v : All()) {
    if (!v->is_sync()) continue;
    std::lock_guard<std::mutex> l(v->sync.mu);
    v->sync.cv.notify_all();
  }
}

void VariableStore::SyncDropAllPending() {
  for (Variable* v : All()) {
    if (!v->is_sync()) continue;
    std::lock_guard<std::mutex> l(v->sync.mu);
    v->sync.DropPending();
    v->sync.cv.notify_all();
  }
}

bool VariableStore::SyncCanComplete(size_t finished) const {
  for (Variable* v : All()) {
    if (!v->is_sync()) continue;
    // Each worker pushes ceil(R / total) gradients per step (several when total < R).
    const size_t total = v->spec.total_num_replicas;
    const size_t r = v->spec.replicas_to_aggregate;
    const size_t per_worker = (r + total - 1) / total;
    const size_t live = finished >= total ? 0 : total - finished;
    if (live * per_worker < r) return false;
  }
  return true;
}

}  // namespace psrt
