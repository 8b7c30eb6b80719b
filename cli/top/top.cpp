// ringsync top: a live view of a job from its daemons' /metrics (see kHelp). One
// io_context runs the scrapes, the refresh timer and the signal_set that ends it.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <utility>  // before Boost 1.74's asio headers, which use std::exchange without it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "cli/commands.h"
#include "cli/top/options.h"
#include "cli/top/render.h"
#include "cli/top/scrape.h"
#include "cli/top/view.h"
#include "common/units.h"

namespace ringsync::cli {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using top::Options;

std::string wall_clock() {
  const time_t now = ::time(nullptr);
  tm local{};
  ::localtime_r(&now, &local);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}

void write_out(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// The live screen: on a terminal each frame is drawn from the top-left corner,
// every line erased to its end and the rest of the screen below cleared (the
// first frame clears the whole screen); elsewhere frames follow one another.
class Screen {
 public:
  void show(const std::string& frame) {
    if (!terminal_) {
      write_out(frame + "\n");
      return;
    }
    std::string out = first_ ? "\x1b[H\x1b[2J" : "\x1b[H";
    first_ = false;
    std::size_t start = 0;
    while (start < frame.size()) {
      const std::size_t end = std::min(frame.find('\n', start), frame.size());
      out.append(frame, start, end - start);
      out += "\x1b[K\n";
      start = end + 1;
    }
    out += "\x1b[J";
    write_out(out);
  }

 private:
  bool terminal_ = ::isatty(STDOUT_FILENO) == 1;
  bool first_ = true;
};

top::Frame frame_of(const Options& o, bool live) {
  top::Frame frame;
  frame.job_id = o.job_id;
  frame.clock = wall_clock();
  if (live) frame.refreshing = "every " + units::format_duration(o.interval);
  return frame;
}

std::string with_origin(const Options& o, std::string text) {
  if (o.origin.empty()) return text;
  const auto first_line = text.find('\n');
  return text.insert(first_line + 1, "daemons from " + o.origin + "\n");
}

asio::awaitable<void> pause_until(Clock::time_point when) {
  asio::steady_timer timer(co_await asio::this_coro::executor, when);
  boost::system::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

// Redraws every interval until the signal_set stops the io_context.
asio::awaitable<int> watch(const Options& o) {
  Screen screen;
  std::vector<top::Scrape> previous;
  for (;;) {
    const auto started = Clock::now();
    auto current = co_await top::scrape_all(o.targets, o.timeout);
    screen.show(with_origin(o, top::render(top::make_view(previous, current, o.job_id), frame_of(o, true))));
    previous = std::move(current);
    co_await pause_until(started + std::chrono::duration_cast<Clock::duration>(o.interval));
  }
}

// Two scrapes an interval apart, one plain snapshot.
asio::awaitable<int> snapshot(const Options& o) {
  const auto started = Clock::now();
  const auto first = co_await top::scrape_all(o.targets, o.timeout);
  co_await pause_until(started + std::chrono::duration_cast<Clock::duration>(o.interval));
  const auto second = co_await top::scrape_all(o.targets, o.timeout);
  const top::View view = top::make_view(first, second, o.job_id);
  if (view.nodes_up() == 0) {
    std::string message = "ringsync top: no daemon answered:\n";
    for (const auto& node : view.nodes) message += "  " + node.instance + ": " + node.error + "\n";
    std::cerr << message;
    co_return 1;
  }
  write_out(with_origin(o, top::render(view, frame_of(o, false))));
  co_return 0;
}

}  // namespace

int top_command(const std::vector<std::string>& args) {
  auto options = top::parse_options(args);
  if (!options.ok()) {
    std::cerr << "ringsync top: " << options.status().message() << "\n";
    return 2;
  }
  if (options->help) {
    std::cout << top::kHelp;
    return 0;
  }
  asio::io_context io;
  asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
  int stop_signal = 0;
  signals.async_wait([&](boost::system::error_code ec, int sig) {
    if (ec) return;
    stop_signal = sig;
    io.stop();
  });
  int status = 1;
  asio::co_spawn(io, options->once ? snapshot(*options) : watch(*options),
                 [&](std::exception_ptr error, int code) {
                   status = code;
                   if (error) {
                     try {
                       std::rethrow_exception(error);
                     } catch (const std::exception& e) {
                       std::cerr << "ringsync top: " << e.what() << "\n";
                     }
                     status = 1;
                   }
                   signals.cancel();
                 });
  io.run();
  if (stop_signal == 0) return status;
  // Ctrl-C is how a live view ends; a snapshot it cut short did not happen.
  return options->once ? 128 + stop_signal : 0;
}

}  // namespace ringsync::cli
