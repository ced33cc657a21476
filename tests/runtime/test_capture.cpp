// The capture itself, on the real kernel: sessions whose records go to a
// ring buffer of their own (what a `flightrec run` handed to flightrecd
// reads) next to sessions on the capture's ring.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <string>
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
  void add(const void* data, size_t size) {
    REQUIRE(size >= sizeof(fr_header));
    const auto* h = static_cast<const fr_header*>(data);
    sessions.insert(h->session);
    pids.insert(h->pid);
    types.insert(h->type);
    ++count;
  }
};

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
  // Runs argv in the cgroup to its end; returns its pid.
  pid_t run(std::vector<std::string> argv) const {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::ofstream(path + "/cgroup.procs") << getpid() << std::endl;
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
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

TEST_CASE("capture: a session with a ring buffer of its own gets all its records there, and the other rings none") {
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
  uint32_t own = capture.open_session({own_cg.id()}, false, kOwnBytes);
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
