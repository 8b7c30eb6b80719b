#include "common/socket_path.h"

namespace ringsync {

std::string default_socket_path(const std::map<std::string, std::string>& env, unsigned uid) {
  if (auto it = env.find("XDG_RUNTIME_DIR"); it != env.end() && it->second.starts_with('/')) {
    std::string dir = it->second;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return dir + "/ringsync/ringsyncd.sock";
  }
  if (uid == 0) return "/run/ringsync/ringsyncd.sock";
  return "/tmp/ringsync-" + std::to_string(uid) + "/ringsyncd.sock";
}

std::string slurm_socket_path(const std::map<std::string, std::string>& env, unsigned uid) {
  const auto job = env.find("SLURM_JOB_ID");
  if (job == env.end() || job->second.empty() || job->second.size() > 32 ||
      job->second.find_first_not_of("0123456789_") != std::string::npos)
    return "";
  const std::string path = default_socket_path(env, uid);
  return path.substr(0, path.rfind('/') + 1) + "ringsyncd-slurm-" + job->second + ".sock";
}

}  // namespace ringsync
