#include "cli/path_rules.h"

#include <climits>
#include <cstdlib>

#include "sandbox/launch.h"

namespace flightrec::cli {

bool add_path_rules(probe::PathRules& rules, const std::vector<std::string>& paths, const std::string& root_dir) {
  char real[PATH_MAX];
  std::string root = realpath(root_dir.c_str(), real) ? real : root_dir;  // as /proc/self/fd names it
  bool all = true;
  for (const auto& path : paths) {
    if (path.size() >= FR_PATH_RULE_MAX) {
      all = false;
      continue;
    }
    rules.listed.push_back(path);
    auto number = uint32_t(rules.listed.size());
    rules.match.emplace_back(path, number);
    std::string host = sandbox::in_root(root, path);
    std::string inside;
    if (root == "/") inside = host;
    else if (host == root) inside = "/";
    else if (host.size() > root.size() && host.compare(0, root.size(), root) == 0 && host[root.size()] == '/')
      inside = host.substr(root.size());
    if (!inside.empty() && inside != path && inside.size() < FR_PATH_RULE_MAX) rules.match.emplace_back(inside, number);
  }
  return all;
}

}  // namespace flightrec::cli
