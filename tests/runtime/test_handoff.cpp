// `flightrec run` handing its session to a running flightrecd: the record is
// the one it makes in-process, TLS plaintext comes from the daemon's
// probes, the daemon lists the run while it lasts and ends it with its
// connection, a daemon that dies takes the command with it (said in the
// record), and requests the daemon should not serve are refused.
#include <doctest/doctest.h>

#include <bpf/bpf.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "common/text.h"
#include "control/client.h"
#include "runtime/harness.h"

using nlohmann::json;
using namespace rt;

namespace {

// A daemon that watches nothing and takes runs, its socket in dir.
std::string runs_config(const TempDir& dir, const std::string& extra = "") {
  std::string config = dir.file("flightrecd.yaml");
  std::ofstream(config) << "version: 1\nstorage:\n  dir: " << dir.file("records") << "\nsocket:\n  path: "
                        << dir.file("control.sock") << "\nring: 8M\n" << extra << "watch:\n";
  return config;
}

json status_of(const TempDir& dir) {
  Result r = rt::flightrec({"status", "--socket", dir.file("control.sock"), "--json"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return json::parse(r.out);
}

// `cat /etc/hostname` under observe, handed to the daemon whose socket is in dir.
Result handed_cat(const TempDir& dir, const std::string& db) {
  return rt::flightrec({"run", "--daemon", "require", "--daemon-socket", dir.file("control.sock"), "--policy", "observe",
                        "--tls", "off", "--db", db, "--", "/bin/cat", "/etc/hostname"});
}

// Waits (up to a minute: emulated kernels are slow) until the daemon lists `n` runs.
bool runs_listed(const TempDir& dir, size_t n) {
  for (int i = 0; i < 600; ++i) {
    if (status_of(dir)["runs"].size() == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// The programs executed, by name (where they are differs between
// systems), but sleep (how often the wait loop ran is timing).
std::set<std::string> exec_files(const std::vector<json>& all) {
  std::set<std::string> out;
  for (const auto& e : of_type(all, "exec")) {
    std::string file = e.value("filename", "");
    file = file.substr(file.rfind('/') + 1);
    if (file != "sleep") out.insert(file);
  }
  return out;
}

bool opened(const std::vector<json>& all, const std::string& path) {
  for (const auto& e : of_type(all, "file_open"))
    if (e.value("path", "") == path) return true;
  return false;
}

// A shell command that makes `started`, waits for `go` to exist, reads
// /etc/hostname and exits 3.
std::string waits_for(const std::string& started, const std::string& go) {
  return "touch " + started + "; while [ ! -e " + go + " ]; do sleep 0.05; done; cat /etc/hostname > /dev/null; exit 3";
}

// The ids of the ring buffers flightrecd makes for runs (named so), host-wide.
std::set<uint32_t> session_rings() {
  std::set<uint32_t> ids;
  for (uint32_t id = 0; bpf_map_get_next_id(id, &id) == 0;) {
    int fd = bpf_map_get_fd_by_id(id);
    if (fd < 0) continue;
    bpf_map_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.type == BPF_MAP_TYPE_RINGBUF &&
        std::string(info.name) == "fr_session_ring")
      ids.insert(id);
    close(fd);
  }
  return ids;
}

// The ids of the session rings a process holds (its fdinfo says map_id).
std::set<uint32_t> rings_held_by(pid_t pid) {
  std::set<uint32_t> all = session_rings(), held;
  std::string dir = "/proc/" + std::to_string(pid) + "/fdinfo";
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(f.path());
    for (std::string line; std::getline(in, line);)
      if (line.rfind("map_id:", 0) == 0) {
        uint32_t id = uint32_t(std::stoul(line.substr(7)));
        if (all.count(id)) held.insert(id);
      }
  }
  return held;
}

void await_file(const std::string& path) {
  for (int i = 0; i < 600 && !std::filesystem::exists(path); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

}  // namespace

TEST_CASE("run through flightrecd: the record it makes in-process, and the run listed while it lasts") {
  REQUIRE(is_root());
  TempDir dir;
  Daemon d(runs_config(dir));
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  std::string handed = dir.file("handed.db"), here = dir.file("here.db"), go = dir.file("go");
  std::vector<std::string> common = {"--policy", "observe", "--tls", "off", "--daemon-socket", dir.file("control.sock")};
  std::vector<std::string> args = {"run", "--daemon", "require", "--db", handed};
  args.insert(args.end(), common.begin(), common.end());
  args.insert(args.end(), {"--", "/bin/sh", "-c", waits_for(dir.file("started1"), go)});
  std::vector<std::string> argv = {FLIGHTREC_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  Proc p = start(argv);
  await_file(dir.file("started1"));
  REQUIRE(runs_listed(dir, 1));
  json run = status_of(dir)["runs"][0];
  CHECK(run["cgroup"].get<std::string>().find("/run-") != std::string::npos);
  CHECK(run["ended"] == false);
  std::ofstream(go) << "";
  Result r = wait(p);
  INFO(r.err);
  CHECK(r.code == 3);
  CHECK(r.err.empty());
  CHECK(runs_listed(dir, 0));  // the session ended with its connection

  // The same in-process.
  std::string go2 = dir.file("go2");
  argv = {FLIGHTREC_BIN, "run", "--daemon", "off", "--db", here};
  argv.insert(argv.end(), common.begin(), common.end());
  argv.insert(argv.end(), {"--", "/bin/sh", "-c", waits_for(dir.file("started2"), go2)});
  p = start(argv);
  await_file(dir.file("started2"));
  std::ofstream(go2) << "";
  Result local = wait(p);
  CHECK(local.code == 3);

  auto a = entries(handed), b = entries(here);
  REQUIRE(!a.empty());
  REQUIRE(!b.empty());
  CHECK(exec_files(a) == std::set<std::string>{"sh", "touch", "cat"});
  CHECK(exec_files(b) == exec_files(a));
  CHECK(opened(a, "/etc/hostname"));
  CHECK(opened(b, "/etc/hostname"));
  CHECK(of_type(a, "syscall").size() > 20);
  CHECK(of_type(a, "lost").empty());
  CHECK(of_type(a, "error").empty());
  auto end_a = of_type(a, "session_end"), end_b = of_type(b, "session_end");
  REQUIRE(end_a.size() == 1);
  REQUIRE(end_b.size() == 1);
  CHECK(end_a[0]["exit_code"] == 3);
  CHECK(end_a[0]["reason"] == end_b[0]["reason"]);
  CHECK(rt::flightrec({"verify", "--db", handed}).code == 0);
  CHECK(d.stop(SIGTERM).code == 0);
}

TEST_CASE("run through flightrecd: TLS plaintext from the probes the daemon attached") {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  Daemon d(runs_config(dir));
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  std::string db = dir.file("s.db");
  Result r = rt::flightrec({"run", "--daemon", "require", "--daemon-socket", dir.file("control.sock"), "--policy", "observe",
                        "--db", db, "--", "curl", "-sk", srv.url("/x")});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "hello tls body\n");
  auto all = entries(db);
  std::string sent, received;
  for (const auto& e : of_type(all, "tls")) {
    CHECK(e["comm"] == "curl");
    std::string data = *flightrec::base64_decode(e["data_b64"].get<std::string>());
    (e["direction"] == "send" ? sent : received) += data;
  }
  CHECK(sent.rfind("GET /x HTTP/1.1\r\n", 0) == 0);
  CHECK(received.find("hello tls body\n") != std::string::npos);
  CHECK(of_type(all, "tls_uncaptured").empty());
  CHECK(rt::flightrec({"verify", "--db", db}).code == 0);

  // A run that asked for none keeps none, though the daemon's probes fire.
  std::string off = dir.file("off.db");
  r = rt::flightrec({"run", "--daemon", "require", "--daemon-socket", dir.file("control.sock"), "--policy", "observe",
                     "--tls", "off", "--db", off, "--", "curl", "-sk", srv.url("/x")});
  REQUIRE(r.code == 0);
  auto none = entries(off);
  CHECK(of_type(none, "tls").empty());
  CHECK(of_type(none, "tls_hello").empty());
  CHECK(!of_type(none, "exec").empty());
}

TEST_CASE("run through flightrecd: a daemon that dies takes the command with it, and the record says so") {
  REQUIRE(is_root());
  TempDir dir;
  Daemon d(runs_config(dir));
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  std::string db = dir.file("s.db");
  Proc p = start({FLIGHTREC_BIN, "run", "--daemon", "require", "--daemon-socket", dir.file("control.sock"), "--policy",
                  "observe", "--tls", "off", "--db", db, "--", "sleep", "60"});
  REQUIRE(runs_listed(dir, 1));
  d.stop(SIGKILL);
  Result r = wait(p);
  CHECK(r.code == 128 + SIGKILL);  // the command's status: killed
  CHECK(r.err.find("flightrecd went away") != std::string::npos);
  auto all = entries(db);
  bool said = false;
  for (const auto& e : of_type(all, "error")) said = said || e.dump().find("went away") != std::string::npos;
  CHECK(said);
  auto end = of_type(all, "session_end");
  REQUIRE(end.size() == 1);
  CHECK(end[0]["reason"] == "flightrecd went away; the session was ended");
  CHECK(rt::flightrec({"verify", "--db", db}).code == 0);
}

TEST_CASE("flightrecd refuses runs it should not take; --daemon require says why, auto records in-process") {
  REQUIRE(is_root());
  TempDir dir;
  std::string name = "flightrec-test-handoff-" + std::to_string(getpid());
  std::string watched = cgroup2_root() + "/" + name;
  REQUIRE(mkdir(watched.c_str(), 0755) == 0);
  struct Remove {
    std::string path;
    ~Remove() { rmdir(path.c_str()); }
  } remove{watched};
  std::string config = runs_config(dir);
  std::ofstream(config, std::ios::app) << "  - name: taken\n    cgroup: \"" << name << "\"\n";
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: running, 1 watch rule(s), recording 1 cgroup(s)"), d.err);
  // Straight to the socket, as any root process could ask.
  auto ask = [&](const std::string& request) {
    std::string script =
        "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\ns.sendall(sys.argv[2].encode()+b'\\n')\n"
        "print(s.recv(65536).decode())\n";
    Result r = run({"python3", "-c", script, dir.file("control.sock"), request});
    REQUIRE(r.code == 0);
    return json::parse(r.out).value("error", "");
  };
  CHECK(ask(R"({"request":"session","cgroup":"/etc","ring_bytes":65536})").find("not a cgroup below") != std::string::npos);
  CHECK(ask(R"({"request":"session","cgroup":")" + cgroup2_root() + R"(/a/../b","ring_bytes":65536})")
            .find("not a cgroup below") != std::string::npos);
  CHECK(ask(R"({"request":"session","cgroup":")" + watched + R"(","ring_bytes":1000})").find("ring_bytes") != std::string::npos);
  CHECK(ask(R"({"request":"session","cgroup":")" + watched + R"(","ring_bytes":65536})")
            .find("watch rule taken records that cgroup already") != std::string::npos);
  CHECK(ask(R"({"request":"session","cgroup":")" + watched + R"(/none","ring_bytes":65536})") != "");
  CHECK(status_of(dir)["runs"].empty());

  // A session that needs what the daemon lacks: entry times off here.
  TempDir dir2;
  Daemon d2(runs_config(dir2, "runs:\n  entry_times: false\n"));
  REQUIRE_MESSAGE(d2.await("flightrecd: running"), d2.err);
  std::string db = dir2.file("s.db");
  Result refused = rt::flightrec({"run", "--daemon", "require", "--daemon-socket", dir2.file("control.sock"), "--policy",
                              "observe", "--db", db, "--", "true"});
  CHECK(refused.code == 125);
  CHECK(refused.err.find("runs.entry_times: false") != std::string::npos);
  CHECK(status_of(dir2)["runs"].empty());
  Result here = rt::flightrec({"run", "--daemon", "auto", "--daemon-socket", dir2.file("control.sock"), "--policy",
                           "observe", "--db", db, "--", "true"});
  CHECK(here.code == 0);
  CHECK(here.err.empty());
  CHECK(rt::flightrec({"verify", "--db", db}).code == 0);
  Result none = rt::flightrec({"run", "--daemon", "require", "--daemon-socket", dir.file("nothing.sock"), "--policy",
                           "observe", "--db", dir.file("n.db"), "--", "true"});
  CHECK(none.code == 125);
  CHECK(none.err.find("no flightrecd socket at") != std::string::npos);
}

TEST_CASE("run through flightrecd under an egress allowlist: the filter is the run's own, the record the same" * doctest::test_suite("vm-sandbox")) {
  REQUIRE(is_root());
  TempDir dir;
  Daemon d(runs_config(dir));
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  Listener allowed, other;
  std::string script = "import socket,sys\n"
                       "for p in sys.argv[1:]:\n"
                       "    s = socket.socket()\n"
                       "    try:\n"
                       "        s.connect(('127.0.0.1', int(p))); print('connected')\n"
                       "    except OSError as e:\n"
                       "        print('errno', e.errno)\n"
                       "try:\n"
                       "    socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP); print('icmp')\n"
                       "except OSError as e:\n"
                       "    print('icmp errno', e.errno)\n";
  auto run_once = [&](const std::string& daemon, const std::string& db) {
    return run_in(dir.path.string(), {FLIGHTREC_BIN, "run", "--daemon", daemon, "--daemon-socket",
                                      dir.file("control.sock"), "--tls", "off", "--allow",
                                      "127.0.0.1:" + std::to_string(allowed.port), "--db", db, "--", "python3", "-c",
                                      script, std::to_string(allowed.port), std::to_string(other.port)});
  };
  std::string handed = dir.file("handed.db"), here = dir.file("here.db");
  Result r = run_once("require", handed);
  if (r.code == 125 && r.err.find("need programs of the session's own") != std::string::npos) {
    // Where the policy's path rules or allowlist are BPF-LSM's to enforce
    // (a kernel without Landlock, or with BPF-LSM), they need rules the
    // daemon's programs lack: such a run is recorded in-process.
    MESSAGE("not handed over here: " << r.err);
    CHECK(r.err.find("BPF-LSM") != std::string::npos);
    Result here_run = run_once("auto", here);
    CHECK(here_run.code == 0);
    CHECK(runs_listed(dir, 0));
    return;
  }
  INFO(r.err);
  REQUIRE(r.code == 0);
  std::string out = r.out;
  // EACCES where Landlock has TCP port rules (it checks first), else EPERM
  // from the cgroup connect program; an ICMP socket: EPERM from
  // sock_create, or EACCES where ping_group_range leaves the sandbox out.
  CHECK((out.rfind("connected\nerrno 1\n", 0) == 0 || out.rfind("connected\nerrno 13\n", 0) == 0));
  CHECK((out.ends_with("\nicmp errno 1\n") || out.ends_with("\nicmp errno 13\n")));
  Result local = run_once("off", here);
  CHECK(local.code == 0);
  CHECK(local.out == out);
  for (const std::string& db : {handed, here}) {
    auto all = entries(db);
    REQUIRE(!all.empty());
    auto v = of_type(all, "violation");
    int allow = 0;
    for (const auto& x : v)
      if (x["rule_id"] == "network.allow" && x["detail"].get<std::string>().find("port " + std::to_string(other.port)) != std::string::npos)
        ++allow;
    CHECK(allow == 1);
    bool filter = false;
    for (const auto& c : all.front()["capture"]) filter = filter || c == "cgroup/connect4";
    CHECK(filter);
    CHECK(rt::flightrec({"verify", "--db", db}).code == 0);
  }
  CHECK(runs_listed(dir, 0));
}

TEST_CASE("run through flightrecd: calls seen at their entry too, or at their return alone with --entry-times off") {
  REQUIRE(is_root());
  TempDir dir;
  Daemon d(runs_config(dir));
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  for (bool entry : {true, false}) {
    CAPTURE(entry);
    std::string db = dir.file(entry ? "entry.db" : "at-exit.db");
    Result r = rt::flightrec({"run", "--daemon", "require", "--daemon-socket", dir.file("control.sock"), "--policy",
                              "observe", "--tls", "off", "--entry-times", entry ? "on" : "off", "--db", db, "--",
                              "/bin/cat", "/etc/hostname"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    auto all = entries(db);
    REQUIRE(!all.empty());
    auto capture = all.front()["capture"];
    CHECK((std::find(capture.begin(), capture.end(), "tp_btf/sys_enter") != capture.end()) == entry);
    size_t calls = 0, timed = 0;
    for (const auto& e : of_type(all, "syscall")) {
      ++calls;
      timed += e.contains("ts_enter_mono_ns");
    }
    CHECK(calls > 10);
    // With entry times every call has one: the run's first process came
    // into the session with state, not unseen.
    CHECK(timed == (entry ? calls : 0));
  }
}

// Each ring the daemon puts in the kernel's table of rings, or takes out,
// waits for an RCU grace period: a run's ring, once its client has gone
// and nothing in it is unread, is the next run's.
TEST_CASE("run through flightrecd: back-to-back runs reuse one ring, and each records") {
  REQUIRE(is_root());
  TempDir dir;
  std::set<uint32_t> others = session_rings();  // another daemon's, on this host
  Daemon d(runs_config(dir));
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  std::set<uint32_t> seen;
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    std::string db = dir.file("r" + std::to_string(i) + ".db");
    Result r = handed_cat(dir, db);
    INFO(r.err);
    REQUIRE(r.code == 0);
    auto all = entries(db);
    CHECK(opened(all, "/etc/hostname"));
    CHECK(of_type(all, "lost").empty());
    CHECK(rt::flightrec({"verify", "--db", db}).code == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few of the daemon's ticks
    for (uint32_t id : session_rings())
      if (!others.count(id)) seen.insert(id);
  }
  // The spare made at start (or the first run's own, if its size differed) and no more.
  CHECK(!seen.empty());
  CHECK(seen.size() <= 2);
  CHECK(d.stop(SIGTERM).code == 0);
}

// A client that did not end its session (here: killed) may still have been
// reading its ring: that ring is taken out, never another run's.
TEST_CASE("run through flightrecd: the ring of a client that did not end cleanly is let go, not reused") {
  REQUIRE(is_root());
  TempDir dir;
  Daemon d(runs_config(dir));
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  Proc p = start({FLIGHTREC_BIN, "run", "--daemon", "require", "--daemon-socket", dir.file("control.sock"), "--policy",
                  "observe", "--tls", "off", "--db", dir.file("killed.db"), "--", "/bin/sleep", "60"});
  REQUIRE(runs_listed(dir, 1));
  std::string cgroup = status_of(dir)["runs"][0]["cgroup"].get<std::string>();
  std::set<uint32_t> ring = rings_held_by(p.pid);
  REQUIRE(ring.size() == 1);
  kill(p.pid, SIGKILL);
  wait(p);
  REQUIRE(runs_listed(dir, 0));
  // Its command died with it (parent-death signal); its cgroup is left.
  for (int i = 0; i < 100 && rmdir(cgroup.c_str()) != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i = 0; i < 3; ++i) {
    std::string db = dir.file("next" + std::to_string(i) + ".db");
    Result r = handed_cat(dir, db);
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(opened(entries(db), "/etc/hostname"));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few of the daemon's ticks
  }
  CHECK(session_rings().count(*ring.begin()) == 0);
  CHECK(d.stop(SIGTERM).code == 0);
}

// A client that closes its connection without asking to end may still
// read its ring (it holds the descriptor): no other run gets that ring.
TEST_CASE("run through flightrecd: a ring whose client closed without ending is no other run's") {
  REQUIRE(is_root());
  TempDir dir;
  Daemon d(runs_config(dir));
  REQUIRE_MESSAGE(d.await("flightrecd: running"), d.err);
  std::string cgroup = cgroup2_root() + "/flightrec-test-unclean-" + std::to_string(getpid());
  REQUIRE(mkdir(cgroup.c_str(), 0755) == 0);
  struct Remove {
    std::string path;
    ~Remove() { rmdir(path.c_str()); }
  } remove{cgroup};
  // An empty cgroup: nothing is written to its ring, which stays drained.
  flightrec::control::HeldConnection held = flightrec::control::request_held(
      dir.file("control.sock"), flightrec::control::SessionRequest{cgroup, 8u << 20, false, true});
  REQUIRE(held.fds.size() == 2);
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  REQUIRE(bpf_obj_get_info_by_fd(held.fds[0], &info, &len) == 0);
  close(held.fd);  // no end request
  REQUIRE(runs_listed(dir, 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few of the daemon's ticks
  for (int i = 0; i < 2; ++i) {
    Proc p = start({FLIGHTREC_BIN, "run", "--daemon", "require", "--daemon-socket", dir.file("control.sock"),
                    "--policy", "observe", "--tls", "off", "--db", dir.file("r" + std::to_string(i) + ".db"), "--",
                    "/bin/sleep", "1"});
    REQUIRE(runs_listed(dir, 1));
    std::set<uint32_t> rings = rings_held_by(p.pid);
    CHECK(rings.size() == 1);
    CHECK(rings.count(info.id) == 0);
    CHECK(wait(p).code == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  for (int fd : held.fds) close(fd);
  CHECK(d.stop(SIGTERM).code == 0);
}
