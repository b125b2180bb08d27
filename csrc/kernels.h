// Fused optimizer kernels: one pass over var, slots and gradient, with TensorFlow 1.x's exact
// update formulas (tensorflow/core/kernels/training_ops.cc). Each kernel is compiled once per
// instruction-set target (kernels_impl.cc: baseline, avx2, avx512) and the best target the CPU
// supports is chosen at first use; PSRT_KERNEL_TARGET=<name> forces one.
//
// Thread-safety: the kernels take no lock. Concurrent updates of one variable race in the
// Hogwild manner (as TF's use_locking=False); callers that want serialized updates hold the
// variable's mutex (store.cc). ApplyDense splits tensors of 2^20 elements or more across up to
// one thread per CPU it may run on (threads it starts per call; the caller works too) and
// returns only when no thread touches the arrays any more. ApplySparse runs on the caller.
// PSRT_KERNEL_TARGET, read at first use, forces a target; an unknown or unsupported value is
// reported on stderr and the best supported target is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "status.h"
#include "wire.h"

namespace psrt {

// Number of optimizer slots kept beside a variable and their TF names
// (GradientDescent: none; Adagrad: "Adagrad"; Momentum: "Momentum"; Adam: "Adam", "Adam_1").
int NumSlots(Optimizer opt);
const char* SlotName(Optimizer opt, int slot);
const char* OptimizerName(Optimizer opt);

struct KernelArgs {
  Optimizer optimizer = Optimizer::kNone;
  DType dtype = DType::kFloat32;      // kFloat32 or kFloat64
  double learning_rate = 0.0;
  double momentum = 0.0;              // Momentum
  bool use_nesterov = false;          // Momentum
  double beta1 = 0.9;                 // Adam
  double beta2 = 0.999;               // Adam
  double epsilon = 1e-8;              // Adam
  double beta1_power = 0.0;           // Adam: beta1^t for this step (t counted from 1)
  double beta2_power = 0.0;           // Adam: beta2^t
};

// var[i] and slot[k][i] for i in [0, n) are updated with grad[i].
// Formulas (TF1):
//   GradientDescent: var -= lr * g
//   Adagrad:  accum += g * g;  var -= lr * g / sqrt(accum)
//   Momentum: accum = accum * momentum + g;
//             var -= lr * accum                                  (use_nesterov = false)
//             var -= g * lr + accum * momentum * lr              (use_nesterov = true)
//   Adam:     lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
//             m = m + (g - m) * (1 - beta1);  v = v + (g*g - v) * (1 - beta2)
//             var -= lr_t * m / (sqrt(v) + epsilon)
// Arithmetic is in the variable's dtype. Returns InvalidArgument for an unsupported
// optimizer/dtype pair; never fails otherwise.
Status ApplyDense(const KernelArgs& args, void* var, void* const* slots, const void* grad,
                  size_t n);

// Checks a dense update's arguments (optimizer, dtype, buffers) without writing anything:
// exactly the checks ApplyDense makes, so a caller can validate before it changes other state
// (Adam's beta powers) and then apply knowing the update cannot fail.
Status CheckDense(const KernelArgs& args, const void* var, void* const* slots, const void* grad,
                  size_t n);

// A row-sparse update prepared before anything is written: every index checked, the order in
// which duplicate indices are summed computed and all scratch memory allocated, so applying it
// (ApplyPrepared) cannot fail. Holds pointers to the caller's indices and rows, which must
// outlive it. Not thread-safe; one per update.
class SparseUpdate {
 public:
  SparseUpdate() = default;
  size_t size() const { return num_indices_; }

 private:
  friend Status PrepareSparse(const KernelArgs&, size_t, size_t, const int64_t*, size_t,
                              const void*, bool, SparseUpdate*);
  friend void ApplyPrepared(const KernelArgs&, void*, void* const*, const SparseUpdate&);
  size_t num_rows_ = 0;
  size_t row_width_ = 0;
  const int64_t* indices_ = nullptr;
  size_t num_indices_ = 0;
  const void* rows_ = nullptr;
  bool unique_ = true;              // no index repeats: each row is updated as sent
  std::vector<size_t> order_;       // positions sorted by index (when not unique)
  mutable std::vector<uint8_t> sum_;  // one row of scratch for summing duplicates
};

// Validates a row-sparse update of a variable viewed as [num_rows, row_width] (row
// indices[j] gets rows[j*row_width .. (j+1)*row_width)) and prepares it into *out. Nothing is
// written. InvalidArgument for an unsupported optimizer/dtype, a null buffer, or an index
// outside [0, num_rows) (naming the index and its position); ResourceExhausted when the scratch
// for summing duplicates cannot be allocated. `known_unique`: the caller guarantees no index
// repeats (skips the sort and the scratch).
Status PrepareSparse(const KernelArgs& args, size_t num_rows, size_t row_width,
                     const int64_t* indices, size_t num_indices, const void* rows,
                     bool known_unique, SparseUpdate* out);

// Applies a prepared update: duplicate indices are summed first (in the order they were sent),
// then each distinct row gets one dense update (TF's SparseApply* after unsorted_segment_sum).
// `args` must have the optimizer and dtype it was prepared with (beta powers may differ).
// Never fails.
void ApplyPrepared(const KernelArgs& args, void* var, void* const* slots,
                   const SparseUpdate& update);

// PrepareSparse then ApplyPrepared: on any error nothing is written.
Status ApplySparse(const KernelArgs& args, void* var, void* const* slots, size_t num_rows,
                   size_t row_width, const int64_t* indices, size_t num_indices,
                   const void* rows);

// Targets compiled into this build, in preference order ("avx512", "avx2", "baseline").
std::vector<std::string> CompiledKernelTargets();
// Compiled targets that this CPU can run.
std::vector<std::string> SupportedKernelTargets();
// The target in use.
std::string ActiveKernelTarget();
// Selects a target by name; InvalidArgument naming the name and the supported choices.
Status SetKernelTarget(const std::string& name);

// ---- Implementation detail shared by kernels.cc and kernels_impl.cc ----------------------
// kernels_impl.cc is compiled once per target into namespace psrt::<target>; each copy exports
// only GetKernelTable(), and kernels.cc picks one table at run time. Nothing else may be shared
// with those objects: an inline function emitted by an AVX-512 object could be the copy the
// linker keeps for the whole module and crash an older CPU.
namespace kernel_detail {

// The optimizer's scalars, already cast to the variable's dtype T (TF casts them to T before
// the update), and Adam's step size lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
// computed in T as TF's ApplyAdam does.
template <typename T>
struct KernelScalars {
  Optimizer optimizer = Optimizer::kNone;
  bool use_nesterov = false;
  T lr = 0;
  T momentum = 0;
  T one_minus_beta1 = 0;
  T one_minus_beta2 = 0;
  T epsilon = 0;
  T lr_t = 0;
};

// One target's loops. Apply* updates var[0, n) and its slots (slot1 is used by Adam only,
// slot0 by every optimizer except GradientDescent) with grad[0, n); Accumulate* is
// dst[i] += src[i]. Arrays must not overlap each other; arguments are not checked (kernels.cc
// validates them). Thread-safe: no state.
struct KernelTable {
  void (*apply_f32)(const KernelScalars<float>& s, float* var, float* slot0, float* slot1,
                    const float* grad, size_t n);
  void (*apply_f64)(const KernelScalars<double>& s, double* var, double* slot0, double* slot1,
                    const double* grad, size_t n);
  void (*accumulate_f32)(float* dst, const float* src, size_t n);
  void (*accumulate_f64)(double* dst, const double* src, size_t n);
};

}  // namespace kernel_detail

// Defined by kernels_impl.cc for each target that CMake builds (PSRT_HAVE_KERNEL_<TARGET>).
namespace baseline {
const kernel_detail::KernelTable& GetKernelTable();
}
namespace avx2 {
const kernel_detail::KernelTable& GetKernelTable();
}
namespace avx512 {
const kernel_detail::KernelTable& GetKernelTable();
}

}  // namespace psrt
