#pragma once
// Which cgroups the daemon records, as they come and go: the cgroup v2 tree
// is walked where the watch rules could match, with an inotify watch on
// every directory walked, so a cgroup made later is seen within
// milliseconds of its mkdir and a removed one at its rmdir.
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace flightrec::daemon {

class Discovery {
 public:
  // rel: a path relative to `root` ("" is the root itself).
  struct Rules {
    std::function<bool(const std::string& rel)> matches;     // record this cgroup
    std::function<bool(const std::string& rel)> may_descend;  // a cgroup below it could match
  };
  Discovery(std::string root, Rules rules);  // throws Error
  ~Discovery();
  Discovery(const Discovery&) = delete;
  Discovery& operator=(const Discovery&) = delete;

  int fd() const { return inotify_; }  // readable when the tree changed
  const std::string& root() const { return root_; }

  struct Changes {
    std::vector<std::string> appeared;  // matching cgroups (rel), parents before children
    std::vector<std::string> vanished;  // cgroups reported before that are gone
  };
  // Walks the tree again (at start, after new rules, after the kernel's
  // event queue overflowed): every matching cgroup not reported yet, every
  // reported one that is gone or no longer matches.
  Changes rescan(Rules rules);
  Changes rescan() { return rescan(rules_); }
  // After fd() is readable.
  Changes read();

 private:
  void visit(const std::string& rel, Changes& out);  // watch it, report it, walk below
  void forget(const std::string& rel, Changes& out);  // rel and everything below it are gone
  std::string root_;
  Rules rules_;
  int inotify_ = -1;
  std::map<int, std::string> watched_;       // watch descriptor -> rel
  std::map<std::string, int> watch_of_;      // rel -> watch descriptor
  std::set<std::string> reported_;           // matching cgroups handed out as appeared
  bool unwatched_ = false;                   // a directory could not be watched (said once)
};

}  // namespace flightrec::daemon
