// ProcessHolder stops a process for a moment without anyone seeing it: the
// held process's parent is told of no stop, a signal sent meanwhile is
// delivered after, and the process goes on where it was.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/process_hold.h"
#include "common/system.h"

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
  // The test is the held process's parent, and waits for it as flightrec
  // waits for its command (and a shell's job control for its jobs).
  int child_out[2];
  REQUIRE(pipe2(child_out, O_NONBLOCK) == 0);
  flightrec::ProcessHolder holder;
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    g_out = child_out[1];
    signal(SIGUSR1, on_usr1);
    for (;;) {  // busy, as a program starting up is
      char c = 'r';
      (void)!write(child_out[1], &c, 1);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  REQUIRE(read_byte(child_out[0], 2000) == 'r');  // running
  int status = 0;
  CHECK(holder.hold(child) == 1);
  CHECK(state_of(child) == 't');  // a ptrace stop
  CHECK(waitpid(child, &status, WNOHANG | WUNTRACED) == 0);  // its parent is told of nothing
  char drained;
  while (read(child_out[0], &drained, 1) == 1) {
  }
  kill(child, SIGUSR1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(read_byte(child_out[0], 10) == 0);  // nothing while held: not even the handler
  CHECK(state_of(child) == 't');
  holder.release();
  // Let go: the signal's handler runs, and it goes on.
  bool handled = false, running = false;
  for (int i = 0; i < 200 && !(handled && running); ++i) {
    char c = read_byte(child_out[0], 10);
    handled |= c == 'u';
    running |= c == 'r';
  }
  CHECK(handled);
  CHECK(running);
  CHECK(waitpid(child, &status, WNOHANG | WUNTRACED) == 0);
  kill(child, SIGKILL);
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  close(child_out[0]);
  close(child_out[1]);
}

namespace {

pid_t pausing_child(bool with_a_thread) {
  pid_t child = fork();
  if (child == 0) {
    if (with_a_thread) std::thread([] { pause(); }).detach();
    pause();
    _exit(0);
  }
  return child;
}

// Waits up to 2 s for child's end, as its parent: whether it was heard of.
bool heard_end(pid_t child) {
  for (int i = 0; i < 200; ++i) {
    int status;
    if (waitpid(child, &status, WNOHANG) == child) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

TEST_CASE("process hold: not held when gone, traced already, or with more than one thread; a held process killed is heard of") {
  flightrec::ProcessHolder holder;
  CHECK(holder.hold(999999999) == 0);
  pid_t traced = pausing_child(false);
  REQUIRE(traced > 0);
  REQUIRE(ptrace(PTRACE_SEIZE, traced, nullptr, nullptr) == 0);  // another tracer: this test
  CHECK(holder.hold(traced) == 0);
  kill(traced, SIGKILL);
  waitpid(traced, nullptr, 0);
  pid_t threaded = pausing_child(true);
  REQUIRE(threaded > 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // its second thread made
  CHECK(holder.hold(threaded) == 0);
  CHECK(state_of(threaded) == 'S');
  kill(threaded, SIGKILL);
  CHECK(heard_end(threaded));
  // Killed while held: the helper reaps its tracee's end, so its parent
  // hears of it then, not at the release.
  pid_t killed = pausing_child(false);
  REQUIRE(killed > 0);
  CHECK(holder.hold(killed) == 1);
  kill(killed, SIGKILL);
  CHECK(heard_end(killed));
  holder.release();
}

TEST_CASE("process hold: what is held is let go when the holder ends") {
  pid_t child = pausing_child(false);
  REQUIRE(child > 0);
  {
    flightrec::ProcessHolder holder;
    CHECK(holder.hold(child) == 1);
    CHECK(state_of(child) == 't');
  }
  bool paused = false;  // in pause() again, once it runs
  for (int i = 0; i < 200 && !paused; ++i) {
    paused = state_of(child) == 'S';
    if (!paused) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(paused);
  kill(child, SIGKILL);
  CHECK(heard_end(child));
}

TEST_CASE("proc_stat_fields: the fields after a name that holds ') ' and spaces; nullopt for a task gone") {
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    prctl(PR_SET_NAME, "a) b c) d", 0, 0, 0);
    pause();
    _exit(0);
  }
  std::optional<std::vector<std::string>> fields;
  for (int i = 0; i < 200; ++i) {  // once its name is set
    fields = flightrec::proc_stat_fields(child);
    std::ifstream comm("/proc/" + std::to_string(child) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name == "a) b c) d") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fields = flightrec::proc_stat_fields(child);
  REQUIRE(fields);
  REQUIRE(fields->size() > 22 - 3);
  CHECK((*fields)[0].size() == 1);                          // state
  CHECK((*fields)[1] == std::to_string(getpid()));          // ppid
  CHECK(std::stoll((*fields)[22 - 3]) > 0);                 // starttime
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  CHECK(!flightrec::proc_stat_fields(child));
}

TEST_CASE("make_private_dirs: each missing part made 0700, an existing one left; a file in the way is an error") {
  char tmpl[] = "/tmp/flightrec-unit-XXXXXX";
  std::string base = mkdtemp(tmpl);
  std::string deep = base + "/a/b/c";
  flightrec::make_private_dirs(deep);
  struct stat st {};
  REQUIRE(stat(deep.c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK((st.st_mode & 07777) == 0700);
  flightrec::make_private_dirs(deep);  // again: nothing to do
  std::ofstream(base + "/file") << "x";
  CHECK_THROWS_AS(flightrec::make_private_dirs(base + "/file"), flightrec::Error);
  CHECK_THROWS_AS(flightrec::make_private_dirs(base + "/file/below"), flightrec::Error);
  std::filesystem::remove_all(base);
}
