// Runtime grants (docs/POLICIES.md: Runtime grants) on the real kernel: a sandboxed
// shell whose writes outside its work directory, and named system calls,
// wait on seccomp user notification for a grant given over the session's
// grant socket; every grant, use, expiry, revocation and refusal is checked
// in the sealed record.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <linux/bpf.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "runtime/harness.h"

using nlohmann::json;
using namespace rt;
namespace fs = std::filesystem;

namespace {

// A host directory anyone may write (the sandbox's ids are not the host's),
// outside every tree the policy makes writable: only a grant opens it.
struct HostDir {
  std::string path;
  explicit HostDir(const std::string& suffix = "") : path("/opt/flightrec-grant-test-" + std::to_string(getpid()) + suffix) {
    fs::create_directories(path);
    chmod(path.c_str(), 0777);
  }
  ~HostDir() { fs::remove_all(path); }
};

// One JSON request on a grant socket and its reply line ("" if none).
std::string ask_socket(const std::string& sock, const std::string& line) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, sock.c_str(), sizeof(sa.sun_path) - 1);
  std::string reply;
  if (connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
    // A refused client is answered and closed at once, perhaps before this
    // is sent: no SIGPIPE, and the reply is read all the same.
    (void)!send(s, (line + "\n").data(), line.size() + 1, MSG_NOSIGNAL);
    char c;
    while (read(s, &c, 1) == 1 && c != '\n') reply += c;
  }
  close(s);
  return reply;
}

// `flightrec run` of a shell script under a policy that asks. The script
// and the test take turns: `step NAME` in the script says "ready NAME" on
// stderr and waits for a line on its stdin (the sandbox's writes never
// reach the host, so files cannot carry the turns).
struct AskSession {
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("s.db"), sock = dir.file("grants.sock");
  Proc proc;
  std::string err;  // stderr read so far
  // tools: programs copied into the work directory, where the script finds
  // them as ./NAME (the build tree may be hidden from the sandbox, e.g. under /tmp).
  AskSession(const std::string& ask_yaml, const std::string& script, const std::vector<std::string>& args = {},
             const std::vector<std::string>& tools = {}) {
    fs::create_directories(work);
    for (const auto& t : tools) fs::copy_file(t, work + "/" + fs::path(t).filename().string());
    chmod(dir.path.c_str(), 0711);  // the socket is reachable by other users (they are refused)
    std::ofstream(dir.file("ask.yaml")) << "version: 1\nname: ask-test\nask:\n" << ask_yaml;
    std::string prelude =
        "step() { echo \"ready $1\" >&2; read go; }\n"
        "w() { if echo \"$2\" > \"$1\" 2>/dev/null; then echo \"$1 written\"; else echo \"$1 refused\"; fi; }\n";
    std::vector<std::string> argv = {FLIGHTREC_BIN, "run", "--policy", dir.file("ask.yaml"), "--db", db,
                                     "--grants", sock, "--", "sh", "-c", prelude + script, "sh"};
    argv.insert(argv.end(), args.begin(), args.end());
    proc = start_in(work, argv, {}, true);
  }
  ~AskSession() {
    if (proc.pid > 0) {
      kill(proc.pid, SIGKILL);
      wait(proc);
    }
  }
  // Reads stderr until the script's "ready NAME" (a bounded wait, not a timing check).
  bool reached(const std::string& name) { return said("ready " + name + "\n"); }
  // Reads stderr until it holds `want`.
  bool said(const std::string& want) {
    while (err.find(want) == std::string::npos) {
      pollfd p{proc.err_fd, POLLIN, 0};
      char buf[4096];
      ssize_t n = poll(&p, 1, 60000) == 1 ? read(proc.err_fd, buf, sizeof(buf)) : -1;
      if (n <= 0) {
        MESSAGE("stderr never said " << want << "; it said:\n" << err);
        return false;
      }
      err.append(buf, size_t(n));
    }
    return true;
  }
  void go() { REQUIRE(write(proc.in_fd, "go\n", 3) == 3); }
  Result finish() {
    Result r = wait(proc);
    proc.pid = -1;
    r.err = err + r.err;
    return r;
  }
  // The supervisor: flightrec's child named flightrec-grant (-1: none).
  pid_t supervisor() const {
    for (const auto& d : fs::directory_iterator("/proc")) {
      std::string stat = slurp(d.path().string() + "/stat");
      size_t close_paren = stat.rfind(')');
      if (close_paren == std::string::npos || stat.find("(flightrec-grant)") == std::string::npos) continue;
      if (std::atoi(stat.c_str() + stat.find(' ', close_paren + 2) + 1) == proc.pid)
        return pid_t(std::atoi(d.path().filename().c_str()));
    }
    return -1;
  }
  // The calls list says are waiting, once one is (polled for up to 30 s).
  json waiting() {
    json w;
    for (int i = 0; i < 1500 && w.empty(); ++i) {
      w = request({{"op", "list"}})["waiting"];
      if (w.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return w;
  }
  json request(const json& req) {
    std::string reply = ask_socket(sock, req.dump());
    INFO("reply: " << reply);
    REQUIRE(json::accept(reply));
    return json::parse(reply);
  }
};

std::vector<json> with(const std::vector<json>& all, const std::string& type, const std::string& key, const json& value) {
  std::vector<json> out;
  for (const auto& e : of_type(all, type))
    if (e.contains(key) && e[key] == value) out.push_back(e);
  return out;
}

// The record of a grant of one use, asked for before and after: the grant
// (of `kind`), one use by `syscall`, its expiry by uses, and the two asked
// calls denied with EPERM. Returns the grant's and the use's entries.
std::pair<json, json> one_use_record(const std::string& db, int64_t id, const std::string& kind,
                                     const std::string& syscall) {
  CHECK(flightrec({"verify", "--db", db}).code == 0);
  auto all = entries(db);
  auto granted = with(all, "grant", "grant_id", id);
  auto uses = with(all, "grant_use", "grant_id", id);
  auto expired = with(all, "grant_expired", "grant_id", id);
  auto denied = of_type(all, "grant_denied");
  REQUIRE(granted.size() == 1);
  CHECK(granted[0]["kind"] == kind);
  REQUIRE(uses.size() == 1);
  CHECK(uses[0]["syscall"] == syscall);
  REQUIRE(expired.size() == 1);
  CHECK(expired[0]["why"] == "uses");
  REQUIRE(denied.size() == 2);
  for (const auto& d : denied) {
    CHECK(d["syscall"] == syscall);
    CHECK(d["errno"] == EPERM);
  }
  return {granted[0], uses[0]};
}

}  // namespace

TEST_CASE("grants: a write grant for one directory, used, then expired; the writes before and after are refused") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  HostDir target;
  AskSession s("  write: true\n  timeout: 1s\n",
               "w " + target.path + "/one 1; step granted; w " + target.path + "/two 2; step expired; w " +
                   target.path + "/three 3; cat " + target.path + "/two\n");
  REQUIRE(s.reached("granted"));
  json g = s.request({{"op", "grant"}, {"kind", "write"}, {"path", target.path}, {"duration_ms", 5000},
                      {"reason", "pip install into the cache"}});
  REQUIRE(g["ok"] == true);
  int64_t id = g["id"].get<int64_t>();
  s.go();
  REQUIRE(s.reached("expired"));
  // The grant lapses on its own; `list` shows it until then.
  bool gone = false;
  for (int i = 0; i < 1000 && !gone; ++i) {
    gone = s.request({{"op", "list"}})["grants"].empty();
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(gone);
  s.go();
  Result r = s.finish();
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == target.path + "/one refused\n" + target.path + "/two written\n" + target.path + "/three refused\n2\n");
  // The writes went to the sandbox's overlay, never to the host.
  CHECK(fs::is_empty(target.path));

  CHECK(flightrec({"verify", "--db", s.db}).code == 0);
  auto all = entries(s.db);
  auto grants = of_type(all, "grant");
  REQUIRE(grants.size() == 1);
  CHECK(grants[0]["grant_id"] == id);
  CHECK(grants[0]["kind"] == "write");
  CHECK(grants[0]["path"] == target.path);
  CHECK(grants[0]["duration_ms"] == 5000);
  CHECK(grants[0]["reason"] == "pip install into the cache");
  CHECK(grants[0]["client_uid"] == 0);
  auto uses = with(all, "grant_use", "grant_id", id);
  REQUIRE(uses.size() == 1);
  CHECK(uses[0]["syscall"] == "openat");
  CHECK(uses[0]["result"].get<int64_t>() >= 0);
  auto expired = with(all, "grant_expired", "grant_id", id);
  REQUIRE(expired.size() == 1);
  CHECK(expired[0]["why"] == "time");
  auto denied = of_type(all, "grant_denied");
  REQUIRE(denied.size() == 2);
  for (const auto& d : denied) {
    CHECK(d["errno"] == EACCES);
    CHECK(d["why"] == "no grant within 1000 ms");
  }
  // Each denial answers an ask that names the path the shell gave.
  auto asks = of_type(all, "grant_ask");
  REQUIRE(asks.size() == 2);
  CHECK(asks[0]["path"] == target.path + "/one");
  CHECK(asks[1]["path"] == target.path + "/three");
}

TEST_CASE("grants: a revoked grant stops writes; another user is refused; mkdir -p through a path that exists is not asked") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  HostDir target;
  AskSession s("  write: true\n  timeout: 1s\n",
               "step granted; mkdir -p " + target.path + "/sub && echo mkdir ok; w " + target.path +
                   "/sub/one 1; step revoked; w " + target.path + "/two 2\n");
  REQUIRE(s.reached("granted"));
  json g = s.request({{"op", "grant"}, {"kind", "write"}, {"path", target.path}, {"reason", "build step"}});
  REQUIRE(g["ok"] == true);
  int64_t id = g["id"].get<int64_t>();

  // A user who is not the session's owner gets nothing, and is recorded.
  pid_t child = fork();
  if (child == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(3);
    std::string reply = ask_socket(s.sock, R"({"op":"grant","kind":"write","path":"/","reason":"mine"})");
    _exit(reply == R"({"error":"refused: uid 65534 is not the session's owner","ok":false})" ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);

  s.go();
  REQUIRE(s.reached("revoked"));
  CHECK(s.request({{"op", "revoke"}, {"id", id}, {"reason", "step done"}})["ok"] == true);
  CHECK(s.request({{"op", "revoke"}, {"id", id}})["error"] == "no grant with id " + std::to_string(id));
  s.go();
  Result r = s.finish();
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "mkdir ok\n" + target.path + "/sub/one written\n" + target.path + "/two refused\n");

  CHECK(flightrec({"verify", "--db", s.db}).code == 0);
  auto all = entries(s.db);
  auto revoked = with(all, "grant_revoked", "grant_id", id);
  REQUIRE(revoked.size() == 1);
  CHECK(revoked[0]["reason"] == "step done");
  CHECK(revoked[0]["client_uid"] == 0);
  auto refused = of_type(all, "grant_refused");
  REQUIRE(refused.size() == 1);
  CHECK(refused[0]["client_uid"] == 65534);
  CHECK(refused[0]["why"] == "uid 65534 is not the session's owner");
  // mkdir -p asks nothing for the directories that exist: only sub is made
  // under the grant, then one file; two is refused after the revocation.
  auto uses = with(all, "grant_use", "grant_id", id);
  REQUIRE(uses.size() == 2);
  CHECK(uses[0]["syscall"] == "mkdir");
  CHECK(uses[0]["result"] == 0);
  CHECK(uses[1]["syscall"] == "openat");
  auto asks = of_type(all, "grant_ask");
  REQUIRE(asks.size() == 1);
  CHECK(asks[0]["path"] == target.path + "/two");
  CHECK(of_type(all, "grant_denied").size() == 1);
}

TEST_CASE("grants: under a grant the supervisor acts with the thread's own ids and its umask of the moment") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  HostDir target;
  // A directory inside the grant that only the host's root may write: the
  // sandbox's ids are not root's, so the grant does not open it.
  std::string ro = target.path + "/ro";
  fs::create_directories(ro);
  chmod(ro.c_str(), 0555);
  AskSession s("  write: true\n  timeout: 1s\n",
               "step granted; umask 022; w " + target.path + "/a 1; umask 077; w " + target.path + "/b 2; w " + ro +
                   "/c 3; umask 022; w " + target.path + "/d 4; stat -c %a " + target.path + "/a " + target.path +
                   "/b " + target.path + "/d\n");
  REQUIRE(s.reached("granted"));
  json g = s.request({{"op", "grant"}, {"kind", "write"}, {"path", target.path}, {"reason", "ids"}});
  REQUIRE(g["ok"] == true);
  s.go();
  Result r = s.finish();
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == target.path + "/a written\n" + target.path + "/b written\n" + ro + "/c refused\n" + target.path +
                     "/d written\n644\n600\n644\n");
  CHECK(flightrec({"verify", "--db", s.db}).code == 0);
  auto uses = with(entries(s.db), "grant_use", "grant_id", g["id"]);
  REQUIRE(uses.size() == 4);
  CHECK(uses[2]["path"] == ro + "/c");
  CHECK(uses[2]["result"] == -EACCES);
}

TEST_CASE("grants: a umask another thread set is the one the supervisor creates with, as the kernel would") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  HostDir target;
  // The first write makes the supervisor read the thread's umask; the
  // second thread's umask() must make it read again (fr_view_gen).
  AskSession s("  write: true\n  timeout: 1s\n", "step granted; ./umask_thread " + target.path + "\n", {},
               {UMASK_THREAD_BIN});
  REQUIRE(s.reached("granted"));
  json g = s.request({{"op", "grant"}, {"kind", "write"}, {"path", target.path}, {"reason", "umask"}});
  REQUIRE(g["ok"] == true);
  s.go();
  Result r = s.finish();
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "644 600 600\n");
  CHECK(flightrec({"verify", "--db", s.db}).code == 0);
  CHECK(with(entries(s.db), "grant_use", "grant_id", g["id"]).size() == 3);
}

TEST_CASE("grants: a system call granted for one use goes through once; before and after it waits and fails") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  AskSession s("  syscalls: [uname]\n  timeout: 1s\n",
               "u() { uname -n >/dev/null && echo \"uname $1 ok\" || echo \"uname $1 refused\"; }\n"
               "u 0; step granted; u 1; u 2\n");
  REQUIRE(s.reached("granted"));
  json g = s.request({{"op", "grant"}, {"kind", "syscall"}, {"syscall", "uname"}, {"uses", 1}, {"reason", "one look"}});
  REQUIRE(g["ok"] == true);
  int64_t id = g["id"].get<int64_t>();
  s.go();
  Result r = s.finish();
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "uname 0 refused\nuname 1 ok\nuname 2 refused\n");
  auto [granted, use] = one_use_record(s.db, id, "syscall", "uname");
  CHECK(granted["syscall"] == "uname");
  CHECK(use["result"] == 0);
}

namespace {

const char* kConnectPolicy = "  connect: true\n  timeout: 1s\nnetwork:\n  mode: allowlist\n";

// Listeners on 127.0.0.1 that accept and close until destroyed: no backlog
// fills however many connections come.
struct AcceptingListeners {
  Listener a, b;
  std::atomic<bool> stop{false};
  std::thread thread{[this] {
    while (!stop) {
      pollfd p[2] = {{a.fd, POLLIN, 0}, {b.fd, POLLIN, 0}};
      if (poll(p, 2, 50) <= 0) continue;
      for (auto& one : p)
        if (one.revents & POLLIN) close(accept4(one.fd, nullptr, nullptr, SOCK_CLOEXEC));
    }
  }};
  ~AcceptingListeners() {
    stop = true;
    thread.join();
  }
};

}  // namespace

TEST_CASE("grants: a connect granted for one call goes through once; the connects before and after wait and are refused" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  Listener l;
  TempDir tools;
  // The allowlist is empty, and loopback is no exception to it.
  std::ofstream(tools.file("c.py")) << "import socket, sys\n"
                                        "s = socket.socket()\n"
                                        "try:\n"
                                        "    s.connect(('127.0.0.1', int(sys.argv[1]))); print('connected')\n"
                                        "except OSError as e:\n"
                                        "    print('errno', e.errno)\n";
  AskSession s(kConnectPolicy, "python3 c.py \"$1\"; step granted; python3 c.py \"$1\"; python3 c.py \"$1\"\n",
               {std::to_string(l.port)}, {tools.file("c.py")});
  REQUIRE(s.reached("granted"));
  json bad = s.request({{"op", "grant"}, {"kind", "connect"}, {"address", "localhost"}, {"port", l.port}, {"reason", "x"}});
  CHECK(bad["ok"] == false);
  json g = s.request({{"op", "grant"}, {"kind", "connect"}, {"address", "::ffff:127.0.0.1"}, {"port", l.port},
                      {"uses", 1}, {"reason", "fetch once"}});
  REQUIRE(g["ok"] == true);
  int64_t id = g["id"].get<int64_t>();
  json list = s.request({{"op", "list"}});
  REQUIRE(list["grants"].size() == 1);
  CHECK(list["grants"][0]["address"] == "127.0.0.1");  // keyed as IPv4, as the kernel's maps
  s.go();
  Result r = s.finish();
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "errno 1\nconnected\nerrno 1\n");
  auto [granted, use] = one_use_record(s.db, id, "connect", "connect");
  CHECK(granted["address"] == "127.0.0.1");
  CHECK(granted["port"] == l.port);
  CHECK(granted["reason"] == "fetch once");
  CHECK(use["address"] == "127.0.0.1");
  auto all = entries(s.db);
  auto asks = of_type(all, "grant_ask");  // the granted connect did not wait: no ask
  REQUIRE(asks.size() == 2);
  for (const auto& a : asks) CHECK(a["port"] == l.port);
}

TEST_CASE("grants: a thread rewriting the address during the decision cannot connect where no grant allows" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  AcceptingListeners ends;
  AskSession s("  connect: true\n  timeout: 100ms\nnetwork:\n  mode: allowlist\n",
               "step granted; ./connect_race 127.0.0.1 \"$1\" \"$2\" 60\n",
               {std::to_string(ends.a.port), std::to_string(ends.b.port)}, {CONNECT_RACE_BIN});
  REQUIRE(s.reached("granted"));
  json g = s.request({{"op", "grant"}, {"kind", "connect"}, {"address", "127.0.0.1"}, {"port", ends.a.port},
                      {"reason", "race"}});
  REQUIRE(g["ok"] == true);
  s.go();
  Result r = s.finish();
  INFO(r.err);
  REQUIRE(r.code == 0);
  // Whatever address the supervisor read, the kernel connected only where
  // the grant allows: a rewritten port finds no ticket for it.
  CHECK(r.out.rfind("a ", 0) == 0);
  CHECK(r.out.find(", b 0\n") != std::string::npos);
  CHECK(r.out.rfind("a 0, b 0\n", 0) != 0);
  auto all = entries(s.db);
  CHECK(!with(all, "grant_use", "grant_id", g["id"]).empty());
  for (const auto& e : of_type(all, "grant_use")) CHECK(e["port"] == ends.a.port);
}

namespace {

// ask.exec with an exec list that runs the shell and the dynamic loader
// (usr-merged Debian: /bin and /lib64 lead into /usr).
const char* kExecPolicy = "  exec: true\n  timeout: 1s\nfilesystem:\n  exec: [/usr/bin, /usr/lib, /bin, /lib, /lib64]\n";

bool bpf_lsm_loads() {
  return flightrec({"probe"}).out.find("BPF-LSM                                         yes") != std::string::npos;
}

}  // namespace

TEST_CASE("grants: an exec granted for one use runs once where the kernel loads LSM programs; elsewhere ask.exec refuses to start" * doctest::test_suite("vm-sandbox-exec")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  if (!bpf_lsm_loads()) {
    // Landlock cannot widen at run time, so only BPF-LSM can judge exec
    // grants: without it the command never runs.
    TempDir dir;
    std::ofstream(dir.file("p.yaml")) << "version: 1\nname: t\nask:\n" << kExecPolicy;
    Result r = run_in(dir.path.string(), {FLIGHTREC_BIN, "run", "--policy", dir.file("p.yaml"), "--db",
                                          dir.file("s.db"), "--", "sh", "-c", "echo ran"});
    CHECK(r.code != 0);
    CHECK(r.out.empty());
    CHECK(r.err.find("refuses BPF-LSM programs, so the path rules (or ask.exec's grants) cannot be enforced") !=
          std::string::npos);
    MESSAGE("BPF-LSM refused by this kernel: ask.exec refused to start, as it must");
    return;
  }
  // A program off the exec list, in the work directory.
  TempDir tools;
  fs::copy_file("/usr/bin/true", tools.file("tool"));
  AskSession s(kExecPolicy, "t() { if ./tool; then echo ran; else echo refused; fi; }\nt; step granted; t; t\n", {},
               {tools.file("tool")});
  REQUIRE(s.reached("granted"));
  json missing = s.request({{"op", "grant"}, {"kind", "exec"}, {"path", s.work + "/none"}, {"reason", "x"}});
  CHECK(missing["ok"] == false);
  json g = s.request({{"op", "grant"}, {"kind", "exec"}, {"path", s.work + "/tool"}, {"uses", 1}, {"reason", "run once"}});
  REQUIRE(g["ok"] == true);
  int64_t id = g["id"].get<int64_t>();
  s.go();
  Result r = s.finish();
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "refused\nran\nrefused\n");
  auto [granted, use] = one_use_record(s.db, id, "exec", "execve");
  CHECK(granted["path"] == s.work + "/tool");
}

TEST_CASE("grants: a thread rewriting the exec path during the decision cannot run an ungranted file" * doctest::test_suite("vm-sandbox-exec")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  if (!bpf_lsm_loads()) {
    MESSAGE("BPF-LSM refused by this kernel: ask.exec does not start (the test above checks that)");
    return;
  }
  TempDir tools;
  std::ofstream(tools.file("a")) << "#!/bin/sh\necho A\n";
  std::ofstream(tools.file("b")) << "#!/bin/sh\necho B\n";
  chmod(tools.file("a").c_str(), 0755);
  chmod(tools.file("b").c_str(), 0755);
  AskSession s("  exec: true\n  timeout: 100ms\nfilesystem:\n  exec: [/usr/bin, /usr/lib, /bin, /lib, /lib64]\n",
               "mkdir s && mv a b s/ && step granted && ./exec_race ./s/a ./s/b 300\n", {},
               {tools.file("a"), tools.file("b"), EXEC_RACE_BIN});
  REQUIRE(s.reached("granted"));
  json race = s.request({{"op", "grant"}, {"kind", "exec"}, {"path", s.work + "/exec_race"}, {"reason", "the racer"}});
  REQUIRE(race["ok"] == true);
  json g = s.request({{"op", "grant"}, {"kind", "exec"}, {"path", s.work + "/s/a"}, {"reason", "race"}});
  REQUIRE(g["ok"] == true);
  s.go();
  Result r = s.finish();
  INFO(r.err);
  REQUIRE(r.code == 0);
  // Whatever path the supervisor read, the kernel ran only the granted
  // file: a rewritten path finds no ticket for what it names.
  CHECK((r.out == "A\n" || r.out == "none ran\n"));
  CHECK(r.out.find('B') == std::string::npos);
  auto all = entries(s.db);
  CHECK(!with(all, "grant_use", "grant_id", g["id"]).empty());
}

TEST_CASE("grants: a supervisor that dies leaves asked calls failing, and the record says so") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  HostDir target;
  AskSession s("  write: true\n  timeout: 10s\n", "step killed; w " + target.path + "/one 1\n");
  REQUIRE(s.reached("killed"));
  pid_t supervisor = s.supervisor();
  REQUIRE(supervisor > 0);
  REQUIRE(kill(supervisor, SIGKILL) == 0);
  // Its socket dies with it: no grant can come any more.
  for (int i = 0; i < 500 && !ask_socket(s.sock, R"({"op":"list"})").empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  s.go();
  Result r = s.finish();
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == target.path + "/one refused\n");
  CHECK(r.err.find("ALERT the grant supervisor killed by signal 9: asked calls fail from now on") != std::string::npos);
  CHECK(flightrec({"verify", "--db", s.db}).code == 0);
  auto all = entries(s.db);
  auto stopped = of_type(all, "grants_stopped");
  REQUIRE(stopped.size() == 1);
  CHECK(stopped[0]["why"] == "the grant supervisor killed by signal 9; asked calls fail from now on (ENOSYS)");
  CHECK(of_type(all, "grant_use").empty());
}

TEST_CASE("grants: a thread rewriting the path during the decision cannot get a write outside the granted directory") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  HostDir granted("-a"), other("-b");
  std::string a = granted.path + "/f", b = other.path + "/f";
  // And a path in the work directory (the policy's writable tree) of b's length.
  std::string w = "./" + std::string(b.size() - 4, 'w') + "/f";
  AskSession s("  write: true\n  timeout: 100ms\n",
               "step granted; ./grant_race " + a + " " + b + " 30; mkdir \"$(dirname \"$1\")\"; ./grant_race \"$1\" " + b +
                   " 30\n",
               {w}, {GRANT_RACE_BIN});
  REQUIRE(s.reached("granted"));
  json g = s.request({{"op", "grant"}, {"kind", "write"}, {"path", granted.path}, {"reason", "race"}});
  REQUIRE(g["ok"] == true);
  s.go();
  Result r = s.finish();
  INFO(r.err);
  REQUIRE(r.code == 0);
  // Whatever the supervisor read is what it opened: b was never written,
  // under the grant (done by the supervisor) or past it (Landlock).
  // (The second race rewrites many bytes, so most opens see a mix of the
  // two names and fail; only b matters there.)
  CHECK(r.out.rfind("a exists, b absent\n", 0) == 0);
  CHECK(r.out.substr(r.out.find('\n') + 1).find(", b absent\n") != std::string::npos);
  CHECK(count_lines(r.out) == 2);
  CHECK(fs::is_empty(granted.path));
  CHECK(fs::is_empty(other.path));
  auto all = entries(s.db);
  auto uses = with(all, "grant_use", "grant_id", g["id"]);
  CHECK(!uses.empty());
  for (const auto& u : uses) CHECK(u["result"].get<int64_t>() >= 0);
}

TEST_CASE("grants: examples/agent_loop.py grants a directory for one step, and the step after it is refused") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string db = dir.file("steps.db");
  Result r = run_in(dir.path.string(), {"python3", SOURCE_DIR "/examples/agent_loop.py", "--flightrec", FLIGHTREC_BIN,
                                        "--db", db});
  fs::remove_all("/opt/flightrec-example-cache");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("step: fill the package cache: exit 0\n    wheel\nstep: read the cache back: exit 0\n") !=
        std::string::npos);
  CHECK(r.out.find("step: write there without a grant: exit 2\n") != std::string::npos);
  auto all = entries(db);
  REQUIRE(of_type(all, "grant").size() == 1);
  CHECK(of_type(all, "grant")[0]["reason"] == "fill the package cache");
  CHECK(of_type(all, "grant_revoked").size() == 1);
  CHECK(of_type(all, "grant_use").size() == 2);
  CHECK(of_type(all, "grant_denied").size() == 1);
}

TEST_CASE("grants: list shows each waiting call with what it asks for, and a grant given meanwhile lets it through") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  HostDir target;
  AskSession s("  write: true\n  timeout: 60s\n", "step start; w " + target.path + "/one 1\n");
  REQUIRE(s.reached("start"));
  s.go();
  // The write waits for an answer: list says what it wants, before anyone decides.
  json waiting = s.waiting();
  REQUIRE(waiting.size() == 1);
  CHECK(waiting[0]["kind"] == "write");
  std::string hex;
  for (unsigned char c : target.path + "/one") {
    static const char* digits = "0123456789abcdef";
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  CHECK(waiting[0]["paths_hex"].dump().find(hex) != std::string::npos);
  CHECK(waiting[0]["pid"].get<int64_t>() > 0);
  CHECK(waiting[0]["times_out_in_ms"].get<int64_t>() <= 60000);
  json g = s.request({{"op", "grant"}, {"kind", "write"}, {"path", target.path}, {"uses", 1}, {"reason", "asked"}});
  REQUIRE(g["ok"] == true);
  Result r = s.finish();
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == target.path + "/one written\n");
}

// Looks NAME up (or takes ADDRESS) and says what a greeter on port 8080 there answers.
const char* kLookupPy = "import socket, errno, sys\n"
                        "try:\n"
                        "    a = sys.argv[2] if len(sys.argv) > 2 else socket.getaddrinfo(sys.argv[1], 8080, socket.AF_INET)[0][4][0]\n"
                        "    print(socket.create_connection((a, 8080), timeout=5).recv(100).decode().strip())\n"
                        "except socket.gaierror:\n"
                        "    print('no address')\n"
                        "except OSError as e:\n"
                        "    print(errno.errorcode.get(e.errno))\n";

TEST_CASE("grants: a name granted at run time is answered and admitted; before the grant its lookup is denied at the ask's timeout" *
          doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  NamesWorld world("{\"api.test\": {\"A\": [\"NET1\"], \"ttl\": 60}}");
  TempDir tools;
  std::ofstream(tools.file("n.py")) << kLookupPy;
  // No name on the allowlist: ask.connect makes names grantable.
  AskSession s(std::string(kConnectPolicy) + "  dns_upstream: [\"" + world.net + "53\"]\n  dns_private: true\n",
               "python3 n.py api.test; step granted; python3 n.py api.test; step revoked; python3 n.py api.test; "
               "python3 n.py api.test \"$1\"\n",
               {world.net + "1"}, {tools.file("n.py")});
  REQUIRE(s.reached("granted"));
  json bad = s.request({{"op", "grant"}, {"kind", "name"}, {"name", "a.*.test"}, {"port", 8080}, {"reason", "x"}});
  CHECK(bad["ok"] == false);
  json g = s.request({{"op", "grant"}, {"kind", "name"}, {"name", "API.test"}, {"port", 8080}, {"reason", "the model's API"}});
  REQUIRE(g["ok"] == true);
  json list = s.request({{"op", "list"}});
  REQUIRE(list["grants"].size() == 1);
  CHECK(list["grants"][0]["name"] == "api.test");
  REQUIRE(s.said("GRANT 1: name api.test port 8080"));  // the resolver has it once the recorder has
  s.go();
  REQUIRE(s.reached("revoked"));
  REQUIRE(s.request({{"op", "revoke"}, {"id", g["id"]}, {"reason", "done"}})["ok"] == true);
  REQUIRE(s.said("REVOKED 1 (done)"));
  s.go();
  Result r = s.finish();
  INFO(r.err);
  REQUIRE(r.code == 0);
  // Refused, then granted; revoked, the name is refused again and its address closed to new connects.
  CHECK(r.out == "no address\nfrom " + world.net + "1\nno address\nEPERM\n");
  auto all = entries(s.db);
  auto grants = of_type(all, "grant");
  REQUIRE(grants.size() == 1);
  CHECK(grants[0]["kind"] == "name");
  CHECK(grants[0]["name"] == "api.test");
  CHECK(grants[0]["reason"] == "the model's API");
  bool refused = false, allowed = false;
  for (const auto& d : of_type(all, "dns")) {
    if (d.value("name", "") != "api.test" || d.value("qtype", "") != "A") continue;
    refused = refused || d["verdict"] == "refused";
    if (d["verdict"] == "allowed") {
      allowed = true;
      CHECK(d["rule"] == "grant " + std::to_string(g["id"].get<int64_t>()) + ": api.test:8080");
      CHECK(d["addresses"] == json::array({world.net + "1"}));
    }
  }
  CHECK(refused);
  CHECK(allowed);
  // The lookups before the grant and after its revocation each asked, and were denied at the timeout.
  auto asks = of_type(all, "grant_ask");
  std::vector<json> name_asks;
  for (const auto& a : asks)
    if (a.value("kind", "") == "name") name_asks.push_back(a);
  REQUIRE(name_asks.size() == 2);
  for (const auto& a : name_asks) {
    CHECK(a["name"] == "api.test");
    CHECK(a["qtype"] == "A");
    CHECK(a["client"].get<std::string>().starts_with("127."));
    auto denied = with(all, "grant_denied", "ask_id", a["ask_id"]);
    REQUIRE(denied.size() == 1);
    CHECK(denied[0]["name"] == "api.test");
    CHECK(denied[0]["why"] == "no grant within 1000 ms");
    bool recorded = false;
    for (const auto& d : of_type(all, "dns"))
      recorded = recorded || (d.value("ask_id", int64_t(0)) == a["ask_id"].get<int64_t>() && d["verdict"] == "refused" &&
                              d.value("waited_for_grant", 0) == 1);
    CHECK(recorded);
  }
  CHECK(r.err.find("flightrec: ASK " + std::to_string(name_asks[0]["ask_id"].get<int64_t>()) + ": name api.test (from 127.") !=
        std::string::npos);
}

TEST_CASE("grants: a lookup of a name no rule allows waits for a name grant; list shows it; granted meanwhile, it is answered" *
          doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  NamesWorld world("{\"api.test\": {\"A\": [\"NET1\"], \"ttl\": 60}, \"other.test\": {\"A\": [\"NET2\"], \"ttl\": 60}}");
  TempDir tools;
  std::ofstream(tools.file("n.py")) << kLookupPy;
  // The same question over TCP, as the sandbox's resolv.conf names the resolver.
  std::ofstream(tools.file("tcpq.py"))
      << "import socket, struct, sys\n"
         "ns = [l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver')][0]\n"
         "q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0)\n"
         "q += b''.join(bytes([len(p)]) + p.encode() for p in sys.argv[1].split('.')) + b'\\0' + struct.pack('>HH', 1, 1)\n"
         "s = socket.create_connection((ns, 53), timeout=70)\n"
         "s.sendall(struct.pack('>H', len(q)) + q)\n"
         "def rd(n):\n"
         "    b = b''\n"
         "    while len(b) < n:\n"
         "        c = s.recv(n - len(b))\n"
         "        if not c: raise SystemExit('tcp: closed')\n"
         "        b += c\n"
         "    return b\n"
         "r = rd(struct.unpack('>H', rd(2))[0])\n"
         "print('tcp rcode', r[3] & 15, 'answers', struct.unpack('>H', r[6:8])[0])\n";
  AskSession s("  connect: true\n  timeout: 60s\nnetwork:\n  mode: allowlist\n  dns_upstream: [\"" + world.net +
                   "53\"]\n  dns_private: true\n",
               "step start; python3 tcpq.py api.test & python3 n.py api.test; wait; python3 n.py www.api.test\n", {},
               {tools.file("n.py"), tools.file("tcpq.py")});
  REQUIRE(s.reached("start"));
  s.go();
  // The lookup waits: list names it (and the client that asked) before anyone decides.
  json waiting = s.waiting();
  REQUIRE(waiting.size() == 1);
  CHECK(waiting[0]["kind"] == "name");
  CHECK(waiting[0]["name"] == "api.test");
  CHECK(waiting[0]["client"].get<std::string>().starts_with("127."));
  CHECK(waiting[0]["times_out_in_ms"].get<int64_t>() <= 60000);
  // A grant of another name answers nothing.
  REQUIRE(s.request({{"op", "grant"}, {"kind", "name"}, {"name", "other.test"}, {"port", 8080}, {"reason", "x"}})["ok"] == true);
  REQUIRE(s.request({{"op", "list"}})["waiting"].size() == 1);
  json g = s.request({{"op", "grant"}, {"kind", "name"}, {"name", "api.test"}, {"port", 8080}, {"reason", "the model's API"}});
  REQUIRE(g["ok"] == true);
  // The second lookup (a name under api.test, no rule covers it) waits too; the session ends before any grant.
  REQUIRE(s.said("name www.api.test"));
  kill(s.proc.pid, SIGTERM);
  Result r = s.finish();
  INFO(r.err);
  // Both lookups of api.test (UDP and TCP) waited on one ask and were answered; the last one ends with the session.
  CHECK(r.out.find("from " + world.net + "1\n") != std::string::npos);
  CHECK(r.out.find("tcp rcode 0 answers 1\n") != std::string::npos);
  auto all = entries(s.db);
  std::vector<json> name_asks;
  for (const auto& a : of_type(all, "grant_ask"))
    if (a.value("kind", "") == "name") name_asks.push_back(a);
  REQUIRE(name_asks.size() == 2);
  CHECK(name_asks[0]["name"] == "api.test");
  CHECK(name_asks[1]["name"] == "www.api.test");
  auto uses = with(all, "grant_use", "ask_id", name_asks[0]["ask_id"]);
  REQUIRE(uses.size() == 1);
  CHECK(uses[0]["grant_id"] == g["id"]);
  CHECK(uses[0]["name"] == "api.test");
  bool answered = false, cut_short = false;
  for (const auto& d : of_type(all, "dns")) {
    if (d.value("ask_id", int64_t(0)) == name_asks[0]["ask_id"].get<int64_t>() && d["verdict"] == "allowed") {
      answered = d.value("waited_for_grant", 0) == 1 && d["addresses"] == json::array({world.net + "1"}) &&
                 d["rule"] == "grant " + std::to_string(g["id"].get<int64_t>()) + ": api.test:8080";
    }
    // Refused when the session ended (every query taken is answered).
    if (d.value("name", "") == "www.api.test" && d["verdict"] == "refused" && d.value("waited_for_grant", 0) == 1)
      cut_short = true;
  }
  CHECK(answered);
  CHECK(cut_short);
}

TEST_CASE("grants: lookups waiting for a grant are bounded: 16 held over TCP (each holds a connection), the rest refused at once" *
          doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  NamesWorld world("{\"api.test\": {\"A\": [\"NET1\"], \"ttl\": 60}}");
  TempDir tools;
  // 4 connections, each asking for 5 names of its own in a row, and every reply read.
  std::ofstream(tools.file("many.py"))
      << "import socket, struct\n"
         "ns = [l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver')][0]\n"
         "socks = []\n"
         "for c in range(4):\n"
         "    s = socket.create_connection((ns, 53), timeout=30)\n"
         "    for i in range(5):\n"
         "        label = b'n%d' % (c * 5 + i)\n"
         "        q = struct.pack('>HHHHHH', i, 0x0100, 1, 0, 0, 0) + bytes([len(label)]) + label + b'\\x04test\\0' + struct.pack('>HH', 1, 1)\n"
         "        s.sendall(struct.pack('>H', len(q)) + q)\n"
         "    socks.append(s)\n"
         "def rd(s, n):\n"
         "    b = b''\n"
         "    while len(b) < n:\n"
         "        c = s.recv(n - len(b))\n"
         "        if not c: raise SystemExit('closed')\n"
         "        b += c\n"
         "    return b\n"
         "got = 0\n"
         "for s in socks:\n"
         "    for i in range(5):\n"
         "        rd(s, struct.unpack('>H', rd(s, 2))[0])\n"
         "        got += 1\n"
         "print('replies', got)\n";
  AskSession s("  connect: true\n  timeout: 2s\nnetwork:\n  mode: allowlist\n  dns_upstream: [\"" + world.net +
                   "53\"]\n",
               "python3 many.py\n", {}, {tools.file("many.py")});
  Result r = s.finish();
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "replies 20\n");
  auto all = entries(s.db);
  size_t asks = 0, waited = 0, at_once = 0;
  for (const auto& a : of_type(all, "grant_ask")) asks += a.value("kind", "") == "name";
  for (const auto& d : of_type(all, "dns")) {
    if (d.value("verdict", "") != "refused" || d.value("transport", "") != "tcp") continue;
    (d.value("waited_for_grant", 0) == 1 ? waited : at_once) += 1 + d.value("repeats", 0);
  }
  CHECK(asks == 16);
  CHECK(waited == 16);
  CHECK(at_once == 4);
}

TEST_CASE("grants: the supervisor holds the names' map read-only, and writes only the grant maps") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  AskSession s(kConnectPolicy, "step start\n");
  REQUIRE(s.reached("start"));
  pid_t supervisor = s.supervisor();
  REQUIRE(supervisor > 0);
  // Each BPF map it holds, by type, and whether its descriptor may write (fdinfo's flags).
  std::multimap<int, bool> maps;
  for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(supervisor) + "/fdinfo")) {
    std::istringstream info(slurp(fd.path().string()));
    std::string key;
    unsigned long flags = 0;
    int type = -1;
    for (std::string value; info >> key >> value;) {
      if (key == "flags:") flags = std::stoul(value, nullptr, 8);
      if (key == "map_type:") type = std::stoi(value);
    }
    if (type >= 0) maps.emplace(type, (flags & O_ACCMODE) != O_RDONLY);
  }
  s.go();
  CHECK(s.finish().code == 0);
  INFO("maps (type, writable): " << json(std::vector<std::pair<int, bool>>(maps.begin(), maps.end())).dump());
  // fr_egress_named, the one LRU hash: read-only. fr_conn_granted and fr_conn_tickets (hashes): written.
  REQUIRE(maps.count(BPF_MAP_TYPE_LRU_HASH) == 1);
  CHECK_FALSE(maps.find(BPF_MAP_TYPE_LRU_HASH)->second);
  REQUIRE(maps.count(BPF_MAP_TYPE_HASH) == 2);
  for (auto [at, end] = maps.equal_range(BPF_MAP_TYPE_HASH); at != end; ++at) CHECK(at->second);
}
