// Length-prefixed fields in a byte string, for the small records the daemons
// exchange as opaque bytes inside their control messages (a data-plane
// address, a locality). Little-endian; an Unpacker that runs past the end
// fails instead of reading beyond it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ringsync::service::transport {

class Packer {
 public:
  Packer& u8(std::uint8_t v) {
    bytes_.push_back(v);
    return *this;
  }
  Packer& u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
    return *this;
  }
  Packer& bytes(std::span<const std::uint8_t> v) {
    u64(v.size());
    bytes_.insert(bytes_.end(), v.begin(), v.end());
    return *this;
  }
  Packer& text(const std::string& v) {
    return bytes({reinterpret_cast<const std::uint8_t*>(v.data()), v.size()});
  }
  std::vector<std::uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<std::uint8_t> bytes_;
};

class Unpacker {
 public:
  explicit Unpacker(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  // Each returns false (and reads nothing more) once the input ran out.
  bool u8(std::uint8_t& v) {
    if (!take(1)) return false;
    v = bytes_[at_ - 1];
    return true;
  }
  bool u64(std::uint64_t& v) {
    if (!take(8)) return false;
    v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(bytes_[at_ - 8 + i]) << (8 * i);
    return true;
  }
  bool bytes(std::vector<std::uint8_t>& v) {
    std::uint64_t n = 0;
    if (!u64(n) || n > bytes_.size() - at_ || !take(static_cast<std::size_t>(n))) return false;
    v.assign(bytes_.begin() + static_cast<std::ptrdiff_t>(at_ - n), bytes_.begin() + static_cast<std::ptrdiff_t>(at_));
    return true;
  }
  bool text(std::string& v) {
    std::vector<std::uint8_t> raw;
    if (!bytes(raw)) return false;
    v.assign(raw.begin(), raw.end());
    return true;
  }
  bool at_end() const { return ok_ && at_ == bytes_.size(); }

 private:
  bool take(std::size_t n) {
    if (!ok_ || n > bytes_.size() - at_) return ok_ = false;
    at_ += n;
    return true;
  }
  std::span<const std::uint8_t> bytes_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

}  // namespace ringsync::service::transport
