// ringsyncd: the per-node ringsync daemon.
#include <sys/resource.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "common/config.h"
#include "common/log.h"
#include "common/version.h"
#include "service/daemon.h"
#include "service/daemon_config.h"
#include "service/threads/heap.h"

namespace {

int run_daemon(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  // Whatever escapes is a bug; it still ends with a message, not an abort.
  try {
    return run_daemon(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "ringsyncd: internal error (a bug: please report it): " << e.what() << "\n";
    return 70;  // EX_SOFTWARE
  }
}

namespace {

int run_daemon(int argc, char** argv) {
  using namespace ringsync;
  auto env = service::daemon_environment();
  auto parsed = config::Config::parse(service::daemon_tunables(), argc, argv, env);
  if (!parsed.ok()) {
    std::cerr << "ringsyncd: " << parsed.status().message() << "\n"
              << "Run 'ringsyncd --help' for the list of settings.\n";
    return 2;
  }
  const config::Config& table = *parsed;
  if (table.help_requested()) {
    std::cout << table.help_text("ringsyncd",
                                 "The ringsync daemon: serves the trainer processes of this node "
                                 "(collectives over shared memory) and exports /metrics.");
    return 0;
  }
  if (table.version_requested()) {
    std::cout << "ringsyncd " << kVersion << "\n";
    return 0;
  }
  if (!table.positional().empty()) {
    std::cerr << "ringsyncd: unexpected argument '" << table.positional().front()
              << "'; settings are given as --name value\n";
    return 2;
  }
  auto cfg = service::daemon_config_from(table);
  if (!cfg.ok()) {
    std::cerr << "ringsyncd: " << cfg.status().message() << "\n";
    return 2;
  }
  Status logging = log::configure(cfg->log_level, cfg->log_subsys);
  if (!logging.ok()) {
    std::cerr << "ringsyncd: " << logging.message() << "\n";
    return 2;
  }
  {
    std::istringstream lines(table.dump());
    for (std::string line; std::getline(lines, line);) {
      // The job token is a shared secret: say whether it is set, not what it is.
      if (line.rfind("job-token = ", 0) == 0 && !cfg->cluster.token.empty()) {
        const auto source = line.rfind(" (");
        line = "job-token = (set, not shown)" + (source == std::string::npos ? "" : line.substr(source));
      }
      RS_LOG(info, "config") << line;
    }
  }

  // Before the first collective's buffers: the heap keeps what it grew to.
  switch (service::threads::keep_heap()) {
    case service::threads::HeapLimits::kKept:
      RS_LOG(debug, "config") << "heap: blocks up to " << (service::threads::kHeapBlockBytes >> 20)
                              << " MiB from the heap, up to " << (service::threads::kKeptFreeBytes >> 20)
                              << " MiB of it kept when free";
      break;
    case service::threads::HeapLimits::kFromEnvironment:
      RS_LOG(info, "config") << "heap: malloc's limits as the environment sets them (GLIBC_TUNABLES, MALLOC_*_)";
      break;
    case service::threads::HeapLimits::kUnavailable:
      RS_LOG(debug, "config") << "heap: this malloc ignores mallopt; its own limits apply";
      break;
  }

  // Each client connection holds a descriptor; use all the kernel allows.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  service::Daemon daemon(std::move(cfg).value());
  Status started = daemon.start();
  if (!started.ok()) {
    RS_LOG(error, "daemon") << started.message();
    std::cerr << "ringsyncd: " << started.message() << "\n";
    return 1;
  }
  daemon.run();
  RS_LOG(info, "daemon") << "stopped";
  return 0;
}

}  // namespace
