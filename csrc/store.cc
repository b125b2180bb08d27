#include "store.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>

#include "initializers.h"

namespace psrt {

bool AlignedBuffer::Allocate(size_t n) {
  if (n > SIZE_MAX - 64) return false;
  size_t alloc = (n + 63) / 64 * 64;
  if (alloc == 0) alloc = 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, alloc));
  if (p == nullptr) return false;
  std::memset(p, 0, alloc);
  std::free(data_);
  data_ = p;
  size_ = n;
  return true;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

uint8_t* Variable::SlotData(uint8_t slot) const {
  if (slot == 0) return value.data();
  if (slot - 1u < slots.size()) return slots[slot - 1]->data();
  return nullptr;
}

std::string Variable::ShapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(spec.shape[i]);
  }
  return s + "]";
}

namespace {

std::string Describe(const VarSpec& s) {
  std::string shape = "[";
  for (size_t i = 0; i < s.shape.size(); ++i) {
    if (i) shape += ",";
    shape += std::to_string(s.shape[i]);
  }
  std::string d =
      std::string(DTypeName(s.dtype)) + shape + "] optimizer " + OptimizerName(s.optimizer);
  if (s.is_table())
    d += " hash table (max_rows " + (s.max_rows ? std::to_string(s.max_rows) : "none") + ")";
  if (s.replicas_to_aggregate > 0)
    d += " synchronous (replicas_to_aggregate " + std::to_string(s.replicas_to_aggregate) +
         ", total_num_replicas " + std::to_string(s.total_num_replicas) + ")";
  return d;
}

// The initial value of slot k (0-based): the VarSpec's slot_init, slot_init2, slot_init3.
double SlotInit(const VarSpec& spec, int k) {
  return k == 0 ? spec.slot_init : k == 1 ? spec.slot_init2 : spec.slot_init3;
}

void FillSlot(uint8_t* dst, DType dtype, size_t n, double v) {
  if (dtype == DType::kFloat32) {
    auto* p = reinterpret_cast<float*>(dst);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(v);
  } else if (dtype == DType::kFloat64) {
    auto* p = reinterpret_cast<double*>(dst);
    for (size_t i = 0; i < n; ++i) p[i] = v;
  }
}

KernelArgs ArgsFor(Variable* var, double lr, bool has_lr) {
  KernelArgs a;
  a.optimizer = var->spec.optimizer;
  a.dtype = var->spec.dtype;
  a.learning_rate = has_lr ? lr : var->spec.learning_rate;
  a.momentum = var->spec.momentum;
  a.use_nesterov = var->spec.use_nesterov != 0;
  a.beta1 = var->spec.beta1;
  a.beta2 = var->spec.beta2;
  a.epsilon = var->spec.epsilon;
  a.rho = var->spec.rho;
  a.l1 = var->spec.l1;
  a.l2 = var->spec.l2;
  a.l2_shrinkage = var->spec.l2_shrinkage;
  a.lr_power = var->spec.lr_power;
  // AdagradDA's step is taken with the beta powers (TakeBetaPowers), once the update is
  // checked; a valid placeholder lets the check pass.
  a.global_step = 1;
  return a;
}

// Adam uses the beta powers of this step and advances them, as TF's AdamOptimizer._finish.
void TakeBetaPowers(Variable* var, KernelArgs* a) {
  if (var->spec.optimizer == Optimizer::kAdagradDA) {
    // AdagradDA's step: this variable's applies so far + 1, as TF's Python optimizer passes
    // global_step + 1 when every step updates the variable once.
    std::lock_guard<std::mutex> l(var->mu);
    a->global_step = ++var->applies;
    return;
  }
  if (var->spec.optimizer != Optimizer::kAdam) return;
  std::lock_guard<std::mutex> l(var->mu);
  a->beta1_power = var->beta1_power;
  a->beta2_power = var->beta2_power;
  var->beta1_power *= var->spec.beta1;
  var->beta2_power *= var->spec.beta2;
}

}  // namespace

VariableStore::VariableStore() {
  for (auto& c : chunks_) c.store(nullptr, std::memory_order_relaxed);
}

VariableStore::~VariableStore() = default;

Status VariableStore::Register(const VarSpec& spec, const void* init, Variable** out,
                               bool* created) {
  Variable* var = nullptr;
  if (created != nullptr) *created = false;
  {
    std::lock_guard<std::mutex> l(registry_mu_);
    auto it = by_name_.find(spec.name);
    if (it != by_name_.end()) {
      var = owned_[it->second - 1].get();
      if (var->spec.dtype != spec.dtype || var->spec.shape != spec.shape ||
          var->spec.optimizer != spec.optimizer ||
          var->spec.replicas_to_aggregate != spec.replicas_to_aggregate ||
          var->spec.total_num_replicas != spec.total_num_replicas ||
          var->spec.table != spec.table || var->spec.max_rows != spec.max_rows) {
        return InvalidArgument("variable '" + spec.name + "' is already registered as " +
                               Describe(var->spec) + "; got " + Describe(spec));
      }
    } else {
      PSRT_RETURN_IF_ERROR(CreateLocked(spec, &var));
      if (created != nullptr) *created = true;
    }
  }
  if (init != nullptr) {
    {
      // Initialization is rare: take the variable's mutex for it, whatever use_locking says.
      std::lock_guard<std::mutex> l(var->mu);
      if (var->nbytes > 0) std::memcpy(var->value.data(), init, var->nbytes);
    }
    FinishInit(var);  // slots, Adam's powers, AdagradDA's step, initialized, sync state
  }
  *out = var;
  return Status::Ok();
}

Status VariableStore::CreateLocked(const VarSpec& spec, Variable** out) {
  const size_t id = owned_.size() + 1;  // id 0 is never used
  if (id >= kChunkSize * kMaxChunks)
    return Status(Code::kResourceExhausted,
                  "cannot register '" + spec.name + "': this ps task holds the maximum of " +
                      std::to_string(kChunkSize * kMaxChunks - 1) + " variables");
  const size_t n = static_cast<size_t>(spec.NumElements());
  const size_t nbytes = n * DTypeSize(spec.dtype);
  const int num_slots = NumSlots(spec.optimizer);
  auto exhausted = [&](const std::string& what) {
    return Status(Code::kResourceExhausted,
                  "cannot allocate " + what + " for variable '" + spec.name + "' " +
                      Describe(spec) + " (" + std::to_string(nbytes) + " bytes for the value" +
                      (num_slots ? " and each of " + std::to_string(num_slots) + " slot(s)" : "") +
                      ", " + std::to_string(nbytes * (1 + num_slots)) +
                      " bytes in all); nothing was registered");
  };
  // The memory limit first: the value, every slot and (synchronous, dense) the step's
  // gradient sum, before a byte is allocated. A table reserves its rows as it grows.
  const bool sync_sum = spec.replicas_to_aggregate > 0 && !spec.is_table();
  const uint64_t charge =
      spec.is_table() ? 0 : uint64_t{nbytes} * (1 + num_slots + (sync_sum ? 1 : 0));
  if (charge > 0) {
    std::string what = "the value";
    if (num_slots) what += " and " + std::to_string(num_slots) + " optimizer slot(s)";
    if (sync_sum) what += " and the synchronous gradient sum";
    if (charge != nbytes) what += ", " + std::to_string(nbytes) + " bytes each";
    what += "; " + Describe(spec);
    PSRT_RETURN_IF_ERROR(memory_.Reserve(charge, spec.name, what));
  }
  struct Unreserve {
    MemoryAccount* m;
    uint64_t n;
    ~Unreserve() {
      if (m) m->Release(n);
    }
  } unreserve{&memory_, charge};
  // Everything that can fail (memory for the value, the slots and the table entries) happens
  // before the variable is published: a failure leaves the store exactly as it was.
  std::unique_ptr<Variable> v;
  try {
    v = std::make_unique<Variable>();
    v->id = static_cast<uint32_t>(id);
    v->spec = spec;
    v->num_elements = n;
    v->nbytes = nbytes;
    v->reserved_bytes = charge;
    if (spec.is_table()) {
      // Rows are allocated as they are created (table.h); the value and slots stay empty.
      v->table = std::make_unique<HashTable>(spec, &memory_);
    } else if (!v->value.Allocate(nbytes)) {
      return exhausted(std::to_string(nbytes) + " bytes");
    }
    for (int k = 0; k < num_slots && !spec.is_table(); ++k) {
      v->slots.push_back(std::make_unique<AlignedBuffer>());
      if (!v->slots.back()->Allocate(nbytes))
        return exhausted(std::to_string(nbytes) + " bytes for slot '" +
                         SlotName(spec.optimizer, k) + "'");
      FillSlot(v->slots.back()->data(), spec.dtype, n, SlotInit(spec, k));
    }
    v->beta1_power = spec.beta1;
    v->beta2_power = spec.beta2;
    const size_t chunk = id >> kChunkBits;
    if (chunks_[chunk].load(std::memory_order_acquire) == nullptr) {
      // An empty chunk of the id table is harmless if a later step fails.
      owned_chunks_.reserve(owned_chunks_.size() + 1);
      auto c = std::make_unique<std::atomic<Variable*>[]>(kChunkSize);
      for (size_t i = 0; i < kChunkSize; ++i) c[i].store(nullptr, std::memory_order_relaxed);
      chunks_[chunk].store(c.get(), std::memory_order_release);
      owned_chunks_.push_back(std::move(c));
    }
    owned_.reserve(owned_.size() + 1);
    by_name_.emplace(spec.name, static_cast<uint32_t>(id));
  } catch (const std::bad_alloc&) {
    return exhausted("memory");
  }
  // Publish: nothing below allocates; the variable keeps its reservation.
  unreserve.m = nullptr;
  Variable* var = v.get();
  chunks_[id >> kChunkBits].load(std::memory_order_acquire)[id & (kChunkSize - 1)].store(
      var, std::memory_order_release);
  owned_.push_back(std::move(v));
  count_.store(owned_.size(), std::memory_order_release);
  *out = var;
  return Status::Ok();
}

Status VariableStore::FindByName(const std::string& name, Variable** out) const {
  std::lock_guard<std::mutex> l(registry_mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return NotFound("no variable named '" + name + "' on this ps task");
  *out = owned_[it->second - 1].get();
  return Status::Ok();
}

Status VariableStore::Find(uint32_t id, Variable** out) const {
  size_t chunk = id >> kChunkBits;
  Variable* v = nullptr;
  if (id != 0 && chunk < kMaxChunks) {
    std::atomic<Variable*>* c = chunks_[chunk].load(std::memory_order_acquire);
    if (c != nullptr) v = c[id & (kChunkSize - 1)].load(std::memory_order_acquire);
  }
  if (v == nullptr)
    return NotFound("no variable with id " + std::to_string(id) + " on this ps task (" +
                    std::to_string(size()) + " registered)");
  *out = v;
  return Status::Ok();
}

Status VariableStore::CheckTrainable(const Variable* var) {
  if (var->spec.optimizer == Optimizer::kNone)
    return FailedPrecondition("variable '" + var->spec.name +
                              "' was registered without an optimizer; cannot apply a gradient");
  if (!var->initialized.load(std::memory_order_acquire))
    return FailedPrecondition("Attempting to use uninitialized value " + var->spec.name);
  return Status::Ok();
}

namespace {

void SlotPointers(const Variable* var, void* slots[kMaxSlots]) {
  for (int i = 0; i < kMaxSlots; ++i)
    slots[i] = static_cast<size_t>(i) < var->slots.size() ? var->slots[i]->data() : nullptr;
}

}  // namespace

// Both updates validate everything first, then take Adam's beta powers, then apply with a
// kernel call that cannot fail: a refused update changes no byte of the store.
Status VariableStore::ApplyDense(Variable* var, const void* grad, double lr, bool has_lr) {
  if (grad == nullptr && var->num_elements > 0)
    return InvalidArgument("dense update of '" + var->spec.name + "': no gradient buffer");
  KernelArgs a;
  PSRT_RETURN_IF_ERROR(BeginDense(var, lr, has_lr, &a));
  ApplyDenseRange(var, a, grad, 0, var->num_elements);
  return Status::Ok();
}

namespace {

// Dense access to a hash table has no meaning: its rows are addressed by id.
Status NotForTables(const Variable* var, const char* what) {
  if (!var->table) return Status::Ok();
  return InvalidArgument(std::string(what) + " of hash table '" + var->spec.name +
                         "': a table's rows are addressed by id (row-sparse PULL and PUSH, "
                         "TABLE_EXPORT, TABLE_IMPORT)");
}

}  // namespace

Status VariableStore::BeginDense(Variable* var, double lr, bool has_lr, KernelArgs* args) {
  PSRT_RETURN_IF_ERROR(NotForTables(var, "dense update"));
  PSRT_RETURN_IF_ERROR(CheckTrainable(var));
  *args = ArgsFor(var, lr, has_lr);
  void* slots[kMaxSlots];
  SlotPointers(var, slots);
  Status st = CheckDense(*args, var->value.data(), slots, var->value.data(), var->num_elements);
  if (!st.ok()) return Status(st.code(), "variable '" + var->spec.name + "': " + st.message());
  TakeBetaPowers(var, args);
  return Status::Ok();
}

void VariableStore::ApplyDenseRange(Variable* var, const KernelArgs& args, const void* grad,
                                    size_t begin, size_t n) {
  if (n == 0 || begin >= var->num_elements) return;
  n = std::min(n, var->num_elements - begin);
  const size_t off = begin * DTypeSize(var->spec.dtype);
  void* slots[kMaxSlots];
  SlotPointers(var, slots);
  for (void*& p : slots)
    if (p != nullptr) p = static_cast<uint8_t*>(p) + off;
  std::unique_lock<std::mutex> l(var->mu, std::defer_lock);
  if (var->spec.use_locking) l.lock();
  // Checked by BeginDense: the optimizer, dtype and buffers are valid, so this cannot fail.
  (void)psrt::ApplyDense(args, var->value.data() + off, slots, grad, n);
}

Status VariableStore::AssignRange(Variable* var, uint8_t slot, const void* bytes, size_t at,
                                  size_t len) {
  PSRT_RETURN_IF_ERROR(NotForTables(var, "assign"));
  uint8_t* dst = var->SlotData(slot);
  if (dst == nullptr || slot == kOptimizerStateSlot)
    return InvalidArgument("variable '" + var->spec.name + "' has no slot index " +
                           std::to_string(slot - 1));
  if (at > var->nbytes || len > var->nbytes - at)
    return InvalidArgument("assign to '" + var->spec.name + "': bytes [" + std::to_string(at) +
                           ", " + std::to_string(at + len) + ") outside its " +
                           std::to_string(var->nbytes) + " bytes");
  std::unique_lock<std::mutex> l(var->mu, std::defer_lock);
  if (var->spec.use_locking) l.lock();
  if (len > 0) std::memcpy(dst + at, bytes, len);
  return Status::Ok();
}

void VariableStore::MarkInitialized(Variable* var) {
  var->initialized.store(true, std::memory_order_release);
}

void VariableStore::RunInitializer(Variable* var, const InitSpec& init) {
  if (!var->table) {
    std::lock_guard<std::mutex> l(var->mu);
    FillInitializer(init, var->spec.dtype, var->value.data(), var->num_elements);
  }
  FinishInit(var);
}

void VariableStore::FinishInit(Variable* var) {
  {
    std::lock_guard<std::mutex> l(var->mu);
    if (var->table) var->table->Clear();  // a table starts empty: rows come on first use
    for (size_t k = 0; k < var->slots.size(); ++k)
      FillSlot(var->slots[k]->data(), var->spec.dtype, var->num_elements,
               SlotInit(var->spec, static_cast<int>(k)));
    var->beta1_power = var->spec.beta1;
    var->beta2_power = var->spec.beta2;
    var->applies = 0;
    var->initialized.store(true, std::memory_order_release);
  }
  SyncReset(var);
}

Status VariableStore::ApplySparse(Variable* var, const int64_t* indices, size_t n,
                                  const void* rows, double lr, bool has_lr) {
  return ApplyRows(var, indices, n, rows, lr, has_lr, false);
}

Status VariableStore::ApplyRows(Variable* var, const int64_t* indices, size_t n,
                                const void* rows, double lr, bool has_lr, bool known_unique) {
  PSRT_RETURN_IF_ERROR(CheckTrainable(var));
  if (var->table) {
    return var->table->Apply(ArgsFor(var, lr, has_lr), indices, n, rows,
                             [var](KernelArgs* a) { TakeBetaPowers(var, a); });
  }
  if (var->spec.shape.empty())
    return InvalidArgument("row-sparse update of scalar variable '" + var->spec.name + "'");
  const size_t num_rows = static_cast<size_t>(var->spec.shape[0]);
  const size_t width = num_rows == 0 ? 0 : var->num_elements / num_rows;
  KernelArgs a = ArgsFor(var, lr, has_lr);
  SparseUpdate update;
  Status st = PrepareSparse(a, num_rows, width, indices, n, rows, known_unique, &update);
  if (!st.ok()) return Status(st.code(), "variable '" + var->spec.name + "': " + st.message());
  // TF advances Adam's beta powers once per apply, however many rows it touched (none too).
  TakeBetaPowers(var, &a);
  void* slots[kMaxSlots];
  SlotPointers(var, slots);
  std::unique_lock<std::mutex> l(var->mu, std::defer_lock);
  if (var->spec.use_locking) l.lock();
  ApplyPrepared(a, var->value.data(), slots, update);
  return Status::Ok();
}

Status VariableStore::Assign(Variable* var, uint8_t slot, const void* bytes, size_t len) {
  if (slot == kOptimizerStateSlot) {
    if (var->spec.optimizer != Optimizer::kAdam)
      return InvalidArgument("variable '" + var->spec.name + "' (optimizer " +
                             OptimizerName(var->spec.optimizer) +
                             ") has no optimizer state: slot 255 holds Adam's beta powers only");
    if (len != 16) return InvalidArgument("optimizer state of '" + var->spec.name +
                                          "' is float64[2]; got " + std::to_string(len) +
                                          " bytes");
    double p[2];
    std::memcpy(p, bytes, 16);
    std::lock_guard<std::mutex> l(var->mu);
    var->beta1_power = p[0];
    var->beta2_power = p[1];
    return Status::Ok();
  }
  PSRT_RETURN_IF_ERROR(NotForTables(var, "assign"));
  uint8_t* dst = var->SlotData(slot);
  if (dst == nullptr)
    return InvalidArgument("variable '" + var->spec.name + "' has " +
                           std::to_string(var->slots.size()) + " optimizer slots; slot index " +
                           std::to_string(slot - 1) + " does not exist");
  if (len != var->nbytes)
    return InvalidArgument("assign to '" + var->spec.name + "': expected " +
                           std::to_string(var->nbytes) + " bytes, got " + std::to_string(len));
  std::unique_lock<std::mutex> l(var->mu, std::defer_lock);
  if (var->spec.use_locking) l.lock();
  if (var->spec.dtype == DType::kInt64 && var->num_elements == 1) {
    int64_t v;
    std::memcpy(&v, bytes, 8);
    __atomic_store_n(reinterpret_cast<int64_t*>(dst), v, __ATOMIC_SEQ_CST);
  } else {
    std::memcpy(dst, bytes, len);
  }
  if (slot == 0) var->initialized.store(true, std::memory_order_release);
  return Status::Ok();
}

Status VariableStore::AssignAdd(Variable* var, const void* delta, size_t len) {
  PSRT_RETURN_IF_ERROR(NotForTables(var, "assign_add"));
  if (!var->initialized.load(std::memory_order_acquire))
    return FailedPrecondition("Attempting to use uninitialized value " + var->spec.name);
  if (len != var->nbytes)
    return InvalidArgument("assign_add to '" + var->spec.name + "': expected " +
                           std::to_string(var->nbytes) + " bytes, got " + std::to_string(len));
  std::unique_lock<std::mutex> l(var->mu, std::defer_lock);
  if (var->spec.use_locking) l.lock();
  size_t n = var->num_elements;
  switch (var->spec.dtype) {
    case DType::kFloat32: {
      auto* v = reinterpret_cast<float*>(var->value.data());
      const auto* d = static_cast<const float*>(delta);
      for (size_t i = 0; i < n; ++i) v[i] += d[i];
      break;
    }
    case DType::kFloat64: {
      auto* v = reinterpret_cast<double*>(var->value.data());
      const auto* d = static_cast<const double*>(delta);
      for (size_t i = 0; i < n; ++i) v[i] += d[i];
      break;
    }
    case DType::kInt64: {
      auto* v = reinterpret_cast<int64_t*>(var->value.data());
      const auto* d = static_cast<const int64_t*>(delta);
      for (size_t i = 0; i < n; ++i) __atomic_add_fetch(&v[i], d[i], __ATOMIC_SEQ_CST);
      break;
    }
    default:
      return Internal("bad dtype");
  }
  return Status::Ok();
}

Status VariableStore::CheckStepVariable(const Variable* var) {
  if (var->spec.dtype != DType::kInt64 || var->num_elements != 1)
    return InvalidArgument("variable '" + var->spec.name + "' is " +
                           DTypeName(var->spec.dtype) + var->ShapeString() +
                           "; a global step must be an int64 scalar");
  if (!var->initialized.load(std::memory_order_acquire))
    return FailedPrecondition("Attempting to use uninitialized value " + var->spec.name);
  return Status::Ok();
}

Status VariableStore::StepRead(Variable* var, int64_t* value) {
  PSRT_RETURN_IF_ERROR(CheckStepVariable(var));
  *value = __atomic_load_n(reinterpret_cast<int64_t*>(var->value.data()), __ATOMIC_SEQ_CST);
  return Status::Ok();
}

Status VariableStore::StepIncrement(Variable* var, int64_t delta, int64_t* new_value) {
  PSRT_RETURN_IF_ERROR(CheckStepVariable(var));
  *new_value = __atomic_add_fetch(reinterpret_cast<int64_t*>(var->value.data()), delta,
                                  __ATOMIC_SEQ_CST);
  return Status::Ok();
}

std::vector<Variable*> VariableStore::All() const {
  std::lock_guard<std::mutex> l(registry_mu_);
  std::vector<Variable*> out;
  out.reserve(owned_.size());
  for (auto& v : owned_) out.push_back(v.get());
  return out;
}

}  // namespace psrt

namespace psrt {

namespace {

Status CheckTable(const Variable* var, bool need_init) {
  if (!var->table)
    return InvalidArgument("variable '" + var->spec.name + "' is not a hash table");
  if (need_init && !var->initialized.load(std::memory_order_acquire))
    return FailedPrecondition("Attempting to use uninitialized value " + var->spec.name);
  return Status::Ok();
}

}  // namespace

Status VariableStore::GatherRows(Variable* var, const int64_t* ids, size_t n, uint8_t slot,
                                 uint8_t* out) {
  PSRT_RETURN_IF_ERROR(CheckTable(var, true));
  return var->table->Gather(ids, n, slot, out);
}

Status VariableStore::TableExport(Variable* var, uint64_t cursor, size_t max_rows,
                                  std::vector<uint8_t>* out, size_t* n, int64_t* next) {
  PSRT_RETURN_IF_ERROR(CheckTable(var, true));
  return var->table->Export(cursor, max_rows, out, n, next);
}

Status VariableStore::TableImport(Variable* var, const uint8_t* records, size_t n, bool clear) {
  PSRT_RETURN_IF_ERROR(CheckTable(var, !clear));
  PSRT_RETURN_IF_ERROR(var->table->Import(records, n, clear));
  if (clear) {
    std::lock_guard<std::mutex> l(var->mu);
    var->beta1_power = var->spec.beta1;
    var->beta2_power = var->spec.beta2;
    var->applies = 0;
  }
  var->initialized.store(true, std::memory_order_release);
  return Status::Ok();
}

Status VariableStore::TableEvict(Variable* var, uint64_t unseen, uint64_t min_count,
                                 size_t* evicted) {
  PSRT_RETURN_IF_ERROR(CheckTable(var, true));
  *evicted = var->table->Evict(unseen, min_count);
  return Status::Ok();
}

}  // namespace psrt
