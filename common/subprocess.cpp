#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace ringsync {
namespace {

// This process's environment without `remove`, with `extra` added, as KEY=VALUE.
std::vector<std::string> child_environment(const std::map<std::string, std::string>& extra,
                                           const std::vector<std::string>& remove = {}) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& name : remove) env.erase(name);
  for (const auto& [k, v] : extra) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// NULL-terminated pointers into `strings` (which must outlive them), for exec.
std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// In the forked child: make `fd` the descriptor `target`, kept across exec.
bool redirect(int fd, int target) {
  if (fd == target) return ::fcntl(fd, F_SETFD, 0) == 0;
  return ::dup2(fd, target) == target;
}

}  // namespace

Result<Child> Child::start(const std::vector<std::string>& argv,
                   const std::map<std::string, std::string>& extra_env,
                   const std::string& log_path) {
  std::vector<std::string> env_strings = child_environment(extra_env);
  std::vector<char*> envp = pointers(env_strings);
  std::vector<std::string> argv_copy = argv;
  std::vector<char*> args = pointers(argv_copy);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!log_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  }
  Child child;
  const int rc = posix_spawn(&child.pid_, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    return Status::InvalidArgument("cannot start " + argv[0] + ": " + std::strerror(rc));
  return child;
}

// fork + exec rather than posix_spawn: posix_spawn cannot ask for a parent-death
// signal. Everything the child needs is prepared before fork(); between fork() and
// exec the child makes only async-signal-safe calls, and reports a failure as an
// errno over a close-on-exec pipe (end of file there means exec succeeded).
Result<Child> Child::start_with(const std::vector<std::string>& argv,
                                const SpawnOptions& options) {
  if (argv.empty()) return Status::InvalidArgument("no program to start");
  std::vector<std::string> env_strings = child_environment(options.extra_env, options.remove_env);
  std::vector<char*> envp = pointers(env_strings);
  std::vector<std::string> argv_copy = argv;
  std::vector<char*> args = pointers(argv_copy);
  const char* log_path =
      options.log_path.empty() || options.capture_output ? nullptr : options.log_path.c_str();

  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, exec_pipe[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {out_pipe, err_pipe, exec_pipe}) {
      close_fd(p[0]);
      close_fd(p[1]);
    }
  };
  if ((options.capture_output &&
       (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)) ||
      ::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    const int err = errno;
    close_all();
    return Status::Internal("cannot start " + argv[0] + ": pipe: " + std::strerror(err));
  }

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    close_all();
    return Status::Internal("cannot start " + argv[0] + ": fork: " + std::strerror(err));
  }
  if (pid == 0) {
    auto fail = [&](int err) {
      [[maybe_unused]] auto n = ::write(exec_pipe[1], &err, sizeof err);
      ::_exit(127);
    };
    if (options.parent_death_signal != 0) {
      if (::prctl(PR_SET_PDEATHSIG, options.parent_death_signal) != 0) fail(errno);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    }
    if (options.own_process_group && ::setpgid(0, 0) != 0) fail(errno);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (options.null_stdin) {
      const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0 || !redirect(fd, 0)) fail(errno);
    }
    if (options.capture_output) {
      if (!redirect(out_pipe[1], 1) || !redirect(err_pipe[1], 2)) fail(errno);
    } else if (log_path) {
      const int fd = ::open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      if (fd < 0 || !redirect(fd, 1) || !redirect(fd, 2)) fail(errno);
    }
    ::execve(args[0], args.data(), envp.data());
    fail(errno);
  }

  // Also from this side, so a signal_group() right after start cannot miss the
  // group; EACCES once the child has exec'd is fine (it did it itself).
  if (options.own_process_group) ::setpgid(pid, pid);
  close_fd(out_pipe[1]);
  close_fd(err_pipe[1]);
  close_fd(exec_pipe[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_pipe[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  close_fd(exec_pipe[0]);
  if (n == sizeof child_errno) {
    int st;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    close_all();
    return Status::InvalidArgument("cannot start " + argv[0] + ": " + std::strerror(child_errno));
  }

  Child child;
  child.pid_ = pid;
  child.group_leader_ = options.own_process_group;
  child.out_fd_ = out_pipe[0];
  child.err_fd_ = err_pipe[0];
  for (int fd : {child.out_fd_, child.err_fd_})
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return child;
}

Child::Child(Child&& other) noexcept
    : pid_(other.pid_),
      status_(other.status_),
      group_leader_(other.group_leader_),
      out_fd_(other.out_fd_),
      err_fd_(other.err_fd_) {
  other.pid_ = -1;
  other.out_fd_ = other.err_fd_ = -1;
}

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    release();
    pid_ = other.pid_;
    status_ = other.status_;
    group_leader_ = other.group_leader_;
    out_fd_ = other.out_fd_;
    err_fd_ = other.err_fd_;
    other.pid_ = -1;
    other.out_fd_ = other.err_fd_ = -1;
  }
  return *this;
}

Child::~Child() { release(); }

void Child::release() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int st;
    ::waitpid(pid_, &st, 0);
  }
  close_fd(out_fd_);
  close_fd(err_fd_);
}

std::optional<int> Child::wait(std::chrono::milliseconds timeout) {
  if (status_ || pid_ <= 0) return status_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = st;
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool Child::succeeded(std::chrono::milliseconds timeout) {
  auto st = wait(timeout);
  return st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
}

void Child::signal(int sig) {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

// Only before the leader is reaped: until then its pid cannot name another group.
void Child::signal_group(int sig) {
  if (pid_ > 0 && !status_) ::kill(group_leader_ ? -pid_ : pid_, sig);
}

bool Child::running() { return pid_ > 0 && !wait(std::chrono::milliseconds(0)); }

}  // namespace ringsync
