// The trainer side of `ringsync launch`: N*L copies of the command, each told its
// node's daemon and its ranks through the environment, their output streamed
// line by line with a rank prefix, and the job's end decided: the first failure,
// a daemon lost, a timeout or a stop signal stops every rank still running.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ringsync::cli {

class NodeDaemons;
class StopSignals;

struct RanksSpec {
  std::vector<std::string> command;  // command[0] is the program's path
  int nodes = 1;
  int slots = 1;
  std::string job_id = "default";
  std::vector<std::string> sockets;  // node I's daemon socket
  // Daemons that run already (ringsync launch --daemon): the ranks describe
  // the job to them, RINGSYNC_NODES (these control addresses, by node) and a
  // fresh RINGSYNC_JOB_TOKEN. Empty: the launcher's own pre-configured daemons.
  std::vector<std::string> control_addresses;
  std::string job_token;
  std::optional<std::chrono::nanoseconds> timeout;
  std::chrono::nanoseconds stop_grace = std::chrono::seconds(10);
  // This global rank's stdout goes out without the prefix (the demo's table); -1: none.
  int raw_stdout_rank = -1;
  std::string tool = "ringsync launch";  // how the launcher's own messages begin
};

// Runs the job to its end and returns its exit status: 0 when every rank exited 0;
// else the first failing rank's status (128+S for signal S), 1 for a daemon that
// died, 124 for the timeout, 128+S for a stop signal S to the launcher.
// `daemons`: the launcher's own, watched for exits (null: attached daemons).
int run_trainer_ranks(const RanksSpec& spec, NodeDaemons* daemons, StopSignals& signals);

// Writes "TOOL: text" and a newline to stderr in one write.
void say(const std::string& tool, const std::string& text);

}  // namespace ringsync::cli
