// UCX matches a receive against every message that reached the worker, from
// any endpoint: a UCX tag does not say who sent it. So the sender's rank is
// folded into the top bits of the 64-bit UCX tag, and a receive from node p
// matches only tags folded with p.
//
//   bits 63 .. 64-s        sender rank           (s = bits needed for size-1)
//   bits 64-s-1 .. 0       the transport tag, top s bits dropped
//
// The transport tag is make_tag(sequence, step, chunk): the dropped bits are the
// top of the collective sequence. Two tags alias only when their sequences are
// congruent modulo 2^(32-s) (and step and chunk are equal): 2^31 collectives
// apart for 2 nodes, 2^22 for 1024. Collectives that far apart are never in
// flight together, so the aliasing is harmless; a job of size 1 folds nothing.
//
// A keyed job's ring XORs every UCX tag with a 64-bit tag key that only the
// job's nodes can compute (data_plane_tag_key in formation/peer_auth.h, from
// the job's key and this ring's roster). UCX accepts a message from any
// endpoint that reaches the worker, but a receive matches only the exact tag:
// a message from outside the ring that does not carry the key sits unmatched
// in UCX's unexpected queue and never reaches a buffer.
#pragma once

#include <bit>
#include <cstdint>
#include <string>

namespace ringsync::service::transport {

class UcxTagCodec {
 public:
  explicit UcxTagCodec(int size, std::uint64_t tag_key = 0)
      : sender_bits_(size > 1 ? std::bit_width(static_cast<std::uint32_t>(size - 1)) : 0), tag_key_(tag_key) {}

  int sender_bits() const { return sender_bits_; }

  // The UCX tag of a message that `sender` sends under `tag`.
  std::uint64_t encode(int sender, std::uint64_t tag) const {
    if (sender_bits_ == 0) return tag ^ tag_key_;
    const std::uint64_t low = tag & (~std::uint64_t{0} >> sender_bits_);
    return ((static_cast<std::uint64_t>(sender) << (64 - sender_bits_)) | low) ^ tag_key_;
  }

  // The sender folded into a UCX tag.
  int sender(std::uint64_t ucx_tag) const {
    return sender_bits_ == 0 ? 0 : static_cast<int>((ucx_tag ^ tag_key_) >> (64 - sender_bits_));
  }

 private:
  int sender_bits_;
  std::uint64_t tag_key_;
};

// "tag 0x0000000700020003 (sequence 7, step 2, chunk 3)", for error messages.
inline std::string describe_tag(std::uint64_t tag) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(16, '0');
  for (int i = 0; i < 16; ++i) hex[15 - i] = kHex[(tag >> (4 * i)) & 0xf];
  return "tag 0x" + hex + " (sequence " + std::to_string(tag >> 32) + ", step " +
         std::to_string((tag >> 16) & 0xffff) + ", chunk " + std::to_string(tag & 0xffff) + ")";
}

}  // namespace ringsync::service::transport
