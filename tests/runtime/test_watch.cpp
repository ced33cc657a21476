// flightrec watch on real cgroups: what runs inside is recorded; a cgroup
// that goes away ends its part of the session with an entry.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "runtime/harness.h"

using nlohmann::json;
using namespace rt;

namespace {

// A cgroup with one shell loop in it that keeps testing for `marker`
// (or runs `loop_body` over and over).
struct Workload {
  std::string path;
  pid_t pid = -1;
  Workload(const std::string& name, const std::string& marker, std::string loop_body = "") {
    if (loop_body.empty()) loop_body = "test -e " + marker + "; sleep 0.02";
    path = cgroup2_root() + "/" + name;
    REQUIRE(mkdir(path.c_str(), 0755) == 0);
    pid = fork();
    if (pid == 0) {
      std::ofstream(path + "/cgroup.procs") << getpid() << std::endl;
      execlp("sh", "sh", "-c", ("while :; do " + loop_body + "; done").c_str(), (char*)nullptr);
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  void stop() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      pid = -1;
    }
    for (int i = 0; i < 100 && rmdir(path.c_str()) != 0 && errno == EBUSY; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~Workload() { stop(); }
};

}  // namespace

TEST_CASE("watch records an existing cgroup's processes for --duration") {
  REQUIRE(is_root());
  TempDir dir;
  std::string marker = dir.file("watch-marker"), db = dir.file("w.db");
  Workload w("flightrec-test-watch-" + std::to_string(getpid()), marker);
  Result r = flightrec({"watch", "--cgroup", w.path, "--db", db, "--duration", "1.5"});
  INFO(r.err);
  CHECK(r.code == 0);
  auto all = entries(db);
  REQUIRE(all.size() > 3);
  CHECK(all.front()["mode"] == "watch");
  CHECK(all.front()["cgroups"] == json::array({w.path}));
  CHECK(all.back()["reason"] == "duration elapsed");
  int tests = 0, sleeps = 0;
  for (const auto& e : all) {
    if (e.value("path", "") == marker) ++tests;
    if (e["type"] == "exec" && e["argv"][0] == "sleep") ++sleeps;
  }
  CHECK(tests > 5);
  CHECK(sleeps > 5);
  // The shell that was there before watch began is named at the start, as
  // flightrecd names what it finds (session/cgroup_session.h).
  // (Its `sleep 0.02` may be there too.)
  bool shell_listed = false;
  for (const auto& p : of_type(all, "process_at_start")) {
    shell_listed |= p["process_pid"] == w.pid && p["argv"][0] == "sh";
    CHECK((p["argv"][0] == "sh" || p["argv"][0] == "sleep"));
  }
  CHECK(shell_listed);
  size_t listed = 0, first_exec = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i]["type"] == "process_at_start") listed = i;
    if (all[i]["type"] == "exec" && !first_exec) first_exec = i;
  }
  CHECK(listed < first_exec);  // before anything it did while watched
  CHECK(flightrec({"verify", "--db", db}).code == 0);
  // A watched session has no command: the report names the workload instead.
  Result rep = flightrec({"report", "--db", db, "--session", "1", "--out", dir.file("w.html")});
  REQUIRE(rep.code == 0);
  CHECK(slurp(dir.file("w.html")).find("<br>workload cgroups [&quot;" + w.path + "&quot;]") != std::string::npos);
}

TEST_CASE("watch: the command lines of processes already running are redacted as exec's are") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("w.db");
  // The shell's own argv (sh -c "while ...") holds a key, as an agent's
  // tool might when it was started before flightrec watched it.
  const std::string key = "sk-proj-ABCDEFGHIJKLMNOPqrstuvwx";
  Workload w("flightrec-test-watch-argv-" + std::to_string(getpid()), "", ": --key " + key + "; sleep 0.02");
  Result r = flightrec({"watch", "--cgroup", w.path, "--db", db, "--duration", "0.5"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto all = entries(db);
  bool listed = false;
  for (const auto& p : of_type(all, "process_at_start")) {
    if (p["process_pid"] != w.pid) continue;
    listed = true;
    CHECK(p["argv"].dump().find("sk-[REDACTED]") != std::string::npos);
    CHECK(p["redacted"] == json::array({"sk-"}));
  }
  CHECK(listed);
  for (const auto& e : all) CHECK(e.dump().find(key) == std::string::npos);  // nowhere in the record
}

TEST_CASE("watch records a dozen cgroups at once, each one's processes") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("w.db");
  std::vector<std::unique_ptr<Workload>> loads;
  std::vector<std::string> args = {"watch", "--db", db, "--duration", "1.5"};
  for (int i = 0; i < 12; ++i) {
    std::string marker = dir.file("marker-" + std::to_string(i));
    loads.push_back(std::make_unique<Workload>("flightrec-test-many-" + std::to_string(getpid()) + "-" + std::to_string(i), marker));
    args.insert(args.end(), {"--cgroup", loads.back()->path});
  }
  Result r = flightrec(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto all = entries(db);
  CHECK(all.front()["cgroups"].size() == 12);
  for (int i = 0; i < 12; ++i) {
    std::string marker = dir.file("marker-" + std::to_string(i));
    int tests = 0;
    for (const auto& e : all) tests += e.value("path", "") == marker;
    INFO(marker);
    CHECK(tests > 5);
  }
  CHECK(flightrec({"verify", "--db", db}).code == 0);
}

namespace {

// Runs `script` with sh in cgroup `dir` (it joins before it execs).
pid_t spawn_in(const std::string& dir, const std::string& script) {
  pid_t pid = fork();
  if (pid == 0) {
    std::ofstream(dir + "/cgroup.procs") << getpid() << std::endl;
    execlp("sh", "sh", "-c", script.c_str(), (char*)nullptr);
    _exit(127);
  }
  return pid;
}

}  // namespace

TEST_CASE("a task moved out of the watched cgroup stays recorded, and the move is an entry") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("w.db"), fifo = dir.file("go"), marker = dir.file("after-the-move");
  std::string name = "flightrec-test-move-" + std::to_string(getpid());
  std::string watched = cgroup2_root() + "/" + name, outside = watched + "-out";
  REQUIRE(mkdir(watched.c_str(), 0755) == 0);
  REQUIRE(mkdir(outside.c_str(), 0755) == 0);
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  std::ofstream(marker) << "x\n";
  // An idle sibling: blocked on the FIFO from before the session until after its move.
  pid_t idle = spawn_in(watched, "read x < " + fifo + "; cat " + marker + " > /dev/null");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // it is blocked in open by now
  Proc w = start({FLIGHTREC_BIN, "watch", "--cgroup", watched, "--db", db, "--duration", "3"});
  // flightrec says it is watching once it is attached.
  std::string said = await_said(w, "watching");
  // A process in the watched cgroup moves the idle one out, then it is let go.
  pid_t mover = spawn_in(watched, "echo " + std::to_string(idle) + " > " + outside + "/cgroup.procs");
  waitpid(mover, nullptr, 0);
  std::ofstream(fifo) << "go\n";
  int status = 0;
  waitpid(idle, &status, 0);
  Result r = wait(w);
  for (const auto& d : {watched, outside}) rmdir(d.c_str());
  INFO(said << r.err);
  CHECK(r.code == 0);
  CHECK(WIFEXITED(status));
  auto all = entries(db);
  CHECK(all.front()["tasks_at_start"] >= 1);
  bool moved = false, opened_after = false;
  for (const auto& e : all) {
    if (e["type"] == "cgroup_move" && e["moved_pid"] == idle && e["to_cgroup"] == "/" + name + "-out") {
      moved = true;
      CHECK(e["pid"] == mover);
    }
    if (e["type"] == "file_open" && e.value("path", "") == marker) {
      CHECK(moved);  // after the move entry
      opened_after = true;
    }
  }
  CHECK(moved);
  CHECK(opened_after);
}

// Every task of a fork storm is counted into the session once and out
// once, however the watch's start falls among its forks and exits: else
// the session outlives its cgroup (a process and exit program attached
// after the session opened missed the first forks and exits).
TEST_CASE("a watched cgroup of a fork storm that disappears ends the session: every task counted out") {
  REQUIRE(is_root());
  for (int round = 0; round < 5; ++round) {
    CAPTURE(round);
    TempDir dir;
    std::string db = dir.file("w.db");
    Workload w("flightrec-test-storm-" + std::to_string(getpid()), dir.file("m"), "(:)");
    Proc watch = start({FLIGHTREC_BIN, "watch", "--cgroup", w.path, "--db", db, "--duration", "30"});
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    w.stop();
    Result r = wait(watch);
    CHECK(r.code == 0);
    auto all = entries(db);
    REQUIRE(!all.empty());
    CHECK(all.back()["reason"] == "every watched cgroup is gone");
  }
}

TEST_CASE("a watched cgroup that disappears ends the session with an entry") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("w.db");
  Workload w("flightrec-test-gone-" + std::to_string(getpid()), dir.file("m"));
  Proc watch = start({FLIGHTREC_BIN, "watch", "--cgroup", w.path, "--db", db, "--duration", "60"});
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  w.stop();
  Result r = wait(watch);  // ends by itself long before 60 s
  CHECK(r.code == 0);
  auto all = entries(db);
  auto gone = of_type(all, "cgroup_gone");
  REQUIRE(gone.size() == 1);
  CHECK(gone[0]["cgroup"] == w.path);
  CHECK(all.back()["reason"] == "every watched cgroup is gone");
  CHECK(flightrec({"verify", "--db", db}).code == 0);
}

TEST_CASE("watch stops cleanly on SIGINT") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("w.db");
  Workload w("flightrec-test-int-" + std::to_string(getpid()), dir.file("m"));
  Proc watch = start({FLIGHTREC_BIN, "watch", "--cgroup", w.path, "--db", db});
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  kill(watch.pid, SIGINT);
  Result r = wait(watch);
  CHECK(r.code == 0);
  auto all = entries(db);
  CHECK(all.back()["reason"] == "stopped by signal INT");
  CHECK(flightrec({"verify", "--db", db}).out.find("OK: 1 session") == 0);
}

TEST_CASE("watching the cgroup flightrec itself runs in does not record the recorder") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("w.db");
  Workload w("flightrec-test-self-" + std::to_string(getpid()), dir.file("m"));
  Proc watch = start({"sh", "-c", "echo $$ > " + w.path + "/cgroup.procs && exec " FLIGHTREC_BIN
                      " watch --cgroup " + w.path + " --db " + db + " --duration 1.5"});
  Result r = wait(watch);
  REQUIRE(r.code == 0);
  auto all = entries(db);
  int recorder_pid = all.front()["pid"];
  int own_syscalls = 0, workload = 0;
  for (const auto& e : all) {
    if (e.contains("nr") && e["pid"] == recorder_pid) ++own_syscalls;
    if (e.contains("nr") && e["pid"] == w.pid) ++workload;
  }
  CHECK(own_syscalls == 0);
  CHECK(workload > 10);
}

TEST_CASE("watch with --deny-path and --allow-exec confines processes already running, for the session only" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  TempDir dir;
  std::string secret = dir.file("secret"), copy = dir.file("true-copy"), out = dir.file("out"), db = dir.file("w.db");
  std::ofstream(secret) << "s3cret\n";
  REQUIRE(run({"cp", "/usr/bin/true", copy}).code == 0);
  Workload w("flightrec-test-confine-" + std::to_string(getpid()), "",
             "cat " + secret + " >/dev/null 2>&1; echo cat=$? >> " + out + "; " + copy + " 2>/dev/null; echo copy=$? >> " +
                 out + "; sleep 0.05");
  Result r = flightrec({"watch", "--cgroup", w.path, "--deny-path", secret, "--allow-exec", "/usr", "--db", db,
                        "--duration", "1.5"});
  bool lsm = flightrec({"probe"}).out.find("BPF-LSM                                         yes") != std::string::npos;
  if (!lsm) {
    CHECK(r.code == 1);  // flightrec's own error: nothing was watched unconfined
    CHECK(r.err.find("cannot be enforced") != std::string::npos);
    CHECK(access(db.c_str(), F_OK) != 0);  // and no record begun
    return;
  }
  INFO(r.err);
  REQUIRE(r.code == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  w.stop();
  // Before the session the loop could read and execute; during it, not;
  // after it, again.
  std::string lines = slurp(out);
  size_t denied = lines.find("cat=1\ncopy=126\n");
  REQUIRE(denied != std::string::npos);
  CHECK(lines.rfind("cat=0\ncopy=0\n", denied) != std::string::npos);
  CHECK(lines.find("cat=0\ncopy=0\n", denied) != std::string::npos);
  auto all = entries(db);
  CHECK(all.front()["lsm_hidden"] == json::array({secret}));
  CHECK(all.front()["lsm_exec"] == json::array({"/usr"}));
  bool hidden = false, exec = false;
  for (const auto& e : all) {
    if (e["type"] != "lsm" || e.value("decision", "") != "deny") continue;
    hidden = hidden || (e["path"] == secret && e["rule_id"] == "filesystem.hidden");
    exec = exec || (e["path"] == copy && e["rule_id"] == "filesystem.exec");
  }
  CHECK(hidden);
  CHECK(exec);
}

TEST_CASE("watch --mode lite: writes and file changes recorded, stats and reads only counted" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  TempDir dir;
  std::string marker = dir.file("lite-marker"), written = dir.file("lite-written"), db = dir.file("w.db");
  std::ofstream(marker) << "read me\n";
  // Each round: a stat and a read of marker (counted), a write open of
  // `written` and a rename of it (recorded).
  Workload w("flightrec-test-lite-" + std::to_string(getpid()), marker,
             "test -e " + marker + "; cat " + marker + " 2>/dev/null; echo x > " + written + "; mv " + written + " " +
                 written + ".moved; sleep 0.02");
  Result r = flightrec({"watch", "--mode", "lite", "--counts-interval", "1s", "--cgroup", w.path, "--db", db,
                        "--duration", "2.5"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto all = entries(db);
  REQUIRE(!all.empty());
  CHECK(all.front()["capture_mode"] == "lite");
  int writes = 0, renames = 0, reads = 0, stats = 0;
  for (const auto& e : all) {
    std::string path = e.value("path", "");
    std::string name = e.value("name", "");
    if (path == written && e["type"] == "file_open") ++writes;
    if (name == "renameat2" || name == "rename") renames += e.value("oldpath", "") == written;
    if (path == marker && e["type"] == "file_open") ++reads;
    if (name == "newfstatat" || name == "stat" || name == "statx") ++stats;
  }
  // Every round writes, then renames once or twice (mv tries
  // RENAME_NOREPLACE first): at least as many renames as writes, but for
  // the round the window cut, however many rounds the machine managed (5
  // in 2.5 s once under emulation, ~100 here).
  CHECK(writes >= 2);
  CHECK(renames >= 2);
  CHECK(renames >= writes - 1);
  CHECK(reads == 0);  // cat's opens of marker read it: counted only
  CHECK(stats == 0);  // no hook at all
  int64_t opens = 0;
  for (const auto& e : of_type(all, "syscall_counts")) {
    CHECK(e["cgroup"] == w.path);
    for (size_t i = 0; i < e["syscalls"].size(); ++i)
      if (e["syscalls"][i] == "openat") opens += e["calls"][i].get<int64_t>();
  }
  CHECK(opens > writes);
  CHECK(flightrec({"verify", "--db", db}).code == 0);
  // Lite has no entry times: asking for them is refused.
  Result bad = flightrec({"watch", "--mode", "lite", "--entry-times", "on", "--cgroup", w.path, "--db",
                          dir.file("bad.db"), "--duration", "1"});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--mode lite has no entry times") != std::string::npos);
}

TEST_CASE("watch --policy agent-pod: a shell started by a program off processes.expected_parents is a violation, one started by a shell is not") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("w.db"), marker = dir.file("go");
  // Programs named as a pod's server and worker would be (copies of perl, so
  // /proc's exe names them too), each starting a shell.
  for (const char* name : {"nginx", "worker"})
    std::filesystem::copy_file("/usr/bin/perl", dir.file(name));
  chmod(dir.file("nginx").c_str(), 0755);
  chmod(dir.file("worker").c_str(), 0755);
  const std::string shell_out = "system('/bin/sh', '-c', 'true')";
  std::string path = cgroup2_root() + "/flightrec-test-watch-parents-" + std::to_string(getpid());
  REQUIRE(mkdir(path.c_str(), 0755) == 0);
  // Running before the watch begins: known to it by process_at_start alone.
  pid_t server = fork();
  if (server == 0) {
    std::ofstream(path + "/cgroup.procs") << getpid() << std::endl;
    std::string script = "select(undef, undef, undef, 0.02) until -e '" + marker + "'; " + shell_out;
    execl(dir.file("nginx").c_str(), "nginx", "-e", script.c_str(), (char*)nullptr);
    _exit(127);
  }
  Proc watch = start({FLIGHTREC_BIN, "watch", "--cgroup", path, "--db", db, "--policy", "agent-pod"});
  std::string said = await_said(watch, "watching");
  REQUIRE_MESSAGE(said.find("watching") != std::string::npos, said);
  std::ofstream(marker) << "go\n";
  int status = 0;
  waitpid(server, &status, 0);
  CHECK(WIFEXITED(status));
  Result r = run({"sh", "-c", "echo $$ > " + path + "/cgroup.procs && " + dir.file("worker") + " -e \"" + shell_out +
                                  "\" && bash -c '/bin/sh -c true; true'"});
  kill(watch.pid, SIGINT);
  Result watched = wait(watch);
  rmdir(path.c_str());
  INFO(r.err);
  INFO(watched.err);
  REQUIRE(r.code == 0);
  REQUIRE(watched.code == 0);
  std::vector<std::string> details;
  for (const auto& v : of_type(entries(db), "violation"))
    if (v["rule_id"] == "processes.unexpected_parent") {
      details.push_back(v["detail"]);
      CHECK(v["action"] == "would-deny");
      CHECK(v["level"] == "ALERT");
    }
  INFO(json(details).dump(1));
  REQUIRE(details.size() == 2);
  CHECK(details[0].starts_with("/bin/sh started by " + dir.file("nginx") + " (pid " + std::to_string(server) + ")"));
  CHECK(details[1].starts_with("/bin/sh started by " + dir.file("worker")));
  CHECK(watched.err.find("ALERT processes.unexpected_parent would-deny") != std::string::npos);
}
