#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace psrt {

namespace {

// FIPS 180-4, section 4.2.2: the first 32 bits of the fractional parts of the cube roots of the
// first 64 primes.
constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

inline uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

// One streaming SHA-256 computation (section 6.2).
class Sha256State {
 public:
  Sha256State() = default;

  void Update(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    total_ += n;
    while (n > 0) {
      const size_t take = std::min(n, sizeof block_ - used_);
      std::memcpy(block_ + used_, p, take);
      used_ += take;
      p += take;
      n -= take;
      if (used_ == sizeof block_) {
        Compress(block_);
        used_ = 0;
      }
    }
  }

  Digest Finish() {
    // Padding (section 5.1.1): a 1 bit, zeros, then the message length in bits, big-endian.
    const uint64_t bits = total_ * 8;
    const uint8_t one = 0x80;
    Update(&one, 1);
    const uint8_t zero = 0;
    while (used_ != 56) Update(&zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    Update(len, 8);
    Digest out;
    for (int i = 0; i < 8; ++i)
      for (int k = 0; k < 4; ++k) out[4 * i + k] = static_cast<uint8_t>(h_[i] >> (24 - 8 * k));
    return out;
  }

 private:
  void Compress(const uint8_t* block) {
    uint32_t w[64];
    for (int t = 0; t < 16; ++t)
      w[t] = (uint32_t{block[4 * t]} << 24) | (uint32_t{block[4 * t + 1]} << 16) |
             (uint32_t{block[4 * t + 2]} << 8) | uint32_t{block[4 * t + 3]};
    for (int t = 16; t < 64; ++t) {
      const uint32_t s0 = Rotr(w[t - 15], 7) ^ Rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const uint32_t s1 = Rotr(w[t - 2], 17) ^ Rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6],
             h = h_[7];
    for (int t = 0; t < 64; ++t) {
      const uint32_t t1 = h + (Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                          kRound[t] + w[t];
      const uint32_t t2 = (Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
  }

  // Section 5.3.3: the initial hash value.
  uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t block_[64] = {};
  size_t used_ = 0;
  uint64_t total_ = 0;
};

// HMAC's inner and outer hashes (RFC 2104) over parts of a message.
class Hmac {
 public:
  explicit Hmac(const std::string& key) {
    uint8_t k[64] = {};
    if (key.size() > sizeof k) {
      const Digest d = Sha256(key.data(), key.size());
      std::memcpy(k, d.data(), d.size());
    } else {
      std::memcpy(k, key.data(), key.size());
    }
    uint8_t pad[64];
    for (int i = 0; i < 64; ++i) pad[i] = k[i] ^ 0x36;
    inner_.Update(pad, sizeof pad);
    for (int i = 0; i < 64; ++i) pad[i] = k[i] ^ 0x5c;
    outer_.Update(pad, sizeof pad);
  }
  Hmac& Update(const void* p, size_t n) {
    inner_.Update(p, n);
    return *this;
  }
  Hmac& Update(const std::string& s) { return Update(s.data(), s.size()); }
  Digest Finish() {
    const Digest in = inner_.Finish();
    outer_.Update(in.data(), in.size());
    return outer_.Finish();
  }

 private:
  Sha256State inner_;
  Sha256State outer_;
};

}  // namespace

Digest Sha256(const void* data, size_t n) {
  Sha256State s;
  s.Update(data, n);
  return s.Finish();
}

Digest HmacSha256(const std::string& key, const void* msg, size_t n) {
  return Hmac(key).Update(msg, n).Finish();
}

bool DigestEqual(const Digest& a, const Digest& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  // The volatile read keeps the compiler from turning the loop into an early-exit compare.
  volatile uint8_t result = diff;
  return result == 0;
}

bool RandomNonce(uint8_t* out) {
  size_t got = 0;
  while (got < kNonceSize) {
    const ssize_t r = getrandom(out + got, kNonceSize - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  if (got == kNonceSize) return true;
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  while (got < kNonceSize) {
    const ssize_t r = read(fd, out + got, kNonceSize - got);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (!(r < 0 && errno == EINTR)) {
      break;
    }
  }
  close(fd);
  return got == kNonceSize;
}

Digest WorkerProof(const std::string& secret, const uint8_t* server_nonce,
                   const uint8_t* client_nonce, const std::string& job, uint32_t task) {
  uint8_t t[4];
  for (int i = 0; i < 4; ++i) t[i] = static_cast<uint8_t>(task >> (8 * i));
  return Hmac(secret)
      .Update(std::string("psrt-auth-v1 worker"))
      .Update(server_nonce, kNonceSize)
      .Update(client_nonce, kNonceSize)
      .Update(job)
      .Update(t, sizeof t)
      .Finish();
}

Digest ServerProof(const std::string& secret, const uint8_t* server_nonce,
                   const uint8_t* client_nonce) {
  return Hmac(secret)
      .Update(std::string("psrt-auth-v1 ps"))
      .Update(server_nonce, kNonceSize)
      .Update(client_nonce, kNonceSize)
      .Finish();
}

}  // namespace psrt
