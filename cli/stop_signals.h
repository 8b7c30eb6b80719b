// The launcher's signals. SIGINT, SIGTERM, SIGHUP and SIGPIPE (our output's reader
// is gone) ask it to stop the job; SIGCHLD says a child exited. Each wakes one
// poll() through a self-pipe, so the launcher needs no threads and blocks no
// signals (a blocked mask would be inherited by trainers). Catching SIGPIPE, rather
// than dying of it, lets the launcher stop the job in order instead of orphaning
// it; handlers, unlike "ignore", are reset for the children at exec. One instance
// at a time.
#pragma once

namespace ringsync::cli {

class StopSignals {
 public:
  StopSignals();   // installs the handlers
  ~StopSignals();  // puts the previous handlers back
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Readable when a signal has arrived: poll it with the other descriptors.
  int wake_fd() const { return pipe_[0]; }
  // Empties the pipe; returns how many stop signals arrived since the last call.
  int drain();
  // The first stop signal received; 0 when none.
  int first_stop_signal() const;

 private:
  int pipe_[2] = {-1, -1};
  int seen_ = 0;
};

// "SIGINT", "SIGTERM", ... for messages.
const char* signal_name(int sig);

}  // namespace ringsync::cli
