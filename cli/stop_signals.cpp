#include "cli/stop_signals.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

namespace ringsync::cli {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
constexpr int kCount = sizeof(kSignals) / sizeof(kSignals[0]);

int g_write_fd = -1;
struct sigaction g_previous[kCount];
// Counted here as well as written to the pipe: a pipe full of SIGCHLD bytes must
// not lose a Ctrl-C.
volatile sig_atomic_t g_stop_count = 0;
volatile sig_atomic_t g_first_stop = 0;

// SIGPIPE too: our stdout is a pipe whose reader left (`ringsync launch ... | head`);
// the job stops as a pipeline would, rather than running on unseen.
bool is_stop(int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGPIPE; }

void on_signal(int sig) {
  const int saved = errno;
  // Every write after the first SIGPIPE brings another: only the first counts.
  if (is_stop(sig) && (sig != SIGPIPE || g_first_stop == 0)) {
    if (g_first_stop == 0) g_first_stop = sig;
    g_stop_count = g_stop_count + 1;
  }
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (g_write_fd >= 0) [[maybe_unused]] auto n = ::write(g_write_fd, &byte, 1);
  errno = saved;
}

}  // namespace

StopSignals::StopSignals() {
  if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) pipe_[0] = pipe_[1] = -1;
  g_write_fd = pipe_[1];
  g_stop_count = 0;
  g_first_stop = 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < kCount; ++i) {
    action.sa_flags = SA_RESTART | (kSignals[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
    ::sigaction(kSignals[i], &action, &g_previous[i]);
  }
}

StopSignals::~StopSignals() {
  for (int i = 0; i < kCount; ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
  g_write_fd = -1;
  for (int fd : pipe_)
    if (fd >= 0) ::close(fd);
}

int StopSignals::drain() {
  unsigned char buf[256];
  for (;;) {
    const ssize_t n = ::read(pipe_[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
  }
  const int count = g_stop_count;
  const int fresh = count - seen_;
  seen_ = count;
  return fresh;
}

int StopSignals::first_stop_signal() const { return g_first_stop; }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGKILL: return "SIGKILL";
    case SIGPIPE: return "SIGPIPE";
    default: return "a signal";
  }
}

}  // namespace ringsync::cli
