// A flightrec killed with SIGKILL (the OOM killer, a CI runner's cancel,
// systemd's stop timeout) leaves nothing on the host for good: the
// session's tmpfs never was on the host's mount table, and its cgroups,
// directory, claim and processes are reaped by the next run or `flightrec
// gc`, never those of a live session.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "runtime/harness.h"

using namespace rt;
namespace fs = std::filesystem;

namespace {

uint64_t shmem_kib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  std::string unit;
  while (in >> key >> value >> unit)
    if (key == "Shmem:") return value;
  return 0;
}

// Where cgroups can be: the v2 tree and each v1 hierarchy.
std::vector<std::string> cgroup_trees() {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(" - cgroup2 ") == std::string::npos && line.find(" - cgroup ") == std::string::npos) continue;
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    f >> id >> parent >> dev >> root >> point;
    out.push_back(point + "/flightrec");
  }
  return out;
}

// Everything on the host whose name says it is session `prefix` (run-PID-):
// cgroups, session directory and claim, grant socket, mounts.
std::vector<std::string> traces_of(const std::string& prefix) {
  std::vector<std::string> out;
  std::vector<std::string> dirs = cgroup_trees();
  dirs.push_back("/var/lib/flightrec/sessions");
  dirs.push_back("/run/flightrec/grants");
  for (const auto& d : dirs) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().string());
  }
  std::string mounts = slurp("/proc/self/mountinfo");
  if (mounts.find("/" + prefix) != std::string::npos) out.push_back("a mount of " + prefix);
  return out;
}

std::string session_prefix(pid_t flightrec_pid) { return "run-" + std::to_string(flightrec_pid) + "-"; }

// The session's v2 cgroup, once flightrec has made it ("" until then).
std::string v2_cgroup_of(pid_t flightrec_pid) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cgroup2_root() + "/flightrec", ec))
    if (e.path().filename().string().rfind(session_prefix(flightrec_pid), 0) == 0) return e.path().string();
  return "";
}

template <class F>
bool eventually(F done, int seconds) {
  for (int i = 0; i < seconds * 100; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

std::string verify(const std::string& db) {
  Result v = flightrec({"verify", "--db", db});
  return std::to_string(v.code) + " " + v.out + v.err;
}

}  // namespace

TEST_CASE("SIGKILL of flightrec while the command writes: its 200 MB are given back at once, the next run reaps "
          "the rest and says so, a live session beside it is untouched") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string live_db = dir.file("live.db"), killed_db = dir.file("killed.db");
  // The live session: it outlasts the kill and the reaping, then ends well.
  Proc live = start({FLIGHTREC_BIN, "run", "--db", live_db, "--", "sh", "-c",
                     "echo kept > /tmp/mine; sleep 4; cat /tmp/mine"});
  uint64_t before = shmem_kib();
  Proc victim = start({FLIGHTREC_BIN, "run", "--db", killed_db, "--", "sh", "-c",
                       "dd if=/dev/zero of=/tmp/big bs=1M count=200 2>/dev/null; sleep 60"});
  bool written = eventually([&] { return shmem_kib() >= before + 190 * 1024; }, 30);
  REQUIRE_MESSAGE(written, "the command did not write its 200 MB");
  std::string prefix = session_prefix(victim.pid);
  // The session's tmpfs is in flightrec's own mount namespace, not the host's.
  CHECK(slurp("/proc/self/mountinfo").find(prefix) == std::string::npos);
  REQUIRE(!v2_cgroup_of(victim.pid).empty());

  kill(victim.pid, SIGKILL);
  Result killed = wait(victim);  // its output ends when the sandbox's processes do
  CHECK(killed.code == 128 + SIGKILL);
  bool given_back = eventually([&] { return shmem_kib() < before + 50 * 1024; }, 10);
  INFO("Shmem before " << before << " KiB, now " << shmem_kib() << " KiB");
  CHECK(given_back);
  // What only a reaper removes: its cgroups and claim.
  CHECK(!traces_of(prefix).empty());

  Result next = flightrec({"run", "--db", dir.file("next.db"), "--", "true"});
  INFO(next.err);
  CHECK(next.code == 0);
  CHECK(next.err.find("flightrec: reaped a killed session: " + prefix) != std::string::npos);
  std::vector<std::string> left = traces_of(prefix);
  INFO("left: " << (left.empty() ? "" : left.front()));
  CHECK(left.empty());
  // Said once: the run after that has nothing of it to reap.
  Result again = flightrec({"run", "--db", dir.file("again.db"), "--", "true"});
  CHECK(again.err.find(prefix) == std::string::npos);

  Result l = wait(live);
  CHECK(l.code == 0);
  CHECK(l.out == "kept\n");
  CHECK(verify(live_db).find("0 OK") == 0);
  std::string v = verify(killed_db);
  CHECK(v.find("0 OK") == 0);
  CHECK(v.find("unterminated") != std::string::npos);
}

TEST_CASE("SIGKILL of flightrec during set-up, at several points: `flightrec gc` leaves no cgroup, directory, "
          "claim, socket, mount or process of those runs") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  // BPF links (the capture's programs, uprobes, the egress programs) live on
  // flightrec's descriptors only: the host's count does not grow. (Taken once
  // it is steady: an earlier test's processes may still be letting theirs go.)
  auto links = [] { return nlohmann::json::parse(run({"bpftool", "link", "list", "-j"}).out, nullptr, false).size(); };
  size_t links_before = links();
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    size_t now = links();
    if (now == links_before) break;
    links_before = now;
  }
  std::vector<std::string> prefixes;
  for (int delay_ms : {0, 5, 15, 30, 60, 120, 250, 1000}) {
    Proc p = start({FLIGHTREC_BIN, "run", "--db", dir.file("s" + std::to_string(delay_ms) + ".db"), "--", "sleep", "60"});
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(p.pid, SIGKILL);
    wait(p);
    prefixes.push_back(session_prefix(p.pid));
  }
  Result gc = flightrec({"gc"});
  INFO(gc.out << gc.err);
  CHECK(gc.code == 0);
  for (const auto& prefix : prefixes) {
    std::vector<std::string> left = traces_of(prefix);
    INFO(prefix << " left: " << (left.empty() ? "" : left.front()));
    CHECK(left.empty());
  }
  // No process of theirs lives on: each `sleep 60` died with its session.
  Result ps = run({"pgrep", "-x", "sleep", "-a"});
  CHECK(ps.out.find("sleep 60") == std::string::npos);
  bool no_more_links = eventually([&] { return links() <= links_before; }, 10);
  INFO("BPF links before " << links_before << ", now " << links());
  CHECK(no_more_links);
  Result dry = flightrec({"gc", "--dry-run"});
  for (const auto& prefix : prefixes) CHECK(dry.out.find(prefix) == std::string::npos);
}

TEST_CASE("SIGKILL of flightrec while it writes the agent's edits back: no half-written file in the work "
          "directory, and nothing of the run left after the next one") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string work = dir.file("work");
  mkdir(work.c_str(), 0755);
  // Each file is 4 KiB of one letter: a file on the host is either whole or absent.
  Proc p = start_in(work,
                    {FLIGHTREC_BIN, "run", "--db", dir.file("w.db"), "--policy", "agent", "--", "sh", "-c",
                     "mkdir d; i=0; while [ $i -lt 3000 ]; do head -c 4096 /dev/zero | tr '\\0' x > d/f$i; "
                     "i=$((i+1)); done"},
                    {});
  // Killed once the first files are on the host: in the middle of writing them back.
  auto on_host = [&] {
    size_t n = 0;
    std::error_code ec;
    for (auto it = fs::directory_iterator(work + "/d", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) ++n;
    return n;
  };
  bool writing = eventually([&] { return on_host() >= 50; }, 180);
  REQUIRE(writing);
  kill(p.pid, SIGKILL);
  wait(p);
  size_t whole = 0, other = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(work, ec)) {
    std::string name = e.path().filename().string();
    if (e.is_directory()) continue;
    if (slurp(e.path().string()) == std::string(4096, 'x')) ++whole;
    else {
      ++other;
      MESSAGE("not whole: " << e.path().string());
    }
  }
  MESSAGE(whole << " of 3000 files were written back before the kill");
  CHECK(other == 0);
  std::string v = verify(dir.file("w.db"));
  CHECK(v.find("0 OK") == 0);
  CHECK(v.find("unterminated") != std::string::npos);  // killed before its end, as meant
  Result next = flightrec({"run", "--db", dir.file("n.db"), "--", "true"});
  CHECK(next.err.find("reaped a killed session: " + session_prefix(p.pid)) != std::string::npos);
  CHECK(traces_of(session_prefix(p.pid)).empty());
}

TEST_CASE("an unconfined run killed by SIGKILL: what its command left running is killed by the reaper") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string pidfile = dir.file("bg.pid");
  // observe confines nothing: the background sleep is not in a pid namespace
  // that dies with flightrec, only in the session's cgroup.
  Proc p = start({FLIGHTREC_BIN, "run", "--policy", "observe", "--db", dir.file("o.db"), "--", "sh", "-c",
                  "exec >/dev/null 2>&1; sleep 300 & echo $! > " + pidfile + "; sleep 300"});
  REQUIRE(eventually([&] { return slurp(pidfile).size() > 1; }, 30));
  pid_t background = pid_t(std::stol(slurp(pidfile)));
  std::string prefix = session_prefix(p.pid);
  kill(p.pid, SIGKILL);
  wait(p);
  REQUIRE(kill(background, 0) == 0);  // lives on, unrecorded, until reaped
  Result gc = flightrec({"gc"});
  INFO(gc.out << gc.err);
  CHECK(gc.code == 0);
  CHECK(gc.out.find(prefix) != std::string::npos);
  CHECK(gc.out.find("processes killed") != std::string::npos);
  CHECK(eventually([&] { return kill(background, 0) != 0; }, 5));
  CHECK(traces_of(prefix).empty());
}
