#pragma once
// Holds a process of one thread (one that has just exec'd) still for a
// moment, invisibly to it and its parent: it is seized and interrupted with
// ptrace (a ptrace-stop, not a group stop: the parent's waitpid sees
// nothing, a shell's job control neither), and let go as it was, a signal
// that came meanwhile given back. Nothing is held where the process has
// more threads (one could exec meanwhile: the kernel then waits for the
// held one), where it does not stop within 200 ms, or where the kernel
// refuses (another tracer, Yama's ptrace_scope 3). A held process killed
// meanwhile is reaped by the helper at once, so its parent hears of it.
//
// The tracer is a helper process of its own, forked once: a tracee's stops
// are reported to every thread of its tracer's process, so a waitpid()
// elsewhere in flightrec (the command's first process is its child) would
// take them. It ends with flightrec, and the kernel then lets go whatever
// it held.
#include <sys/types.h>

#include <cstddef>

namespace flightrec {

class ProcessHolder {
 public:
  ProcessHolder();   // forks the helper; throws Error when it cannot
  ~ProcessHolder();  // the helper ends, letting go what it held
  ProcessHolder(const ProcessHolder&) = delete;
  ProcessHolder& operator=(const ProcessHolder&) = delete;
  // Holds process pid: 1 when held, else 0. What an earlier hold() held
  // is let go first.
  size_t hold(pid_t pid);
  void release();  // lets go what hold() held

 private:
  size_t ask(pid_t pid);  // 0: release
  int sock_ = -1;
  pid_t helper_ = -1;
};

}  // namespace flightrec
