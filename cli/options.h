// Tiny "--name value" option reading for the CLI subcommands.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common/units.h"

namespace ringsync::cli {

// Value after `--name` in args, if present.
inline std::optional<std::string> option(const std::vector<std::string>& args,
                                         const std::string& name) {
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == name) return args[i + 1];
  return std::nullopt;
}

// "--name=value" split at the first '=' ("--name" alone: no value).
struct NamedArgument {
  std::string name;
  std::optional<std::string> value;
};
inline NamedArgument split_argument(const std::string& arg) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos) return {arg, std::nullopt};
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

inline bool flag(const std::vector<std::string>& args, const std::string& name) {
  for (const auto& a : args)
    if (a == name) return true;
  return false;
}

}  // namespace ringsync::cli

namespace ringsync::cli {

// Reads a byte-size option ("64M", "4096"); prints the error and returns false when bad.
inline bool bytes_option(const std::vector<std::string>& args, const std::string& name,
                         std::uint64_t& out) {
  auto text = option(args, name);
  if (!text) return true;
  auto parsed = units::parse_bytes(*text);
  if (!parsed.ok()) {
    std::fprintf(stderr, "ringsync: %s: %s\n", name.c_str(), parsed.status().message().c_str());
    return false;
  }
  out = *parsed;
  return true;
}

}  // namespace ringsync::cli
