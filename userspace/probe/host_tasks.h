#pragma once
// Which sessions the tasks on the host hold, by one walk of /proc: what
// settles a session's task count when it stays above zero with no task of
// the session left (probe/capture.h, session_has_tasks).
#include <cstdint>
#include <optional>
#include <set>

namespace flightrec::probe {

// include/uapi/linux/pidfd.h: pidfd_open(tid, PIDFD_THREAD) opens any
// thread (6.9+); before it, EINVAL, and only a process (its leader) opens.
constexpr unsigned kPidfdThread = 0x80;  // O_EXCL

// A pidfd of the thread, the key of fr_tasks: PIDFD_THREAD (6.9+), else the
// process's (a leader, on older kernels; -1 for another thread there).
int task_pidfd(int tid);

// fr_tasks_map: the programs' task storage (keyed by pidfd). nullopt when
// some task's session could not be told: then no session is known empty.
std::optional<std::set<uint32_t>> sessions_of_host_tasks(int fr_tasks_map);

}  // namespace flightrec::probe
