#include "initializers.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

namespace psrt {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
constexpr int kMaxNormalTries = 32;  // truncated normal: a redraw is needed 4.6 % of the time
constexpr double kTwoPi = 6.283185307179586476925286766559;
// TF's variance_scaling: the stddev of a normal truncated at 2 stddev is 0.8796... of the
// untruncated one, so the truncated draw is scaled up by 1 / 0.87962566103423978.
constexpr double kTruncatedStddev = 0.87962566103423978;

// splitmix64's finalizer: a bijection of the 64-bit integers with good avalanche.
inline uint64_t Mix(uint64_t z) {
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ULL;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

inline double Uniform(uint64_t key, uint64_t j, uint64_t k) {
  return static_cast<double>(Mix(key ^ (j * 64 + k)) >> 11) * (1.0 / 9007199254740992.0);
}

// Box-Muller from draws 2t and 2t+1 of element j.
inline double Normal(uint64_t key, uint64_t j, int t) {
  const double u1 = Uniform(key, j, 2 * static_cast<uint64_t>(t));
  const double u2 = Uniform(key, j, 2 * static_cast<uint64_t>(t) + 1);
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(kTwoPi * u2);
}

inline double TruncatedNormal(uint64_t key, uint64_t j) {
  for (int t = 0; t < kMaxNormalTries; ++t) {
    const double z = Normal(key, j, t);
    if (std::fabs(z) <= 2.0) return z;
  }
  return 0.0;
}

// TF's _compute_fans: (fan_in, fan_out) of a shape.
void Fans(const std::vector<int64_t>& shape, double* fan_in, double* fan_out) {
  if (shape.empty()) {
    *fan_in = *fan_out = 1;
  } else if (shape.size() == 1) {
    *fan_in = *fan_out = static_cast<double>(shape[0]);
  } else if (shape.size() == 2) {
    *fan_in = static_cast<double>(shape[0]);
    *fan_out = static_cast<double>(shape[1]);
  } else {
    double receptive = 1;
    for (size_t i = 0; i + 2 < shape.size(); ++i) receptive *= static_cast<double>(shape[i]);
    *fan_in = static_cast<double>(shape[shape.size() - 2]) * receptive;
    *fan_out = static_cast<double>(shape.back()) * receptive;
  }
}

// The value of element j (of the whole variable).
struct Generator {
  InitKind kind;
  int distribution = 0;
  uint64_t key = 0;
  double a = 0, b = 0;  // kind-specific: see Make

  double operator()(uint64_t j) const {
    switch (kind) {
      case InitKind::kZeros: return 0.0;
      case InitKind::kOnes: return 1.0;
      case InitKind::kConstant: return a;
      case InitKind::kRandomUniform: return a + (b - a) * Uniform(key, j, 0);
      case InitKind::kRandomNormal: return a + b * Normal(key, j, 0);
      case InitKind::kTruncatedNormal: return a + b * TruncatedNormal(key, j);
      case InitKind::kVarianceScaling:
        if (distribution == 2) return -b + 2 * b * Uniform(key, j, 0);  // b: the limit
        if (distribution == 1) return b * Normal(key, j, 0);             // b: the stddev
        return b * TruncatedNormal(key, j);
      case InitKind::kNone: break;
    }
    return 0.0;
  }

  static Generator Make(const InitSpec& s) {
    Generator g;
    g.kind = s.kind;
    g.distribution = s.distribution;
    g.key = Mix(s.seed + kGolden);
    g.a = s.a;
    g.b = s.b;
    if (s.kind == InitKind::kVarianceScaling) {
      // TF's VarianceScaling: scale / max(1, n) with n the fan the mode names.
      double fan_in, fan_out;
      Fans(s.full_shape, &fan_in, &fan_out);
      const double n = s.fan_mode == 0 ? fan_in : s.fan_mode == 1 ? fan_out
                                                                   : (fan_in + fan_out) / 2;
      const double scale = s.a / std::max(1.0, n);
      g.b = s.distribution == 2 ? std::sqrt(3.0 * scale)
            : s.distribution == 1 ? std::sqrt(scale)
                                  : std::sqrt(scale) / kTruncatedStddev;
    }
    return g;
  }
};

template <typename T>
void FillRange(const Generator& g, uint64_t first, T* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(g(first + i));
}

template <typename T>
void Fill(const Generator& g, uint64_t first, T* out, size_t n) {
  // Random draws cost ~20 ns per element: tensors of a million elements or more are split
  // over the CPUs (each thread computes its own slice; the result does not depend on it).
  const size_t cpus = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = g.kind > InitKind::kConstant && n >= (size_t{1} << 20)
                             ? std::min<size_t>(cpus, n >> 19) : 1;
  if (threads <= 1) {
    FillRange(g, first, out, n);
    return;
  }
  std::vector<std::thread> pool;
  const size_t per = (n + threads - 1) / threads;
  size_t done_by_caller_from = 0;
  for (size_t t = 1; t < threads; ++t) {
    const size_t begin = t * per;
    if (begin >= n) break;
    const size_t len = std::min(per, n - begin);
    try {
      pool.emplace_back([&g, first, out, begin, len] { FillRange(g, first + begin, out + begin, len); });
    } catch (...) {
      // No thread: this caller fills the rest itself.
      done_by_caller_from = begin;
      break;
    }
  }
  FillRange(g, first, out, std::min(per, n));
  if (done_by_caller_from != 0)
    FillRange(g, first + done_by_caller_from, out + done_by_caller_from,
              n - done_by_caller_from);
  for (auto& th : pool) th.join();
}

}  // namespace

double InitUniform(uint64_t seed, uint64_t j, uint64_t k) {
  return Uniform(Mix(seed + kGolden), j, k);
}

void FillInitializer(const InitSpec& spec, DType dtype, void* out, size_t n) {
  const Generator g = Generator::Make(spec);
  switch (dtype) {
    case DType::kFloat32: Fill(g, spec.offset, static_cast<float*>(out), n); break;
    case DType::kFloat64: Fill(g, spec.offset, static_cast<double*>(out), n); break;
    case DType::kInt64: Fill(g, spec.offset, static_cast<int64_t*>(out), n); break;
    default: break;
  }
}

}  // namespace psrt
