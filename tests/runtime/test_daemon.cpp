// flightrecd on real cgroups: a kubepods-like tree made while it runs is
// recorded cgroup by cgroup, each in its own sealed record with its pod's
// identity; processes already there are listed; SIGHUP, SIGTERM and
// SIGKILL do what docs/DAEMON.md says.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "runtime/harness.h"

using nlohmann::json;
using namespace rt;
namespace fs = std::filesystem;

namespace {

// A shell loop that stats `marker` `calls` times (`test -e`: one stat
// each), sleeping 10 ms every `pace` calls so that it is not the daemon's
// top speed that is measured; then runs `after` (sh syntax).
std::string paced_stats(const std::string& marker, int calls, int pace, const std::string& after = "exit 0") {
  return "i=0; while [ $i -lt " + std::to_string(calls) + " ]; do test -e " + marker + "; i=$((i+1)); [ $((i % " +
         std::to_string(pace) + ")) -eq 0 ] && sleep 0.01; done; " + after;
}

// A cgroup directory (made with its parents), removed with them at the end.
struct CgroupTree {
  std::string base;
  std::vector<pid_t> pids;
  explicit CgroupTree(const std::string& name) : base(cgroup2_root() + "/" + name) {
    REQUIRE(mkdir(base.c_str(), 0755) == 0);
  }
  std::string make(const std::string& rel) {
    std::string path = base;
    std::istringstream parts(rel);
    for (std::string part; std::getline(parts, part, '/');) {
      path += "/" + part;
      mkdir(path.c_str(), 0755);
    }
    return path;
  }
  // Runs argv inside the cgroup at rel; returns its pid.
  // stdout_file: where its standard output goes (else ours).
  pid_t spawn(const std::string& rel, std::vector<std::string> argv, const std::string& stdout_file = "") {
    std::string path = base + "/" + rel;
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    pid_t pid = fork();
    if (pid == 0) {
      close(ready[0]);
      // Opened outside the cgroup: not one of the acts it records.
      if (!stdout_file.empty()) {
        int out = open(stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (out < 0 || dup2(out, 1) < 0) _exit(126);
      }
      std::ofstream(path + "/cgroup.procs") << getpid() << std::endl;
      close(ready[1]);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
    close(ready[1]);
    char byte;
    (void)!read(ready[0], &byte, 1);  // EOF once it is in the cgroup
    close(ready[0]);
    pids.push_back(pid);
    return pid;
  }
  int reap(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    pids.erase(std::remove(pids.begin(), pids.end(), pid), pids.end());
    return status;
  }
  void remove(const std::string& rel) {
    std::string path = base + "/" + rel;
    for (int i = 0; i < 200 && rmdir(path.c_str()) != 0 && errno == EBUSY; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~CgroupTree() {
    for (pid_t pid : pids) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    // Deepest first.
    std::vector<std::string> dirs;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(base, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_directory()) dirs.push_back(it->path());
    std::sort(dirs.begin(), dirs.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
    dirs.push_back(base);
    for (const auto& d : dirs)
      for (int i = 0; i < 200 && rmdir(d.c_str()) != 0 && errno == EBUSY; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
};


// The record whose genesis entry observes `cgroup`.
std::string record_of(const std::vector<std::string>& dbs, const std::string& cgroup) {
  for (const auto& db : dbs) {
    auto all = entries(db);
    if (!all.empty() && all.front()["cgroups"] == json::array({cgroup})) return db;
  }
  return "";
}

bool has_exec_of(const std::vector<json>& all, const std::string& file) {
  for (const auto& e : of_type(all, "exec"))
    if (e.value("filename", "") == file) return true;
  return false;
}

const char* kPodUid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
const char* kPodSlice = "kubepods-burstable-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice";
const std::string kContainerA(64, 'a'), kContainerB(64, 'b');

// The config of a daemon recording, under the test's own cgroup `name`,
// each glob as a rule (named `rule0`, `rule1`, ... unless given as NAME=GLOB).
std::string daemon_config(const TempDir& dir, const std::string& name, const std::vector<std::string>& globs) {
  std::string config = dir.file("flightrecd.yaml");
  std::ofstream out(config);
  out << "version: 1\nstorage:\n  dir: " << dir.file("records") << "\nsocket:\n  path: " << dir.file("control.sock")
      << "\nring: 8M\nwatch:\n";
  for (size_t i = 0; i < globs.size(); ++i) {
    size_t eq = globs[i].find('=');
    std::string rule = eq == std::string::npos ? "rule" + std::to_string(i) : globs[i].substr(0, eq);
    out << "  - name: " << rule << "\n    cgroup: \"" << name << "/" << globs[i].substr(eq + 1) << "\"\n";
  }
  return config;
}

}  // namespace

TEST_CASE("flightrecd --check-config: OK with what it watches, or the file, line and key at fault") {
  TempDir dir;
  std::string good = dir.file("good.yaml"), bad = dir.file("bad.yaml"), lite = dir.file("lite.yaml");
  std::ofstream(good) << "version: 1\nstorage:\n  dir: " << dir.file("records")
                      << "\nwatch:\n  - name: pods\n    cgroup: \"kubepods.slice/**/cri-containerd-*.scope\"\n";
  std::ofstream(bad) << "version: 1\nstorage:\n  dir: " << dir.file("records")
                     << "\nwatch:\n  - name: pods\n    cgroup: x\n    colour: red\n";
  std::string policed = dir.file("policed.yaml");
  std::ofstream(lite) << "version: 1\nstorage:\n  dir: " << dir.file("records")
                      << "\nwatch:\n  - name: pods\n    cgroup: x\n    mode: lite\n";
  std::ofstream(policed) << "version: 1\nstorage:\n  dir: " << dir.file("records")
                         << "\nwatch:\n  - name: pods\n    cgroup: x\n    policy: agent-pod\n";
  std::string unloadable = dir.file("unloadable.yaml"), lossy = dir.file("lossy.yaml");
  std::ofstream(unloadable) << "version: 1\nstorage:\n  dir: " << dir.file("records")
                            << "\nwatch:\n  - name: pods\n    cgroup: x\n    policy: " << dir.file("none.yaml") << "\n";
  std::ofstream(lossy) << "version: 1\nstorage:\n  dir: " << dir.file("records")
                       << "\nwatch:\n  - name: pods\n    cgroup: x\n    on_loss: kill\n";
  Result r = run({FLIGHTRECD_BIN, "--config", good, "--check-config"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("1 watch rule(s)") != std::string::npos);
  CHECK(r.out.find("pods: kubepods.slice/**/cri-containerd-*.scope") != std::string::npos);
  r = run({FLIGHTRECD_BIN, "--config", bad, "--check-config"});
  CHECK(r.code == 2);
  CHECK(r.err.find(bad + ":7:") != std::string::npos);
  CHECK(r.err.find("colour") != std::string::npos);
  // A rule's policy is loaded as the daemon would judge by it.
  r = run({FLIGHTRECD_BIN, "--config", policed, "--check-config"});
  CHECK(r.code == 0);
  CHECK(r.out.find("pods: x (full, unsigned, judged by policy agent-pod (audit))") != std::string::npos);
  r = run({FLIGHTRECD_BIN, "--config", unloadable, "--check-config"});
  CHECK(r.code == 2);
  CHECK(r.err.find(unloadable + ":5: watch rule pods: policy " + dir.file("none.yaml")) != std::string::npos);
  // A setting this flightrecd cannot act on is refused, not ignored.
  r = run({FLIGHTRECD_BIN, "--config", lossy, "--check-config"});
  CHECK(r.code == 2);
  CHECK(r.err.find(lossy + ":5: watch rule pods: on_loss: kill is not supported") != std::string::npos);
  r = run({FLIGHTRECD_BIN, "--config", lite, "--check-config"});
  CHECK(r.code == 0);
  CHECK(r.out.find("pods: x (lite, unsigned)") != std::string::npos);
  r = run({FLIGHTRECD_BIN, "--config", dir.file("missing.yaml"), "--check-config"});
  CHECK(r.code == 2);
  CHECK(r.err.find("missing.yaml") != std::string::npos);
}

TEST_CASE("flightrecd records a kubepods tree made while it runs: each container its own sealed session") {
  REQUIRE(is_root());
  TempDir dir;
  // kubelet's layout with --cgroup-root=/P (P.slice/P-kubepods.slice/...),
  // P unique to this test: the host's own kubepods are never touched.
  std::string p = "flightrectest" + std::to_string(getpid());
  std::string name = p + ".slice";
  CgroupTree tree(name);
  std::string pod = p + "-kubepods.slice/" + p + "-kubepods-burstable.slice/" + p + "-" + std::string(kPodSlice);
  std::string a = pod + "/cri-containerd-" + kContainerA + ".scope";
  std::string b = pod + "/cri-containerd-" + kContainerB + ".scope";
  // Container A runs before the daemon starts.
  tree.make(a);
  pid_t sleeper = tree.spawn(a, {"sleep", "60"});
  std::string storage = dir.file("records");
  std::string config = daemon_config(dir, name, {"pods=*-kubepods.slice/**/cri-containerd-*.scope"});
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  CHECK(d.err.find("recording 1 cgroup(s)") != std::string::npos);

  // Container B appears later; what it runs is recorded from its first exec.
  tree.make(b);
  REQUIRE_MESSAGE(d.await("flightrecd: recording", 2), d.err);
  // status: both sessions, from the daemon itself; root only.
  Result st = flightrec({"status", "--socket", dir.file("control.sock"), "--json"});
  INFO(st.out << st.err);
  REQUIRE(st.code == 0);
  json status = json::parse(st.out);
  CHECK(status["sessions"].size() == 2);
  CHECK(status["watch_rules"] == 1);
  for (const auto& s : status["sessions"]) {
    CHECK(s["rule"] == "pods");
    CHECK(fs::exists(s["record"].get<std::string>()));
  }
  Result human = flightrec({"status", "--socket", dir.file("control.sock")});
  CHECK(human.out.find("2 session(s)") != std::string::npos);
  Result nobody = run({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", FLIGHTREC_BIN, "status", "--socket",
                       dir.file("control.sock")});
  CHECK(nobody.code == 1);
  CHECK(nobody.err.find("Permission denied") != std::string::npos);
  // One daemon per control socket: a second one refuses to start.
  Result second = run({FLIGHTRECD_BIN, "--config", config});
  CHECK(second.code == 1);
  CHECK(second.err.find("another flightrecd answers") != std::string::npos);

  std::string out = dir.file("b-wrote");
  pid_t worker = tree.spawn(b, {"sh", "-c", "cat /etc/hostname >/dev/null; echo hi > " + out});
  CHECK(tree.reap(worker) == 0);
  tree.remove(b);
  REQUIRE_MESSAGE(d.await("flightrecd: sealed"), d.err);
  CHECK_MESSAGE(d.err.find("the cgroup is gone") != std::string::npos, d.err);

  Result r = d.stop(SIGTERM);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.err.find("stopped (flightrecd stopped by signal TERM)") != std::string::npos);

  auto dbs = records_in(storage);
  REQUIRE(dbs.size() == 2);
  std::string root = cgroup2_root() + "/" + name + "/";
  std::string db_a = record_of(dbs, root + a), db_b = record_of(dbs, root + b);
  REQUIRE(!db_a.empty());
  REQUIRE(!db_b.empty());
  for (const auto& db : dbs) {
    Result v = flightrec({"verify", "--db", db});
    INFO(db << ": " << v.out << v.err);
    CHECK(v.code == 0);
    CHECK(v.out.find("complete") != std::string::npos);
  }
  auto rec_a = entries(db_a), rec_b = entries(db_b);
  for (const auto* rec : {&rec_a, &rec_b}) {
    const json& g = rec->front();
    CHECK(g["mode"] == "watch");
    CHECK(g["watch_rule"] == "pods");
    CHECK(g["pod_uid"] == kPodUid);
    CHECK(g["qos_class"] == "burstable");
    CHECK(g["container_runtime"] == "containerd");
  }
  CHECK(rec_a.front()["container_id"] == kContainerA);
  CHECK(rec_b.front()["container_id"] == kContainerB);

  // A's sleeper was there first: listed at the start, as /proc had it.
  auto at_start = of_type(rec_a, "process_at_start");
  REQUIRE(at_start.size() == 1);
  CHECK(at_start[0]["process_pid"] == sleeper);
  CHECK(at_start[0]["exe"] == "/usr/bin/sleep");
  CHECK(at_start[0]["argv"] == json::array({"sleep", "60"}));
  CHECK(rec_a.back()["reason"] == "flightrecd stopped by signal TERM");

  // B's processes are in B's record, from their first exec, and only there.
  CHECK(of_type(rec_b, "process_at_start").empty());
  CHECK(has_exec_of(rec_b, "/usr/bin/sh"));  // found on PATH
  CHECK(has_exec_of(rec_b, "/usr/bin/cat"));
  CHECK(!has_exec_of(rec_a, "/usr/bin/cat"));
  bool opened_hostname = false;
  for (const auto& e : of_type(rec_b, "file_open")) opened_hostname |= e.value("path", "") == "/etc/hostname";
  CHECK(opened_hostname);
  CHECK(!of_type(rec_b, "cgroup_gone").empty());
  CHECK(rec_b.back()["reason"] == "the cgroup is gone");
}

TEST_CASE("flightrecd: SIGKILL leaves unterminated records that verify; a restart records the cgroups still there") {
  REQUIRE(is_root());
  TempDir dir;
  std::string name = "flightrec-test-kill-" + std::to_string(getpid());
  CgroupTree tree(name);
  tree.make("job");
  tree.spawn("job", {"sh", "-c", "while :; do cat /etc/hostname >/dev/null; sleep 0.05; done"});
  std::string storage = dir.file("records"), config = daemon_config(dir, name, {"jobs=*"});
  {
    Daemon d(config);
    REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // a checkpoint or more
    Result r = d.stop(SIGKILL);
    CHECK(r.code == 128 + SIGKILL);
  }
  auto dbs = records_in(storage);
  REQUIRE(dbs.size() == 1);
  Result v = flightrec({"verify", "--db", dbs[0]});
  INFO(v.out << v.err);
  CHECK(v.code == 0);
  CHECK(v.out.find("unterminated") != std::string::npos);

  Daemon again(config);
  REQUIRE_MESSAGE(again.await("flightrecd: running"), again.err);
  CHECK(again.err.find("recording 1 cgroup(s)") != std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Result r = again.stop(SIGTERM);
  CHECK(r.code == 0);
  dbs = records_in(storage);
  REQUIRE(dbs.size() == 2);
  auto second = entries(dbs[1]);
  CHECK(second.back()["type"] == "session_end");
  CHECK(of_type(second, "process_at_start").size() >= 1);
  CHECK(!of_type(second, "syscall").empty());
}

TEST_CASE("flightrecd: SIGHUP applies new watch rules; a cgroup no rule matches any more is sealed") {
  REQUIRE(is_root());
  TempDir dir;
  std::string name = "flightrec-test-hup-" + std::to_string(getpid());
  CgroupTree tree(name);
  tree.make("one");
  tree.make("two");
  tree.spawn("one", {"sleep", "60"});
  tree.spawn("two", {"sleep", "60"});
  std::string storage = dir.file("records"), config = daemon_config(dir, name, {"jobs=one"});
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  CHECK(d.err.find("recording 1 cgroup(s)") != std::string::npos);
  daemon_config(dir, name, {"jobs=two"});
  kill(d.proc.pid, SIGHUP);
  REQUIRE_MESSAGE(d.await("config reloaded"), d.err);
  CHECK(d.err.find("no watch rule matches the cgroup any more") != std::string::npos);
  // A bad config is refused and the old one stays.
  std::ofstream(config) << "version: 1\nwatch: 3\n";
  kill(d.proc.pid, SIGHUP);
  REQUIRE_MESSAGE(d.await("config not reloaded"), d.err);
  Result r = d.stop(SIGTERM);
  CHECK(r.code == 0);
  auto dbs = records_in(storage);
  REQUIRE(dbs.size() == 2);
  std::string root = cgroup2_root() + "/" + name + "/";
  auto one = entries(record_of(dbs, root + "one")), two = entries(record_of(dbs, root + "two"));
  REQUIRE(!one.empty());
  REQUIRE(!two.empty());
  CHECK(one.back()["reason"] == "no watch rule matches the cgroup any more");
  CHECK(two.back()["reason"] == "flightrecd stopped by signal TERM");
}

TEST_CASE("the .deb installs flightrec, flightrecd, its unit, config, policies, docs and examples, and purge removes them") {
  REQUIRE(is_root());
  TempDir dir;
  Result built = run({SOURCE_DIR "/tools/build-deb.sh", BUILD_DIR, dir.path.string()});
  INFO(built.out << built.err);
  REQUIRE(built.code == 0);
  std::string deb = built.out.substr(0, built.out.find('\n'));
  Result info = run({"dpkg-deb", "--field", deb, "Depends"});
  // Linked in but libc (FLIGHTREC_STATIC_DEPS); what the binaries do load
  // is checked by running them, installed, below.
  CHECK(info.out.find("libc6") != std::string::npos);
  CHECK(info.out.find("libcapstone") != std::string::npos);  // loaded when needed, not linked
  CHECK(info.out.find("libnats") != std::string::npos);      // likewise (JetStream, collect)
  const std::vector<std::string> files = {"/usr/bin/flightrec", "/usr/sbin/flightrecd", "/lib/systemd/system/flightrecd.service",
                                          "/etc/flightrec/flightrecd.yaml", "/usr/share/flightrec/policies/agent.yaml",
                                          "/usr/share/doc/flightrec/FORMAT.md", "/usr/share/doc/flightrec/LITE.md",
                                          "/usr/share/doc/flightrec/SHIPPING.md", "/usr/share/doc/flightrec/HEALTH.md",
                                          "/usr/share/doc/flightrec/DAEMON.md", "/usr/share/doc/flightrec/POLICIES.md",
                                          "/usr/share/flightrec/policies/agent-pod.yaml",
                                          "/usr/share/doc/flightrec/examples/ask.yaml",
                                          "/usr/share/flightrec/prometheus/flightrec.rules.yml",
                                          "/usr/share/flightrec/grafana/flightrec.json"};
  Result in = run({"dpkg", "-i", deb});
  // Whatever fails below, the machine is left as it was.
  struct Purge {
    bool done = false;
    ~Purge() {
      if (!done) run({"dpkg", "--purge", "flightrec"});
    }
  } purge_guard;
  INFO(in.out << in.err);
  REQUIRE(in.code == 0);
  for (const auto& f : files) {
    INFO(f);
    CHECK(access(f.c_str(), F_OK) == 0);
  }
  Result version = run({"/usr/bin/flightrec", "--version"});
  INFO(version.out << version.err);
  CHECK(version.code == 0);
  // The installed daemon reads the installed default config: valid, and it records nothing until told to.
  Result check = run({"/usr/sbin/flightrecd", "--check-config"});
  INFO(check.out << check.err);
  CHECK(check.code == 0);
  CHECK(check.out.find("0 watch rule(s)") != std::string::npos);
  Result unit = run({"systemd-analyze", "verify", "/lib/systemd/system/flightrecd.service"});
  INFO(unit.out << unit.err);
  CHECK(unit.code == 0);
  CHECK(unit.err.find("flightrecd.service") == std::string::npos);  // no complaint about the unit
  Result purge = run({"dpkg", "--purge", "flightrec"});
  purge_guard.done = true;
  INFO(purge.out << purge.err);
  CHECK(purge.code == 0);
  for (const auto& f : files) {
    INFO(f);
    CHECK(access(f.c_str(), F_OK) != 0);
  }
  CHECK(access("/etc/flightrec", F_OK) != 0);
}

TEST_CASE("flightrecd: reloads under a stream of syscalls lose none of them") {
  REQUIRE(is_root());
  TempDir dir;
  std::string name = "flightrec-test-hupload-" + std::to_string(getpid());
  CgroupTree tree(name);
  tree.make("job");
  std::string storage = dir.file("records"), config = daemon_config(dir, name, {"jobs=*"});
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  // Each `test -e` is one stat of the marker; the loop counts its own,
  // paced (~30k calls/s, well within what the daemon seals) so that what
  // is measured is the reloads, not the daemon's top speed.
  const int kCalls = 30000;
  std::string marker = dir.file("marker");
  pid_t job = tree.spawn("job", {"sh", "-c", paced_stats(marker, kCalls, 300)});
  for (int i = 1; i <= 10; ++i) {
    kill(d.proc.pid, SIGHUP);
    REQUIRE_MESSAGE(d.await("config reloaded", i), d.err);
    std::this_thread::sleep_for(std::chrono::milliseconds(80));  // spread over the stream
  }
  CHECK(tree.reap(job) == 0);
  Result r = d.stop(SIGTERM);
  CHECK(r.code == 0);
  auto dbs = records_in(storage);
  REQUIRE(dbs.size() == 1);
  auto all = entries(dbs[0]);
  int stats = 0;
  for (const auto& e : all) stats += e.value("path", "") == marker;
  CHECK(stats == kCalls);
  CHECK_MESSAGE(of_type(all, "lost").empty(), d.err, "\n", json(of_type(all, "lost")).dump());
  CHECK(all.back()["reason"] == "flightrecd stopped by signal TERM");
}

namespace {

// Replaces `line` (a whole line of the config) with `with`.
void edit_config(const std::string& config, const std::string& line, const std::string& with) {
  std::string text = slurp(config);
  REQUIRE(text.find(line) != std::string::npos);
  text.replace(text.find(line), line.size(), with);
  std::ofstream(config) << text;
}

// Oldest first, by when each file was last written.
std::vector<std::string> by_age(std::vector<std::string> dbs) {
  std::sort(dbs.begin(), dbs.end(), [](const std::string& a, const std::string& b) {
    return fs::last_write_time(a) < fs::last_write_time(b);
  });
  return dbs;
}

int count_path(const std::vector<json>& all, const std::string& path) {
  int n = 0;
  for (const auto& e : all) n += e.value("path", "") == path;
  return n;
}

}  // namespace

TEST_CASE("flightrecd: a task that moves out of its cgroup and removes it stays recorded until it exits") {
  REQUIRE(is_root());
  TempDir dir;
  std::string name = "flightrec-test-escape-" + std::to_string(getpid());
  CgroupTree tree(name);
  tree.make("agent");
  tree.make("elsewhere");  // no rule matches it
  std::string config = daemon_config(dir, name, {"agent"});
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  std::string root = cgroup2_root() + "/" + name, before = dir.file("before"), after = dir.file("after");
  std::string go = dir.file("go");
  // It moves itself out, removes its cgroup, waits, then acts.
  pid_t agent = tree.spawn("agent", {"sh", "-c", "cat " + before + " 2>/dev/null; echo $$ > " + root +
                                                     "/elsewhere/cgroup.procs; rmdir " + root + "/agent; "
                                                     "while [ ! -e " + go + " ]; do sleep 0.05; done; cat " + after +
                                                     " 2>/dev/null; exit 0"});
  REQUIRE_MESSAGE(d.await("live on elsewhere"), d.err);
  std::ofstream(go) << "go";
  CHECK(tree.reap(agent) == 0);
  REQUIRE_MESSAGE(d.await("flightrecd: sealed"), d.err);
  Result r = d.stop(SIGTERM);
  CHECK(r.code == 0);
  auto dbs = records_in(dir.file("records"));
  REQUIRE(dbs.size() == 1);
  auto all = entries(dbs[0]);
  CHECK(count_path(all, before) >= 1);
  CHECK(count_path(all, after) >= 1);  // after its cgroup was gone
  CHECK(!of_type(all, "cgroup_gone").empty());
  CHECK(all.back()["reason"] == "the cgroup is gone and so is every task of its session");
  CHECK(flightrec({"verify", "--db", dbs[0]}).code == 0);
}

TEST_CASE("flightrecd: nested cgroups both recorded: a process belongs to the innermost session") {
  REQUIRE(is_root());
  TempDir dir;
  std::string name = "flightrec-test-nest-" + std::to_string(getpid());
  CgroupTree tree(name);
  tree.make("outer/inner");
  std::string marker = dir.file("marker");
  tree.spawn("outer/inner", {"sh", "-c", "while :; do test -e " + marker + "; sleep 0.02; done"});
  std::string config = daemon_config(dir, name, {"outer", "outer/inner"});
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  CHECK(d.err.find("recording 2 cgroup(s)") != std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Result r = d.stop(SIGTERM);
  CHECK(r.code == 0);
  std::string root = cgroup2_root() + "/" + name;
  auto dbs = records_in(dir.file("records"));
  auto outer = entries(record_of(dbs, root + "/outer")), inner = entries(record_of(dbs, root + "/outer/inner"));
  REQUIRE(!outer.empty());
  REQUIRE(!inner.empty());
  CHECK(count_path(inner, marker) > 5);
  CHECK(count_path(outer, marker) == 0);
}

TEST_CASE("flightrecd: a session flooding the ring does not keep a new cgroup unrecorded") {
  REQUIRE(is_root());
  TempDir dir;
  std::string name = "flightrec-test-flood-" + std::to_string(getpid());
  CgroupTree tree(name);
  tree.make("busy");
  std::string config = daemon_config(dir, name, {"*"});
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  pid_t flood = tree.spawn("busy", {BENCH_SYSCALLS_BIN, "getppid", "30000000"});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  tree.make("late");
  // Seen between bounded reads of the ring, not after the flood.
  CHECK_MESSAGE(d.await("flightrecd: recording", 2, 5000), d.err);
  kill(flood, SIGKILL);
  tree.reap(flood);
  Result r = d.stop(SIGTERM);
  CHECK(r.code == 0);
}

TEST_CASE("flightrecd: events lost in one session are a gap in that session's record, not in the others'") {
  REQUIRE(is_root());
  TempDir dir;
  std::string name = "flightrec-test-gap-" + std::to_string(getpid());
  CgroupTree tree(name);
  tree.make("loud");
  tree.make("quiet");
  std::string config = daemon_config(dir, name, {"*"});
  edit_config(config, "ring: 8M\n", "ring: 64K\n");  // a ring far smaller than a storm
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  REQUIRE_MESSAGE(d.await("flightrecd: recording", 2), d.err);
  pid_t quiet = tree.spawn("quiet", {"sleep", "60"});
  // The quiet one asleep before the storm, and killed once the daemon has
  // had time to drain the storm's last records: neither its start nor its
  // exit may meet a full ring (the sessions share it).
  auto asleep = [&] {
    std::error_code ec;
    std::string exe = fs::read_symlink("/proc/" + std::to_string(quiet) + "/exe", ec);
    std::ifstream sc("/proc/" + std::to_string(quiet) + "/syscall");
    long nr = -1;
    sc >> nr;
    return exe.find("sleep") != std::string::npos && (nr == 35 || nr == 230);  // nanosleep, clock_nanosleep
  };
  for (int i = 0; i < 3000 && !asleep(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(asleep());
  pid_t storm = tree.spawn("loud", {BENCH_SYSCALLS_BIN, "getppid", "2000000"});
  CHECK(tree.reap(storm) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(quiet, SIGKILL);
  tree.reap(quiet);
  Result r = d.stop(SIGTERM);
  CHECK(r.code == 0);
  auto dbs = records_in(dir.file("records"));
  std::string root = cgroup2_root() + "/" + name + "/";
  std::string loud_db = record_of(dbs, root + "loud"), quiet_db = record_of(dbs, root + "quiet");
  REQUIRE(!loud_db.empty());
  REQUIRE(!quiet_db.empty());
  // Dropped records are counted per session and CPU (cpu_lost); a program
  // run the kernel skipped (program_misses) cannot be told apart, and is
  // a gap in every session.
  auto dropped = [](const std::vector<json>& rec) {
    int64_t n = 0;
    for (const auto& e : of_type(rec, "lost"))
      for (const auto& c : e["cpu_lost"]) n += c.get<int64_t>();
    return n;
  };
  auto loud = entries(loud_db), calm = entries(quiet_db);
  INFO("loud: " << of_type(loud, "lost").size() << " lost entries, " << dropped(loud) << " dropped");
  CHECK(dropped(loud) > 0);
  CHECK(dropped(calm) == 0);
  CHECK(loud.back()["lost_total"].get<int64_t>() >= dropped(loud));
  for (const auto& db : {loud_db, quiet_db}) {
    Result v = flightrec({"verify", "--db", db});
    CHECK_MESSAGE(v.code == 0, v.out << v.err);
  }
}

TEST_CASE("flightrecd: a cgroup deeper than the kernel's walk is recorded") {
  REQUIRE(is_root());
  TempDir dir;
  std::string name = "flightrec-test-deep-" + std::to_string(getpid());
  CgroupTree tree(name);
  std::string rel;
  for (int i = 0; i < 36; ++i) rel += (rel.empty() ? "" : "/") + std::string("d") + std::to_string(i);
  tree.make(rel);
  std::string config = daemon_config(dir, name, {"**/d35"});
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  CHECK(d.err.find("recording 1 cgroup(s)") != std::string::npos);
  std::string marker = dir.file("marker");
  pid_t p = tree.spawn(rel, {"sh", "-c", "cat " + marker + " 2>/dev/null; exit 0"});
  tree.reap(p);
  Result r = d.stop(SIGTERM);
  CHECK(r.code == 0);
  auto dbs = records_in(dir.file("records"));
  REQUIRE(dbs.size() == 1);
  CHECK(count_path(entries(dbs[0]), marker) >= 1);
}

TEST_CASE("flightrecd: a process put into a recorded cgroup from outside is recorded, and how it came") {
  REQUIRE(is_root());
  TempDir dir;
  std::string name = "flightrec-test-inject-" + std::to_string(getpid());
  CgroupTree tree(name);
  tree.make("agent");
  tree.make("outside");  // no rule matches it
  std::string config = daemon_config(dir, name, {"agent"});
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  std::string go = dir.file("go"), marker = dir.file("marker");
  pid_t guest = tree.spawn("outside", {"sh", "-c", "while [ ! -e " + go + " ]; do sleep 0.05; done; cat " + marker +
                                                       " 2>/dev/null; exit 0"});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // This test process, outside every session, moves it in.
  std::ofstream(cgroup2_root() + "/" + name + "/agent/cgroup.procs") << guest << std::endl;
  std::ofstream(go) << "go";
  CHECK(tree.reap(guest) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Result r = d.stop(SIGTERM);
  CHECK(r.code == 0);
  auto dbs = records_in(dir.file("records"));
  REQUIRE(dbs.size() == 1);
  auto all = entries(dbs[0]);
  bool came_in = false;
  for (const auto& e : of_type(all, "cgroup_move"))
    came_in |= e.value("into_session", 0) == 1 && e["moved_pid"] == guest && e["pid"] == getpid();
  CHECK(came_in);
  CHECK(count_path(all, marker) >= 1);
}

TEST_CASE("flightrecd's metrics: Prometheus scrapes them and its query API reads them back") {
  REQUIRE(is_root());
  REQUIRE_MESSAGE(access("/usr/bin/prometheus", X_OK) == 0, "Debian's prometheus package (tools/install-deps.sh)");
  TempDir dir;
  std::string name = "flightrec-test-metrics-" + std::to_string(getpid());
  CgroupTree tree(name);
  tree.make("job");
  std::string marker = dir.file("marker");
  tree.spawn("job", {"sh", "-c", "while :; do test -e " + marker + "; sleep 0.01; done"});
  int metrics_port, web_port;
  {
    Listener a, b;  // ports the kernel says are free
    metrics_port = a.port;
    web_port = b.port;
  }
  std::string config = daemon_config(dir, name, {"job"});
  std::ofstream(config, std::ios::app) << "metrics:\n  listen: \"127.0.0.1:" << metrics_port << "\"\n";
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  std::string url = "http://127.0.0.1:" + std::to_string(metrics_port);
  Result page = run({"curl", "-sS", "-i", url + "/metrics"});
  INFO(page.out << page.err);
  CHECK(page.out.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  CHECK(page.out.find("# TYPE flightrecd_sessions gauge\nflightrecd_sessions 1\n") != std::string::npos);
  CHECK(page.out.find("flightrecd_bpf_program_runs_total{program=\"fr_sys_exit\"}") != std::string::npos);
  CHECK(run({"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", url + "/other"}).out == "404");

  std::string prom = dir.file("prometheus.yml");
  std::ofstream(prom) << "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: flightrecd\n"
                      << "    static_configs:\n      - targets: ['127.0.0.1:" << metrics_port << "']\n";
  Proc server = start({"prometheus", "--config.file=" + prom, "--storage.tsdb.path=" + dir.file("tsdb"),
                       "--web.listen-address=127.0.0.1:" + std::to_string(web_port)});
  auto query = [&](const std::string& q) {
    return run({"curl", "-sS", "--get", "--data-urlencode", "query=" + q,
                "http://127.0.0.1:" + std::to_string(web_port) + "/api/v1/query"})
        .out;
  };
  std::string sessions, entries_seen;
  for (int i = 0; i < 120; ++i) {  // Prometheus starts, then scrapes every second
    sessions = query("flightrecd_sessions");
    entries_seen = query("flightrecd_session_entries_total{rule=\"rule0\"} > 0");
    if (sessions.find("\"1\"]") != std::string::npos && entries_seen.find("\"cgroup\"") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  kill(server.pid, SIGTERM);
  Result prom_out = wait(server);
  INFO(sessions << "\n" << entries_seen << "\n" << prom_out.err.substr(0, 2000));
  CHECK(sessions.find("\"status\":\"success\"") != std::string::npos);
  CHECK(sessions.find("\"1\"]") != std::string::npos);
  CHECK(entries_seen.find(cgroup2_root() + "/" + name + "/job") != std::string::npos);
  Result r = d.stop(SIGTERM);
  CHECK(r.code == 0);
}

TEST_CASE("flightrecd: storage.rotate continues a session in chained files; storage.retain removes the oldest") {
  REQUIRE(is_root());
  TempDir dir;
  std::string name = "flightrec-test-rotate-" + std::to_string(getpid());
  CgroupTree tree(name);
  tree.make("job");
  std::string config = daemon_config(dir, name, {"job"});
  edit_config(config, "  dir: " + dir.file("records") + "\n",
              "  dir: " + dir.file("records") + "\n  rotate:\n    size: 128K\n  retain:\n    count: 3\n");
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  // 60k stats of the marker, paced over 6 s or more (sizes are checked
  // every second): several files' worth.
  const int kCalls = 60000;
  std::string marker = dir.file("marker");
  pid_t job = tree.spawn("job", {"sh", "-c", paced_stats(marker, kCalls, 100)});
  CHECK(tree.reap(job) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the last rotation check
  Result r = d.stop(SIGTERM);
  CHECK(r.code == 0);
  int rotations = occurrences(r.err, "flightrecd: rotated"), removed = occurrences(r.err, "(retention: ");
  INFO(r.err);
  REQUIRE(rotations >= 4);
  // Every file of a session still recorded is kept, however many.
  CHECK(removed == 0);
  auto dbs = records_in(dir.file("records"));
  CHECK(int(dbs.size()) == rotations + 1);
  // The next start applies the bounds to what is sealed now: the newest 3.
  {
    tree.remove("job");
    Daemon again(config);
    REQUIRE_MESSAGE(again.await("flightrecd: running"), again.err);
    Result r2 = again.stop(SIGTERM);
    CHECK(occurrences(r2.err, "(retention: ") == rotations + 1 - 3);
  }
  dbs = records_in(dir.file("records"));
  CHECK(dbs.size() == 3);
  // The files kept are a chain: each genesis names the one before, and its last chain value.
  dbs = by_age(dbs);
  for (size_t i = 0; i < dbs.size(); ++i) {
    Result v = flightrec({"verify", "--db", dbs[i]});
    INFO(dbs[i] << ": " << v.out << v.err);
    CHECK(v.code == 0);
    auto all = entries(dbs[i]);
    REQUIRE(all.size() >= 2);
    if (i + 1 < dbs.size()) CHECK(all.back()["reason"] == "rotated (size)");
    if (i > 0) {
      auto prev = entries(dbs[i - 1]);
      CHECK(all.front()["previous_record"] == fs::path(dbs[i - 1]).filename().string());
      CHECK(all.front()["previous_origin"] == prev.front()["origin"]);
      CHECK(all.front()["previous_head"].get<std::string>() + "\n" == sqlite(dbs[i - 1], "select chain_head from sessions"));
    }
  }
  CHECK(entries(dbs.back()).back()["reason"] == "flightrecd stopped by signal TERM");
}

namespace {

// A small tmpfs for records, unmounted at the end.
struct SmallDisk {
  std::string path;
  explicit SmallDisk(const std::string& at, const std::string& size) : path(at) {
    REQUIRE(mkdir(path.c_str(), 0700) == 0);
    REQUIRE(run({"mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", path}).code == 0);
  }
  ~SmallDisk() { run({"umount", "-l", path}); }
  // Fills it to `free_kib` KiB free.
  void fill_to(uint64_t free_kib) {
    Result df = run({"df", "--output=avail", "-k", path});
    uint64_t avail = std::stoull(df.out.substr(df.out.find('\n') + 1));
    if (avail > free_kib)
      run({"dd", "if=/dev/zero", "of=" + path + "/filler", "bs=1K", "count=" + std::to_string(avail - free_kib)});
  }
};

}  // namespace

TEST_CASE("flightrecd: storage below min_free suspends the records loudly, then resumes; stop seals them; rotate makes room") {
  REQUIRE(is_root());
  for (std::string action : {"suspend", "stop", "rotate"}) {
    CAPTURE(action);
    TempDir dir;
    SmallDisk disk(dir.file("disk"), "24m");
    std::string name = "flightrec-test-full-" + std::to_string(getpid());
    CgroupTree tree(name);
    tree.make("job");
    std::string config = daemon_config(dir, name, {"job"});
    edit_config(config, "  dir: " + dir.file("records") + "\n",
                "  dir: " + disk.path + "/records\n  min_free: 8M\n  disk_full_action: " + action + "\n");
    std::string marker = dir.file("marker");
    pid_t job = tree.spawn("job", {"sh", "-c", "while :; do test -e " + marker + "; sleep 0.01; done"});
    Daemon d(config);
    REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
    if (action == "rotate") {
      // An old sealed record of 3 MiB: removing it is room enough.
      std::string old = disk.path + "/records/rule0/20200101T000000Z-old-1.db";
      run({"dd", "if=/dev/zero", "of=" + old, "bs=1K", "count=3072"});
      disk.fill_to(7 * 1024);
      REQUIRE_MESSAGE(d.await("removed the 1 oldest sealed record(s)", 1, 5000), d.err);
      CHECK(access(old.c_str(), F_OK) != 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      Result r = d.stop(SIGTERM);
      CHECK(r.code == 0);
      CHECK(r.err.find("STORAGE FULL") == std::string::npos);
      auto dbs = records_in(disk.path + "/records");
      REQUIRE(dbs.size() == 1);
      CHECK(of_type(entries(dbs[0]), "recording_suspended").empty());
      kill(job, SIGKILL);
      tree.reap(job);
      continue;
    }
    disk.fill_to(7 * 1024);  // below the mark
    REQUIRE_MESSAGE(d.await("STORAGE FULL", 1, 5000), d.err);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    unlink((disk.path + "/filler").c_str());  // room again
    REQUIRE_MESSAGE(d.await("has room again", 1, 5000), d.err);
    if (action == "stop") REQUIRE_MESSAGE(d.await("flightrecd: recording", 2, 5000), d.err);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(job, SIGKILL);
    tree.reap(job);
    Result r = d.stop(SIGTERM);
    CHECK(r.code == 0);
    auto dbs = records_in(disk.path + "/records");
    for (const auto& db : dbs) CHECK(flightrec({"verify", "--db", db}).code == 0);
    if (action == "suspend") {
      REQUIRE(dbs.size() == 1);
      auto all = entries(dbs[0]);
      auto suspended = of_type(all, "recording_suspended"), resumed = of_type(all, "recording_resumed");
      REQUIRE(suspended.size() == 1);
      REQUIRE(resumed.size() == 1);
      CHECK(suspended[0]["min_free_bytes"] == 8 << 20);
      CHECK(resumed[0]["records_left_out"].get<int64_t>() > 0);  // the loop went on meanwhile
      // Nothing of the session's between the two but what flightrec wrote.
      for (int64_t seq = suspended[0]["seq"].get<int64_t>() + 1; seq < resumed[0]["seq"].get<int64_t>(); ++seq)
        CHECK(all.at(size_t(seq - 1))["comm"] == "flightrec");
      CHECK(count_path(all, marker) > 0);
    } else {
      // The first session sealed when the disk filled; a new one once it had room.
      REQUIRE(dbs.size() == 2);
      dbs = by_age(dbs);
      CHECK(entries(dbs[0]).back()["reason"] == "storage below storage.min_free (disk_full_action: stop)");
      CHECK(entries(dbs[1]).back()["reason"] == "flightrecd stopped by signal TERM");
    }
  }
}

TEST_CASE("flightrecd: socket.group lets that group's members ask for status, and no one else") {
  REQUIRE(is_root());
  REQUIRE(run({"groupadd", "-f", "flightrectest"}).code == 0);
  struct DropGroup {
    ~DropGroup() { run({"groupdel", "flightrectest"}); }
  } drop_group;
  std::string gid = run({"getent", "group", "flightrectest"}).out;
  gid = gid.substr(gid.find(':', gid.find(':') + 1) + 1);
  gid = gid.substr(0, gid.find(':'));
  TempDir dir;
  chmod(dir.path.c_str(), 0711);  // others may reach the socket inside, as they may /run/flightrec
  std::string name = "flightrec-test-group-" + std::to_string(getpid());
  CgroupTree tree(name);
  std::string config = daemon_config(dir, name, {"job"});
  edit_config(config, "  path: " + dir.file("control.sock") + "\n",
              "  path: " + dir.file("control.sock") + "\n  group: flightrectest\n");
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  struct stat st {};
  REQUIRE(stat(dir.file("control.sock").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);
  CHECK(std::to_string(st.st_gid) == gid);
  auto status_as = [&](const std::vector<std::string>& ids) {
    std::vector<std::string> argv = {"setpriv"};
    argv.insert(argv.end(), ids.begin(), ids.end());
    argv.insert(argv.end(), {FLIGHTREC_BIN, "status", "--socket", dir.file("control.sock"), "--json"});
    return run(argv);
  };
  Result member = status_as({"--reuid=65534", "--regid=" + gid, "--clear-groups"});
  INFO(member.out << member.err);
  CHECK(member.code == 0);
  Result supplementary = status_as({"--reuid=65534", "--regid=65534", "--groups=" + gid});
  INFO(supplementary.out << supplementary.err);
  CHECK(supplementary.code == 0);
  Result other = status_as({"--reuid=65534", "--regid=65534", "--clear-groups"});
  CHECK(other.code == 1);
  CHECK(other.err.find("Permission denied") != std::string::npos);
  CHECK(d.stop(SIGTERM).code == 0);
}

TEST_CASE("flightrecd: a session whose cgroup is gone still rotates, and what its tasks do next is in the next file") {
  REQUIRE(is_root());
  TempDir dir;
  std::string name = "flightrec-test-gonerot-" + std::to_string(getpid());
  CgroupTree tree(name);
  tree.make("agent");
  tree.make("elsewhere");
  std::string config = daemon_config(dir, name, {"agent"});
  edit_config(config, "  dir: " + dir.file("records") + "\n", "  dir: " + dir.file("records") + "\n" + "  rotate:\n    size: 128K\n");
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  std::string root = cgroup2_root() + "/" + name, marker = dir.file("marker"), after = dir.file("after");
  pid_t agent = tree.spawn("agent", {"sh", "-c", "echo $$ > " + root + "/elsewhere/cgroup.procs; rmdir " + root + "/agent; " +
                                                     paced_stats(marker, 40000, 100, "cat " + after + " 2>/dev/null; exit 0")});
  CHECK(tree.reap(agent) == 0);
  REQUIRE_MESSAGE(d.await("so is every task of its session", 1, 10000), d.err);
  Result r = d.stop(SIGTERM);
  CHECK(r.code == 0);
  CHECK(r.err.find("flightrecd: rotated") != std::string::npos);
  CHECK(r.err.find("cannot continue") == std::string::npos);
  auto dbs = records_in(dir.file("records"));
  REQUIRE(dbs.size() >= 2);
  dbs = by_age(dbs);
  int stats = 0;
  for (const auto& db : dbs) {
    CHECK(flightrec({"verify", "--db", db}).code == 0);
    stats += count_path(entries(db), marker);
  }
  CHECK(stats == 40000);  // every one, across the files
  // The last act is in a file after the first (where the cgroup went);
  // which one depends on where a rotation fell.
  int after_opens = 0;
  for (size_t i = 1; i < dbs.size(); ++i) after_opens += count_path(entries(dbs[i]), after);
  CHECK(after_opens >= 1);
  CHECK(entries(dbs.back()).back()["reason"] == "the cgroup is gone and so is every task of its session");
}

namespace {

// A port on 127.0.0.1 that refuses connections: bound, never listening.
struct RefusingPort {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int port = 0;
  RefusingPort() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  ~RefusingPort() { close(fd); }
};

// Every call of lite_acts (tests/programs/lite_acts.c), as it names them.
const std::vector<std::string> kLiteActs = {
    "openat", "open", "creat", "truncate", "link", "linkat", "symlink", "symlinkat", "rename", "renameat",
    "renameat2", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "mknod", "mknodat",
    "unlink", "unlinkat", "mkdir", "rmdir", "mkdirat", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
    "lremovexattr", "fremovexattr", "utime", "utimes", "futimesat", "utimensat", "name_to_handle_at",
    "open_by_handle_at", "execve", "connect", "bind", "listen", "accept", "accept4", "setuid",
    "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "setgroups", "capset",
    "prctl", "seccomp", "add_key", "request_key", "keyctl",
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "mount", "umount2", "pivot_root", "chroot",
    "open_tree", "move_mount", "fsopen", "fsmount", "mount_setattr", "fsconfig", "fspick", "open_tree_attr",
    "swapon", "swapoff", "quotactl", "fanotify_init", "fanotify_mark", "unshare", "setns", "bpf", "init_module",
    "finit_module", "delete_module", "kexec_file_load", "perf_event_open", "io_uring_setup", "userfaultfd", "iopl",
    "ioperm", "syslog", "acct", "reboot", "sethostname", "setdomainname", "settimeofday", "clock_settime",
    "adjtimex", "clock_adjtime", "lsm_set_self_attr", "file_setattr"};

// Calls of `name` by `pid` in a record.
std::vector<json> calls_of(const std::vector<json>& all, const std::string& name, int64_t pid) {
  std::vector<json> out;
  for (const auto& e : all)
    if (e.contains("nr") && e.value("name", "") == name && e.value("pid", int64_t(0)) == pid) out.push_back(e);
  return out;
}

// Sum of the syscall_counts entries' calls of `name` in `cgroup`.
int64_t counted(const std::vector<json>& all, const std::string& name, const std::string& cgroup) {
  int64_t n = 0;
  for (const auto& e : of_type(all, "syscall_counts")) {
    if (e.value("cgroup", "") != cgroup) continue;
    for (size_t i = 0; i < e["syscalls"].size(); ++i)
      if (e["syscalls"][i] == name) n += e["calls"][i].get<int64_t>();
  }
  return n;
}

}  // namespace

TEST_CASE("flightrecd lite mode: every call docs/LITE.md lists is recorded, reads and the rest only counted" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  TempDir dir;
  std::string name = "flightrectest" + std::to_string(getpid()) + "-lite";
  CgroupTree tree(name);
  std::string config = dir.file("flightrecd.yaml");
  std::ofstream(config) << "version: 1\nstorage:\n  dir: " << dir.file("records") << "\nsocket:\n  path: "
                        << dir.file("control.sock") << "\nring: 8M\nlite:\n  counts_interval: 1s\nwatch:\n"
                        << "  - name: lite\n    cgroup: \"" << name << "/agent\"\n    mode: lite\n"
                        << "  - name: full\n    cgroup: \"" << name << "/other\"\n";
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  std::string agent = tree.make("agent"), other = tree.make("other");
  REQUIRE_MESSAGE(d.await("rule lite"), d.err);
  REQUIRE_MESSAGE(d.await("rule full"), d.err);
  RefusingPort refusing;
  std::string work_lite = dir.file("lite-work"), work_full = dir.file("full-work");
  mkdir(work_lite.c_str(), 0700);
  mkdir(work_full.c_str(), 0700);
  // What each act returned, for a failure's context (too long for every run's log).
  pid_t lite_pid = tree.spawn("agent", {LITE_ACTS_BIN, work_lite, std::to_string(refusing.port)}, dir.file("lite.out"));
  pid_t full_pid = tree.spawn("other", {LITE_ACTS_BIN, work_full, std::to_string(refusing.port)}, dir.file("full.out"));
  CHECK(tree.reap(lite_pid) == 0);
  CHECK(tree.reap(full_pid) == 0);
  // Counts are sealed each second: wait for one that has the acts' reads.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  Result st = flightrec({"status", "--socket", dir.file("control.sock"), "--json"});
  REQUIRE(st.code == 0);
  json status = json::parse(st.out);  // held: a range-for over a temporary's member dangles (C++20)
  REQUIRE(!status["sessions"].empty());
  for (const auto& s : status["sessions"]) CHECK(s["mode"] == (s["rule"] == "lite" ? "lite" : "full"));
  Result r = d.stop();
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto dbs = records_in(dir.file("records"));
  std::string lite_db = record_of(dbs, agent), full_db = record_of(dbs, other);
  REQUIRE(!lite_db.empty());
  REQUIRE(!full_db.empty());
  CHECK(flightrec({"verify", "--db", lite_db}).code == 0);
  CHECK(flightrec({"verify", "--db", full_db}).code == 0);
  auto lite = entries(lite_db), full = entries(full_db);
  INFO("lite_acts in the lite session:\n" << slurp(dir.file("lite.out")));
  INFO("lite_acts in the full session:\n" << slurp(dir.file("full.out")));

  // The lite session is served by the syscall tracepoints alone, the full
  // one by the raw syscall program, and neither records the other's way.
  const json& lite_genesis = lite.front();
  CHECK(lite_genesis["capture_mode"] == "lite");
  CHECK(lite_genesis["counts_interval_ms"] == 1000);
  auto has = [](const json& list, const std::string& s) { return std::find(list.begin(), list.end(), s) != list.end(); };
  CHECK(has(lite_genesis["capture"], "tracepoint/syscalls/sys_exit_openat"));
  CHECK(!has(lite_genesis["capture"], "tp_btf/sys_exit"));
  CHECK(full.front()["capture_mode"] == "full");
  CHECK(has(full.front()["capture"], "tp_btf/sys_exit"));
  CHECK(!has(full.front()["capture"], "tracepoint/syscalls/sys_exit_openat"));

  // Every act once (open twice: a truncation and /proc/self/mem; prctl
  // once of two: PR_GET_DUMPABLE is only counted). A call whose tracepoint
  // this kernel lacks is one it does not have (init_module without
  // CONFIG_MODULES): ENOSYS, as the full record shows, and the genesis
  // entry lists it.
  for (const auto& act : kLiteActs) {
    INFO(act);
    std::string tracepoint = act == "umount2" ? std::string("umount") : act;
    size_t expected = act == "open" || act == "connect" ? 2 : 1;
    if (has(lite_genesis["capture"], "tracepoint/syscalls/sys_exit_" + tracepoint)) {
      CHECK(calls_of(lite, act, lite_pid).size() == expected);
    } else {
      CHECK(calls_of(lite, act, lite_pid).empty());
      CHECK(has(lite_genesis.value("capture_absent", json::array()), tracepoint));
      REQUIRE(calls_of(full, act, full_pid).size() == (act == "prctl" ? 2u : expected));
      CHECK(calls_of(full, act, full_pid)[0]["ret"] == -38);
    }
  }
  CHECK(calls_of(lite, "prctl", lite_pid).at(0)["args"][0] == 4);  // PR_SET_DUMPABLE
  CHECK(calls_of(lite, "open", lite_pid).at(1).value("kernel_path", "") == "/proc/" + std::to_string(lite_pid) + "/mem");
  // A clone that made a user namespace: the fork entry says so.
  int new_ns = 0;
  for (const auto& e : of_type(lite, "fork")) new_ns += e.value("pid", int64_t(0)) == lite_pid && e.value("new_namespaces", 0) == 1;
  CHECK(new_ns == 1);
  auto ret_of = [&](const std::string& act) { return calls_of(lite, act, lite_pid).at(0).value("ret", int64_t(1)); };
  CHECK(ret_of("execve") == -2);     // ENOENT: a failed exec is recorded, a good one is the exec entry
  CHECK(ret_of("connect") == -111);  // ECONNREFUSED
  CHECK(ret_of("renameat2") == 0);
  CHECK(ret_of("umount2") == -2);
  // The accepted connection's peer, from the kernel (no buffer was given).
  const json accepted = calls_of(lite, "accept", lite_pid).at(0);
  CHECK(accepted.value("ret", int64_t(-1)) >= 0);
  CHECK(accepted.value("addr", "") == "127.0.0.1");
  CHECK(accepted.value("addr_from_kernel", 0) == 1);
  // Opens: the two that write or truncate, not the 200 reads after them.
  auto opens = calls_of(lite, "openat", lite_pid);
  CHECK(opens.at(0).value("kernel_path", "") == work_lite + "/written");
  CHECK(calls_of(lite, "open", lite_pid).at(0).value("path", "") == work_lite + "/written");
  // Where BPF-LSM loads, its view of the same opens: the two that write or
  // truncate, no reads; and no capability checks (too many for lite).
  if (has(lite_genesis["capture"], "lsm/file_open")) {
    int lsm_opens = 0;
    for (const auto& e : of_type(lite, "lsm")) {
      CHECK(e.value("hook", "") != "capable");
      lsm_opens += e.value("hook", "") == "file_open" && e.value("path", "") == work_lite + "/written";
    }
    CHECK(lsm_opens == 2);
  }
  // The full session saw all of it: the reads and 10000 getppid calls.
  CHECK(calls_of(full, "openat", full_pid).size() >= 201);
  CHECK(calls_of(full, "getppid", full_pid).size() == 10001);  // and one for ptrace's target
  CHECK(calls_of(lite, "getppid", lite_pid).empty());
  // Counted per cgroup: every openat (1 + 200 reads), never getppid (no hook).
  CHECK(counted(lite, "openat", agent) >= 201);
  CHECK(counted(lite, "execve", agent) == 2);  // lite_acts' own exec and the failed one
  CHECK(counted(lite, "prctl", agent) == 2);
  CHECK(counted(lite, "getppid", agent) == 0);
  CHECK(of_type(full, "syscall_counts").empty());
}

namespace {

// A server started by the test that prints "PORT n" first (the mock, the
// webhook sink): its port.
int port_of(Proc& p) {
  std::string line;
  char c;
  while (line.find('\n') == std::string::npos && read(p.out_fd, &c, 1) == 1) line += c;
  REQUIRE_MESSAGE(line.starts_with("PORT "), line);
  return std::stoi(line.substr(5));
}

}  // namespace

TEST_CASE("flightrecd: a watched cgroup's agent, its model calls and tool calls in its record (watch rule with tls), and as OTLP spans at a collector") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  REQUIRE_MESSAGE(!cgroup2_root().empty(), "needs cgroup v2");
  TempDir dir;
  MockApi mock;
  std::string name = "flightrecturns" + std::to_string(getpid()) + ".slice";
  CgroupTree tree(name);
  tree.make("job.scope");
  std::string received = dir.file("otlp");
  mkdir(received.c_str(), 0700);
  Proc sink = start({"python3", std::string(SOURCE_DIR) + "/tests/programs/otlp_sink.py", received});
  int sink_port = port_of(sink);
  std::string config = daemon_config(dir, name, {"turns=job.scope"});
  std::ofstream(config, std::ios::app) << "    tls: true\noutputs:\n  otlp:\n    - name: traces\n      endpoint: http://127.0.0.1:"
                                       << sink_port << "/v1/traces\n";
  Result check = run({FLIGHTRECD_BIN, "--config", config, "--check-config"});
  CHECK(check.out.find("output traces: OTLP/HTTP protobuf to http://127.0.0.1:") != std::string::npos);
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: recording"), d.err);
  std::string work = dir.file("work");
  mkdir(work.c_str(), 0755);
  pid_t agent = tree.spawn("job.scope", {"sh", "-c", "cd " + work + " && exec python3 " + std::string(SOURCE_DIR) +
                                                         "/tests/programs/llm_agent.py --api anthropic --stream --port " +
                                                         std::to_string(mock.port) + " --ca " + mock.ca});
  CHECK(tree.reap(agent) == 0);
  CHECK(slurp(work + "/hello.txt") == "edited by agent\n");
  tree.remove("job.scope");
  REQUIRE_MESSAGE(d.await("flightrecd: sealed"), d.err);
  d.stop(SIGTERM);
  auto dbs = records_in(dir.file("records"));
  REQUIRE(dbs.size() == 1);
  auto all = entries(dbs[0]);
  auto calls = of_type(all, "llm_call"), tools = of_type(all, "tool_call");
  CHECK(calls.size() == 3);
  REQUIRE(tools.size() == 2);
  CHECK(tools[0]["llm_call"] == calls[0]["seq"]);
  CHECK(tools[0]["act_links"].dump().find("argv") != std::string::npos);
  CHECK(flightrec({"verify", "--db", dbs[0]}).code == 0);
  // The collector got the session's spans as they were sealed (the root at
  // its end), as OpenTelemetry's decoder reads them; each names its entry.
  kill(sink.pid, SIGTERM);
  wait(sink);
  std::vector<json> spans;
  for (const auto& f : std::filesystem::directory_iterator(received))
    for (auto& s : rt::otlp_spans(rt::otlp_decoded(f.path().string()))) spans.push_back(std::move(s));
  std::map<std::string, int> names;
  std::set<std::string> seqs;
  for (const auto& s : spans) {
    ++names[s["name"].get<std::string>()];
    seqs.insert(rt::span_attribute(s, "flightrec.seq").value("intValue", ""));
  }
  INFO(json(names).dump());
  CHECK(names == std::map<std::string, int>{{"chat claude-mock-1", 3}, {"execute_tool Bash", 1}, {"execute_tool Write", 1},
                                             {"invoke_agent job.scope", 1}});
  for (const auto& e : calls) CHECK(seqs.count(std::to_string(e["seq"].get<int64_t>())));
  for (const auto& e : tools) CHECK(seqs.count(std::to_string(e["seq"].get<int64_t>())));
}

namespace {

// The alerts Prometheus has firing now, by name, from its query API.
std::set<std::string> firing(int web_port) {
  Result r = run({"curl", "-sS", "--get", "--data-urlencode", "query=ALERTS{alertstate=\"firing\"}",
                  "http://127.0.0.1:" + std::to_string(web_port) + "/api/v1/query"});
  std::set<std::string> out;
  try {
    nlohmann::json answer = nlohmann::json::parse(r.out);  // named: a loop over a temporary's member dangles
    for (const auto& s : answer["data"]["result"]) out.insert(s["metric"]["alertname"].get<std::string>());
  } catch (const std::exception&) {
  }  // not up yet: none
  return out;
}

}  // namespace

TEST_CASE("health: a real Prometheus and Alertmanager alert on a real flightrecd when events are lost and the disk fills; silent while healthy") {
  REQUIRE(is_root());
  REQUIRE_MESSAGE(access("/usr/bin/prometheus-alertmanager", X_OK) == 0, "Debian's prometheus-alertmanager (tools/install-deps.sh)");
  TempDir dir;
  SmallDisk disk(dir.file("disk"), "24m");
  std::string name = "flightrec-test-health-" + std::to_string(getpid());
  CgroupTree tree(name);
  tree.make("job");
  int metrics_port, web_port, am_port;
  {
    Listener a, b, c;  // ports the kernel says are free
    metrics_port = a.port, web_port = b.port, am_port = c.port;
  }
  // The rules as shipped, but for: clauses of 0 s (the test has no minutes to wait).
  std::string rules = dir.file("rules.yml");
  {
    std::string text = slurp(std::string(SOURCE_DIR) + "/deploy/prometheus/flightrec.rules.yml");
    std::ofstream(rules) << std::regex_replace(text, std::regex("for: [0-9]+[smh]"), "for: 0s");
  }
  std::string hooks = dir.file("hooks.jsonl");
  Proc sink = start({"python3", std::string(SOURCE_DIR) + "/tests/programs/webhook_sink.py", hooks});
  int hook_port = port_of(sink);
  std::ofstream(dir.file("am.yml")) << "route:\n  receiver: hook\n  group_by: ['alertname']\n  group_wait: 1s\n"
                                       "  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: hook\n"
                                       "    webhook_configs:\n      - url: 'http://127.0.0.1:" << hook_port << "/'\n";
  Proc am = start({"prometheus-alertmanager", "--config.file=" + dir.file("am.yml"), "--storage.path=" + dir.file("am"),
                   "--web.listen-address=127.0.0.1:" + std::to_string(am_port), "--cluster.listen-address="});
  std::ofstream(dir.file("prometheus.yml"))
      << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - " << rules
      << "\nalerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['127.0.0.1:" << am_port
      << "']\nscrape_configs:\n  - job_name: flightrecd\n    static_configs:\n      - targets: ['127.0.0.1:" << metrics_port
      << "']\n";
  // Alerts resent every second: the first is sent before the Alertmanager
  // is discovered (Prometheus' default waits a minute to send it again).
  Proc prom = start({"prometheus", "--config.file=" + dir.file("prometheus.yml"), "--storage.tsdb.path=" + dir.file("tsdb"),
                     "--web.listen-address=127.0.0.1:" + std::to_string(web_port), "--rules.alert.resend-delay=1s"});
  auto query = [&](const std::string& q) {
    return run({"curl", "-sS", "--get", "--data-urlencode", "query=" + q,
                "http://127.0.0.1:" + std::to_string(web_port) + "/api/v1/query"})
        .out;
  };
  auto await_firing = [&](const std::string& alert) {
    for (int i = 0; i < 240; ++i) {
      if (firing(web_port).count(alert) && slurp(hooks).find("\"alertname\":\"" + alert + "\"") != std::string::npos)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    MESSAGE(alert << " did not reach the webhook: Prometheus has " << query("ALERTS") << "\nits Alertmanagers: "
                  << run({"curl", "-sS", "http://127.0.0.1:" + std::to_string(web_port) + "/api/v1/alertmanagers"}).out
                  << "\nthe webhook has: " << slurp(hooks).substr(0, 2000) << "\nthe Alertmanager has: "
                  << run({"curl", "-sS", "http://127.0.0.1:" + std::to_string(am_port) + "/api/v2/alerts"}).out);
    return false;
  };

  // Healthy: a session recording a quiet job, scraped and evaluated for a
  // while; nothing fires, nothing reaches the webhook.
  std::string config = daemon_config(dir, name, {"job"});
  std::ofstream(config, std::ios::app) << "metrics:\n  listen: \"127.0.0.1:" << metrics_port << "\"\n";
  std::string marker = dir.file("marker");
  pid_t job = tree.spawn("job", {"sh", "-c", "while :; do test -e " + marker + "; sleep 0.01; done"});
  {
    Daemon d(config);
    REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
    bool scraped = false;
    for (int i = 0; i < 240 && !scraped; ++i) {
      scraped = query("flightrecd_session_entries_total > 0").find("\"cgroup\"") != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    REQUIRE(scraped);
    // The rules loaded (else "nothing fires" would prove nothing).
    std::string loaded = run({"curl", "-sS", "http://127.0.0.1:" + std::to_string(web_port) + "/api/v1/rules"}).out;
    REQUIRE_MESSAGE(loaded.find("\"FlightrecStorageFull\"") != std::string::npos, loaded);
    std::this_thread::sleep_for(std::chrono::seconds(5));  // five evaluations of every rule
    CHECK(firing(web_port).empty());
    CHECK(slurp(hooks).empty());
    CHECK(d.stop(SIGTERM).code == 0);
  }

  // A ring far smaller than a storm: events lost, per host and per session;
  // and the daemon that started again is said too.
  edit_config(config, "ring: 8M\n", "ring: 64K\n");
  {
    Daemon d(config);
    REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
    pid_t storm = tree.spawn("job", {BENCH_SYSCALLS_BIN, "getppid", "2000000"});
    CHECK(tree.reap(storm) == 0);
    CHECK(await_firing("FlightrecEventsLost"));
    CHECK(await_firing("FlightrecSessionEventsLost"));
    CHECK(await_firing("FlightrecdRestarted"));
    CHECK(d.stop(SIGTERM).code == 0);
  }

  // The record disk fills past min_free: storage full, the session suspended.
  edit_config(config, "ring: 64K\n", "ring: 8M\n");
  edit_config(config, "  dir: " + dir.file("records") + "\n",
              "  dir: " + disk.path + "/records\n  min_free: 8M\n  disk_full_action: suspend\n");
  {
    Daemon d(config);
    REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
    disk.fill_to(4 << 10);
    CHECK(await_firing("FlightrecStorageFull"));
    CHECK(await_firing("FlightrecSessionSuspended"));
    CHECK(d.stop(SIGTERM).code == 0);
  }
  kill(job, SIGKILL);
  tree.reap(job);
  std::string received = slurp(hooks);
  INFO(received.substr(0, 4000));
  // What reached the webhook names the session's cgroup.
  CHECK(received.find(cgroup2_root() + "/" + name + "/job") != std::string::npos);
  for (Proc* p : {&prom, &am, &sink}) {
    kill(p->pid, SIGTERM);
    wait(*p);
  }
}

TEST_CASE("health: every metric the alert rules and the dashboard name is one flightrecd serves") {
  REQUIRE(is_root());
  TempDir dir;
  std::string name = "flightrec-test-names-" + std::to_string(getpid());
  CgroupTree tree(name);
  tree.make("job");
  int metrics_port;
  {
    Listener a;
    metrics_port = a.port;
  }
  std::string config = daemon_config(dir, name, {"job"});
  std::ofstream(config, std::ios::app) << "metrics:\n  listen: \"127.0.0.1:" << metrics_port << "\"\n";
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  std::string page = run({"curl", "-sS", "http://127.0.0.1:" + std::to_string(metrics_port) + "/metrics"}).out;
  CHECK(d.stop(SIGTERM).code == 0);
  std::set<std::string> served;
  for (size_t at = 0; (at = page.find("# TYPE ", at)) != std::string::npos; at += 7)
    served.insert(page.substr(at + 7, page.find(' ', at + 7) - at - 7));
  REQUIRE(served.count("flightrecd_sessions"));
  // Every flightrecd_* name in the rules and in the dashboard, and every
  // recording rule the dashboard reads is one the rules make.
  std::string rules = slurp(std::string(SOURCE_DIR) + "/deploy/prometheus/flightrec.rules.yml");
  std::string dashboard = slurp(std::string(SOURCE_DIR) + "/deploy/grafana/flightrec.json");
  REQUIRE(!dashboard.empty());
  CHECK(nlohmann::json::parse(dashboard)["panels"].size() > 10);  // valid JSON, with its panels
  size_t names = 0;
  for (const std::string* text : {&rules, &dashboard}) {
    for (size_t at = 0; (at = text->find("flightrecd_", at)) != std::string::npos;) {
      size_t end = at;
      while (end < text->size() && (isalnum((unsigned char)(*text)[end]) || (*text)[end] == '_')) ++end;
      std::string metric = text->substr(at, end - at);
      at = end;
      if (metric == "flightrecd_" || metric.rfind("flightrecd_", 0) != 0) continue;
      ++names;
      CHECK_MESSAGE(served.count(metric), metric << " is not served by flightrecd");
    }
    for (size_t at = 0; (at = text->find("flightrec:", at)) != std::string::npos;) {
      size_t end = at;
      while (end < text->size() && (isalnum((unsigned char)(*text)[end]) || (*text)[end] == '_' || (*text)[end] == ':')) ++end;
      std::string rule = text->substr(at, end - at);
      at = end;
      if (rule.size() == 10) continue;  // "flightrec: recording health", a title
      CHECK_MESSAGE(rules.find("- record: " + rule + "\n") != std::string::npos, rule << " is no recording rule of ours");
    }
  }
  CHECK(names > 20);
}

TEST_CASE("flightrecd: a session probes at most 16 TLS files of its own, another's are still probed, and a session's go when it ends") {
  REQUIRE(is_root());
  REQUIRE_MESSAGE(!cgroup2_root().empty(), "needs cgroup v2");
  const std::string libssl = "/usr/lib/x86_64-linux-gnu/libssl.so.3";
  REQUIRE(access(libssl.c_str(), R_OK) == 0);
  TempDir dir;
  std::string name = "flightrec-test-tlsshare-" + std::to_string(getpid());
  CgroupTree tree(name);
  tree.make("a");
  tree.make("b");
  int metrics_port;
  {
    Listener l;  // a port the kernel says is free
    metrics_port = l.port;
  }
  std::string config = dir.file("flightrecd.yaml");
  std::ofstream(config) << "version: 1\nstorage:\n  dir: " << dir.file("records") << "\nsocket:\n  path: "
                        << dir.file("control.sock") << "\nring: 8M\nwatch:\n  - name: a\n    cgroup: \"" << name
                        << "/a\"\n    tls: true\n  - name: b\n    cgroup: \"" << name << "/b\"\n    tls: true\n"
                        << "metrics:\n  listen: \"127.0.0.1:" << metrics_port << "\"\n";
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: recording", 2), d.err);
  auto probed = [&] {
    std::string page = run({"curl", "-sS", "http://127.0.0.1:" + std::to_string(metrics_port) + "/metrics"}).out;
    size_t at = page.find("\nflightrecd_tls_files_probed ");
    return at == std::string::npos ? -1L : std::stol(page.substr(at + 29));
  };
  long base = probed();
  REQUIRE(base >= 0);
  // 20 copies of libssl (20 files to the kernel) in a, opened and held open
  // by one process (its view of the paths is where the daemon opens them).
  std::string libs = dir.file("libs");
  std::string copies;
  for (int i = 0; i < 21; ++i) {
    std::string sub = libs + "/" + std::to_string(i);
    fs::create_directories(sub);
    fs::copy_file(libssl, sub + "/libssl.so.3");
    if (i < 20) copies += " " + sub + "/libssl.so.3";
  }
  const char* hold = "import sys, time\nfiles = [open(p, 'rb') for p in sys.argv[1:]]\ntime.sleep(120)\n";
  pid_t holder_a = tree.spawn("a", {"sh", "-c", std::string("exec python3 -c \"") + hold + "\"" + copies});
  CHECK(eventually([&] { return probed() == base + 16; }, 60000));
  // b's own copy is probed: a's share is not the daemon's whole.
  pid_t holder_b = tree.spawn("b", {"python3", "-c", hold, libs + "/20/libssl.so.3"});
  CHECK(eventually([&] { return probed() == base + 17; }, 60000));
  CHECK(probed() == base + 17);  // and a got no more meanwhile
  // a ends: the probes of its files go; b's stay.
  kill(holder_a, SIGKILL);
  tree.reap(holder_a);
  tree.remove("a");
  REQUIRE_MESSAGE(d.await("flightrecd: sealed"), d.err);
  CHECK(eventually([&] { return probed() == base + 1; }, 30000));
  kill(holder_b, SIGKILL);
  tree.reap(holder_b);
  d.stop(SIGTERM);
  // a's record says which copies were not probed, and why.
  std::string a_db = record_of(records_in(dir.file("records")), tree.base + "/a");
  REQUIRE(!a_db.empty());
  int refused = 0;
  for (const auto& e : of_type(entries(a_db), "error"))
    refused += e.value("detail", "").find("files probed already (each session's share)") != std::string::npos;
  CHECK(refused == 4);
}
