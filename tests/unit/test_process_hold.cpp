// ProcessHold stops a process for a moment without anyone seeing it: the
// held process's parent is told of no stop, a signal sent meanwhile is
// delivered after, and the process goes on where it was.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "common/process_hold.h"

namespace {

// The one-letter state of a thread, from /proc (e.g. R, S, t).
char state_of(pid_t tid) {
  std::ifstream status("/proc/" + std::to_string(tid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("State:", 0) == 0) return line.size() > 7 ? line[7] : '?';
  return '?';
}

// A byte from fd, or 0 after timeout_ms without one.
char read_byte(int fd, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 10) {
    char c;
    if (read(fd, &c, 1) == 1) return c;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

int g_out = -1;
void on_usr1(int) {
  char c = 'u';
  (void)!write(g_out, &c, 1);
}

}  // namespace

TEST_CASE("process hold: the held process stops, its parent sees no stop, a signal sent meanwhile comes after") {
  // The test is the tracer; a parent of its own watches the held child with
  // waitpid(WUNTRACED), as a shell's job control would, and says 's' for a stop.
  int child_pid_pipe[2], child_out[2], parent_out[2];
  REQUIRE(pipe(child_pid_pipe) == 0);
  REQUIRE(pipe2(child_out, O_NONBLOCK) == 0);
  REQUIRE(pipe2(parent_out, O_NONBLOCK) == 0);
  pid_t parent = fork();
  REQUIRE(parent >= 0);
  if (parent == 0) {
    pid_t child = fork();
    if (child == 0) {
      g_out = child_out[1];
      signal(SIGUSR1, on_usr1);
      for (;;) {  // busy, as a program starting up is
        char c = 'r';
        (void)!write(child_out[1], &c, 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    (void)!write(child_pid_pipe[1], &child, sizeof(child));
    int status;
    while (waitpid(child, &status, WUNTRACED) == child) {
      char c = WIFSTOPPED(status) ? 's' : 'x';
      (void)!write(parent_out[1], &c, 1);
      if (!WIFSTOPPED(status)) _exit(0);
    }
    _exit(0);
  }
  pid_t child = 0;
  REQUIRE(read(child_pid_pipe[0], &child, sizeof(child)) == sizeof(child));
  REQUIRE(read_byte(child_out[0], 2000) == 'r');  // running
  {
    flightrec::ProcessHold hold(child);
    CHECK(hold.threads_held() == 1);
    CHECK(state_of(child) == 't');  // a ptrace stop
    char drained;
    while (read(child_out[0], &drained, 1) == 1) {
    }
    kill(child, SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK(read_byte(child_out[0], 10) == 0);  // nothing while held: not even the handler
    CHECK(state_of(child) == 't');
  }
  // Let go: the signal's handler runs, and it goes on.
  bool handled = false, running = false;
  for (int i = 0; i < 200 && !(handled && running); ++i) {
    char c = read_byte(child_out[0], 10);
    handled |= c == 'u';
    running |= c == 'r';
  }
  CHECK(handled);
  CHECK(running);
  CHECK(read_byte(parent_out[0], 100) == 0);  // its parent was told of no stop
  kill(child, SIGKILL);
  CHECK(read_byte(parent_out[0], 2000) == 'x');  // (and does see its end)
  waitpid(parent, nullptr, 0);
  for (int fd : {child_pid_pipe[0], child_pid_pipe[1], child_out[0], child_out[1], parent_out[0], parent_out[1]}) close(fd);
}

TEST_CASE("process hold: a process that is gone, or already traced, is not held") {
  flightrec::ProcessHold none(999999999);
  CHECK(none.threads_held() == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  REQUIRE(ptrace(PTRACE_SEIZE, child, nullptr, nullptr) == 0);  // another tracer: this thread
  std::thread other([&] {
    flightrec::ProcessHold refused(child);  // a second tracer is refused by the kernel
    CHECK(refused.threads_held() == 0);
  });
  other.join();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}
