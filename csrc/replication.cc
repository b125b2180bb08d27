// Replication (replication.h): the marks, the awaiting state and the ReplicaState record of
// docs/protocol.md ("ReplicaState"), read under a variable's exclusive section and installed
// all or nothing.
#include "replication.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <unordered_set>

#include "kernels.h"
#include "store.h"
#include "table.h"

namespace psrt {

void Replication::SetEnabled(bool on, VariableStore* store) {
  enabled_.store(on, std::memory_order_relaxed);
  if (store != nullptr) store->SetSyncCatchUp(on ? kSyncCatchUpSeconds : 0.0);
  if (!on && store != nullptr)
    for (Variable* v : store->All()) EndAwaiting(v);
}

Status Replication::SetWaitSeconds(double s) {
  if (!(s >= 0.0 && s <= 3600.0))
    return InvalidArgument("replica_wait_s " + std::to_string(s) +
                           " is out of range; expected 0..3600 seconds");
  wait_s_.store(s, std::memory_order_relaxed);
  return Status::Ok();
}

// ---- Marks ---------------------------------------------------------------------------------

namespace {

// a = max(a, b) per client; both sorted by client id, a stays sorted.
void MergeMarks(std::vector<Mark>* a, const std::vector<Mark>& b) {
  std::vector<Mark> out;
  out.reserve(a->size() + b.size());
  auto i = a->begin();
  auto j = b.begin();
  while (i != a->end() || j != b.end()) {
    if (j == b.end() || (i != a->end() && i->first < j->first)) {
      out.push_back(*i++);
    } else if (i == a->end() || j->first < i->first) {
      out.push_back(*j++);
    } else {
      out.emplace_back(i->first, std::max(i->second, j->second));
      ++i;
      ++j;
    }
  }
  a->swap(out);
}

// The mark of `client` in sorted `marks`, 0 without one.
uint64_t MarkOf(const std::vector<Mark>& marks, uint64_t client) {
  auto it = std::lower_bound(marks.begin(), marks.end(), Mark{client, 0});
  return it != marks.end() && it->first == client ? it->second : 0;
}

}  // namespace

bool Replication::IsDuplicate(uint64_t client, uint64_t id, const VarReplication& var) const {
  // The variable's own marks, not the task's: a client's requests to different variables
  // may be applied out of id order (written to a connection in another order, or one waiting
  // for its copy), so a higher id done elsewhere says nothing about this variable.
  {
    std::lock_guard<std::mutex> l(var.applied_mu);
    if (id <= MarkOf(var.applied, client)) return true;
  }
  return id <= MarkOf(var.install_marks, client);
}


void Replication::RequireApplied(VarReplication* var) {
  std::lock_guard<std::mutex> l(var->applied_mu);
  MergeMarks(&var->required, var->applied);
}

void Replication::Complete(uint64_t client, uint64_t id, VarReplication* var) {
  if (var != nullptr) {
    try {
      std::lock_guard<std::mutex> l(var->applied_mu);
      auto it = std::lower_bound(var->applied.begin(), var->applied.end(), Mark{client, 0});
      if (it != var->applied.end() && it->first == client) it->second = std::max(it->second, id);
      else var->applied.insert(it, Mark{client, id});
    } catch (const std::bad_alloc&) {
      // Not kept: a later STALE copy may then miss this request here (as a dropped client's).
    }
  }
  std::lock_guard<std::mutex> l(marks_mu_);
  auto it = marks_.find(client);
  if (it != marks_.end()) {
    it->second.mark = std::max(it->second.mark, id);
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  try {
    if (marks_.size() >= kMaxClients) {
      marks_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(client);
    try {
      marks_.emplace(client, Entry{id, lru_.begin()});
    } catch (const std::bad_alloc&) {
      lru_.pop_front();
      throw;
    }
  } catch (const std::bad_alloc&) {
    // Out of memory for one entry: the mark is not kept (a resend would be applied again),
    // which is what dropping the client would do anyway.
  }
}

std::vector<Mark> Replication::Marks() const {
  std::vector<Mark> out;
  {
    std::lock_guard<std::mutex> l(marks_mu_);
    out.reserve(marks_.size());
    for (const auto& [client, e] : marks_) out.emplace_back(client, e.mark);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// ---- Awaiting ------------------------------------------------------------------------------

void Replication::SetAwaiting(Variable* var) {
  std::lock_guard<std::mutex> l(await_mu_);
  if (!var->repl.awaiting.exchange(true)) num_awaiting_.fetch_add(1);
}

void Replication::EndAwaiting(Variable* var) {
  {
    std::lock_guard<std::mutex> l(await_mu_);
    if (!var->repl.awaiting.exchange(false)) return;
    num_awaiting_.fetch_sub(1);
  }
  await_cv_.notify_all();
}

bool Replication::WaitWhileAwaiting(Variable* var, const std::atomic<bool>& stopping) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(wait_seconds()));
  std::unique_lock<std::mutex> l(await_mu_);
  while (var->repl.awaiting.load()) {
    const auto now = Clock::now();
    if (stopping.load() || now >= deadline) return false;
    // Polled every 50 ms for `stopping`; installs notify at once.
    await_cv_.wait_until(l, std::min(deadline, now + std::chrono::milliseconds(50)));
  }
  return true;
}

std::vector<std::string> Replication::AwaitingNames(const VariableStore& store) const {
  std::vector<std::string> out;
  if (num_awaiting_.load() == 0) return out;
  for (const Variable* v : store.All())
    if (v->repl.awaiting.load()) out.push_back(v->spec.name);
  return out;
}

// ---- ReplicaState --------------------------------------------------------------------------

namespace {

std::string Declaration(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                        Optimizer opt, bool table, uint32_t reps, uint32_t total,
                        uint64_t max_rows) {
  std::string d = "'" + name + "' " + DTypeName(dtype) + "[";
  for (size_t i = 0; i < shape.size(); ++i) d += (i ? "," : "") + std::to_string(shape[i]);
  d += "] optimizer " + std::string(OptimizerName(opt));
  if (table) d += " hash table (max_rows " + std::to_string(max_rows) + ")";
  if (reps) d += " synchronous (" + std::to_string(reps) + " of " + std::to_string(total) + ")";
  return d;
}

std::string Declaration(const Variable* v) {
  return Declaration(v->spec.name, v->spec.dtype, v->spec.shape, v->spec.optimizer,
                     v->spec.is_table(), v->spec.replicas_to_aggregate,
                     v->spec.total_num_replicas, v->spec.max_rows);
}

// A row of the variable viewed as [shape[0], rest] (a table: one row of it), in bytes.
size_t RowBytes(const Variable* v) {
  if (v->table) return v->table->row_bytes();
  if (v->spec.shape.empty() || v->spec.shape[0] == 0) return 0;
  return v->nbytes / static_cast<size_t>(v->spec.shape[0]);
}

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out->insert(out->end(), p, p + sizeof(T));
}

void PutBytes(std::vector<uint8_t>* out, const void* p, size_t n) {
  if (n) out->insert(out->end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
}

// A bounds-checked read cursor: every Take fails (returns null) past the end.
class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n) : p_(p), left_(n) {}
  const uint8_t* Take(uint64_t n) {
    if (n > left_) return nullptr;
    const uint8_t* at = p_;
    p_ += n;
    left_ -= static_cast<size_t>(n);
    return at;
  }
  template <typename T>
  bool Get(T* v) {
    const uint8_t* at = Take(sizeof(T));
    if (at == nullptr) return false;
    std::memcpy(v, at, sizeof(T));
    return true;
  }
  size_t left() const { return left_; }

 private:
  const uint8_t* p_;
  size_t left_;
};

// Element j of an array of T at p (unaligned).
template <typename T>
T At(const uint8_t* p, size_t j) {
  T v;
  std::memcpy(&v, p + j * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

Status Replication::Read(Variable* var, uint64_t max_bytes, std::vector<uint8_t>* out) {
  ExclusiveSection section(&var->repl);
  const VarSpec& spec = var->spec;
  if (!var->initialized.load(std::memory_order_acquire) || var->repl.awaiting.load())
    return FailedPrecondition("REPLICA_READ of '" + spec.name + "': it holds no value to copy (" +
                              (var->repl.awaiting.load() ? "it awaits a copy itself"
                                                         : "it is uninitialized") + ")");
  // The requests it holds: those this task applied to it, and those of the copy it was
  // installed from (a task that restarted holds requests it never saw itself).
  std::vector<Mark> marks;
  {
    std::lock_guard<std::mutex> l(var->repl.applied_mu);
    marks = var->repl.applied;
  }
  MergeMarks(&marks, var->repl.install_marks);
  const size_t slots = var->table ? static_cast<size_t>(var->table->num_slots())
                                  : var->slots.size();
  const size_t row_bytes = RowBytes(var);
  auto too_big = [&](uint64_t need) {
    return Status(Code::kResourceExhausted,
                  "REPLICA_READ of " + Declaration(var) + ": its state of " +
                      std::to_string(need) + " bytes exceeds the maximum of " +
                      std::to_string(max_bytes) + " bytes (max_payload); copy it from a "
                      "checkpoint instead");
  };
  try {
    out->clear();
    SyncState& st = var->sync;
    std::lock_guard<std::mutex> sl(st.mu);
    const bool has_dense = st.has_dense && st.dense.size() == var->nbytes;
    const size_t s = st.rows.ids.size();
    uint64_t fixed = 4 + 2 + 5 + 2 + spec.name.size() + 1 + 8 * spec.shape.size() + 16 + 4 +
                     16 * uint64_t{marks.size()} + 24 + 13 + (has_dense ? var->nbytes : 0) + 8 +
                     uint64_t{s} * (16 + row_bytes);
    const uint64_t values = var->table ? 16 : uint64_t{var->nbytes} * (1 + slots);
    if (fixed + values > max_bytes) return too_big(fixed + values);
    out->reserve(static_cast<size_t>(fixed + values));
    Put<uint32_t>(out, kStateTag);
    Put<uint16_t>(out, kStateFormat);
    Put<uint8_t>(out, var->table ? 1 : 0);
    Put<uint8_t>(out, static_cast<uint8_t>(spec.dtype));
    Put<uint8_t>(out, static_cast<uint8_t>(spec.optimizer));
    Put<uint8_t>(out, static_cast<uint8_t>(slots));
    Put<uint8_t>(out, 1);  // initialized
    Put<uint16_t>(out, static_cast<uint16_t>(spec.name.size()));
    PutBytes(out, spec.name.data(), spec.name.size());
    Put<uint8_t>(out, static_cast<uint8_t>(spec.shape.size()));
    for (int64_t d : spec.shape) Put<int64_t>(out, d);
    Put<uint32_t>(out, spec.replicas_to_aggregate);
    Put<uint32_t>(out, spec.total_num_replicas);
    Put<uint64_t>(out, spec.max_rows);
    Put<uint32_t>(out, static_cast<uint32_t>(marks.size()));
    for (const Mark& m : marks) {
      Put<uint64_t>(out, m.first);
      Put<uint64_t>(out, m.second);
    }
    {
      std::lock_guard<std::mutex> l(var->mu);
      Put<double>(out, var->beta1_power);
      Put<double>(out, var->beta2_power);
      Put<int64_t>(out, var->applies);
    }
    Put<int64_t>(out, st.step);
    Put<uint32_t>(out, st.count);
    Put<uint8_t>(out, has_dense ? 1 : 0);
    if (has_dense) PutBytes(out, st.dense.data(), var->nbytes);
    Put<uint64_t>(out, s);
    PutBytes(out, st.rows.ids.data(), s * 8);
    PutBytes(out, st.rows.count.data(), s * 4);
    PutBytes(out, st.rows.last.data(), s * 4);
    PutBytes(out, st.rows.values.data(), s * row_bytes);
    if (!var->table) {
      if (var->is_step_counter()) {
        Put<int64_t>(out, __atomic_load_n(reinterpret_cast<const int64_t*>(var->value.data()),
                                          __ATOMIC_SEQ_CST));
      } else {
        PutBytes(out, var->value.data(), var->nbytes);
      }
      for (const auto& slot : var->slots) PutBytes(out, slot->data(), var->nbytes);
      return Status::Ok();
    }
  } catch (const std::bad_alloc&) {
    return Status(Code::kResourceExhausted,
                  "out of memory taking the state of " + Declaration(var) + " (REPLICA_READ)");
  }
  const uint64_t so_far = out->size();
  Status st = var->table->Snapshot(max_bytes - so_far, out);
  if (st.code() == Code::kResourceExhausted && out->size() == so_far)
    return Status(st.code(), "REPLICA_READ of " + Declaration(var) + ": " + st.message() +
                                 "; copy it from a checkpoint instead");
  return st;
}

Status Replication::Install(Variable* var, const uint8_t* p, size_t n) {
  const VarSpec& spec = var->spec;
  const std::string where = "REPLICA_INSTALL into '" + spec.name + "'";
  if (!enabled())
    return FailedPrecondition(where + ": replication is off on this ps task "
                              "(Server.set_replication(True) turns it on)");
  Cursor c(p, n);
  auto truncated = [&](const char* what) {
    return InvalidArgument(where + ": the ReplicaState of " + std::to_string(n) +
                           " bytes ends inside " + what);
  };
  // 1. The record's identity: the same variable, declared the same way.
  uint32_t tag = 0;
  uint16_t format = 0;
  uint8_t kind = 0, dtype = 0, opt = 0, slots = 0, initialized = 0, rank = 0;
  uint16_t name_len = 0;
  if (!c.Get(&tag) || !c.Get(&format)) return truncated("its tag and format");
  if (tag != kStateTag)
    return InvalidArgument(where + ": not a ReplicaState (tag 0x" + [&] {
      char b[16];
      snprintf(b, sizeof b, "%08x", tag);
      return std::string(b);
    }() + "; expected 0x53525350, \"PSRS\")");
  if (format != kStateFormat)
    return InvalidArgument(where + ": ReplicaState format " + std::to_string(format) +
                           "; this ps task reads format " + std::to_string(kStateFormat));
  if (!c.Get(&kind) || !c.Get(&dtype) || !c.Get(&opt) || !c.Get(&slots) ||
      !c.Get(&initialized) || !c.Get(&name_len))
    return truncated("its declaration");
  const uint8_t* name_p = c.Take(name_len);
  if (name_p == nullptr || !c.Get(&rank)) return truncated("its name");
  if (rank > kMaxRank)
    return InvalidArgument(where + ": the copy has rank " + std::to_string(rank) +
                           "; at most " + std::to_string(kMaxRank));
  std::vector<int64_t> shape(rank);
  for (int64_t& d : shape)
    if (!c.Get(&d)) return truncated("its shape");
  uint32_t reps = 0, total = 0, num_marks = 0;
  uint64_t max_rows = 0;
  if (!c.Get(&reps) || !c.Get(&total) || !c.Get(&max_rows) || !c.Get(&num_marks))
    return truncated("its synchronous and table settings");
  const std::string name(reinterpret_cast<const char*>(name_p), name_len);
  const bool table = var->table != nullptr;
  if (kind > 1 || (kind == 1) != table || name != spec.name ||
      dtype != static_cast<uint8_t>(spec.dtype) || opt != static_cast<uint8_t>(spec.optimizer) ||
      shape != spec.shape || reps != spec.replicas_to_aggregate ||
      total != spec.total_num_replicas || max_rows != spec.max_rows) {
    std::string theirs = kind > 1 ? "kind code " + std::to_string(kind) + " (valid: 0, 1)"
        : Declaration(name, dtype >= 1 && dtype <= 3 ? static_cast<DType>(dtype) : DType::kInvalid,
                      shape, opt <= kMaxOptimizer ? static_cast<Optimizer>(opt) : Optimizer::kNone,
                      kind == 1, reps, total, max_rows);
    if (opt > kMaxOptimizer) theirs += " (optimizer code " + std::to_string(opt) + ")";
    return InvalidArgument(where + ": the copy is of " + theirs + ", this variable is " +
                           Declaration(var) + "; a copy installs into the same variable only");
  }
  const size_t want_slots = table ? static_cast<size_t>(var->table->num_slots())
                                  : var->slots.size();
  if (slots != want_slots || initialized != 1)
    return InvalidArgument(where + ": the copy has " + std::to_string(slots) +
                           " slots and initialized " + std::to_string(initialized) +
                           "; expected " + std::to_string(want_slots) + " slots and 1");
  // 2. The marks.
  if (num_marks > kMaxClients)
    return InvalidArgument(where + ": " + std::to_string(num_marks) + " marks; at most " +
                           std::to_string(kMaxClients));
  const uint8_t* marks_p = c.Take(uint64_t{num_marks} * 16);
  if (marks_p == nullptr) return truncated("its marks");
  std::vector<Mark> marks(num_marks);
  for (size_t j = 0; j < num_marks; ++j) {
    marks[j] = {At<uint64_t>(marks_p, 2 * j), At<uint64_t>(marks_p, 2 * j + 1)};
    if (marks[j].first == 0 || (j > 0 && marks[j].first <= marks[j - 1].first))
      return InvalidArgument(where + ": mark " + std::to_string(j) + " has client id " +
                             std::to_string(marks[j].first) +
                             "; client ids must be non-zero and increasing");
  }
  // 3. Optimizer and synchronous state.
  double beta1 = 0, beta2 = 0;
  int64_t applies = 0, step = 0;
  uint32_t count = 0;
  uint8_t has_dense = 0;
  if (!c.Get(&beta1) || !c.Get(&beta2) || !c.Get(&applies) || !c.Get(&step) || !c.Get(&count) ||
      !c.Get(&has_dense))
    return truncated("its optimizer and synchronous state");
  const bool sync = reps > 0;
  const bool counter = var->is_step_counter();
  if (applies < 0 || step < 0 || step == INT64_MAX || has_dense > 1 ||
      (sync ? count >= reps : count != 0 || step != 0) ||
      (has_dense && (!sync || table || counter)))
    return InvalidArgument(where + ": AdagradDA count " + std::to_string(applies) + ", step " +
                           std::to_string(step) + ", " + std::to_string(count) +
                           " gradients collected, dense sum " + std::to_string(has_dense) +
                           " do not fit " + Declaration(var));
  const uint8_t* dense = has_dense ? c.Take(var->nbytes) : nullptr;
  uint64_t s = 0;
  if ((has_dense && dense == nullptr) || !c.Get(&s)) return truncated("its gradient sum");
  const size_t row_bytes = RowBytes(var);
  const uint64_t num_rows = spec.shape.empty() || table ? 0 : static_cast<uint64_t>(spec.shape[0]);
  if (s > 0 && (!sync || counter || s > num_rows || count == 0))
    return InvalidArgument(where + ": a gradient sum of " + std::to_string(s) + " rows does not "
                           "fit " + Declaration(var) + " with " + std::to_string(count) +
                           " gradients collected");
  const uint8_t* sum_ids = c.Take(s * 8);
  const uint8_t* sum_counts = sum_ids ? c.Take(s * 4) : nullptr;
  const uint8_t* sum_last = sum_counts ? c.Take(s * 4) : nullptr;
  const uint8_t* sum_values = sum_last ? c.Take(s * row_bytes) : nullptr;
  if (sum_values == nullptr) return truncated("its gradient sum's rows");
  // 4. The value and slots, or the table's rows.
  uint64_t clock = 0, t = 0;
  const uint8_t* body = nullptr;
  if (!table) {
    body = c.Take(uint64_t{var->nbytes} * (1 + slots));
    if (body == nullptr) return truncated("its value and slots");
  } else {
    if (!c.Get(&clock) || !c.Get(&t)) return truncated("its table clock and row count");
    const uint64_t rb = var->table->snapshot_row_bytes();
    if (t > c.left() / rb) return truncated("its table rows");
    body = c.Take(t * rb);
    if (max_rows != 0 && t > max_rows)
      return InvalidArgument(where + ": the copy holds " + std::to_string(t) +
                             " rows; the table holds at most " + std::to_string(max_rows));
  }
  if (c.left() != 0)
    return InvalidArgument(where + ": " + std::to_string(c.left()) +
                           " bytes after the ReplicaState");
  // 5. Every index and count, before anything is written.
  RowSum fresh;
  try {
    std::unordered_set<int64_t> seen;
    seen.reserve(static_cast<size_t>(table ? t : s));
    for (size_t j = 0; j < s; ++j) {
      const int64_t id = At<int64_t>(sum_ids, j);
      const uint32_t k = At<uint32_t>(sum_counts, j), last = At<uint32_t>(sum_last, j);
      if (id < 0 || static_cast<uint64_t>(id) >= num_rows || !seen.insert(id).second ||
          k == 0 || k > count || last == 0 || last > count)
        return InvalidArgument(where + ": gradient sum row " + std::to_string(j) + " (index " +
                               std::to_string(id) + ", held by " + std::to_string(k) +
                               " gradients, last " + std::to_string(last) +
                               ") is out of range, repeated, or counts more than the " +
                               std::to_string(count) + " gradients collected");
    }
    seen.clear();
    for (size_t j = 0; table && j < t; ++j) {
      const int64_t id = At<int64_t>(body, j);
      const uint64_t last_seen = At<uint64_t>(body, 2 * t + j);
      if (!seen.insert(id).second || last_seen > clock)
        return InvalidArgument(where + ": table row " + std::to_string(j) + " (id " +
                               std::to_string(id) + ", last seen " + std::to_string(last_seen) +
                               ") repeats an id or was seen after the clock " +
                               std::to_string(clock));
    }
    // The new gradient sum is built aside; it replaces the old one only once all is checked.
    fresh.ids.resize(s);
    fresh.count.resize(s);
    fresh.last.resize(s);
    fresh.values.resize(s * row_bytes);
    fresh.pos.reserve(s);
    if (s) {
      std::memcpy(fresh.ids.data(), sum_ids, s * 8);
      std::memcpy(fresh.count.data(), sum_counts, s * 4);
      std::memcpy(fresh.last.data(), sum_last, s * 4);
      std::memcpy(fresh.values.data(), sum_values, s * row_bytes);
    }
    for (size_t j = 0; j < s; ++j) fresh.pos.emplace(fresh.ids[j], j);
  } catch (const std::bad_alloc&) {
    return Status(Code::kResourceExhausted, where + ": out of memory checking the copy; nothing "
                                                    "was written");
  }
  // 6. Write, in the exclusive section: first what can fail (memory), then the rest.
  {
    ExclusiveSection section(&var->repl);
    for (const auto& [client, need] : var->repl.required) {
      const uint64_t have = MarkOf(marks, client);
      if (have < need)
        return Unavailable(where + ": the copy holds client " + std::to_string(client) +
                           "'s requests up to " + std::to_string(have) + ", but this ps task "
                           "applied up to " + std::to_string(need) + " to it already (the other "
                           "replica has not applied them yet); nothing was written: read it "
                           "again");
    }
    SyncState& st = var->sync;
    if (has_dense && st.dense.size() != var->nbytes && !st.dense.Allocate(var->nbytes))
      return Status(Code::kResourceExhausted,
                    where + ": cannot allocate " + std::to_string(var->nbytes) +
                        " bytes for its gradient sum; nothing was written");
    if (table) PSRT_RETURN_IF_ERROR(var->table->Restore(clock, static_cast<size_t>(t), body));
    {
      std::lock_guard<std::mutex> l(var->mu);
      if (!table && counter) {
        __atomic_store_n(reinterpret_cast<int64_t*>(var->value.data()), At<int64_t>(body, 0),
                         __ATOMIC_SEQ_CST);
      } else if (!table) {
        if (var->nbytes) std::memcpy(var->value.data(), body, var->nbytes);
      }
      for (size_t k = 0; !table && k < var->slots.size(); ++k)
        if (var->nbytes) std::memcpy(var->slots[k]->data(), body + (1 + k) * var->nbytes,
                                     var->nbytes);
      var->beta1_power = beta1;
      var->beta2_power = beta2;
      var->applies = applies;
    }
    {
      std::lock_guard<std::mutex> l(st.mu);
      st.step = step;
      st.count = count;
      st.has_dense = has_dense != 0;
      if (has_dense && var->nbytes) std::memcpy(st.dense.data(), dense, var->nbytes);
      st.rows.Swap(fresh);
      st.cv.notify_all();
    }
    var->repl.install_marks.swap(marks);
    var->repl.required.clear();
    var->initialized.store(true, std::memory_order_release);
  }
  EndAwaiting(var);
  return Status::Ok();
}

}  // namespace psrt
