#include "probe/brake.h"

#include <bpf/bpf.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "common/system.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::probe {
namespace {

// Whether pid is the process that started at start_boottime_ns: /proc's
// starttime (field 22, clock ticks since boot) is task->start_boottime.
bool started_at(pid_t pid, uint64_t start_boottime_ns) {
  auto fields = proc_stat_fields(pid);
  if (!fields || fields->size() <= 22 - 3) return false;
  uint64_t tick_ns = 1'000'000'000ull / uint64_t(sysconf(_SC_CLK_TCK));
  return std::strtoull((*fields)[22 - 3].c_str(), nullptr, 10) == start_boottime_ns / tick_ns;
}

}  // namespace

size_t continue_braked(int braked_map_fd) {
  std::vector<std::pair<uint32_t, fr_braked>> stopped;
  uint32_t key = 0, next = 0;
  void* prev = nullptr;
  while (bpf_map_get_next_key(braked_map_fd, prev, &next) == 0 && stopped.size() < FR_BRAKED_MAX) {
    fr_braked b{};
    if (bpf_map_lookup_elem(braked_map_fd, &next, &b) == 0) stopped.emplace_back(next, b);
    key = next;
    prev = &key;
  }
  size_t continued = 0;
  for (const auto& [tgid, b] : stopped) {
    // Forgotten first: a process the kernel stops again from now on is
    // noted again, and continued next time.
    bpf_map_delete_elem(braked_map_fd, &tgid);
    UniqueFd pidfd(int(syscall(SYS_pidfd_open, pid_t(tgid), 0)));
    if (pidfd.get() < 0 || !started_at(pid_t(tgid), b.start_boottime)) continue;  // gone, or its pid reused
    if (syscall(SYS_pidfd_send_signal, pidfd.get(), SIGCONT, nullptr, 0) == 0) ++continued;
  }
  return continued;
}

}  // namespace flightrec::probe
