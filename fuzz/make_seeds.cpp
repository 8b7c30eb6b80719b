// Writes the seed corpora of the frame harnesses (fuzz/corpus/client_frame,
// peer_frame): one body of every message type, as encode() makes it, so
// libFuzzer starts from valid FlatBuffers instead of discovering them. The
// make_seeds target of the fuzz build (scripts/fuzz.sh): run it from the
// repository root after a protocol change; the files are committed.
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <variant>

#include "common/peer_wire.h"
#include "common/wire.h"

namespace {

template <typename Message, typename Encode, std::size_t... I>
void write_all(const std::string& folder, Encode encode, std::index_sequence<I...>) {
  (
      [&] {
        using Alternative = std::variant_alternative_t<I, Message>;
        const std::vector<std::uint8_t> frame = encode(Message(Alternative{}));
        std::ofstream out(folder + "/type-" + std::to_string(I), std::ios::binary);
        out.write(reinterpret_cast<const char*>(frame.data()) + ringsync::wire::kFrameHeaderBytes,
                  static_cast<std::streamsize>(frame.size() - ringsync::wire::kFrameHeaderBytes));
      }(),
      ...);
}

}  // namespace

int main() {
  using namespace ringsync;
  write_all<wire::Message>("fuzz/corpus/client_frame", [](const wire::Message& m) { return wire::encode(m); },
                           std::make_index_sequence<std::variant_size_v<wire::Message>>());
  write_all<peer_wire::Message>("fuzz/corpus/peer_frame",
                                [](const peer_wire::Message& m) { return peer_wire::encode(m); },
                                std::make_index_sequence<std::variant_size_v<peer_wire::Message>>());
  std::puts("wrote fuzz/corpus/client_frame and fuzz/corpus/peer_frame");
  return 0;
}
