// Job authentication: SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104) and the challenge-response
// proofs that a worker and a ps task exchange at connect time when the job has a shared secret
// (docs/protocol.md, "Authentication").
//
// The core builds on a machine with only a C++ compiler, so SHA-256 is implemented here; tests
// check it against the FIPS 180-4 examples and the RFC 4231 HMAC test vectors. Thread-safe: no
// state. Secrets are never logged or copied into error messages.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace psrt {

using Digest = std::array<uint8_t, 32>;

constexpr size_t kNonceSize = 32;

// SHA-256 of data[0, n).
Digest Sha256(const void* data, size_t n);

// HMAC-SHA256(key, msg).
Digest HmacSha256(const std::string& key, const void* msg, size_t n);

// Constant-time equality of two digests (the time does not depend on where they differ).
bool DigestEqual(const Digest& a, const Digest& b);

// kNonceSize bytes from the OS's random source (getrandom, /dev/urandom as fallback). False
// when neither is available.
bool RandomNonce(uint8_t* out);

// What the worker proves: HMAC(secret, "psrt-auth-v1 worker" | server nonce | client nonce |
// job | task as 4 little-endian bytes). Binding the nonces, job and task means a proof answers
// one challenge of one connection only and cannot be replayed or moved to another task.
Digest WorkerProof(const std::string& secret, const uint8_t* server_nonce,
                   const uint8_t* client_nonce, const std::string& job, uint32_t task);

// What the ps task proves back: HMAC(secret, "psrt-auth-v1 ps" | server nonce | client nonce),
// so a worker with a secret never talks to a peer that does not know it.
Digest ServerProof(const std::string& secret, const uint8_t* server_nonce,
                   const uint8_t* client_nonce);

}  // namespace psrt
