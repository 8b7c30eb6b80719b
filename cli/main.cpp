// ringsync: the command-line tool.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/version.h"

namespace {

void usage(std::ostream& out) {
  out << "usage: ringsync COMMAND [OPTIONS]\n\n"
         "commands:\n"
         "  launch     run a job on this machine: N daemons as simulated nodes, L copies of a\n"
         "             trainer command per node (see 'ringsync launch --help')\n"
         "  demo       launch 2 nodes x 2 trainer processes that allreduce 4 B .. 64 MiB,\n"
         "             verify every result and print a bandwidth table (see 'ringsync demo --help')\n"
         "  wait       wait until a ringsyncd serves the socket trainers here use (batch scripts,\n"
         "             health checks; see 'ringsync wait --help')\n"
         "  top        a live view of a job from its daemons' /metrics: rings, per-link bandwidth\n"
         "             with the slowest marked, late ranks, stalls, errors (see 'ringsync top --help')\n"
         "  version    print the version\n"
         "  help       print this help\n";
}

std::string self_path(const char* argv0) {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : p.string();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(std::cerr);
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "launch") return ringsync::cli::launch(args, self_path(argv[0]));
  if (command == "demo") return ringsync::cli::demo(args, self_path(argv[0]));
  if (command == "demo-rank") return ringsync::cli::demo_rank(args);
  if (command == "wait") return ringsync::cli::wait_daemon(args);
  if (command == "top") return ringsync::cli::top_command(args);
  if (command == "version" || command == "--version") {
    std::cout << "ringsync " << ringsync::kVersion << "\n";
    return 0;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    usage(std::cout);
    return 0;
  }
  std::cerr << "ringsync: unknown command '" << command << "'\n\n";
  usage(std::cerr);
  return 2;
}
