#pragma once
// Resource limits of a session: memory, pids and CPU bandwidth, set on
// cgroup v2 where its controllers are enabled, else on the v1 hierarchies
// (hybrid hosts mount memory, pids and cpu as v1). Also reads the counters
// that say a limit was hit (OOM kills, refused forks).
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "policy/policy.h"

namespace flightrec::sandbox {

struct LimitCounters {
  uint64_t oom_kills = 0;      // processes the OOM killer ended
  uint64_t pids_refused = 0;   // forks refused by pids.max
};

class ResourceLimits {
 public:
  // v2_dir: the session's own cgroup v2 directory; name: its name under
  // the flightrec/ parent in v1 hierarchies. Throws Error.
  ResourceLimits(const policy::Limits& limits, const std::string& v2_dir, const std::string& name);
  ResourceLimits(const ResourceLimits&) = delete;
  ResourceLimits& operator=(const ResourceLimits&) = delete;
  ~ResourceLimits();

  // The "tasks" file of each v1 cgroup (v2 is the caller's). The process
  // to limit, single-threaded, writes "0" to each: a thread moving itself
  // takes no global lock, where a move by another process (cgroup.procs)
  // waits for an RCU grace period (~10 ms) holding the kernel's cgroup lock.
  std::vector<std::string> v1_task_files() const;
  LimitCounters read() const;
  // "memory:v1 pids:v1 cpu:v2 ..." for the genesis entry.
  std::vector<std::string> describe() const;
  void remove();  // removes the v1 directories (once empty)

 private:
  struct Controller {
    std::string name;   // memory, pids, cpu
    std::string dir;    // where its files are
    bool v1 = false;
  };
  std::vector<Controller> controllers_;
};

}  // namespace flightrec::sandbox
