#pragma once
// The processes already in a cgroup when watch or flightrecd starts
// recording it (they exec'd before any probe saw them): who they are, from
// /proc, so the record can start with them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace flightrec::session {

struct ProcessInfo {
  int pid = 0, ppid = 0;
  uint32_t uid = 0;          // real uid
  std::string exe, cwd;      // empty when unreadable (exe may end in " (deleted)")
  std::vector<std::string> argv;  // /proc/PID/cmdline split on NUL (at most 1 MiB read)
  std::string comm;
  bool exe_unreadable = false;    // a kernel thread, a zombie, or no access
  bool argv_left_out = false;     // not read: the snapshot's argv budget was spent
};

// What the command lines of one snapshot may hold together.
constexpr size_t kSnapshotArgvBudget = 16u << 20;

// Every process in cgroup_dir (a cgroup v2 directory) and in every cgroup
// below it (symlinks not followed), except exclude_pid (<= 0: none), sorted
// by pid. A process that exits meanwhile is left out, and so is a cgroup
// removed meanwhile. A pid counts only if cgroup.procs still lists it
// after /proc/PID was opened, and all of a process's files are read through
// that one open directory: a pid reused meanwhile by a process elsewhere is
// not taken for this cgroup's. Throws Error if cgroup_dir cannot be opened
// or has no readable cgroup.procs.
std::vector<ProcessInfo> snapshot_cgroup(const std::string& cgroup_dir, int exclude_pid);
// The same for several cgroups at once, each process once; the processes'
// command lines are read until they hold argv_budget bytes together, the
// rest left out (argv_left_out).
std::vector<ProcessInfo> snapshot_cgroups(const std::vector<std::string>& cgroup_dirs, int exclude_pid,
                                          size_t argv_budget = kSnapshotArgvBudget);

}  // namespace flightrec::session
