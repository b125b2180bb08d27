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

using kernel_detail::KernelScalars;
using kernel_detail::KernelTable;

// Scalars are passed by value so the compiler knows no store to an array changes them.

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

template <typename T>
void Apply(const KernelScalars<T>& s, T* var, T* slot0, T* slot1, const T* grad, size_t n) {
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
