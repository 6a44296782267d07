// SHA-256 (FIPS 180-4), used to content-address cubin cache entries and to checksum
// their payloads. Small and dependency-free so the runtime links no crypto library.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace loom {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // Hashes the length before the bytes, so that ("ab","c") and ("a","bc") differ when
  // several fields are fed one after another.
  void update_field(std::string_view s);
  std::array<uint8_t, 32> digest();  // finishes; the object must not be updated after
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_bytes_ = 0;
};

std::array<uint8_t, 32> sha256(const void* data, size_t bytes);
std::string sha256_hex(std::string_view s);
std::string to_hex(const uint8_t* bytes, size_t n);

}  // namespace loom
