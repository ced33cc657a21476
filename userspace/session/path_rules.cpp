#include "session/path_rules.h"

#include <climits>
#include <cstdlib>

#include "sandbox/launch.h"

namespace flightrec::session {
namespace {

// Where `path` leads inside `root` (root's own view): its longest existing
// part with symlinks resolved inside root, then the rest as written (a rule
// for a file that appears later). "" if it leads out of root.
std::string resolved_inside(const std::string& root, const std::string& path) {
  std::string head = path, tail;
  for (;;) {
    std::string host = sandbox::in_root(root, head);
    if (!host.empty()) {
      std::string inside;
      if (root == "/") inside = host;
      else if (host == root) inside = "/";
      else if (host.size() > root.size() && host.compare(0, root.size(), root) == 0 && host[root.size()] == '/')
        inside = host.substr(root.size());
      else return "";
      return tail.empty() ? inside : (inside == "/" ? "" : inside) + tail;
    }
    if (head == "/") return "";
    size_t slash = head.rfind('/');
    tail = head.substr(slash) + tail;
    head = slash == 0 ? "/" : head.substr(0, slash);
  }
}

// Adds path, and where it leads, under number; false if either is too long.
bool add(probe::PathRules& rules, const std::string& path, uint32_t number, const std::string& root) {
  if (path.size() >= FR_PATH_RULE_MAX) return false;
  rules.match.emplace_back(path, number);
  std::string inside = resolved_inside(root, path);
  // A rule that leads to / would cover everything: only as written.
  if (inside.empty() || inside == path || inside == "/") return true;
  if (inside.size() >= FR_PATH_RULE_MAX) return false;
  rules.match.emplace_back(inside, number);
  return true;
}

std::string real_root(const std::string& root) {
  char real[PATH_MAX];
  return realpath(root.c_str(), real) ? real : root;  // as /proc/self/fd names it
}

}  // namespace

bool add_path_rules(probe::PathRules& rules, const std::vector<std::string>& paths, const std::string& root_dir) {
  std::string root = real_root(root_dir);
  bool all = true;
  for (const auto& path : paths) {
    if (path.size() >= FR_PATH_RULE_MAX) {
      all = false;
      continue;
    }
    rules.listed.push_back(path);
    all = add(rules, path, uint32_t(rules.listed.size()), root) && all;
  }
  return all;
}

void add_path_exception(probe::PathRules& rules, const std::string& path, const std::string& root_dir) {
  add(rules, path, 0, real_root(root_dir));
}

}  // namespace flightrec::session
