// A cgroup's processes from cgroup.procs and /proc, read with plain
// open/read and bounded sizes: the daemon is root and /proc is written by
// whoever runs in the cgroup (comm, cmdline), so nothing is trusted to be
// short or well formed.
#include "session/snapshot.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "common/error.h"

namespace flightrec::session {
namespace {

constexpr size_t kProcsCap = 8 << 20;    // a million pids
constexpr size_t kCmdlineCap = 1 << 20;
constexpr int kMaxDepth = 128;
constexpr size_t kBatch = 256;           // /proc/PID directories open at once

// Up to cap bytes of dir/name; nullopt if it cannot be opened or read.
std::optional<std::string> read_at(int dir, const char* name, size_t cap) {
  int fd = openat(dir, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[16384];
  while (out.size() < cap) {
    ssize_t got = read(fd, buf, std::min(sizeof(buf), cap - out.size()));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      close(fd);
      return std::nullopt;
    }
    if (got == 0) break;
    out.append(buf, size_t(got));
  }
  close(fd);
  return out;
}

std::optional<std::string> link_at(int dir, const char* name) {
  char buf[4096];
  ssize_t n = readlinkat(dir, name, buf, sizeof(buf));
  if (n <= 0 || size_t(n) == sizeof(buf)) return std::nullopt;  // failed or cut
  return std::string(buf, size_t(n));
}

// The pids of cgroup.procs, whole lines only (a cut last line is dropped).
std::optional<std::set<int>> read_procs(int dir) {
  auto text = read_at(dir, "cgroup.procs", kProcsCap);
  if (!text) return std::nullopt;
  std::set<int> pids;
  for (size_t start = 0, nl; (nl = text->find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string line = text->substr(start, nl - start);
    if (line.empty() || line.size() > 9 || line.find_first_not_of("0123456789") != std::string::npos) continue;
    int pid = std::atoi(line.c_str());
    if (pid > 0) pids.insert(pid);
  }
  return pids;
}

// The process behind an open /proc/PID, or nullopt if it is gone.
std::optional<ProcessInfo> describe(int proc, int pid, size_t& argv_budget) {
  ProcessInfo p;
  p.pid = pid;
  // "PID (COMM) S PPID ...": comm may hold ')' and spaces; the fields
  // start after the last ')'.
  auto stat = read_at(proc, "stat", 4096);
  if (!stat) return std::nullopt;
  size_t open = stat->find('('), close = stat->rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  p.comm = stat->substr(open + 1, close - open - 1);
  char state = 0;
  if (sscanf(stat->c_str() + close + 1, " %c %d", &state, &p.ppid) != 2) return std::nullopt;

  auto status = read_at(proc, "status", 64 << 10);
  if (!status) return std::nullopt;
  size_t at = status->starts_with("Uid:") ? 0 : status->find("\nUid:");
  if (at == std::string::npos) return std::nullopt;
  const char* uid = status->c_str() + at + (at ? 5 : 4);
  char* end = nullptr;
  errno = 0;
  unsigned long v = strtoul(uid, &end, 10);
  if (end == uid || errno || v > UINT32_MAX) return std::nullopt;
  p.uid = uint32_t(v);

  // Kernel threads have no exe; another user's process may refuse us.
  if (auto exe = link_at(proc, "exe")) p.exe = *exe;
  else p.exe_unreadable = true;
  p.cwd = link_at(proc, "cwd").value_or("");
  // The command lines all the processes listed may hold together: a
  // process that execs with 1 MiB of argv and forks thousands of times
  // does not make the recorder hold and write gigabytes.
  if (argv_budget == 0) {
    p.argv_left_out = true;
    return p;
  }
  size_t want = std::min(kCmdlineCap, argv_budget);
  std::string cmdline = read_at(proc, "cmdline", want).value_or("");
  if (cmdline.size() >= want && want < kCmdlineCap) {  // cut by the budget, not by the cap: left out whole
    argv_budget = 0;
    p.argv_left_out = true;
    return p;
  }
  argv_budget -= std::min(argv_budget, cmdline.size() + 1);
  for (size_t start = 0; start < cmdline.size();) {
    size_t nul = cmdline.find('\0', start);
    if (nul == std::string::npos) nul = cmdline.size();  // cut, or argv rewritten without NULs
    p.argv.push_back(cmdline.substr(start, nul - start));
    start = nul + 1;
  }
  return p;
}

void collect(int dir, int depth, int exclude_pid, size_t& argv_budget, std::map<int, ProcessInfo>& out) {
  auto pids = read_procs(dir);
  if (!pids) return;  // removed meanwhile
  // A pid read from cgroup.procs may be reused by another process before
  // /proc/PID is opened. So: open, then read cgroup.procs again; one still
  // listed there is this cgroup's, and so is the process behind the open
  // directory if it can still be read afterwards (a pid is not reused
  // while its process, even a zombie, holds it).
  std::vector<int> todo(pids->begin(), pids->end());
  for (size_t from = 0; from < todo.size(); from += kBatch) {
    std::vector<std::pair<int, int>> opened;  // pid, fd
    for (size_t i = from; i < todo.size() && i < from + kBatch; ++i) {
      int pid = todo[i];
      if (pid == exclude_pid || out.count(pid)) continue;
      int fd = open(("/proc/" + std::to_string(pid)).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd >= 0) opened.emplace_back(pid, fd);
    }
    auto again = read_procs(dir);
    for (auto [pid, fd] : opened) {
      if (again && again->count(pid))
        if (auto p = describe(fd, pid, argv_budget)) out.emplace(pid, std::move(*p));
      close(fd);
    }
  }
  if (depth >= kMaxDepth) return;
  int copy = dup(dir);
  if (copy < 0) return;
  DIR* d = fdopendir(copy);
  if (!d) {
    close(copy);
    return;
  }
  while (dirent* e = readdir(d)) {
    if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) continue;
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    // O_NOFOLLOW: a symlink is not descended into, whatever d_type said.
    int sub = openat(dir, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) continue;
    collect(sub, depth + 1, exclude_pid, argv_budget, out);
    close(sub);
  }
  closedir(d);
}

}  // namespace

std::vector<ProcessInfo> snapshot_cgroups(const std::vector<std::string>& cgroup_dirs, int exclude_pid,
                                          size_t argv_budget) {
  std::map<int, ProcessInfo> found;  // by pid: sorted, and once each (nested or repeated cgroups too)
  for (const auto& cgroup_dir : cgroup_dirs) {
    int dir = open(cgroup_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) throw Error(errno_message("cannot open cgroup " + cgroup_dir, errno));
    if (faccessat(dir, "cgroup.procs", R_OK, 0) != 0) {
      int err = errno;
      close(dir);
      throw Error(errno_message("cannot read " + cgroup_dir + "/cgroup.procs", err));
    }
    collect(dir, 0, exclude_pid, argv_budget, found);
    close(dir);
  }
  std::vector<ProcessInfo> out;
  out.reserve(found.size());
  for (auto& [pid, p] : found) out.push_back(std::move(p));
  return out;
}

std::vector<ProcessInfo> snapshot_cgroup(const std::string& cgroup_dir, int exclude_pid) {
  return snapshot_cgroups({cgroup_dir}, exclude_pid);
}

}  // namespace flightrec::session
