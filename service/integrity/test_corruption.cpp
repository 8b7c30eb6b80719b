#include "service/integrity/test_corruption.h"

#include <charconv>
#include <cstdlib>
#include <string>

namespace ringsync::service::integrity {

std::optional<std::uint32_t> corrupt_result_node() {
  static const std::optional<std::uint32_t> node = []() -> std::optional<std::uint32_t> {
    const char* text = std::getenv(std::string(kCorruptResultEnv).c_str());
    if (text == nullptr) return std::nullopt;
    const std::string_view value(text);
    std::uint32_t rank = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), rank);
    if (error != std::errc() || end != value.data() + value.size()) return std::nullopt;
    return rank;
  }();
  return node;
}

}  // namespace ringsync::service::integrity
