// An address as messages show it: "0x7f3a2c000000".
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

namespace ringsync::client {

inline std::string address_text(std::uintptr_t p) {
  std::ostringstream s;
  s << "0x" << std::hex << p;
  return s.str();
}

}  // namespace ringsync::client
