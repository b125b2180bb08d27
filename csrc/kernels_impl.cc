// The optimizer loops of one instruction-set target. CMake compiles this file once per target
// with -DPSRT_KERNEL_NS=<target> and that target's -m flags; kernels.cc chooses a copy at run
// time through GetKernelTable().
//
// The loops are plain C++ that gcc and clang vectorize: __restrict tells them the arrays do not
// overlap, and -fno-math-errno lets sqrt become one vector instruction instead of a libm call
// per element. Each optimizer is one pass that reads grad and the slots once and writes the
// slots and var once: the kernels are memory-bound (20 bytes per float32 Adagrad element), so
// the pass count, not the arithmetic, sets the speed.
//
// This file must not odr-use any inline function or template from a header (std::min,
// std::vector, Status, ...): the linker keeps one copy of each such function for the whole
// module, and the copy it keeps could be the AVX-512 one.
#include "kernels.h"

#include <cmath>

#ifndef PSRT_KERNEL_NS
#error "kernels_impl.cc is compiled once per target with -DPSRT_KERNEL_NS=<target> (CMakeLists.txt)"
#endif

// With FMA available the compiler would fuse var - lr * g into one instruction on avx2/avx512
// and not on baseline, so targets would round differently. Rounding every operation keeps all
// targets bit-identical to each other and to numpy's elementwise arithmetic, which the tests
// rely on; a memory-bound loop gains nothing from the FMA.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace psrt {
namespace PSRT_KERNEL_NS {
namespace {

using kernel_detail::Form;
using kernel_detail::KernelScalars;
using kernel_detail::KernelTable;

// Scalars are passed by value so the compiler knows no store to an array changes them.

// Local helpers (internal linkage, one copy per target) instead of <cmath>'s inline overloads:
// fabs is one instruction; pow stays a call into libm (no vector form without -ffast-math), so
// every target rounds it as the baseline does.
inline float Abs(float x) { return __builtin_fabsf(x); }
inline double Abs(double x) { return __builtin_fabs(x); }
inline float Pow(float x, float y) { return __builtin_powf(x, y); }
inline double Pow(double x, double y) { return __builtin_pow(x, y); }
// Eigen's sign(): -1, 0 or 1 (0 for NaN), branch-free so loops using it vectorize.
template <typename T>
inline T Sign(T x) {
  return static_cast<T>(x > T(0)) - static_cast<T>(x < T(0));
}
// std::min(x, hi) then std::max(.., lo), as TF's clip of Ftrl's linear.
template <typename T>
inline T Clip(T x, T lo, T hi) {
  const T m = hi < x ? hi : x;
  return m < lo ? lo : m;
}

template <typename T>
void GradientDescent(T* __restrict var, const T* __restrict grad, size_t n, T lr) {
  for (size_t i = 0; i < n; ++i) var[i] -= grad[i] * lr;
}

// TF1 ApplyAdagrad with update_slots=true: no epsilon, so a zero accumulator with a zero
// gradient gives NaN exactly as TF does.
template <typename T>
void Adagrad(T* __restrict var, T* __restrict accum, const T* __restrict grad, size_t n, T lr) {
  for (size_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T a = accum[i] + g * g;
    accum[i] = a;
    var[i] -= lr * g / std::sqrt(a);
  }
}

template <typename T>
void Momentum(T* __restrict var, T* __restrict accum, const T* __restrict grad, size_t n, T lr,
              T momentum) {
  for (size_t i = 0; i < n; ++i) {
    const T a = accum[i] * momentum + grad[i];
    accum[i] = a;
    var[i] -= a * lr;
  }
}

template <typename T>
void MomentumNesterov(T* __restrict var, T* __restrict accum, const T* __restrict grad, size_t n,
                      T lr, T momentum) {
  for (size_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T a = accum[i] * momentum + g;
    accum[i] = a;
    var[i] -= g * lr + a * momentum * lr;
  }
}

template <typename T>
void Adam(T* __restrict var, T* __restrict m, T* __restrict v, const T* __restrict grad, size_t n,
          T one_minus_beta1, T one_minus_beta2, T epsilon, T lr_t) {
  for (size_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T mi = m[i] + (g - m[i]) * one_minus_beta1;
    const T vi = v[i] + (g * g - v[i]) * one_minus_beta2;
    m[i] = mi;
    v[i] = vi;
    var[i] -= (mi * lr_t) / (std::sqrt(vi) + epsilon);
  }
}

// ApplyAdadelta, and SparseApplyAdadelta's row loop (the same formula).
template <typename T>
void Adadelta(T* __restrict var, T* __restrict accum, T* __restrict accum_update,
              const T* __restrict grad, size_t n, T lr, T rho, T one_minus_rho, T epsilon) {
  for (size_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T a = accum[i] * rho + g * g * one_minus_rho;
    accum[i] = a;
    const T u = accum_update[i];
    const T update = std::sqrt(u + epsilon) * (T(1) / std::sqrt(a + epsilon)) * g;
    var[i] -= update * lr;
    accum_update[i] = u * rho + update * update * one_minus_rho;
  }
}

// ApplyAdagradDA. TF's functor takes the global step as float: t_l1 = float(t) * l1 and
// l2_t_lr = l2 * (float(t) * lr), in T.
template <typename T>
void AdagradDADense(T* __restrict var, T* __restrict gacc, T* __restrict gg,
                    const T* __restrict grad, size_t n, T lr, T l1, T t_l1, T l2_t_lr) {
  if (l1 > T(0)) {
    const T neg_lr = lr * T(-1);
    for (size_t i = 0; i < n; ++i) {
      const T g = grad[i];
      const T a = gacc[i] + g;
      const T q = gg[i] + g * g;
      gacc[i] = a;
      gg[i] = q;
      const T m = Abs(a) - t_l1;
      var[i] = neg_lr * Sign(a) * (m < T(0) ? T(0) : m) / (l2_t_lr + std::sqrt(q));
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      const T g = grad[i];
      const T a = gacc[i] + g;
      const T q = gg[i] + g * g;
      gacc[i] = a;
      gg[i] = q;
      var[i] = lr * a * T(-1) / (l2_t_lr + std::sqrt(q));
    }
  }
}

// SparseApplyAdagradDA's row loop: the global step t in T, divided out of the numerator.
template <typename T>
void AdagradDARows(T* __restrict var, T* __restrict gacc, T* __restrict gg,
                   const T* __restrict grad, size_t n, T l1, T l2, T t, T t_lr) {
  for (size_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T a = gacc[i] + g;
    const T q = gg[i] + g * g;
    gacc[i] = a;
    gg[i] = q;
    const T den = l2 + std::sqrt(q) / t_lr;
    if (l1 > T(0)) {
      const T m = Abs(a) / t - l1;
      var[i] = T(-1) * Sign(a) * (m < T(0) ? T(0) : m) / den;
    } else {
      var[i] = T(-1) * (a / t) / den;
    }
  }
}

// SparseApplyAdagradDA's scalar loop: the gradient and the arithmetic after the accumulators'
// sums are in double; sqrt of the squared accumulator is taken in T first.
template <typename T>
void AdagradDAScalars(T* var, T* gacc, T* gg, const T* grad, size_t n, double l1, double lr,
                      double t_l1, double t_l2_lr) {
  for (size_t i = 0; i < n; ++i) {
    const double g = grad[i];
    const T a = static_cast<T>(gacc[i] + g);
    const T q = static_cast<T>(gg[i] + g * g);
    gacc[i] = a;
    gg[i] = q;
    const double den = t_l2_lr + static_cast<double>(std::sqrt(q));
    if (l1 > 0) {
      const double m = static_cast<double>(Abs(a)) - t_l1;
      var[i] = static_cast<T>(static_cast<double>(Sign(-a)) * lr * (m < 0.0 ? 0.0 : m) / den);
    } else {
      var[i] = static_cast<T>(static_cast<double>(-a) * lr / den);
    }
  }
}

// ApplyFtrl / ApplyFtrlV2 (kRows = false) and SparseApplyFtrl's row loop (kRows = true, which
// clips linear instead of selecting). kSqrt: lr_power == -0.5, where TF takes sqrt, not pow.
template <typename T, bool kSqrt, bool kShrinkage, bool kRows>
void FtrlLoop(T* __restrict var, T* __restrict accum, T* __restrict linear,
              const T* __restrict grad, size_t n, T lr, T l1, T two_l2, T two_l2_shrinkage,
              T neg_lr_power) {
  for (size_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T v = var[i];
    const T a = accum[i];
    const T gs = kShrinkage ? g + two_l2_shrinkage * v : g;
    const T na = a + g * g;
    const T p_na = kSqrt ? std::sqrt(na) : Pow(na, neg_lr_power);
    const T p_a = kSqrt ? std::sqrt(a) : Pow(a, neg_lr_power);
    const T lin = linear[i] + (gs - (p_na - p_a) / lr * v);
    linear[i] = lin;
    const T y = p_na / lr + two_l2;
    if (kRows) {
      var[i] = (Clip(lin, -l1, l1) - lin) / y;
    } else {
      const T x = l1 * Sign(lin) - lin;
      var[i] = Abs(lin) > l1 ? x / y : T(0);
    }
    accum[i] = na;
  }
}

template <typename T, bool kRows>
void Ftrl(const KernelScalars<T>& s, T* var, T* accum, T* linear, const T* grad, size_t n) {
  const T lr = s.lr, l1 = s.l1, two_l2 = s.two_l2, shr = s.two_l2_shrinkage, p = s.neg_lr_power;
  if (s.ftrl_sqrt) {
    if (s.ftrl_shrinkage) {
      FtrlLoop<T, true, true, kRows>(var, accum, linear, grad, n, lr, l1, two_l2, shr, p);
    } else {
      FtrlLoop<T, true, false, kRows>(var, accum, linear, grad, n, lr, l1, two_l2, shr, p);
    }
  } else if (s.ftrl_shrinkage) {
    FtrlLoop<T, false, true, kRows>(var, accum, linear, grad, n, lr, l1, two_l2, shr, p);
  } else {
    FtrlLoop<T, false, false, kRows>(var, accum, linear, grad, n, lr, l1, two_l2, shr, p);
  }
}

// SparseApplyFtrl's scalar loop: pow for lr_power -0.5 too, and linear + gs - sigma * var
// summed left to right.
template <typename T>
void FtrlScalars(const KernelScalars<T>& s, T* var, T* accum, T* linear, const T* grad,
                 size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T v = var[i];
    const T a = accum[i];
    const T gs = s.ftrl_shrinkage ? g + s.two_l2_shrinkage * v : g;
    const T na = a + g * g;
    T sigma = Pow(na, s.neg_lr_power) - Pow(a, s.neg_lr_power);
    sigma /= s.lr;
    const T lin = linear[i] + gs - sigma * v;
    const T y = (s.ftrl_sqrt ? std::sqrt(na) : Pow(na, s.neg_lr_power)) / s.lr + s.two_l2;
    var[i] = (Clip(lin, -s.l1, s.l1) - lin) / y;
    accum[i] = na;
    linear[i] = lin;
  }
}

// ApplyProximalGradientDescent and SparseApplyProximalGradientDescent's row loop.
template <typename T>
void ProximalGradientDescent(T* __restrict var, const T* __restrict grad, size_t n, T lr, T l1,
                             T lr_l1, T one_plus_l2_lr) {
  if (l1 > T(0)) {
    for (size_t i = 0; i < n; ++i) {
      const T prox = var[i] - grad[i] * lr;
      const T m = Abs(prox) - lr_l1;
      var[i] = Sign(prox) * (m < T(0) ? T(0) : m) / one_plus_l2_lr;
    }
  } else {
    for (size_t i = 0; i < n; ++i) var[i] = (var[i] - grad[i] * lr) / one_plus_l2_lr;
  }
}

// SparseApplyProximalGradientDescent's scalar loop: the division is by 1.0 + l2*lr, a double.
template <typename T>
void ProximalGradientDescentScalars(T* var, const T* grad, size_t n, T lr, T l1, T lr_l1,
                                    double one_plus_l2_lr) {
  for (size_t i = 0; i < n; ++i) {
    const T prox = var[i] - lr * grad[i];
    if (l1 > T(0)) {
      const T m = Abs(prox) - lr_l1;
      var[i] = static_cast<T>(static_cast<double>(Sign(prox) * (m < T(0) ? T(0) : m)) /
                              one_plus_l2_lr);
    } else {
      var[i] = static_cast<T>(static_cast<double>(prox) / one_plus_l2_lr);
    }
  }
}

// ApplyProximalAdagrad and SparseApplyProximalAdagrad's row loop.
template <typename T>
void ProximalAdagrad(T* __restrict var, T* __restrict accum, const T* __restrict grad, size_t n,
                     T lr, T l1, T l2) {
  if (l1 > T(0)) {
    for (size_t i = 0; i < n; ++i) {
      const T g = grad[i];
      const T a = accum[i] + g * g;
      accum[i] = a;
      const T rate = lr * (T(1) / std::sqrt(a));
      const T prox = var[i] - g * rate;
      const T m = Abs(prox) - rate * l1;
      var[i] = Sign(prox) * (m < T(0) ? T(0) : m) / (T(1) + l2 * rate);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      const T g = grad[i];
      const T a = accum[i] + g * g;
      accum[i] = a;
      const T rate = lr * (T(1) / std::sqrt(a));
      var[i] = (var[i] - g * rate) / (T(1) + l2 * rate);
    }
  }
}

// SparseApplyProximalAdagrad's scalar loop: rate = lr / sqrt(accum), the division in double.
template <typename T>
void ProximalAdagradScalars(T* var, T* accum, const T* grad, size_t n, T lr, T l1, T l2) {
  for (size_t i = 0; i < n; ++i) {
    const T g = grad[i];
    const T a = accum[i] + g * g;
    accum[i] = a;
    const T rate = lr / std::sqrt(a);
    const T prox = var[i] - rate * g;
    const double den = 1.0 + static_cast<double>(l2 * rate);
    if (l1 > T(0)) {
      const T m = Abs(prox) - rate * l1;
      var[i] = static_cast<T>(static_cast<double>(Sign(prox) * (m < T(0) ? T(0) : m)) / den);
    } else {
      var[i] = static_cast<T>(static_cast<double>(prox) / den);
    }
  }
}

// ApplyRMSProp (kRows = false) and SparseApplyRMSProp (kRows = true).
template <typename T, bool kRows>
void RMSProp(T* __restrict var, T* __restrict ms, T* __restrict mom, const T* __restrict grad,
             size_t n, T lr, T rho, T one_minus_rho, T momentum, T epsilon) {
  for (size_t i = 0; i < n; ++i) {
    const T g = grad[i];
    T m;
    T p;
    if (kRows) {
      m = ms[i] * rho + g * g * one_minus_rho;
      p = mom[i] * momentum + T(1) / std::sqrt(m + epsilon) * lr * g;
    } else {
      m = ms[i] + (g * g - ms[i]) * one_minus_rho;
      p = mom[i] * momentum + g * lr / std::sqrt(m + epsilon);
    }
    ms[i] = m;
    mom[i] = p;
    var[i] -= p;
  }
}

// ApplyCenteredRMSProp (kRows = false) and SparseApplyCenteredRMSProp (kRows = true).
template <typename T, bool kRows>
void CenteredRMSProp(T* __restrict var, T* __restrict ms, T* __restrict mom, T* __restrict mg,
                     const T* __restrict grad, size_t n, T lr, T rho, T one_minus_rho,
                     T momentum, T epsilon) {
  for (size_t i = 0; i < n; ++i) {
    const T g = grad[i];
    T m;
    T c;
    T p;
    if (kRows) {
      m = ms[i] * rho + g * g * one_minus_rho;
      c = mg[i] * rho + g * one_minus_rho;
      p = mom[i] * momentum + T(1) / std::sqrt(m + epsilon - c * c) * lr * g;
    } else {
      m = ms[i] + (g * g - ms[i]) * one_minus_rho;
      c = mg[i] + (g - mg[i]) * one_minus_rho;
      p = mom[i] * momentum + g * lr / std::sqrt(m - c * c + epsilon);
    }
    ms[i] = m;
    mg[i] = c;
    mom[i] = p;
    var[i] -= p;
  }
}

template <typename T>
void Apply(const KernelScalars<T>& s, T* var, T* slot0, T* slot1, T* slot2, const T* grad,
           size_t n) {
  const bool rows = s.form != Form::kDense;
  const bool scalars = s.form == Form::kSparseScalars;
  switch (s.optimizer) {
    case Optimizer::kGradientDescent:
      GradientDescent(var, grad, n, s.lr);
      break;
    case Optimizer::kAdagrad:
      Adagrad(var, slot0, grad, n, s.lr);
      break;
    case Optimizer::kMomentum:
      if (s.use_nesterov) {
        MomentumNesterov(var, slot0, grad, n, s.lr, s.momentum);
      } else {
        Momentum(var, slot0, grad, n, s.lr, s.momentum);
      }
      break;
    case Optimizer::kAdam:
      Adam(var, slot0, slot1, grad, n, s.one_minus_beta1, s.one_minus_beta2, s.epsilon, s.lr_t);
      break;
    case Optimizer::kAdadelta:
      Adadelta(var, slot0, slot1, grad, n, s.lr, s.rho, s.one_minus_rho, s.epsilon);
      break;
    case Optimizer::kAdagradDA:
      if (scalars) {
        AdagradDAScalars(var, slot0, slot1, grad, n, static_cast<double>(s.l1), s.da_lr_wide,
                         s.da_t_l1_wide, s.da_t_l2_lr_wide);
      } else if (rows) {
        AdagradDARows(var, slot0, slot1, grad, n, s.l1, s.l2, s.da_t, s.da_t_lr);
      } else {
        AdagradDADense(var, slot0, slot1, grad, n, s.lr, s.l1, s.da_t_l1, s.da_l2_t_lr);
      }
      break;
    case Optimizer::kFtrl:
      if (scalars) {
        FtrlScalars(s, var, slot0, slot1, grad, n);
      } else if (rows) {
        Ftrl<T, true>(s, var, slot0, slot1, grad, n);
      } else {
        Ftrl<T, false>(s, var, slot0, slot1, grad, n);
      }
      break;
    case Optimizer::kProximalGradientDescent:
      if (scalars) {
        ProximalGradientDescentScalars(var, grad, n, s.lr, s.l1, s.lr_l1, s.l2_lr_wide);
      } else {
        ProximalGradientDescent(var, grad, n, s.lr, s.l1, s.lr_l1, s.one_plus_l2_lr);
      }
      break;
    case Optimizer::kProximalAdagrad:
      if (scalars) {
        ProximalAdagradScalars(var, slot0, grad, n, s.lr, s.l1, s.l2);
      } else {
        ProximalAdagrad(var, slot0, grad, n, s.lr, s.l1, s.l2);
      }
      break;
    case Optimizer::kRMSProp:
      if (rows) {
        RMSProp<T, true>(var, slot0, slot1, grad, n, s.lr, s.rho, s.one_minus_rho, s.momentum,
                         s.epsilon);
      } else {
        RMSProp<T, false>(var, slot0, slot1, grad, n, s.lr, s.rho, s.one_minus_rho, s.momentum,
                          s.epsilon);
      }
      break;
    case Optimizer::kCenteredRMSProp:
      if (rows) {
        CenteredRMSProp<T, true>(var, slot0, slot1, slot2, grad, n, s.lr, s.rho,
                                 s.one_minus_rho, s.momentum, s.epsilon);
      } else {
        CenteredRMSProp<T, false>(var, slot0, slot1, slot2, grad, n, s.lr, s.rho,
                                  s.one_minus_rho, s.momentum, s.epsilon);
      }
      break;
    case Optimizer::kNone:
      break;  // rejected by kernels.cc before any table is called
  }
}

template <typename T>
void Accumulate(T* __restrict dst, const T* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

// Constant-initialized: no guard variable, no constructor run at load time.
constexpr KernelTable kTable = {&Apply<float>, &Apply<double>, &Accumulate<float>,
                                &Accumulate<double>};

}  // namespace

const KernelTable& GetKernelTable() { return kTable; }

}  // namespace PSRT_KERNEL_NS
}  // namespace psrt
