#include "service/transport/locality.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <string_view>

#include "service/transport/packed_bytes.h"

namespace ringsync::service::transport {

namespace {

constexpr std::uint8_t kLocalityFormat = 1;

// The transport names and aliases of UCX (1.13) that mean shared memory.
constexpr std::array<std::string_view, 8> kSharedMemory = {"sm", "shm", "mm", "posix", "sysv", "cma", "knem", "xpmem"};

bool is_shared_memory(std::string_view name) {
  for (auto s : kSharedMemory)
    if (s == name) return true;
  return false;
}

std::vector<std::string> split(std::string_view list) {
  std::vector<std::string> items;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    if (const auto item = list.substr(0, comma); !item.empty()) items.emplace_back(item);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
  return items;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

std::uint64_t namespace_inode(const std::string& proc, const char* kind) {
  struct stat st {};
  if (::stat((proc + "/self/ns/" + kind).c_str(), &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_ino);
}

// A tmpfs mounted twice keeps its device; another tmpfs has its own.
std::uint64_t device_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_dev) + 1;  // never 0 for a path that exists
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

Locality Locality::read(const std::string& proc, const std::string& dev_shm, const std::string& hostname) {
  Locality l;
  l.boot_id = first_line(proc + "/sys/kernel/random/boot_id");
  l.hostname = hostname;
  l.net = namespace_inode(proc, "net");
  l.ipc = namespace_inode(proc, "ipc");
  l.shm = device_of(dev_shm);
  l.pid = namespace_inode(proc, "pid");
  l.user = namespace_inode(proc, "user");
  return l;
}

Locality Locality::here() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) name[0] = '\0';
  return read("/proc", "/dev/shm", name.data());
}

std::vector<std::uint8_t> Locality::encode() const {
  return Packer().u8(kLocalityFormat).text(boot_id).text(hostname).u64(net).u64(ipc).u64(shm).u64(pid).u64(user).take();
}

Result<Locality> Locality::decode(std::span<const std::uint8_t> bytes) {
  Unpacker in(bytes);
  Locality l;
  std::uint8_t format = 0;
  if (!in.u8(format) || format != kLocalityFormat)
    return Status::ProtocolError("a peer's locality record has an unknown format (same ringsync version everywhere?)");
  if (!in.text(l.boot_id) || !in.text(l.hostname) || !in.u64(l.net) || !in.u64(l.ipc) || !in.u64(l.shm) ||
      !in.u64(l.pid) || !in.u64(l.user) || !in.at_end())
    return Status::ProtocolError("a peer's locality record is truncated or malformed");
  return l;
}

std::string shared_memory_refusal(const Locality& a, const Locality& b) {
  // Another kernel (or one that cannot tell): UCX does not offer shared memory.
  if (a.boot_id.empty() || a.boot_id != b.boot_id) return "";
  std::vector<std::string> differ;
  const auto check = [&](std::uint64_t x, std::uint64_t y, const char* what) {
    if (x == 0 || x != y) differ.emplace_back(what);
  };
  check(a.net, b.net, "network namespace");
  check(a.ipc, b.ipc, "IPC namespace");
  check(a.shm, b.shm, "/dev/shm");
  check(a.pid, b.pid, "PID namespace");
  check(a.user, b.user, "user namespace");
  std::string text;
  for (std::size_t i = 0; i < differ.size(); ++i)
    text += (i == 0 ? "" : i + 1 == differ.size() ? " and " : ", ") + differ[i];
  return text;
}

bool may_use_shared_memory(const std::string& transports) {
  const std::string_view tls = transports.empty() ? std::string_view("all") : std::string_view(transports);
  const bool excluding = tls.front() == '^';
  const auto items = split(excluding ? tls.substr(1) : tls);
  if (excluding) {
    for (const auto& item : items)
      if (item == "sm" || item == "shm") return false;  // every shared-memory transport excluded
    return true;
  }
  for (const auto& item : items)
    if (item == "all" || is_shared_memory(item)) return true;
  return false;
}

std::string without_shared_memory(const std::string& transports) {
  const std::string_view tls = transports.empty() ? std::string_view("all") : std::string_view(transports);
  const bool excluding = tls.front() == '^';
  auto items = split(excluding ? tls.substr(1) : tls);
  bool all = excluding;
  std::vector<std::string> kept;
  for (const auto& item : items) {
    if (item == "all") all = true;
    else if (excluding || !is_shared_memory(item)) kept.push_back(item);
  }
  if (all) {
    // "^sm" excludes every shared-memory transport (UCX's alias for them).
    if (excluding) {
      kept.emplace_back("sm");
      std::string list = "^";
      list += join(kept);
      return list;
    }
    return "^sm";
  }
  for (const auto& item : kept)
    if (item != "self") return join(kept);
  return "";
}

}  // namespace ringsync::service::transport
