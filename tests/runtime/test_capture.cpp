// The capture itself, on the real kernel: sessions whose records go to a
// ring buffer of their own (what a `flightrec run` handed to flightrecd
// reads) next to sessions on the capture's ring; sys_enter attached only
// while a session asks for it.
#include <doctest/doctest.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "probe/capture.h"
#include "probe/ring_reader.h"
#include "runtime/harness.h"

namespace {

struct Seen {
  std::set<uint32_t> sessions;
  std::set<uint32_t> pids;
  std::set<uint16_t> types;
  size_t count = 0;
  // Syscall records per pid: with an entry time, and read at the return alone.
  std::map<uint32_t, size_t> entered, at_exit, blocked;
  std::map<uint32_t, size_t> by_other_threads;  // records of a process's threads but its leader
  void add(const void* data, size_t size) {
    REQUIRE(size >= sizeof(fr_header));
    const auto* h = static_cast<const fr_header*>(data);
    sessions.insert(h->session);
    pids.insert(h->pid);
    types.insert(h->type);
    if (h->type == FR_REC_SYSCALL && size >= sizeof(fr_syscall)) {
      const auto* sc = static_cast<const fr_syscall*>(data);
      ++(sc->enter_ns ? entered : at_exit)[h->pid];
      if (sc->flags & FR_SC_BLOCKED) ++blocked[h->pid];
    }
    if (h->tid != h->pid) ++by_other_threads[h->pid];
    ++count;
  }
};

// How many BPF links attach a program of this name to a raw tracepoint
// (tp_btf programs' links are of that kind), host-wide.
int links_of(const std::string& prog_name) {
  int n = 0;
  for (uint32_t id = 0; bpf_link_get_next_id(id, &id) == 0;) {
    int fd = bpf_link_get_fd_by_id(id);
    if (fd < 0) continue;
    bpf_link_info link{};
    uint32_t len = sizeof(link);
    if (bpf_obj_get_info_by_fd(fd, &link, &len) == 0) {
      int prog = bpf_prog_get_fd_by_id(link.prog_id);
      bpf_prog_info info{};
      uint32_t plen = sizeof(info);
      if (prog >= 0 && bpf_obj_get_info_by_fd(prog, &info, &plen) == 0 && prog_name == info.name) ++n;
      if (prog >= 0) close(prog);
    }
    close(fd);
  }
  return n;
}

// A cgroup v2 directory for one test, removed at the end.
struct TestCgroup {
  std::string path;
  explicit TestCgroup(const std::string& name)
      : path(rt::cgroup2_root() + "/flightrec-test-" + name + "-" + std::to_string(getpid())) {
    REQUIRE(mkdir(path.c_str(), 0755) == 0);
  }
  ~TestCgroup() { rmdir(path.c_str()); }
  uint64_t id() const {
    struct stat st {};
    REQUIRE(stat(path.c_str(), &st) == 0);
    return st.st_ino;
  }
  // Runs argv in the cgroup to its end; returns its pid. cloned_into:
  // the child starts there (clone3's CLONE_INTO_CGROUP), not moved there.
  pid_t run(std::vector<std::string> argv, bool cloned_into = false) const {
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_t pid;
    if (cloned_into) {
      int dir = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      REQUIRE(dir >= 0);
      clone_args ca{};
      ca.flags = CLONE_INTO_CGROUP;
      ca.exit_signal = SIGCHLD;
      ca.cgroup = uint64_t(dir);
      pid = pid_t(syscall(SYS_clone3, &ca, sizeof(ca)));
      if (pid == 0) {
        execv(args[0], args.data());
        _exit(127);
      }
      close(dir);
    } else {
      pid = fork();
      if (pid == 0) {
        std::ofstream(path + "/cgroup.procs") << getpid() << std::endl;
        execv(args[0], args.data());
        _exit(127);
      }
    }
    REQUIRE(pid >= 0);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    return pid;
  }
};

uint64_t sum(const std::vector<uint64_t>& v) {
  uint64_t n = 0;
  for (uint64_t x : v) n += x;
  return n;
}

}  // namespace

TEST_CASE("capture: a session with a ring buffer of its own gets all its records there, and the other rings none" * doctest::test_suite("vm-kernel")) {
  if (!rt::is_root() || rt::cgroup2_root().empty()) {
    MESSAGE("skipped: needs root and cgroup v2");
    return;
  }
  using flightrec::probe::Capture;
  using flightrec::probe::CaptureOptions;
  using flightrec::probe::RingReader;
  TestCgroup shared_cg("shared-ring"), own_cg("own-ring");
  CaptureOptions opts;
  opts.ring_bytes = 4u << 20;
  Seen on_shared, on_own;
  Capture capture(opts, [&](const void* d, size_t n) { on_shared.add(d, n); });
  uint32_t shared = capture.open_session({shared_cg.id()});
  constexpr size_t kOwnBytes = 1u << 20;
  uint32_t own = capture.open_session({own_cg.id()}, {.own_ring_bytes = kOwnBytes});
  CHECK(capture.session_ring(shared) == -1);
  int own_fd = capture.session_ring(own);
  REQUIRE(own_fd >= 0);
  RingReader own_ring(own_fd, kOwnBytes);
  auto read_own = [&] {
    while (own_ring.consume(1 << 16, [&](const void* d, size_t n) { on_own.add(d, n); }) > 0) {
    }
  };
  uint64_t shared_drops = sum(capture.drops_per_cpu());

  pid_t in_shared = shared_cg.run({"/bin/true"});
  pid_t in_own = own_cg.run({"/bin/echo", "own"});
  capture.drain_to_now();
  read_own();

  CHECK(on_own.count > 0);
  CHECK(on_own.sessions == std::set<uint32_t>{own});
  CHECK(on_own.pids.count(uint32_t(in_own)) == 1);
  CHECK(on_own.pids.count(uint32_t(in_shared)) == 0);
  CHECK(on_own.types.count(FR_REC_EXEC) == 1);
  CHECK(on_own.types.count(FR_REC_SYSCALL) == 1);
  CHECK(on_shared.sessions == std::set<uint32_t>{shared});
  CHECK(on_shared.pids.count(uint32_t(in_shared)) == 1);
  CHECK(on_shared.pids.count(uint32_t(in_own)) == 0);
  CHECK(sum(capture.session_drops(own)) == 0);

  // More than the ring holds, unread: the losses are the session's own,
  // not the shared ring's.
  size_t before = on_own.count;
  own_cg.run({"/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=40000", "status=none"});
  uint64_t lost = sum(capture.session_drops(own));
  read_own();
  INFO("own ring: " << on_own.count - before << " records read, " << lost << " lost");
  CHECK(lost > 0);
  CHECK(on_own.count - before > 1000);
  CHECK(sum(capture.drops_per_cpu()) == shared_drops);
  CHECK(sum(capture.session_drops(shared)) == 0);
  capture.drain_to_now();
  CHECK(on_shared.sessions == std::set<uint32_t>{shared});

  capture.close_session(own);
  CHECK(capture.session_ring(own) == -1);
  CHECK(sum(capture.session_drops(own)) == lost);  // until its slot is given again
}

TEST_CASE("capture: a one-session capture records its session in its one slot, and refuses another" * doctest::test_suite("vm-kernel")) {
  if (!rt::is_root() || rt::cgroup2_root().empty()) {
    MESSAGE("skipped: needs root and cgroup v2");
    return;
  }
  using flightrec::probe::Capture;
  using flightrec::probe::CaptureOptions;
  TestCgroup cg("one-slot"), other("one-slot-other");
  CaptureOptions opts;
  opts.ring_bytes = 1u << 20;
  opts.session_slots = 2;  // as run and watch make theirs
  Seen seen;
  Capture capture(opts, [&](const void* d, size_t n) { seen.add(d, n); });
  uint32_t session = capture.open_first_session({cg.id()});
  CHECK(session == 1);
  pid_t pid = cg.run({"/bin/echo", "one"});
  capture.drain_to_now();
  CHECK(seen.sessions == std::set<uint32_t>{session});
  CHECK(seen.pids.count(uint32_t(pid)) == 1);
  CHECK(seen.types.count(FR_REC_EXEC) == 1);
  CHECK(capture.session_drops(session).size() > 0);  // its slot's counters read
  std::string why;
  try {
    capture.open_session({other.id()});
  } catch (const std::exception& e) {
    why = e.what();
  }
  CHECK(why.find("records one session only") != std::string::npos);
}

TEST_CASE("capture: sys_enter serves the sessions that ask for it, and is attached only while one is open" * doctest::test_suite("vm-kernel")) {
  if (!rt::is_root() || rt::cgroup2_root().empty()) {
    MESSAGE("skipped: needs root and cgroup v2");
    return;
  }
  using flightrec::probe::Capture;
  using flightrec::probe::CaptureOptions;
  TestCgroup at_exit_cg("at-exit"), entry_cg("entry");
  CaptureOptions opts;
  opts.ring_bytes = 4u << 20;
  opts.entry_times = true;
  Seen seen;
  Capture capture(opts, [&](const void* d, size_t n) { seen.add(d, n); });
  REQUIRE(links_of("fr_sys_enter") == 0);  // (another flightrec on this host would spoil what follows)

  uint32_t at_exit = capture.open_session({at_exit_cg.id()}, {.entry_times = false});
  CHECK(links_of("fr_sys_exit") == 1);
  CHECK(links_of("fr_sys_enter") == 0);
  // This process has run outside every session since: what it cached
  // of that does not keep its child out, moved or cloned into the cgroup.
  pid_t moved = at_exit_cg.run({"/bin/cat", "/etc/hostname"});
  pid_t cloned = at_exit_cg.run({"/bin/cat", "/etc/hostname"}, true);
  capture.drain_to_now();
  CHECK(seen.at_exit[uint32_t(moved)] > 5);
  CHECK(seen.at_exit[uint32_t(cloned)] > 5);
  CHECK(seen.entered[uint32_t(moved)] == 0);
  CHECK(seen.entered[uint32_t(cloned)] == 0);
  CHECK(seen.pids.count(uint32_t(getpid())) == 0);

  // A process whose second thread has made syscalls outside every
  // session, moved in whole: the kernel says so once, for its leader,
  // and the thread is recorded from then on too.
  {
    std::string go = "/tmp/flightrec-capture-go-" + std::to_string(getpid());
    unlink(go.c_str());
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    pid_t threaded = fork();
    REQUIRE(threaded >= 0);
    if (threaded == 0) {
      close(ready[0]);
      std::thread worker([&] {
        for (int i = 0; i < 100; ++i) (void)!access("/", F_OK);  // outside, and cached so
        (void)!write(ready[1], "r", 1);
        while (access(go.c_str(), F_OK) != 0) usleep(1000);
        for (int i = 0; i < 50; ++i) (void)!access("/", F_OK);
      });
      worker.join();
      _exit(0);
    }
    close(ready[1]);
    char byte;
    REQUIRE(read(ready[0], &byte, 1) == 1);
    close(ready[0]);
    std::ofstream(at_exit_cg.path + "/cgroup.procs") << threaded << std::endl;
    std::ofstream(go) << "";
    int status = 0;
    REQUIRE(waitpid(threaded, &status, 0) == threaded);
    unlink(go.c_str());
    capture.drain_to_now();
    CHECK(seen.by_other_threads[uint32_t(threaded)] >= 50);
  }

  uint32_t entry = capture.open_session({entry_cg.id()});
  CHECK(links_of("fr_sys_enter") == 1);
  pid_t timed = entry_cg.run({"/bin/cat", "/etc/hostname"});
  pid_t timed_clone = entry_cg.run({"/bin/cat", "/etc/hostname"}, true);
  pid_t again = at_exit_cg.run({"/bin/cat", "/etc/hostname"});
  capture.drain_to_now();
  CHECK(seen.entered[uint32_t(timed)] > 5);
  CHECK(seen.at_exit[uint32_t(timed)] == 0);  // from its first call: its state came with its move
  // Its first return (clone3's, in it) is its fork's, skipped as for any
  // child, not taken for a call seccomp stopped.
  CHECK(seen.entered[uint32_t(timed_clone)] > 5);
  CHECK(seen.at_exit[uint32_t(timed_clone)] == 0);
  CHECK(seen.blocked[uint32_t(timed_clone)] == 0);
  CHECK(seen.blocked[uint32_t(timed)] == 0);
  CHECK(seen.at_exit[uint32_t(again)] > 5);
  CHECK(seen.entered[uint32_t(again)] == 0);  // sys_enter leaves that session alone

  capture.close_session(entry);
  capture.release_idle_programs();
  CHECK(links_of("fr_sys_enter") == 0);
  CHECK(links_of("fr_sys_exit") == 1);
  capture.close_session(at_exit);
  capture.release_idle_programs();
  CHECK(links_of("fr_sys_exit") == 0);
  // The next full session attaches them again.
  TestCgroup later_cg("later");
  capture.open_session({later_cg.id()});
  CHECK(links_of("fr_sys_enter") == 1);
  CHECK(links_of("fr_sys_exit") == 1);
}
