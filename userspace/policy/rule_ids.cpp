#include "policy/rule_ids.h"

#include <algorithm>
#include <cctype>

#include "events/syscall_table.h"

namespace flightrec::policy {

const std::vector<std::string>& known_rule_ids() {
  static const std::vector<std::string> ids = {
      "seccomp", "seccomp.default", "seccomp.kill", "seccomp.deny", "seccomp.allow", "oci", "oci.syscalls",
      "filesystem", "filesystem.hidden", "filesystem.read_only", "filesystem.read", "filesystem.exec", "filesystem.protect",
      "filesystem.refer", "filesystem.view", "network", "network.none", "network.allow", "network.bind",
      "network.socket", "network.unix_abstract", "network.inbound", "network.sni", "proc", "proc.access", "landlock",
      "landlock.scope", "limits", "limits.memory", "limits.pids", "limits.file_size", "limits.disk", "limits.wall_time",
      "limits.cpu_time", "limits.record_size", "limits.record_rate", "processes", "processes.unexpected_parent",
      "on_violation"};
  return ids;
}

bool is_known_rule_id(const std::string& id) {
  const auto& ids = known_rule_ids();
  if (std::find(ids.begin(), ids.end(), id) != ids.end()) return true;
  for (const char* prefix : {"seccomp.deny.", "seccomp.allow."})
    if (id.rfind(prefix, 0) == 0) return events::syscall_number(id.substr(std::string(prefix).size())).has_value();
  const std::string oci = "oci.syscalls[";
  if (id.rfind(oci, 0) == 0 && id.size() > oci.size() + 1 && id.back() == ']')
    return std::all_of(id.begin() + long(oci.size()), id.end() - 1, [](char c) { return isdigit(static_cast<unsigned char>(c)); });
  const std::string breaker = "on_violation:";
  if (id.rfind(breaker, 0) == 0) return id.size() > breaker.size();
  return false;
}

}  // namespace flightrec::policy
