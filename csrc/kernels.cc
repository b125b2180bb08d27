// Optimizer names and slots, run-time choice of the kernel target, argument checks, threading of
// large dense updates and the duplicate-summing of sparse updates. The loops themselves are in
// kernels_impl.cc, one copy per target.
#include "kernels.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <numeric>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

#ifndef PSRT_HAVE_KERNEL_BASELINE
#error "kernels.cc needs -DPSRT_HAVE_KERNEL_BASELINE=1 and kernels_impl.cc per target (CMake)"
#endif

namespace psrt {

using kernel_detail::Form;
using kernel_detail::KernelScalars;
using kernel_detail::KernelTable;

int NumSlots(Optimizer opt) {
  switch (opt) {
    case Optimizer::kAdagrad:
    case Optimizer::kMomentum:
    case Optimizer::kProximalAdagrad:
      return 1;
    case Optimizer::kAdam:
    case Optimizer::kAdadelta:
    case Optimizer::kAdagradDA:
    case Optimizer::kFtrl:
    case Optimizer::kRMSProp:
      return 2;
    case Optimizer::kCenteredRMSProp:
      return 3;
    case Optimizer::kNone:
    case Optimizer::kGradientDescent:
    case Optimizer::kProximalGradientDescent:
      return 0;
  }
  return 0;
}

const char* SlotName(Optimizer opt, int slot) {
  const char* const* names = nullptr;
  static const char* const kAdagrad[] = {"Adagrad"};
  static const char* const kMomentum[] = {"Momentum"};
  static const char* const kAdam[] = {"Adam", "Adam_1"};
  static const char* const kAdadelta[] = {"accum", "accum_update"};
  static const char* const kAdagradDA[] = {"gradient_accumulator",
                                           "gradient_squared_accumulator"};
  static const char* const kFtrl[] = {"accum", "linear"};
  static const char* const kProximalAdagrad[] = {"accumulator"};
  static const char* const kRMSProp[] = {"rms", "momentum", "mg"};
  switch (opt) {
    case Optimizer::kAdagrad: names = kAdagrad; break;
    case Optimizer::kMomentum: names = kMomentum; break;
    case Optimizer::kAdam: names = kAdam; break;
    case Optimizer::kAdadelta: names = kAdadelta; break;
    case Optimizer::kAdagradDA: names = kAdagradDA; break;
    case Optimizer::kFtrl: names = kFtrl; break;
    case Optimizer::kProximalAdagrad: names = kProximalAdagrad; break;
    case Optimizer::kRMSProp:
    case Optimizer::kCenteredRMSProp: names = kRMSProp; break;
    case Optimizer::kNone:
    case Optimizer::kGradientDescent:
    case Optimizer::kProximalGradientDescent: break;
  }
  return names != nullptr && slot >= 0 && slot < NumSlots(opt) ? names[slot] : "";
}

const char* OptimizerName(Optimizer opt) {
  switch (opt) {
    case Optimizer::kNone: return "None";
    case Optimizer::kGradientDescent: return "GradientDescent";
    case Optimizer::kAdagrad: return "Adagrad";
    case Optimizer::kMomentum: return "Momentum";
    case Optimizer::kAdam: return "Adam";
    case Optimizer::kAdadelta: return "Adadelta";
    case Optimizer::kAdagradDA: return "AdagradDA";
    case Optimizer::kFtrl: return "Ftrl";
    case Optimizer::kProximalGradientDescent: return "ProximalGradientDescent";
    case Optimizer::kProximalAdagrad: return "ProximalAdagrad";
    case Optimizer::kRMSProp: return "RMSProp";
    case Optimizer::kCenteredRMSProp: return "CenteredRMSProp";
  }
  return "unknown";
}

namespace {

// "GradientDescent, Adagrad, ... or CenteredRMSProp".
std::string OptimizerChoices() {
  std::string out;
  for (int code = 1; code <= kMaxKernelOptimizer; ++code) {
    if (code > 1) out += code == kMaxKernelOptimizer ? " or " : ", ";
    out += OptimizerName(static_cast<Optimizer>(code));
  }
  return out;
}

}  // namespace

Status ParseOptimizerName(const std::string& name, Optimizer* out) {
  if (name.empty() || name == "None") {
    *out = Optimizer::kNone;
    return Status::Ok();
  }
  for (int code = 1; code <= kMaxKernelOptimizer; ++code) {
    if (name == OptimizerName(static_cast<Optimizer>(code))) {
      *out = static_cast<Optimizer>(code);
      return Status::Ok();
    }
  }
  return InvalidArgument("optimizer '" + name + "' not supported; expected " +
                         OptimizerChoices());
}

namespace {

// ---- Targets --------------------------------------------------------------------------------

struct Target {
  const char* name;
  const KernelTable& (*table)();
  bool (*supported)();
};

#if (defined(__x86_64__) || defined(__i386__)) && (PSRT_HAVE_KERNEL_AVX2 || PSRT_HAVE_KERNEL_AVX512)
// __builtin_cpu_supports also checks that the OS saves the wide registers (XGETBV), so a
// supported target is one that can run. The avx512 copy is compiled with F+VL+BW+DQ and the
// avx2 copy with FMA, so each needs all of its flags.
bool CpuHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#if PSRT_HAVE_KERNEL_AVX512
bool CpuHasAvx512() {
  return CpuHasAvx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq");
}
#endif
#endif
bool Always() { return true; }

// Preference order: best first.
const Target kTargets[] = {
#if PSRT_HAVE_KERNEL_AVX512
    {"avx512", &avx512::GetKernelTable, &CpuHasAvx512},
#endif
#if PSRT_HAVE_KERNEL_AVX2
    {"avx2", &avx2::GetKernelTable, &CpuHasAvx2},
#endif
    {"baseline", &baseline::GetKernelTable, &Always},
};

const Target* FindTarget(const std::string& name) {
  for (const Target& t : kTargets) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

const Target* BestTarget() {
  for (const Target& t : kTargets) {
    if (t.supported()) return &t;
  }
  return &kTargets[sizeof(kTargets) / sizeof(kTargets[0]) - 1];  // baseline
}

std::string JoinSupported() {
  std::string out;
  for (const Target& t : kTargets) {
    if (!t.supported()) continue;
    if (!out.empty()) out += ", ";
    out += t.name;
  }
  return out;
}

// Why `name` cannot be used, or OK.
Status CheckTargetName(const std::string& name, const Target** out) {
  const Target* t = FindTarget(name);
  if (t == nullptr) {
    return InvalidArgument("unknown kernel target '" + name + "'; supported on this CPU: " +
                           JoinSupported());
  }
  if (!t->supported()) {
    return InvalidArgument("kernel target '" + name + "' is not supported by this CPU; " +
                           "supported on this CPU: " + JoinSupported());
  }
  *out = t;
  return Status::Ok();
}

// The environment variable is read once, at first use, so tests and benchmarks can force a
// target for a whole process. A bad value must not stop training: it falls back to the best
// target and says so once on stderr.
const Target* InitialTarget() {
  const char* env = std::getenv("PSRT_KERNEL_TARGET");
  if (env == nullptr || *env == '\0') return BestTarget();
  const Target* t = nullptr;
  Status st = CheckTargetName(env, &t);
  if (st.ok()) return t;
  std::fprintf(stderr, "psrt: PSRT_KERNEL_TARGET: %s; using '%s'\n", st.message().c_str(),
               BestTarget()->name);
  return BestTarget();
}

// Function-local static: initialized once, thread-safely, on first use. Atomic because
// SetKernelTarget may run while server threads apply updates.
std::atomic<const Target*>& ActiveSlot() {
  static std::atomic<const Target*> active{InitialTarget()};
  return active;
}

const KernelTable& ActiveTable() {
  return ActiveSlot().load(std::memory_order_acquire)->table();
}

// ---- Argument checks --------------------------------------------------------------------------

std::string FormatDouble(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// The hyper-parameter checks of TF's kernels (made on the values cast to the variable's dtype,
// as TF makes them), plus AdagradDA's step, which TF leaves unchecked (a step of 0 divides by
// zero in its sparse kernel).
template <typename T>
Status CheckHyperParameters(const KernelArgs& a, const char* what) {
  // Messages are built only for a refusal: this runs for every update.
  auto where = [&] { return std::string(what) + " with " + OptimizerName(a.optimizer); };
  auto require = [&](bool ok, const char* name, double value, const char* rule) {
    return ok ? Status::Ok()
              : InvalidArgument(where() + ": " + name + " " + FormatDouble(value) +
                                " must be " + rule + " (TF's " + OptimizerName(a.optimizer) +
                                " kernel refuses it)");
  };
  switch (a.optimizer) {
    case Optimizer::kFtrl:
    case Optimizer::kProximalAdagrad:
      PSRT_RETURN_IF_ERROR(require(static_cast<T>(a.learning_rate) > T(0), "learning_rate",
                                   a.learning_rate, "> 0"));
      PSRT_RETURN_IF_ERROR(require(static_cast<T>(a.l1) >= T(0), "l1", a.l1, ">= 0"));
      PSRT_RETURN_IF_ERROR(require(static_cast<T>(a.l2) >= T(0), "l2", a.l2, ">= 0"));
      if (a.optimizer != Optimizer::kFtrl) break;
      PSRT_RETURN_IF_ERROR(
          require(static_cast<T>(a.lr_power) <= T(0), "lr_power", a.lr_power, "<= 0"));
      PSRT_RETURN_IF_ERROR(require(static_cast<T>(a.l2_shrinkage) >= T(0), "l2_shrinkage",
                                   a.l2_shrinkage, ">= 0"));
      break;
    case Optimizer::kAdagradDA:
      if (a.global_step < 1) {
        return InvalidArgument(where() + ": global_step " + std::to_string(a.global_step) +
                               " must be >= 1 (the step being applied: TF's AdagradDA passes "
                               "its global step + 1)");
      }
      break;
    default:
      break;
  }
  return Status::Ok();
}

Status CheckOptimizer(const KernelArgs& args, const char* what) {
  if (args.optimizer == Optimizer::kNone ||
      static_cast<uint8_t>(args.optimizer) > kMaxKernelOptimizer) {
    return InvalidArgument(std::string(what) + ": unknown optimizer code " +
                           std::to_string(static_cast<int>(args.optimizer)) + "; expected " +
                           OptimizerChoices());
  }
  if (args.dtype != DType::kFloat32 && args.dtype != DType::kFloat64) {
    return InvalidArgument(std::string(what) + ": dtype " + DTypeName(args.dtype) +
                           " not supported by optimizer " + OptimizerName(args.optimizer) +
                           "; expected float32 or float64");
  }
  return args.dtype == DType::kFloat32 ? CheckHyperParameters<float>(args, what)
                                       : CheckHyperParameters<double>(args, what);
}

// Callers pass buffers they own, so a null one is a bug upstream; it is still an error, not
// a crash in a server thread.
Status CheckBuffers(const KernelArgs& args, const void* var, void* const* slots,
                    const void* grad, const char* what) {
  if (var == nullptr || grad == nullptr) {
    return InvalidArgument(std::string(what) + ": null variable or gradient buffer");
  }
  for (int k = 0; k < NumSlots(args.optimizer); ++k) {
    if (slots == nullptr || slots[k] == nullptr) {
      return InvalidArgument(std::string(what) + ": optimizer " + OptimizerName(args.optimizer) +
                             " needs slot '" + SlotName(args.optimizer, k) +
                             "' but its buffer is null");
    }
  }
  return Status::Ok();
}

// Casts the scalars to T before the loop, as TF's kernels receive them as T tensors, and
// computes the scalar products TF's kernels compute once (Adam's step size, lr * l1, ...) in T
// with TF's formulas, or in double where TF's scalar loops do.
template <typename T>
KernelScalars<T> MakeScalars(const KernelArgs& a, Form form) {
  KernelScalars<T> s;
  s.optimizer = a.optimizer;
  s.form = form;
  s.use_nesterov = a.use_nesterov;
  s.lr = static_cast<T>(a.learning_rate);
  s.momentum = static_cast<T>(a.momentum);
  s.one_minus_beta1 = T(1) - static_cast<T>(a.beta1);
  s.one_minus_beta2 = T(1) - static_cast<T>(a.beta2);
  s.epsilon = static_cast<T>(a.epsilon);
  s.lr_t = s.lr * std::sqrt(T(1) - static_cast<T>(a.beta2_power)) /
           (T(1) - static_cast<T>(a.beta1_power));
  s.rho = static_cast<T>(a.rho);
  s.one_minus_rho = T(1) - s.rho;
  s.l1 = static_cast<T>(a.l1);
  s.l2 = static_cast<T>(a.l2);
  s.lr_l1 = s.lr * s.l1;
  s.one_plus_l2_lr = T(1) + s.l2 * s.lr;
  s.l2_lr_wide = 1.0 + static_cast<double>(s.l2 * s.lr);
  const T lr_power = static_cast<T>(a.lr_power);
  s.ftrl_sqrt = lr_power == static_cast<T>(-0.5);
  s.ftrl_shrinkage = a.l2_shrinkage > 0;
  s.neg_lr_power = -lr_power;
  s.two_l2 = T(2) * s.l2;
  s.two_l2_shrinkage = T(2) * static_cast<T>(a.l2_shrinkage);
  // ApplyAdagradDA's functor receives the step as float, SparseApplyAdagradDA's row loop as T,
  // its scalar loop as int64 with the other scalars widened to double.
  const T step_as_float = static_cast<T>(static_cast<float>(a.global_step));
  s.da_t_l1 = step_as_float * s.l1;
  s.da_l2_t_lr = s.l2 * (step_as_float * s.lr);
  s.da_t = static_cast<T>(a.global_step);
  s.da_t_lr = s.da_t * s.lr;
  s.da_lr_wide = static_cast<double>(s.lr);
  s.da_t_l1_wide = static_cast<double>(a.global_step) * static_cast<double>(s.l1);
  s.da_t_l2_lr_wide =
      static_cast<double>(a.global_step) * static_cast<double>(s.l2) * static_cast<double>(s.lr);
  return s;
}

// ---- Dense ------------------------------------------------------------------------------------

template <typename T>
using ApplyFn = void (*)(const KernelScalars<T>&, T*, T*, T*, T*, const T*, size_t);

template <typename T>
ApplyFn<T> ApplyOf(const KernelTable& t);
template <>
ApplyFn<float> ApplyOf<float>(const KernelTable& t) { return t.apply_f32; }
template <>
ApplyFn<double> ApplyOf<double>(const KernelTable& t) { return t.apply_f64; }

template <typename T>
using AccumulateFn = void (*)(T*, const T*, size_t);

template <typename T>
AccumulateFn<T> AccumulateOf(const KernelTable& t);
template <>
AccumulateFn<float> AccumulateOf<float>(const KernelTable& t) { return t.accumulate_f32; }
template <>
AccumulateFn<double> AccumulateOf<double>(const KernelTable& t) { return t.accumulate_f64; }

// Below this many elements a thread costs more to start (~30 us) than the work it takes over
// (1M float32 Adagrad elements move 20 MB, ~0.5 ms at memory speed).
constexpr size_t kParallelMinElements = size_t{1} << 20;
// Each thread gets at least this much on average, so a machine with many cores does not split
// 1M elements into slivers that are all thread start-up.
constexpr size_t kMinElementsPerThread = size_t{1} << 18;
// Unit of work the threads claim. Small enough that a thread the scheduler starts late (the ps
// also runs network threads, often on 2 vCPUs) leaves its share to the others instead of making
// the caller wait; large enough (>= 128 KB per array) that claiming costs nothing.
constexpr size_t kBlockElements = size_t{1} << 15;
constexpr size_t kCacheLine = 64;

// CPUs this process may run on. On Linux the affinity mask, so a ps pinned with taskset or a
// container's cpuset does not start a thread per host CPU; hardware_concurrency() elsewhere.
size_t HardwareThreads() {
  static const size_t n = [] {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
      return static_cast<size_t>(CPU_COUNT(&set));
    }
#endif
    return std::max<size_t>(1, std::thread::hardware_concurrency());
  }();
  return n;
}

size_t NumThreads(size_t n) {
  if (n < kParallelMinElements) return 1;
  return std::max<size_t>(1, std::min(HardwareThreads(), n / kMinElementsPerThread));
}

// A dense update split into blocks that threads claim from a counter. Shared (shared_ptr) by
// the caller and detached helper threads: a helper that starts after all blocks are claimed
// touches only this object, never the arrays, so the caller returns without waiting for it.
template <typename T>
struct DenseJob {
  ApplyFn<T> fn;
  KernelScalars<T> s;
  T* var;
  T* slot0;
  T* slot1;
  T* slot2;
  const T* grad;
  size_t n;
  size_t first_line;  // first index of var that starts a cache line
  size_t num_blocks;
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::condition_variable all_done;
  size_t done = 0;  // blocks finished; guarded by mu

  DenseJob(ApplyFn<T> f, const KernelScalars<T>& sc, T* v, T* s0, T* s1, T* s2, const T* g,
           size_t len)
      : fn(f), s(sc), var(v), slot0(s0), slot1(s1), slot2(s2), grad(g), n(len) {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(var);
    first_line = addr % sizeof(T) != 0
                     ? 0
                     : ((kCacheLine - addr % kCacheLine) % kCacheLine) / sizeof(T);
    num_blocks = (n - first_line + kBlockElements - 1) / kBlockElements;
  }

  // Block boundaries after the first sit on cache lines of var, so no two threads write the
  // same line (false sharing) and every block's loop starts aligned.
  size_t BlockBegin(size_t k) const {
    return k == 0 ? 0 : std::min(n, first_line + k * kBlockElements);
  }

  // Runs unclaimed blocks until none is left.
  void Work() {
    size_t finished = 0;
    for (;;) {
      const size_t k = next.fetch_add(1, std::memory_order_relaxed);
      if (k >= num_blocks) break;
      const size_t b = BlockBegin(k);
      const size_t e = BlockBegin(k + 1);
      fn(s, var + b, slot0 ? slot0 + b : nullptr, slot1 ? slot1 + b : nullptr,
         slot2 ? slot2 + b : nullptr, grad + b, e - b);
      ++finished;
    }
    if (finished == 0) return;
    // The mutex also publishes this thread's writes to the arrays to the caller.
    std::lock_guard<std::mutex> l(mu);
    done += finished;
    if (done == num_blocks) all_done.notify_all();
  }
};

template <typename T>
void RunDense(ApplyFn<T> fn, const KernelScalars<T>& s, T* var, T* slot0, T* slot1, T* slot2,
              const T* grad, size_t n) {
  const size_t threads = NumThreads(n);
  if (threads == 1) {
    fn(s, var, slot0, slot1, slot2, grad, n);
    return;
  }
  std::shared_ptr<DenseJob<T>> job;
  try {
    job = std::make_shared<DenseJob<T>>(fn, s, var, slot0, slot1, slot2, grad, n);
    // If the system refuses a thread, the blocks it would have taken run on the others (at
    // worst all on this one): slower, never wrong, and no exception leaves the kernel.
    for (size_t t = 1; t < threads; ++t) std::thread([job] { job->Work(); }).detach();
  } catch (...) {
    if (job == nullptr) {
      fn(s, var, slot0, slot1, slot2, grad, n);
      return;
    }
  }
  job->Work();
  std::unique_lock<std::mutex> l(job->mu);
  job->all_done.wait(l, [&] { return job->done == job->num_blocks; });
}

template <typename T>
void ApplyDenseTyped(const KernelArgs& args, void* var, void* const* slots, const void* grad,
                     size_t n) {
  const int num_slots = NumSlots(args.optimizer);
  T* s0 = num_slots > 0 ? static_cast<T*>(slots[0]) : nullptr;
  T* s1 = num_slots > 1 ? static_cast<T*>(slots[1]) : nullptr;
  T* s2 = num_slots > 2 ? static_cast<T*>(slots[2]) : nullptr;
  RunDense<T>(ApplyOf<T>(ActiveTable()), MakeScalars<T>(args, Form::kDense),
              static_cast<T*>(var), s0, s1, s2, static_cast<const T*>(grad), n);
}

// ---- Sparse -----------------------------------------------------------------------------------

template <typename T>
void ApplySparseTyped(const KernelArgs& args, void* var_v, void* const* slots, size_t width,
                      const int64_t* indices, size_t num_indices, const void* rows_v,
                      bool unique, const std::vector<size_t>& order, T* sum) {
  const KernelTable& table = ActiveTable();
  const ApplyFn<T> apply = ApplyOf<T>(table);
  const AccumulateFn<T> accumulate = AccumulateOf<T>(table);
  // A row of one element is a rank-1 variable: TF's Sparse* kernels take their scalar loop.
  const KernelScalars<T> s =
      MakeScalars<T>(args, width == 1 ? Form::kSparseScalars : Form::kSparseRows);
  const int num_slots = NumSlots(args.optimizer);
  T* var = static_cast<T*>(var_v);
  T* s0 = num_slots > 0 ? static_cast<T*>(slots[0]) : nullptr;
  T* s1 = num_slots > 1 ? static_cast<T*>(slots[1]) : nullptr;
  T* s2 = num_slots > 2 ? static_cast<T*>(slots[2]) : nullptr;
  const T* rows = static_cast<const T*>(rows_v);

  auto update_row = [&](int64_t index, const T* src) {
    const size_t off = static_cast<size_t>(index) * width;
    apply(s, var + off, s0 ? s0 + off : nullptr, s1 ? s1 + off : nullptr,
          s2 ? s2 + off : nullptr, src, width);
  };

  // No index repeats (the common case for a gathered batch): no duplicates to sum.
  if (unique) {
    for (size_t j = 0; j < num_indices; ++j) update_row(indices[j], rows + j * width);
    return;
  }
  for (size_t j = 0; j < num_indices;) {
    const int64_t index = indices[order[j]];
    size_t end = j + 1;
    while (end < num_indices && indices[order[end]] == index) ++end;
    const T* src = rows + order[j] * width;
    if (end - j > 1) {
      std::copy(src, src + width, sum);
      for (size_t r = j + 1; r < end; ++r) accumulate(sum, rows + order[r] * width, width);
      src = sum;
    }
    update_row(index, src);
    j = end;
  }
}

}  // namespace

// ---- Public entry points ------------------------------------------------------------------------

Status CheckDense(const KernelArgs& args, const void* var, void* const* slots, const void* grad,
                  size_t n) {
  PSRT_RETURN_IF_ERROR(CheckOptimizer(args, "dense update"));
  if (n == 0) return Status::Ok();
  return CheckBuffers(args, var, slots, grad, "dense update");
}

Status ApplyDense(const KernelArgs& args, void* var, void* const* slots, const void* grad,
                  size_t n) {
  PSRT_RETURN_IF_ERROR(CheckDense(args, var, slots, grad, n));
  if (n == 0) return Status::Ok();
  if (args.dtype == DType::kFloat32) {
    ApplyDenseTyped<float>(args, var, slots, grad, n);
  } else {
    ApplyDenseTyped<double>(args, var, slots, grad, n);
  }
  return Status::Ok();
}

Status PrepareSparse(const KernelArgs& args, size_t num_rows, size_t row_width,
                     const int64_t* indices, size_t num_indices, const void* rows,
                     bool known_unique, SparseUpdate* out) {
  const size_t total = num_rows * row_width;
  if (row_width != 0 && total / row_width != num_rows) {
    return InvalidArgument("sparse update: " + std::to_string(num_rows) + " rows of width " +
                           std::to_string(row_width) + " overflow the address space");
  }
  PSRT_RETURN_IF_ERROR(CheckOptimizer(args, "sparse update"));
  if (num_indices > 0 && indices == nullptr) {
    return InvalidArgument("sparse update: null index buffer for " +
                           std::to_string(num_indices) + " indices");
  }
  // Every index is checked before anything is written, so a bad request leaves the variable
  // and its slots exactly as they were.
  bool sorted_unique = true;
  for (size_t j = 0; j < num_indices; ++j) {
    const int64_t index = indices[j];
    if (index < 0 || static_cast<uint64_t>(index) >= num_rows) {
      return InvalidArgument("index " + std::to_string(index) + " at position " +
                             std::to_string(j) + " is out of range [0, " +
                             std::to_string(num_rows) + ")");
    }
    if (j > 0 && index <= indices[j - 1]) sorted_unique = false;
  }
  out->num_rows_ = num_rows;
  out->row_width_ = row_width;
  out->indices_ = indices;
  out->num_indices_ = num_rows == 0 || row_width == 0 ? 0 : num_indices;
  out->rows_ = rows;
  out->unique_ = known_unique || sorted_unique;
  out->order_.clear();
  out->sum_.clear();
  if (out->num_indices_ == 0) return Status::Ok();
  if (rows == nullptr) return InvalidArgument("sparse update: null row buffer");
  if (out->unique_) return Status::Ok();
  try {
    out->order_.resize(num_indices);
    out->sum_.resize(row_width * DTypeSize(args.dtype));
  } catch (const std::bad_alloc&) {
    out->order_ = {};
    out->sum_ = {};
    return Status(Code::kResourceExhausted,
                  "sparse update: cannot allocate scratch space for " +
                      std::to_string(num_indices) + " indices of row width " +
                      std::to_string(row_width));
  }
  std::iota(out->order_.begin(), out->order_.end(), size_t{0});
  // Ties broken by position: duplicates are summed in the order they were sent, so the result
  // does not depend on the sort.
  std::sort(out->order_.begin(), out->order_.end(), [indices](size_t a, size_t b) {
    return indices[a] != indices[b] ? indices[a] < indices[b] : a < b;
  });
  return Status::Ok();
}

void ApplyPrepared(const KernelArgs& args, void* var, void* const* slots,
                   const SparseUpdate& u) {
  if (u.num_indices_ == 0) return;
  if (args.dtype == DType::kFloat32) {
    ApplySparseTyped<float>(args, var, slots, u.row_width_, u.indices_, u.num_indices_, u.rows_,
                            u.unique_, u.order_,
                            reinterpret_cast<float*>(u.sum_.data()));
  } else {
    ApplySparseTyped<double>(args, var, slots, u.row_width_, u.indices_, u.num_indices_,
                             u.rows_, u.unique_, u.order_,
                             reinterpret_cast<double*>(u.sum_.data()));
  }
}

Status ApplySparse(const KernelArgs& args, void* var, void* const* slots, size_t num_rows,
                   size_t row_width, const int64_t* indices, size_t num_indices,
                   const void* rows) {
  SparseUpdate u;
  PSRT_RETURN_IF_ERROR(PrepareSparse(args, num_rows, row_width, indices, num_indices, rows,
                                     false, &u));
  if (u.size() == 0) return Status::Ok();
  PSRT_RETURN_IF_ERROR(CheckBuffers(args, var, slots, rows, "sparse update"));
  ApplyPrepared(args, var, slots, u);
  return Status::Ok();
}

std::vector<std::string> CompiledKernelTargets() {
  std::vector<std::string> out;
  for (const Target& t : kTargets) out.push_back(t.name);
  return out;
}

std::vector<std::string> SupportedKernelTargets() {
  std::vector<std::string> out;
  for (const Target& t : kTargets) {
    if (t.supported()) out.push_back(t.name);
  }
  return out;
}

std::string ActiveKernelTarget() { return ActiveSlot().load(std::memory_order_acquire)->name; }

Status SetKernelTarget(const std::string& name) {
  const Target* t = nullptr;
  PSRT_RETURN_IF_ERROR(CheckTargetName(name, &t));
  ActiveSlot().store(t, std::memory_order_release);
  return Status::Ok();
}

}  // namespace psrt
