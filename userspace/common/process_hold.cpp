#include "common/process_hold.h"

#include <dirent.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace flightrec {

ProcessHold::ProcessHold(pid_t pid) {
  // The threads there now (a program that has just exec'd has one). A
  // thread made meanwhile runs on: bounded, best effort.
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* tasks = opendir(dir.c_str());
  if (!tasks) return;
  for (int n = 0; n < 256;) {
    dirent* d = readdir(tasks);
    if (!d) break;
    if (d->d_name[0] == '.') continue;
    ++n;
    pid_t tid = pid_t(std::atoi(d->d_name));
    if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) continue;  // refused, or gone
    if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) {
      ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
      continue;
    }
    // Until it stops: the interrupt's stop, a signal on its way in (kept,
    // to be given back), or its end.
    int status = 0;
    pid_t got;
    while ((got = waitpid(tid, &status, __WALL)) < 0 && errno == EINTR) {
    }
    if (got != tid || !WIFSTOPPED(status)) continue;  // exited: nothing to let go
    // The interrupt's stop is a PTRACE_EVENT_STOP (so is a group stop, which
    // goes on after the release); with no event it is a signal's delivery.
    bool delivery = (status >> 16) == 0;
    held_.push_back({tid, delivery ? WSTOPSIG(status) : 0});
  }
  closedir(tasks);
}

ProcessHold::~ProcessHold() {
  for (const auto& h : held_)
    ptrace(PTRACE_DETACH, h.tid, nullptr, reinterpret_cast<void*>(static_cast<long>(h.signal)));
}

}  // namespace flightrec
