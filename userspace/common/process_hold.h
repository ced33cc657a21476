#pragma once
// Holds a process still for a moment, invisibly to it and its parent: each
// of its threads is seized and interrupted with ptrace (a ptrace-stop, not
// a group stop: the parent's waitpid sees nothing, a shell's job control
// neither), and let go as it was when the hold ends. Where the kernel
// refuses (another tracer, Yama's ptrace_scope 3), nothing is held. Should
// flightrec die meanwhile, the kernel lets the process go. Use it on one
// thread: the one that made it is the tracer.
#include <sys/types.h>

#include <vector>

namespace flightrec {

class ProcessHold {
 public:
  explicit ProcessHold(pid_t pid);
  ~ProcessHold();  // lets every held thread go
  ProcessHold(const ProcessHold&) = delete;
  ProcessHold& operator=(const ProcessHold&) = delete;
  size_t threads_held() const { return held_.size(); }

 private:
  struct Held {
    pid_t tid;
    int signal;  // a signal stopped on its way in: given back at release
  };
  std::vector<Held> held_;
};

}  // namespace flightrec
