// SHA-256 (FIPS 180-4), small and dependency-free: the driver and the peer
// hash every byte of a connection with it, so a reordered, duplicated or
// lost byte anywhere changes the digest.
#ifndef TCPADVISE_CONFORM_SHA256_H_
#define TCPADVISE_CONFORM_SHA256_H_

#include <stddef.h>
#include <stdint.h>

#include <string>

namespace conform {

class Sha256 {
 public:
  void Update(const void* data, size_t n);
  // The digest of everything so far, as 64 hex digits; the state is kept,
  // so Update may go on afterwards.
  std::string HexDigest() const;

 private:
  void Compress(const uint8_t block[64]);

  uint32_t state_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t block_[64] = {};
  size_t block_len_ = 0;
  uint64_t total_ = 0;
};

}  // namespace conform

#endif  // TCPADVISE_CONFORM_SHA256_H_
