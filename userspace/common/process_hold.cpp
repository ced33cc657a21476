#include "common/process_hold.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "common/error.h"
#include "common/system.h"

namespace flightrec {
namespace {

// One thread at most: a program just exec'd has one, and a process with
// others could exec from one of them meanwhile, which waits for the held
// ones to be reaped while it keeps ptrace attaches out (the kernel's
// cred_guard_mutex): only this helper's wait loop, never blocked, reaps.
struct Tracee {
  pid_t tid = 0;     // 0: none
  bool stopped = false;
  bool letting_go = false;  // released before it stopped: let go as it stops
  int signal = 0;    // a signal stopped on its way in: given back at release
};

// "/proc/PID/task" into buf, without the allocator (the helper is forked
// from a process with threads).
void task_dir(pid_t pid, char* buf) {
  char digits[16];
  int n = 0;
  for (unsigned v = unsigned(pid); n == 0 || v; v /= 10) digits[n++] = char('0' + v % 10);
  char* p = buf;
  for (const char* h = "/proc/"; *h; ++h) *p++ = *h;
  while (n) *p++ = digits[--n];
  for (const char* t = "/task"; *t; ++t) *p++ = *t;
  *p = 0;
}

// The threads of pid (at most 2 read: enough to tell one from more).
int threads_of(pid_t pid, pid_t* first) {
  char path[64];
  task_dir(pid, path);
  int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return 0;
  int count = 0;
  alignas(8) char buf[4096];
  long got;
  while (count < 2 && (got = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0)
    for (long at = 0; at < got && count < 2;) {
      // struct linux_dirent64: d_ino, d_off, d_reclen, d_type, d_name.
      uint16_t reclen;
      __builtin_memcpy(&reclen, buf + at + 16, sizeof(reclen));
      const char* name = buf + at + 19;
      at += reclen;
      if (name[0] < '0' || name[0] > '9') continue;
      pid_t tid = 0;
      for (const char* c = name; *c >= '0' && *c <= '9'; ++c) tid = tid * 10 + (*c - '0');
      if (count++ == 0) *first = tid;
    }
  close(dir);
  return count;
}

void let_go(Tracee& t) {
  // A tracee killed meanwhile cannot be let go: its end is reaped by
  // take_events(), and only then does its parent hear of it.
  if (ptrace(PTRACE_DETACH, t.tid, nullptr, reinterpret_cast<void*>(static_cast<long>(t.signal))) == 0) t = {};
  else t.letting_go = true;
}

// What the tracee did since: stopped (the interrupt, a group stop, or a
// signal on its way in), or ended (reaped here, so its parent hears).
void take_events(Tracee& t) {
  int status;
  pid_t w;
  while (t.tid && (w = waitpid(-1, &status, __WALL | WNOHANG)) > 0) {
    if (w != t.tid) continue;  // not ours any more (a tracee let go, reaped late)
    if (!WIFSTOPPED(status)) {
      t = {};
      return;
    }
    t.stopped = true;
    // The interrupt's stop is a PTRACE_EVENT_STOP (so is a group stop,
    // which goes on after the release); with no event it is a signal's
    // delivery, given back.
    t.signal = (status >> 16) == 0 ? WSTOPSIG(status) : 0;
    if (t.letting_go) let_go(t);
  }
}

// Holds pid's one thread, up to 200 ms for it to stop; whether it stopped.
bool hold_one(pid_t pid, Tracee& t) {
  pid_t tid = 0;
  if (threads_of(pid, &tid) != 1 || tid != pid) return false;
  if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) return false;  // refused, or gone
  t = {tid, false, false, 0};
  if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) {
    t.letting_go = true;  // let go once it stops, or reaped
    return false;
  }
  for (int waited = 0; waited < 200 && t.tid && !t.stopped; ++waited) {
    take_events(t);
    if (t.tid && !t.stopped) usleep(1000);
  }
  // Stopped, and still its only thread (one made before the stop runs on).
  if (t.tid && t.stopped && threads_of(pid, &tid) == 1) return true;
  if (t.tid && t.stopped) let_go(t);
  else if (t.tid) t.letting_go = true;  // not stopped yet (a slow wait in the kernel): let go as it stops
  return false;
}

// The helper: a pid to hold, or 0 to let go; answers 1 when held, else 0.
// Between requests it keeps reaping and letting go (every 5 ms).
[[noreturn]] void serve(int sock) {
  Tracee t;
  for (;;) {
    pollfd p{sock, POLLIN, 0};
    int ready = poll(&p, 1, t.tid ? 5 : -1);
    take_events(t);
    if (ready <= 0) continue;
    int32_t pid;
    if (read(sock, &pid, sizeof(pid)) != ssize_t(sizeof(pid))) _exit(0);  // flightrec is gone
    if (t.tid && !t.letting_go) {
      if (t.stopped) let_go(t);
      else t.letting_go = true;
    }
    int32_t answer = 0;
    if (pid > 0 && !t.tid) answer = hold_one(pid, t) ? 1 : 0;
    if (send(sock, &answer, sizeof(answer), MSG_NOSIGNAL) != ssize_t(sizeof(answer))) _exit(0);
  }
}

}  // namespace

ProcessHolder::ProcessHolder() {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    throw Error(errno_message("process hold: socketpair", errno));
  pid_t parent = getpid();
  helper_ = fork();
  if (helper_ < 0) {
    int err = errno;
    close(pair[0]);
    close(pair[1]);
    throw Error(errno_message("process hold: fork", err));
  }
  if (helper_ == 0) {
    // Syscalls only from here: the parent has threads. It dies with
    // flightrec, and holds none of flightrec's descriptors (a pipe's reader
    // waiting for its end must not wait for this process).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
    dup2(pair[1], 3);
    syscall(SYS_close_range, 4u, ~0u, 0u);
    serve(3);
  }
  close(pair[1]);
  sock_ = pair[0];
}

ProcessHolder::~ProcessHolder() {
  close(sock_);  // the helper reads its end, lets go and exits
  waitpid(helper_, nullptr, 0);
}

size_t ProcessHolder::ask(pid_t pid) {
  int32_t msg = pid, answer = 0;
  // A helper gone (killed) holds nothing: the kernel let go of its tracees.
  if (send(sock_, &msg, sizeof(msg), MSG_NOSIGNAL) != ssize_t(sizeof(msg))) return 0;
  if (read(sock_, &answer, sizeof(answer)) != ssize_t(sizeof(answer))) return 0;
  return size_t(answer);
}

size_t ProcessHolder::hold(pid_t pid) { return pid > 0 ? ask(pid) : 0; }

void ProcessHolder::release() { ask(0); }

}  // namespace flightrec
