#include "store.h"

#include <cstdlib>
#include <cstring>

namespace psrt {

bool AlignedBuffer::Allocate(size_t n) {
  std::free(data_);
  size_t alloc = (n + 63) / 64 * 64;
  if (alloc == 0) alloc = 64;
  data_ = static_cast<uint8_t*>(std::aligned_alloc(64, alloc));
  size_ = data_ == nullptr ? 0 : n;
  if (data_ != nullptr) std::memset(data_, 0, alloc);
  return data_ != nullptr;
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
  return std::string(DTypeName(s.dtype)) + shape + "] optimizer " + OptimizerName(s.optimizer);
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
  return a;
}

// Adam uses the beta powers of this step and advances them, as TF's AdamOptimizer._finish.
void TakeBetaPowers(Variable* var, KernelArgs* a) {
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

Status VariableStore::Register(const VarSpec& spec, const void* init, Variable** out) {
  Variable* var = nullptr;
  {
    std::lock_guard<std::mutex> l(registry_mu_);
    auto it = by_name_.find(spec.name);
    if (it != by_name_.end()) {
      var = owned_[it->second - 1].get();
      if (var->spec.dtype != spec.dtype || var->spec.shape != spec.shape ||
          var->spec.optimizer != spec.optimizer) {
        return InvalidArgument("variable '" + spec.name + "' is already registered as " +
                               Describe(var->spec) + "; got " + Describe(spec));
      }
    } else {
      size_t id = owned_.size() + 1;  // id 0 is never used
      if (id >= kChunkSize * kMaxChunks)
        return Status(Code::kResourceExhausted, "too many variables on this ps task");
      auto v = std::make_unique<Variable>();
      v->id = static_cast<uint32_t>(id);
      v->spec = spec;
      v->num_elements = static_cast<size_t>(spec.NumElements());
      v->nbytes = v->num_elements * DTypeSize(spec.dtype);
      if (!v->value.Allocate(v->nbytes))
        return Status(Code::kResourceExhausted,
                      "cannot allocate " + std::to_string(v->nbytes) + " bytes for '" +
                          spec.name + "'");
      for (int s = 0; s < NumSlots(spec.optimizer); ++s) {
        v->slots.push_back(std::make_unique<AlignedBuffer>(v->nbytes));
        FillSlot(v->slots.back()->data(), spec.dtype, v->num_elements, spec.slot_init);
      }
      v->beta1_power = spec.beta1;
      v->beta2_power = spec.beta2;
      size_t chunk = id >> kChunkBits;
      std::atomic<Variable*>* c = chunks_[chunk].load(std::memory_order_acquire);
      if (c == nullptr) {
        owned_chunks_.push_back(std::make_unique<std::atomic<Variable*>[]>(kChunkSize));
        c = owned_chunks_.back().get();
        for (size_t i = 0; i < kChunkSize; ++i) c[i].store(nullptr, std::memory_order_relaxed);
        chunks_[chunk].store(c, std::memory_order_release);
      }
      var = v.get();
      c[id & (kChunkSize - 1)].store(var, std::memory_order_release);
      owned_.push_back(std::move(v));
      by_name_.emplace(spec.name, static_cast<uint32_t>(id));
      count_.store(owned_.size(), std::memory_order_release);
    }
  }
  if (init != nullptr) {
    // Initialization is rare: take the variable's mutex for all of it (it also guards the
    // beta powers), whatever use_locking says.
    std::lock_guard<std::mutex> l(var->mu);
    std::memcpy(var->value.data(), init, var->nbytes);
    for (auto& s : var->slots)
      FillSlot(s->data(), var->spec.dtype, var->num_elements, var->spec.slot_init);
    var->beta1_power = var->spec.beta1;
    var->beta2_power = var->spec.beta2;
    var->initialized.store(true, std::memory_order_release);
  }
  *out = var;
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

Status VariableStore::ApplyDense(Variable* var, const void* grad, double lr, bool has_lr) {
  if (var->spec.optimizer == Optimizer::kNone)
    return FailedPrecondition("variable '" + var->spec.name +
                              "' was registered without an optimizer; cannot apply a gradient");
  if (!var->initialized.load(std::memory_order_acquire))
    return FailedPrecondition("Attempting to use uninitialized value " + var->spec.name);
  KernelArgs a = ArgsFor(var, lr, has_lr);
  TakeBetaPowers(var, &a);
  void* slots[2] = {nullptr, nullptr};
  for (size_t i = 0; i < var->slots.size() && i < 2; ++i) slots[i] = var->slots[i]->data();
  std::unique_lock<std::mutex> l(var->mu, std::defer_lock);
  if (var->spec.use_locking) l.lock();
  return psrt::ApplyDense(a, var->value.data(), slots, grad, var->num_elements);
}

Status VariableStore::ApplySparse(Variable* var, const int64_t* indices, size_t n,
                                  const void* rows, double lr, bool has_lr) {
  if (var->spec.optimizer == Optimizer::kNone)
    return FailedPrecondition("variable '" + var->spec.name +
                              "' was registered without an optimizer; cannot apply a gradient");
  if (!var->initialized.load(std::memory_order_acquire))
    return FailedPrecondition("Attempting to use uninitialized value " + var->spec.name);
  if (var->spec.shape.empty())
    return InvalidArgument("row-sparse update of scalar variable '" + var->spec.name + "'");
  size_t num_rows = static_cast<size_t>(var->spec.shape[0]);
  size_t width = num_rows == 0 ? 0 : var->num_elements / num_rows;
  KernelArgs a = ArgsFor(var, lr, has_lr);
  TakeBetaPowers(var, &a);
  void* slots[2] = {nullptr, nullptr};
  for (size_t i = 0; i < var->slots.size() && i < 2; ++i) slots[i] = var->slots[i]->data();
  std::unique_lock<std::mutex> l(var->mu, std::defer_lock);
  if (var->spec.use_locking) l.lock();
  Status st = psrt::ApplySparse(a, var->value.data(), slots, num_rows, width, indices, n, rows);
  if (!st.ok()) return Status(st.code(), "variable '" + var->spec.name + "': " + st.message());
  return st;
}

Status VariableStore::Assign(Variable* var, uint8_t slot, const void* bytes, size_t len) {
  if (slot == kOptimizerStateSlot) {
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

namespace {
Status CheckStepVariable(Variable* var) {
  if (var->spec.dtype != DType::kInt64 || var->num_elements != 1)
    return InvalidArgument("variable '" + var->spec.name + "' is " +
                           DTypeName(var->spec.dtype) + var->ShapeString() +
                           "; a global step must be an int64 scalar");
  if (!var->initialized.load(std::memory_order_acquire))
    return FailedPrecondition("Attempting to use uninitialized value " + var->spec.name);
  return Status::Ok();
}
}  // namespace

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
