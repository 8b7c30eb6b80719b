// The view as text: a header line and its sections (nodes, links, ranks, stalled
// tensors, waiting, errors),
// plain (no escape codes) so that --once output can be read by scripts; the live
// screen wraps the same text in cursor movements.
#pragma once

#include <string>

#include "cli/top/view.h"

namespace ringsync::cli::top {

struct Frame {
  std::string job_id;      // the --job-id filter, "" for all
  std::string refreshing;  // live: "every 2 s"; empty for a snapshot
  std::string clock;       // wall-clock time of the scrape, "12:04:05"
};

std::string render(const View& view, const Frame& frame);

// 815.2 MB/s, 1.31 GB/s (decimal multiples, as nccl-tests prints bandwidth).
std::string format_bandwidth(double bytes_per_second);
// 8 us, 12.5 ms, 1.20 s.
std::string format_wait(double seconds);

}  // namespace ringsync::cli::top
