// Reading one frame (wire::kFrameHeaderBytes of length, then the body) from a
// byte stream. The two streams of the daemon read frames this way: a client
// session's Unix socket (local/session.cpp) and a peer daemon's control
// connection, plain or TLS (formation/peer_link.cpp); what each does with a
// frame, a bad length or a closed stream stays with it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>

#include "common/status.h"
#include "common/wire.h"

namespace ringsync::service::transport {

struct FrameRead {
  boost::system::error_code ec;   // the stream failed: closed, reset, cancelled
  bool mid_frame = false;          // ... after the header: the frame was cut short
  Status bad_length = Status::Ok();  // the header announced a length over the limit
};

// `read_exactly(buffer)` fills the buffer or returns the error that stopped it
// (an awaitable of boost::system::error_code). On success `body` holds the frame.
template <typename ReadExactly>
boost::asio::awaitable<FrameRead> read_frame(ReadExactly read_exactly, std::vector<std::uint8_t>& body,
                                             std::size_t max_frame_bytes) {
  FrameRead result;
  std::array<std::uint8_t, wire::kFrameHeaderBytes> header;
  result.ec = co_await read_exactly(boost::asio::buffer(header));
  if (result.ec) co_return result;
  auto length = wire::frame_length(header, max_frame_bytes);
  if (!length.ok()) {
    result.bad_length = length.status();
    co_return result;
  }
  body.resize(*length);
  result.ec = co_await read_exactly(boost::asio::buffer(body));
  result.mid_frame = static_cast<bool>(result.ec);
  co_return result;
}

}  // namespace ringsync::service::transport
