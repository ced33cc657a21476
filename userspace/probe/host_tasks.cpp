#include "probe/host_tasks.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::probe {

int task_pidfd(int tid) {
  int fd = int(syscall(SYS_pidfd_open, tid, kPidfdThread));
  return fd >= 0 ? fd : int(syscall(SYS_pidfd_open, tid, 0));
}

// The sessions the tasks on the host hold, by one walk of /proc (a thread's
// state is keyed by its pidfd in fr_tasks); nullopt when one could not be
// told. PIDFD_THREAD (6.9+) opens any thread; before it only a process
// (its leader) can be: the leader's session stands for its threads, and a
// process whose leader holds none while other threads live cannot be told
// (its leader may have left with pthread_exit, its threads still recorded).
std::optional<std::set<uint32_t>> sessions_of_host_tasks(int map) {
  DIR* procs = opendir("/proc");
  if (!procs) return std::nullopt;
  std::set<uint32_t> seen;
  bool unknown = false;
  auto lookup = [&](int fd) {
    fr_task_state st{};
    bool found = bpf_map_lookup_elem(map, &fd, &st) == 0;
    if (found) seen.insert(st.session);
    close(fd);
    return found;
  };
  while (dirent* p = readdir(procs)) {
    if (unknown) break;
    if (p->d_name[0] < '1' || p->d_name[0] > '9') continue;
    pid_t pid = pid_t(strtol(p->d_name, nullptr, 10));
    DIR* threads = opendir(("/proc/" + std::string(p->d_name) + "/task").c_str());
    if (!threads) continue;
    size_t count = 0;
    bool by_leader = false;
    while (dirent* t = readdir(threads)) {
      if (t->d_name[0] < '1' || t->d_name[0] > '9') continue;
      ++count;
      if (by_leader) continue;
      int fd = int(syscall(SYS_pidfd_open, pid_t(strtol(t->d_name, nullptr, 10)), kPidfdThread));
      if (fd >= 0) {
        lookup(fd);
      } else if (errno == EINVAL) {
        by_leader = true;  // no PIDFD_THREAD on this kernel
      }  // else gone meanwhile
    }
    closedir(threads);
    if (by_leader) {
      int fd = int(syscall(SYS_pidfd_open, pid, 0));
      if (fd >= 0 && !lookup(fd) && count > 1) unknown = true;
    }
  }
  closedir(procs);
  if (unknown) return std::nullopt;
  return seen;
}

}  // namespace flightrec::probe

static_assert(flightrec::probe::kPidfdThread == O_EXCL, "PIDFD_THREAD is O_EXCL");
