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

// Most slots any optimizer keeps (CenteredRMSProp: rms, momentum, mg).
constexpr int kMaxSlots = 3;

// The last optimizer code the kernels implement. The wire accepts codes up to kMaxOptimizer
// (wire.h), fewer until the VarSpec carries the later optimizers' hyper-parameters.
constexpr uint8_t kMaxKernelOptimizer = static_cast<uint8_t>(Optimizer::kCenteredRMSProp);
static_assert(kMaxOptimizer <= kMaxKernelOptimizer, "the wire accepts an optimizer without kernel");

// Number of optimizer slots kept beside a variable, and their names, in slot order. The first
// four optimizers name them as TF names their slot variables in a checkpoint (GradientDescent:
// none; Adagrad: "Adagrad"; Momentum: "Momentum"; Adam: "Adam", "Adam_1"); the later ones by
// their TF slot names (get_slot): Adadelta "accum", "accum_update"; AdagradDA
// "gradient_accumulator", "gradient_squared_accumulator"; Ftrl "accum", "linear";
// ProximalGradientDescent none; ProximalAdagrad "accumulator"; RMSProp "rms", "momentum";
// CenteredRMSProp "rms", "momentum", "mg". TF1's initial values, which the caller sets:
// Adagrad, ProximalAdagrad and Ftrl's accumulators 0.1, AdagradDA's squared accumulator 0.1,
// RMSProp's rms 1.0, every other slot 0.
int NumSlots(Optimizer opt);
const char* SlotName(Optimizer opt, int slot);
const char* OptimizerName(Optimizer opt);
// The optimizer named `name` (an OptimizerName, or "None"/"" for kNone); InvalidArgument naming
// the name and the valid choices otherwise.
Status ParseOptimizerName(const std::string& name, Optimizer* out);

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
  // The optimizers below take epsilon (Adadelta, RMSProp) and momentum (RMSProp) from above.
  double rho = 0.95;                  // Adadelta's rho; RMSProp's decay (TF's kernels call it rho)
  double l1 = 0.0;                    // AdagradDA, Ftrl, Proximal*: L1 strength
  double l2 = 0.0;                    // AdagradDA, Ftrl, Proximal*: L2 strength
  double l2_shrinkage = 0.0;          // Ftrl: > 0 applies TF's FtrlV2
  double lr_power = -0.5;             // Ftrl: learning_rate_power
  int64_t global_step = 0;            // AdagradDA: the step being applied, >= 1 (TF's Python
                                      // optimizer passes its global step + 1)
};

// var[i] and slot[k][i] for i in [0, n) are updated with grad[i].
// Formulas (TF 1.15, tensorflow/core/kernels/training_ops.cc; rsqrt(x) is 1 / sqrt(x);
// sign(x) is -1, 0 or 1; every formula is evaluated in the order written):
//   GradientDescent: var -= lr * g
//   Adagrad:  accum += g * g;  var -= lr * g / sqrt(accum)
//   Momentum: accum = accum * momentum + g;
//             var -= lr * accum                                  (use_nesterov = false)
//             var -= g * lr + accum * momentum * lr              (use_nesterov = true)
//   Adam:     lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
//             m = m + (g - m) * (1 - beta1);  v = v + (g*g - v) * (1 - beta2)
//             var -= lr_t * m / (sqrt(v) + epsilon)
//   Adadelta (ApplyAdadelta):
//             accum = accum * rho + g*g * (1 - rho)
//             update = sqrt(accum_update + epsilon) * rsqrt(accum + epsilon) * g
//             var -= update * lr;  accum_update = accum_update * rho + update*update * (1 - rho)
//   AdagradDA (ApplyAdagradDA), t = global_step as float (TF casts it to float):
//             gacc += g;  gg += g*g;  den = l2 * (t * lr) + sqrt(gg)
//             var = lr * -1 * sign(gacc) * max(|gacc| - t * l1, 0) / den   (l1 > 0)
//             var = lr * gacc * -1 / den                                   (l1 <= 0)
//   Ftrl (ApplyFtrl; ApplyFtrlV2 when l2_shrinkage > 0), p = -lr_power, P(x) = x^p (sqrt(x)
//   when lr_power == -0.5):
//             gs = g (V2: g + 2*l2_shrinkage * var);  new_accum = accum + g*g
//             linear += gs - (P(new_accum) - P(accum)) / lr * var
//             y = P(new_accum) / lr + 2*l2
//             var = |linear| > l1 ? (l1 * sign(linear) - linear) / y : 0;  accum = new_accum
//   ProximalGradientDescent (ApplyProximalGradientDescent):
//             prox = var - g * lr
//             var = sign(prox) * max(|prox| - lr*l1, 0) / (1 + l2*lr)          (l1 > 0)
//             var = prox / (1 + l2*lr)                                          (l1 <= 0)
//   ProximalAdagrad (ApplyProximalAdagrad):
//             accum += g*g;  a = lr * rsqrt(accum);  prox = var - g * a
//             var = sign(prox) * max(|prox| - a * l1, 0) / (1 + l2 * a)         (l1 > 0)
//             var = prox / (1 + l2 * a)                                         (l1 <= 0)
//   RMSProp (ApplyRMSProp), slots rms (ms), momentum (mom):
//             ms += (g*g - ms) * (1 - rho);  mom = mom * momentum + g * lr / sqrt(ms + epsilon)
//             var -= mom
//   CenteredRMSProp (ApplyCenteredRMSProp), slots rms (ms), momentum (mom), mg:
//             ms += (g*g - ms) * (1 - rho);  mg += (g - mg) * (1 - rho)
//             mom = mom * momentum + g * lr / sqrt((ms - mg*mg) + epsilon);  var -= mom
// Arithmetic is in the variable's dtype, with the scalars cast to it first, as TF's kernels
// receive them. Returns InvalidArgument, before writing anything, for an unsupported
// optimizer/dtype pair, a null buffer, or hyper-parameters that TF's kernels refuse (Ftrl:
// lr > 0, l1, l2, l2_shrinkage >= 0, lr_power <= 0; ProximalAdagrad: lr > 0, l1, l2 >= 0) or
// that make no sense (AdagradDA: global_step < 1); never fails otherwise.
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
// then each distinct row gets one update (TF's SparseApply* after unsorted_segment_sum).
// GradientDescent, Adagrad, Momentum, Adam, Adadelta, ProximalGradientDescent and
// ProximalAdagrad update a row of width > 1 as ApplyDense would. The others follow their TF
// Sparse* kernel where it computes differently from the dense one:
//   AdagradDA (SparseApplyAdagradDA), t = global_step in the dtype:
//             var = -1 * sign(gacc) * max(|gacc| / t - l1, 0) / (l2 + sqrt(gg) / (t * lr))
//             var = -1 * (gacc / t) / (l2 + sqrt(gg) / (t * lr))                 (l1 <= 0)
//   Ftrl (SparseApplyFtrl):  var = (clip(linear, -l1, l1) - linear) / y   (no select: y = 0
//             gives NaN, where the dense kernel gives 0)
//   RMSProp (SparseApplyRMSProp):
//             ms = ms * rho + g*g * (1 - rho);  mom = mom * momentum + rsqrt(ms + eps) * lr * g
//   CenteredRMSProp (SparseApplyCenteredRMSProp): ms as RMSProp; mg = mg * rho + g * (1 - rho)
//             mom = mom * momentum + rsqrt((ms + epsilon) - mg*mg) * lr * g
// A variable of rank 1 (row width 1) takes the scalar loop of TF's kernels where they have one:
//   AdagradDA: the accumulators' sums and var in double (t * l1, t * l2 * lr too; t the step):
//             var = sign(-gacc) * lr * max(|gacc| - t*l1, 0) / (t*l2*lr + sqrt(gg)),
//             var = (-gacc * lr) / (t*l2*lr + sqrt(gg))                         (l1 <= 0)
//   Ftrl:     linear = linear + gs - (new_accum^p - accum^p) / lr * var   (pow even for
//             lr_power -0.5); var = (clip(linear, -l1, l1) - linear) / y
//   ProximalGradientDescent, ProximalAdagrad: the last division in double (TF divides by
//             1.0 + l2*lr, a double); ProximalAdagrad's a = lr / sqrt(accum).
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

// Which of TF's loops an update follows: the dense kernel, a Sparse* kernel's row loop, or its
// loop over scalar rows (a rank-1 variable). See ApplyPrepared.
enum class Form : uint8_t { kDense, kSparseRows, kSparseScalars };

// The optimizer's scalars, already cast to the variable's dtype T (TF casts them to T before
// the update), and Adam's step size lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
// computed in T as TF's ApplyAdam does.

template <typename T>
struct KernelScalars {
  Optimizer optimizer = Optimizer::kNone;
  Form form = Form::kDense;
  bool use_nesterov = false;
  T lr = 0;
  T momentum = 0;
  T one_minus_beta1 = 0;
  T one_minus_beta2 = 0;
  T epsilon = 0;
  T lr_t = 0;
  // Adadelta, RMSProp
  T rho = 0;
  T one_minus_rho = 0;
  // AdagradDA, Ftrl, Proximal*
  T l1 = 0;
  T l2 = 0;
  T lr_l1 = 0;           // ProximalGradientDescent: lr * l1
  T one_plus_l2_lr = 0;  // ProximalGradientDescent: 1 + l2 * lr
  double l2_lr_wide = 0;  // ProximalGradientDescent's scalar loop: 1.0 + l2 * lr, a double
  // Ftrl
  bool ftrl_sqrt = true;       // lr_power == -0.5 (in T)
  bool ftrl_shrinkage = false;  // l2_shrinkage > 0: FtrlV2
  T neg_lr_power = 0;
  T two_l2 = 0;
  T two_l2_shrinkage = 0;
  // AdagradDA
  T da_t = 0;          // kSparseRows: global_step in T
  T da_t_lr = 0;       // kSparseRows: t * lr
  T da_t_l1 = 0;       // kDense: float(global_step) * l1
  T da_l2_t_lr = 0;    // kDense: l2 * (float(global_step) * lr)
  double da_lr_wide = 0;       // kSparseScalars: lr, gs * l1 and gs * l2 * lr in double
  double da_t_l1_wide = 0;
  double da_t_l2_lr_wide = 0;
};

// One target's loops. Apply* updates var[0, n) and its slots (slot0, slot1, slot2 in
// SlotName's order; null when the optimizer has fewer) with grad[0, n); Accumulate* is
// dst[i] += src[i]. Arrays must not overlap each other; arguments are not checked (kernels.cc
// validates them). Thread-safe: no state.
struct KernelTable {
  void (*apply_f32)(const KernelScalars<float>& s, float* var, float* slot0, float* slot1,
                    float* slot2, const float* grad, size_t n);
  void (*apply_f64)(const KernelScalars<double>& s, double* var, double* slot0, double* slot1,
                    double* slot2, const double* grad, size_t n);
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
