// Initializers run on the ps task (REGISTER with INIT and an InitSpec, wire.h): TF1's zeros,
// ones, constant, random_uniform, random_normal, truncated_normal and variance_scaling (of
// which glorot_uniform/glorot_normal are cases), so a worker never holds a big initial value.
//
// The random ones are counter-based: element j of the whole variable gets its draws from
// splitmix64 hashes of (seed, j, draw number), so a part starting at element `offset` computes
// exactly its slice of the whole, whatever the number of ps tasks or partitions, and the
// result is reproducible from the seed alone. docs/protocol.md ("Initializers") gives the
// formulas; tests/_init_ref.py is their numpy reference. The random streams are psrt's own:
// the same seed does not give TF's values (TF draws from Philox with its own seed mixing).
//
// Thread-safe: no state. Large fills are split over the CPUs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "wire.h"

namespace psrt {

// Writes elements [spec.offset, spec.offset + n) of the whole variable, in `dtype`, to out.
// spec.kind must not be kNone; int64 only takes zeros, ones and constant (checked by
// VarSpec::Decode).
void FillInitializer(const InitSpec& spec, DType dtype, void* out, size_t n);

// The uniform draw in [0, 1) number k of element j (53 random bits), exposed for tests.
double InitUniform(uint64_t seed, uint64_t j, uint64_t k);

}  // namespace psrt
