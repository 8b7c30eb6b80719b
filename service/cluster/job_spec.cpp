#include "service/cluster/job_spec.h"

namespace ringsync::service::cluster {

std::string control_address(const HostEntry& node) {
  const std::uint16_t port = node.port ? node.port : kDefaultControlPort;
  const bool v6 = node.host.find(':') != std::string::npos;
  return (v6 ? "[" + node.host + "]" : node.host) + ":" + std::to_string(port);
}

std::string node_name(const JobSpec& job, std::uint32_t node) {
  if (node >= job.nodes.size()) return "node " + std::to_string(node);
  return "node " + std::to_string(node) + " (" + control_address(job.nodes[node]) + ")";
}

std::string node_at(const JobSpec& job, std::uint32_t node) {
  if (node >= job.nodes.size()) return "node " + std::to_string(node);
  return "node " + std::to_string(node) + " at " + control_address(job.nodes[node]);
}

}  // namespace ringsync::service::cluster
