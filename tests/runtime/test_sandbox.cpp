// flightrec run --policy: confinement on the real kernel. What the sandbox
// denies fails for the command, appears in the record with its rule, and
// what the command changed is recorded (and kept off the host).
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "runtime/harness.h"

using nlohmann::json;
using namespace rt;

namespace {


void write(const std::string& path, const std::string& data) { std::ofstream(path) << data; }

std::vector<json> violations(const std::vector<json>& all, const std::string& rule) {
  std::vector<json> out;
  for (const auto& e : all)
    if (e["type"] == "violation" && e["rule_id"] == rule) out.push_back(e);
  return out;
}

const json* by_seq(const std::vector<json>& all, int64_t seq) {
  return seq >= 1 && size_t(seq) <= all.size() ? &all[size_t(seq - 1)] : nullptr;
}

// The end-of-session change of a path.
const json* change_of(const std::vector<json>& all, const std::string& path) {
  for (const auto& e : all)
    if (e["type"] == "file_change" && e["when"] == "end" && e["path"] == path) return &e;
  return nullptr;
}

}  // namespace

TEST_CASE("agent, the default: host files hidden and read-only, changes recorded with hashes, only the work directory's written" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("s.db");
  mkdir(work.c_str(), 0755);
  write(work + "/existing.txt", "old\n");
  write(work + "/gone.txt", "bye\n");
  // A root-only file in a readable tree: root inside is not root outside.
  const std::string root_only = "/var/cache/flightrec-test-root-only";
  write(root_only, "root only\n");
  chmod(root_only.c_str(), 0600);
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--db", db, "--", "sh", "-c",
                           "cat " + root_only + " " + db + "; "
                           "cat /etc/shadow; echo x > /etc/flightrec-test; echo new > created.txt; "
                           "echo more >> existing.txt; rm gone.txt; "
                           "python3 -c \"f=open('py.txt','w'); f.write('data'); f.close(); open('py.txt','a').write('!')\"; "
                           "id -u; hostname"});
  INFO(r.err);
  CHECK(r.code == 0);
  unlink(root_only.c_str());
  CHECK(r.out == "0\nflightrec\n");  // root inside (the work directory's owner), its own host name
  // Nothing of them was read (the violations below say why; stderr lines of
  // the command and of flightrec may interleave, so they are not parsed).
  CHECK(r.out.find("root only") == std::string::npos);
  CHECK(r.out.find("SQLite format") == std::string::npos);  // the record is hidden
  CHECK(r.out.find("root:") == std::string::npos);          // /etc/shadow

  // Outside the work directory the host saw none of it (the writes went
  // to the session's overlay); the work directory's changes were written
  // to it at the end (work_dir_mode: write).
  CHECK(access("/etc/flightrec-test", F_OK) != 0);
  CHECK(slurp(work + "/created.txt") == "new\n");
  CHECK(slurp(work + "/existing.txt") == "old\nmore\n");
  CHECK(access((work + "/gone.txt").c_str(), F_OK) != 0);
  CHECK(slurp(work + "/py.txt") == "data!");

  auto all = entries(db);
  REQUIRE(all.size() > 10);
  const json& genesis = all.front();
  CHECK(genesis["policy_name"] == "agent");
  CHECK(genesis["policy_mode"] == "enforce");
  std::string sandbox = genesis["sandbox"].dump();
  CHECK(sandbox.find("namespaces: user") != std::string::npos);
  CHECK(sandbox.find("landlock: abi") != std::string::npos);
  CHECK(sandbox.find("seccomp: ") != std::string::npos);

  auto hidden = violations(all, "filesystem.hidden");
  REQUIRE(hidden.size() == 2);
  CHECK(hidden[0]["detail"].get<std::string>().find(db) != std::string::npos);
  hidden.erase(hidden.begin());
  CHECK(hidden[0]["detail"].get<std::string>().find("/etc/shadow") != std::string::npos);
  CHECK(violations(all, "filesystem.read").size() == 1);  // the root-only file
  CHECK(hidden[0]["level"] == "ALERT");
  CHECK(hidden[0]["action"] == "denied");
  const json* denied_open = by_seq(all, hidden[0]["of_seq"]);
  REQUIRE(denied_open);
  CHECK((*denied_open)["path"] == "/etc/shadow");
  CHECK((*denied_open)["ret"] == -13);  // EACCES
  CHECK((*denied_open)["pid"] == hidden[0]["subject_pid"]);
  // A refused open leaves the kernel no copy of its path: the violation
  // says the path it names was read from the process's memory.
  CHECK(hidden[0].value("from_user_memory", 0) == 1);

  auto read_only = violations(all, "filesystem.read_only");
  REQUIRE(read_only.size() == 1);
  CHECK(read_only[0]["detail"].get<std::string>().find("/etc/flightrec-test") != std::string::npos);

  // Each close of a file written to is a change entry with the state
  // flightrec read when it handled the close (it may already be later than
  // the close: the record is read asynchronously); the end diff has the
  // final state.
  std::vector<std::string> py_when;
  for (const auto& e : all)
    if (e["type"] == "file_change" && e["path"] == work + "/py.txt") {
      py_when.push_back(e["when"]);
      std::string sha = e["sha256_after"];
      CHECK((sha == sha256_hex("data") || sha == sha256_hex("data!")));
      if (e["when"] == "end") CHECK(sha == sha256_hex("data!"));
    }
  CHECK(py_when == std::vector<std::string>{"close", "close", "end"});
  const json* created = change_of(all, work + "/created.txt");
  REQUIRE(created);
  CHECK((*created)["change"] == "created");
  CHECK((*created)["sha256_after"] == sha256_hex("new\n"));
  CHECK((*created)["size"] == 4);
  const json* modified = change_of(all, work + "/existing.txt");
  REQUIRE(modified);
  CHECK((*modified)["change"] == "modified");
  CHECK((*modified)["sha256_before"] == sha256_hex("old\n"));
  CHECK((*modified)["sha256_after"] == sha256_hex("old\nmore\n"));
  const json* gone = change_of(all, work + "/gone.txt");
  REQUIRE(gone);
  CHECK((*gone)["change"] == "deleted");
  CHECK((*gone)["sha256_before"] == sha256_hex("bye\n"));
  CHECK_FALSE(change_of(all, "/etc/flightrec-test"));

  // The kernel saw root inside as the unprivileged id outside.
  int execs = 0;
  for (const auto& e : of_type(all, "exec")) {
    CHECK(e["uid"] == 1000000000);
    ++execs;
  }
  CHECK(execs >= 3);
  CHECK(flightrec({"verify", "--db", db}).code == 0);
}

// The sandbox's init is born in the session's cgroup and joins the limits'
// v1 cgroups itself (no move by flightrec, which waits for the kernel);
// the session opens once it waits for go, so nothing of its set-up (its
// mounts, pivot_root, host name) is in the record.
TEST_CASE("the sandbox's init is in every cgroup of the session from birth; its set-up is not in the record") {
  REQUIRE(is_root());
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("s.db");
  mkdir(work.c_str(), 0755);
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--daemon", "off", "--limit", "pids=64", "--limit", "memory=1G",
                           "--db", db, "--", "cat", "/proc/self/cgroup"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  INFO(r.out);
  // "N:controllers:/path" per hierarchy; the session's path in v2 ("0::").
  std::map<std::string, std::string> path_of;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a != std::string::npos && b != std::string::npos) path_of[line.substr(a + 1, b - a - 1)] = line.substr(b + 1);
  }
  REQUIRE(path_of.count(""));
  std::string session = path_of[""];
  CHECK(session.find("/flightrec/run-") == 0);
  // Where memory or pids are v1 controllers (hybrid hosts), their cgroups are the session's too.
  for (const auto& [controllers, path] : path_of)
    if (controllers == "memory" || controllers == "pids") CHECK(path == session);
  auto all = entries(db);
  REQUIRE(all.size() > 5);
  for (const auto& e : all) {
    std::string name = e.value("name", "");
    CHECK_MESSAGE(name != "mount", e.dump());
    CHECK_MESSAGE(name != "pivot_root", e.dump());
    CHECK_MESSAGE(name != "sethostname", e.dump());
    CHECK_MESSAGE(e["type"] != "cgroup_move", e.dump());
    // Every call has its entry: the init's first return after the session
    // opened, whose entry was not seen, is not recorded.
    if (e.contains("nr")) CHECK_MESSAGE(e.contains("ts_enter_mono_ns"), e.dump());
  }
  CHECK(flightrec({"verify", "--db", db}).code == 0);
}

TEST_CASE("flightrec never reads a host file through a path the sandbox named (no confused deputy)") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("s.db");
  mkdir(work.c_str(), 0755);
  // A root-only secret and a FIFO on the host, in a directory the sandbox's
  // private /tmp can also hold: "L -> /" in the work directory means the
  // sandbox's / inside, and the host's / to a lookup by flightrec.
  std::string name = "flightrec-deputy-" + std::to_string(getpid());
  std::string host_dir = "/tmp/" + name;
  mkdir(host_dir.c_str(), 0700);
  std::string secret = "secret " + std::to_string(getpid()) + "\n";
  write(host_dir + "/key", secret);
  chmod((host_dir + "/key").c_str(), 0600);
  mkfifo((host_dir + "/fifo").c_str(), 0600);
  Result r = run_in(work, {"timeout", "-s", "KILL", "120", FLIGHTREC_BIN, "run", "--db", db, "--", "sh", "-c",
                           "ln -s / L; mkdir -p /tmp/" + name + "; echo decoy > L/tmp/" + name + "/key; "
                           "echo decoy > L/tmp/" + name + "/fifo; mkdir -p a/b; ln -s a/b D; echo x > D/../side; "
                           "echo done"});
  unlink((host_dir + "/key").c_str());
  unlink((host_dir + "/fifo").c_str());
  rmdir(host_dir.c_str());
  INFO(r.err);
  REQUIRE(r.code == 0);  // not stuck on the FIFO
  CHECK(r.out == "done\n");
  auto all = entries(db);
  std::string secret_hash = sha256_hex(secret);
  for (const auto& e : all) {
    INFO(e.dump());
    CHECK(e.dump().find(secret_hash) == std::string::npos);
    // A change at close names a file the sandbox really has, with its bytes.
    if (e["type"] == "file_change" && e["when"] == "close" && e.contains("sha256_after"))
      CHECK(e["sha256_after"] == sha256_hex(e["path"].get<std::string>().ends_with("side") ? "x\n" : "decoy\n"));
  }
  const json* link = change_of(all, work + "/L");
  REQUIRE(link);
  CHECK((*link)["kind"] == "symlink");
  CHECK((*link)["link_target"] == "/");
}

TEST_CASE("TLS attach resolves a library path in the sandbox's view, not the host's") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("s.db");
  mkdir(work.c_str(), 0755);
  // The host has a real libssl at /tmp/NAME/libssl.so.3; the sandbox has
  // its own file there, which is not a library. Its absolute symlink must
  // lead to the sandbox's file, never to the host's.
  std::string name = "flightrec-tlsview-" + std::to_string(getpid());
  std::string host_dir = "/tmp/" + name;
  mkdir(host_dir.c_str(), 0700);
  REQUIRE(run({"cp", "/usr/lib/x86_64-linux-gnu/libssl.so.3", host_dir + "/libssl.so.3"}).code == 0);
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--db", db, "--", "sh", "-c",
                           "mkdir -p /tmp/" + name + "; echo 'not a library' > /tmp/" + name + "/libssl.so.3; "
                           "ln -s /tmp/" + name + "/libssl.so.3 libssl.so.3; read x < libssl.so.3; echo $x; sleep 0.3"});
  unlink((host_dir + "/libssl.so.3").c_str());
  rmdir(host_dir.c_str());
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "not a library\n");
  // Each open of the sandbox's file (one by its name, one through the
  // symlink) led to a probe of that file, which is no library; none to the
  // host's real libssl, which would have attached without a word.
  auto all = entries(db);
  int opens = 0, refused = 0;
  for (const auto& e : of_type(all, "file_open"))
    opens += e["ret"] >= 0 && e.value("kernel_path", "") == "/tmp/" + name + "/libssl.so.3";
  for (const auto& e : of_type(all, "error"))
    refused += e["detail"] == "TLS capture: /tmp/" + name + "/libssl.so.3 exports no TLS library's functions";
  CHECK(opens == 2);
  CHECK(refused == opens);
}

TEST_CASE("what the session names cannot rewrite flightrec's lines, and its terminal settings are restored") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("s.db");
  mkdir(work.c_str(), 0755);
  // A hidden path and a process name carrying CR, tab and escape sequences.
  // The file exists on the host (/run is hidden): what is not there is only
  // a probe, INFO, and not on stderr.
  std::string hostile = "/run/flightrec-" + std::to_string(getpid()) + "-x\r\033[31mOK\tfake";
  std::ofstream(hostile) << "secret\n";
  struct Cleanup {
    std::string path;
    ~Cleanup() { unlink(path.c_str()); }
  } cleanup{hostile};
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--db", db, "--", "sh", "-c",
                           "cat \"/run/flightrec-" + std::to_string(getpid()) + "-$(printf 'x\\r\\033[31mOK\\tfake')\" 2>/dev/null; "
                           "python3 -c \"import ctypes; ctypes.CDLL(None).prctl(15, b'\\x1b[2Jev\\ril', 0, 0, 0); "
                           "open('/etc/hostname').read()\""});
  CHECK(r.code == 0);
  bool alert = false;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    INFO(line);
    CHECK(line.find('\x1b') == std::string::npos);
    CHECK(line.find('\r') == std::string::npos);
    alert |= line.find("ALERT filesystem.hidden denied: openat of hidden /run/flightrec-" + std::to_string(getpid()) +
                       "-x\\r\\u{001b}[31mOK\\tfake") != std::string::npos;
  }
  CHECK(alert);
  Result q = rt::flightrec({"query", "--db", db});
  CHECK(q.code == 0);
  CHECK(q.out.find('\x1b') == std::string::npos);
  CHECK(q.out.find('\r') == std::string::npos);
  CHECK(q.out.find(" \\u{001b}[2Jev\\ril file_open openat /etc/hostname = 3") != std::string::npos);

  // On a terminal (a pty that is flightrec's controlling terminal), the
  // command turns echo off; flightrec turns it back on when it ends.
  const char* pty_script =
      "import os, sys, fcntl, termios\n"
      "m, s = os.openpty()\n"
      "pid = os.fork()\n"
      "if pid == 0:\n"
      "    os.setsid(); fcntl.ioctl(s, termios.TIOCSCTTY, 0)\n"
      "    for fd in (0, 1, 2): os.dup2(s, fd)\n"
      "    os.execv(sys.argv[1], sys.argv[1:])\n"
      "import select\n"
      "status = None\n"
      "while status is None:\n"  // the slave stays open here: no EOF on m
      "    if select.select([m], [], [], 0.1)[0]: os.read(m, 4096)\n"
      "    done, st = os.waitpid(pid, os.WNOHANG)\n"
      "    if done: status = st\n"
      "print(os.waitstatus_to_exitcode(status), 'echo' if termios.tcgetattr(s)[3] & termios.ECHO else 'no echo')\n";
  Result t = run_in(work, {"python3", "-c", pty_script, FLIGHTREC_BIN, "run", "--db", db, "--", "stty", "-echo"});
  INFO(t.err);
  CHECK(t.out == "0 echo\n");
}

TEST_CASE("sandbox path rules are decided by the LSM hook too: a hidden path made during the session stays closed" * doctest::test_suite("vm-sandbox")) {
  REQUIRE(is_root());
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("s.db"), policy = dir.file("later.yaml");
  mkdir(work.c_str(), 0755);
  // The mounts can only mask what exists when the sandbox is built.
  write(policy, "version: 1\nname: later\nfilesystem:\n  read_only: [/usr, /etc, /bin, /lib, /lib64]\n"
                "  hidden: [/tmp/later]\n");
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--policy", policy, "--db", db, "--", "sh", "-c",
                           "echo data > /tmp/later; echo w=$?; cat /tmp/later; echo r=$?; echo ok > /tmp/laterx && "
                           "cat /tmp/laterx; cp /usr/bin/true ./t && ./t && echo exec-ok"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto all = entries(db);
  const json& genesis = all.front();
  bool lsm = flightrec({"probe"}).out.find("BPF-LSM                                         yes") != std::string::npos;
  CHECK(r.out.find("ok\n") != std::string::npos);  // a rule covers its path and below, nothing longer
  // The work directory is executable (an overlay: the kernel's own open of
  // the file in its upper layer is not mistaken for the command's).
  CHECK(r.out.find("exec-ok\n") != std::string::npos);
  // A work directory under a hidden tree (the agent policy hides /home):
  // it stays usable, what else the tree holds does not.
  std::string tree = dir.file("tree"), inner = tree + "/proj", policy2 = dir.file("tree.yaml"), db2 = dir.file("t.db");
  mkdir(tree.c_str(), 0755);
  mkdir(inner.c_str(), 0755);
  write(tree + "/other", "other\n");
  write(policy2, "version: 1\nname: tree\nfilesystem:\n  read_only: [/usr, /etc, /bin, /lib, /lib64]\n"
                 "  hidden: [" + tree + "]\n");
  Result t = run_in(inner, {FLIGHTREC_BIN, "run", "--policy", policy2, "--db", db2, "--", "sh", "-c",
                            "echo x > f && cat f && cp /usr/bin/true ./t && ./t && echo inner-ok; cat " + tree + "/other"});
  INFO(t.err);
  CHECK(t.out == "x\ninner-ok\n");
  auto all2 = entries(db2);
  CHECK(violations(all2, "filesystem.exec").empty());
  CHECK(violations(all2, "filesystem.hidden").size() == 1);  // the other file

  if (!lsm) {
    // Here the mounts and Landlock alone enforce the policy; the record says
    // no path rule was decided by BPF-LSM.
    CHECK_FALSE(genesis.contains("lsm_hidden"));
    CHECK_FALSE(genesis.contains("lsm_exec"));
    return;
  }
  CHECK(r.out.find("w=2\n") != std::string::npos);  // sh: a redirection that failed
  CHECK(r.out.find("r=1\n") != std::string::npos);
  CHECK(r.out.find("data") == std::string::npos);
  CHECK(genesis["lsm_hidden"][0] == "/tmp/later");
  CHECK(genesis["lsm_exec"] == json::array({"/usr", "/etc", "/bin", "/lib", "/lib64", work}));
  auto hidden = violations(all, "filesystem.hidden");
  REQUIRE(hidden.size() == 2);  // the write and the read
  for (const auto& v : hidden) {
    CHECK(v["detail"] == "open of /tmp/later refused by BPF-LSM (hidden)");
    const json* e = by_seq(all, v["of_seq"]);
    REQUIRE(e);
    CHECK((*e)["type"] == "lsm");
    CHECK((*e)["rule"] == 1);
  }
  // Execs passed the exec allowlist on their resolved paths (/bin/sh is /usr/bin/dash).
  CHECK(std::any_of(all.begin(), all.end(), [](const json& e) {
    return e["type"] == "lsm" && e["hook"] == "file_open" && e["decision"] == "allow" &&
           e["path"] == "/usr/bin/dash" && (e["flags"].get<int64_t>() & 0x20);
  }));
  CHECK(violations(all, "filesystem.exec").empty());

}

TEST_CASE("a seccomp denial is recorded with the rule that fired and the blocked call" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string db = dir.file("s.db"), program = dir.file("escape_chroot");
  std::filesystem::copy_file(ESCAPE_DIR "/escape_chroot", program);  // the build tree is not readable inside
  Result r = run_in(dir.path.string(), {FLIGHTREC_BIN, "run", "--db", db, "--", program});
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK(r.out.rfind("BLOCKED", 0) == 0);
  auto all = entries(db);
  auto v = violations(all, "seccomp.deny.chroot");
  REQUIRE(v.size() == 1);
  const json* call = by_seq(all, v[0]["of_seq"]);
  REQUIRE(call);
  CHECK((*call)["name"] == "chroot");
  CHECK((*call)["blocked"] == 1);
  CHECK((*call)["ret"] == -1);  // EPERM
  CHECK(call->contains("ts_enter_mono_ns"));  // the kernel marked it: sys_exit without sys_enter
}

TEST_CASE("--entry-times off is refused for a sandbox with a seccomp filter, before anything runs") {
  // Without the entry trace a stopped call looks like a failed one, and an
  // agent that stacks a filter of its own chooses what such a call returns.
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string db = dir.file("s.db"), marker = dir.file("ran");
  Result r = run_in(dir.path.string(), {FLIGHTREC_BIN, "run", "--entry-times", "off", "--db", db, "--", "sh", "-c",
                                        "echo > " + marker});
  INFO(r.out << r.err);
  CHECK(r.code == 2);
  CHECK(r.err.find("--entry-times off cannot record a sandbox with a seccomp filter (policy agent)") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(db));
  CHECK_FALSE(std::filesystem::exists(marker));
  // observe has no sandbox: the return alone is fine there.
  Result ok = run_in(dir.path.string(), {FLIGHTREC_BIN, "run", "--policy", "observe", "--entry-times", "off", "--db",
                                         db, "--", "true"});
  CHECK(ok.code == 0);
}

TEST_CASE("shadow mode blocks nothing and records what enforce mode would deny" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string db = dir.file("s.db");
  Result r = run_in(dir.path.string(), {FLIGHTREC_BIN, "run", "--shadow", "--db", db, "--", "sh", "-c",
                                        "cat /etc/shadow >/dev/null && echo read; " ESCAPE_DIR "/escape_chroot"});
  INFO(r.err);
  CHECK(r.code == 0);  // chroot worked: nothing was enforced
  CHECK(r.err.rfind("flightrec: WARNING: shadow mode confines nothing: the command runs unconfined as root, "
                    "with full access to this host; the record says what policy agent would deny\n",
                    0) == 0);
  CHECK(r.out.find("read\n") == 0);
  CHECK(r.out.find("ESCAPED") != std::string::npos);
  auto all = entries(db);
  CHECK(all.front()["policy_mode"] == "shadow");
  auto hidden = violations(all, "filesystem.hidden");
  REQUIRE(hidden.size() >= 1);
  CHECK(hidden[0]["action"] == "would-deny");
  auto chroot = violations(all, "seccomp.deny.chroot");
  REQUIRE(chroot.size() == 1);
  CHECK(chroot[0]["action"] == "would-deny");
  const json* call = by_seq(all, chroot[0]["of_seq"]);
  REQUIRE(call);
  CHECK((*call)["ret"] == 0);
  CHECK_FALSE(call->contains("blocked"));
}

TEST_CASE("strict: a few dozen syscalls, no fork, only the command itself" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string db = dir.file("s.db"), db2 = dir.file("s2.db");
  Result r = flightrec({"run", "--policy", "strict", "--db", db, "--", "/bin/echo", "hello"});
  CHECK(r.code == 0);
  CHECK(r.out == "hello\n");
  // Its work directory, /tmp, is in the sandbox's private /tmp: empty, and
  // no window on the host's /tmp (a root-only key in a 0700 directory there).
  std::string host_dir = "/tmp/flightrec-strict-" + std::to_string(getpid());
  mkdir(host_dir.c_str(), 0700);
  write(host_dir + "/key", "host secret\n");
  chmod((host_dir + "/key").c_str(), 0600);
  std::string db3 = dir.file("s3.db");
  r = flightrec({"run", "--policy", "strict", "--db", db3, "--", "/bin/cat", host_dir + "/key"});
  Result ls = flightrec({"run", "--policy", "strict", "--db", db3, "--", "/bin/ls", "-A", "/tmp"});
  unlink((host_dir + "/key").c_str());
  rmdir(host_dir.c_str());
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("No such file or directory") != std::string::npos);
  CHECK(ls.code == 0);
  CHECK(ls.out.empty());
  r = flightrec({"run", "--policy", "strict", "--db", db2, "--", "/bin/sh", "-c", "/bin/true"});
  CHECK(r.code != 0);
  auto all = entries(db2);
  bool fork_denied = false;
  for (const auto& v : violations(all, "seccomp.default")) {
    const json* call = by_seq(all, v["of_seq"]);
    fork_denied = fork_denied || (call && ((*call)["name"] == "vfork" || (*call)["name"] == "clone" ||
                                           (*call)["name"] == "fork"));
  }
  CHECK(fork_denied);
}

TEST_CASE("policy files are checked: errors name the file, line and key, and nothing is recorded") {
  TempDir dir;
  std::string db = dir.file("s.db"), bad = dir.file("bad.yaml");
  struct Case {
    std::string yaml, expect;
  } cases[] = {
      {"version: 1\nname: t\nfilesystem:\n  read_only: [/usr]\n  bogus: 1\n", "bad.yaml:5: filesystem.bogus: unknown key"},
      {"version: 1\nname: t\nlimits:\n  memory: lots\n", "bad.yaml:4: limits.memory: 'lots' is not a size"},
      {"name: t\n", "version: missing"},
      {"version: 1\nname: t\nseccomp:\n  deny: [not_a_syscall]\n", "'not_a_syscall' is not an x86-64 system call"},
      {"version: 1\nname: t\nnetwork:\n  mode: allowlist\n  allow: [\"10.0.0.0/40:80\"]\n", "prefix longer than 32"},
      {"version: 1\nname: t\nfilesystem:\n  hidden: [relative/path]\n", "must be an absolute path"},
      {"version: 1\nname: t\nmode: [x\n", "not valid YAML"},
      {"version: 1\nname: t\nseccomp:\n  deny:\n    - {syscall: clone, args: [{index: 4294967296, value: 1}]}\n", "must be 0-5"},
      {"version: 1\nname: t\nhostname: " + std::string(70, 'a') + "\n", "is not a host name"},
      {"version: 1\nname: t\ncapabilities: [CAP_NOT_A_CAP]\n", "is not a capability name"},
      {"version: 1\nname: t\nseccomp:\n  profile: /dev/zero\n", "not a readable regular file"},
      {"version: 1\nname: t\n? [a, b]\n: 1\n", "bad.yaml:3: top level: a key must be a plain name"},
      {"version: 1\nname: t\nseccomp:\n  default: errno\n  allow: [openat]\n  deny:\n"
       "    - {syscall: openat, args: [{index: 2, op: masked_eq, mask: 64, value: 64}]}\n",
       "decide the same call differently"},
  };
  for (const auto& c : cases) {
    write(bad, c.yaml);
    Result r = flightrec({"run", "--policy", bad, "--db", db, "--", "true"});
    INFO(c.yaml);
    CHECK(r.code == 2);
    CHECK_MESSAGE(r.err.find(c.expect) != std::string::npos, r.err);
    CHECK(count_lines(r.err) == 1);
    CHECK(access(db.c_str(), F_OK) != 0);
  }
  Result r = flightrec({"run", "--policy", "nosuch", "--db", db, "--", "true"});
  CHECK(r.code == 2);
  CHECK(r.err.find("no shipped policy named 'nosuch'") != std::string::npos);
  r = flightrec({"run", "--policy", "/dev/zero", "--db", db, "--", "true"});
  CHECK(r.code == 2);
  CHECK(r.err.find("must be a regular file") != std::string::npos);
  r = flightrec({"run", "--limit", "memory", "--db", db, "--", "true"});
  CHECK(r.code == 2);
  CHECK(r.err.find("expected KEY=VALUE") != std::string::npos);
  CHECK(access(db.c_str(), F_OK) != 0);
}

TEST_CASE("circuit breaker: past the wall-clock limit the session is snapshotted, killed and marked" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string db = dir.file("s.db");
  Result r = run_in(dir.path.string(),
                    {FLIGHTREC_BIN, "run", "--limit", "wall_time=1s", "--db", db, "--", "sh", "-c", "sleep 30; echo no"});
  CHECK(r.code == 124);
  CHECK(r.out.empty());
  auto all = entries(db);
  auto snaps = of_type(all, "snapshot");
  REQUIRE(snaps.size() == 1);
  CHECK(snaps[0]["rule_id"] == "limits.wall_time");
  CHECK(snaps[0]["processes"].get<std::string>().find("sleep 30") != std::string::npos);
  CHECK(snaps[0]["open_fds"].get<std::string>().find("/dev/") != std::string::npos);
  auto v = violations(all, "limits.wall_time");
  REQUIRE(v.size() == 1);
  CHECK(v[0]["level"] == "CRITICAL");
  CHECK(v[0]["action"] == "killed");
  CHECK(all.back()["type"] == "session_end");
  CHECK(all.back()["reason"].get<std::string>().find("limits.wall_time") != std::string::npos);
  CHECK(flightrec({"verify", "--db", db}).code == 0);
}

TEST_CASE("circuit breaker: a session that floods its record is stopped at limits.record_size" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string db = dir.file("s.db"), work = dir.file("work");
  mkdir(work.c_str(), 0755);
  // Something that makes syscalls for as long as it is let: a getppid storm.
  REQUIRE(run({"cp", BENCH_SYSCALLS_BIN, work + "/storm"}).code == 0);
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--limit", "record_size=4M", "--db", db, "--", "./storm", "getppid",
                           "100000000000"});
  INFO(r.err);
  CHECK(r.code == 124);
  auto all = entries(db);
  auto v = violations(all, "limits.record_size");
  REQUIRE(v.size() == 1);
  CHECK(v[0]["level"] == "CRITICAL");
  CHECK(v[0]["detail"].get<std::string>().find("bytes to the record (limit 4194304)") != std::string::npos);
  auto snaps = of_type(all, "snapshot");
  REQUIRE(snaps.size() == 1);
  CHECK(snaps[0]["rule_id"] == "limits.record_size");
  CHECK(snaps[0]["taken_mono_ns"] <= snaps[0]["ts_mono_ns"]);
  CHECK(all.back()["reason"].get<std::string>().find("limits.record_size") != std::string::npos);
  CHECK(flightrec({"verify", "--db", db}).code == 0);
}

TEST_CASE("egress allowlist: the allowed loopback port connects, another fails with EPERM and is recorded" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string db = dir.file("s.db");
  Listener allowed, other;
  std::string script = "import socket,sys\n"
                       "for p in sys.argv[1:]:\n"
                       "    s = socket.socket()\n"
                       "    try:\n"
                       "        s.connect(('127.0.0.1', int(p))); print('connected')\n"
                       "    except OSError as e:\n"
                       "        print('errno', e.errno)\n"
                       "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                       "try:\n"
                       "    u.connect(('127.0.0.1', int(sys.argv[2]))); print('udp connected')\n"
                       "except OSError as e:\n"
                       "    print('udp errno', e.errno)\n"
                       "for a in ('127.0.0.1', '0.0.0.0'):\n"
                       "    s = socket.socket()\n"
                       "    try:\n"
                       "        s.bind((a, 47613)); print('bound', a)\n"
                       "    except OSError as e:\n"
                       "        print('bind errno', e.errno)\n";
  Result r = run_in(dir.path.string(), {FLIGHTREC_BIN, "run", "--allow", "127.0.0.1:" + std::to_string(allowed.port),
                                        "--db", db, "--", "python3", "-c", script, std::to_string(allowed.port),
                                        std::to_string(other.port)});
  INFO(r.err);
  CHECK(r.code == 0);
  // EACCES where Landlock has TCP port rules (it checks first), else EPERM
  // from the cgroup connect program.
  CHECK((r.out == "connected\nerrno 13\nudp errno 1\nbound 127.0.0.1\nbind errno 1\n" ||
         r.out == "connected\nerrno 1\nudp errno 1\nbound 127.0.0.1\nbind errno 1\n"));
  auto all = entries(db);
  auto v = violations(all, "network.allow");
  REQUIRE(v.size() == 2);  // TCP and UDP
  for (const auto& x : v) {
    CHECK(x["detail"].get<std::string>().find("port " + std::to_string(other.port)) != std::string::npos);
    CHECK(x.value("from_user_memory", 0) == 1);  // a refused connect's address: the caller's memory
  }
  auto bind = violations(all, "network.bind");
  REQUIRE(bind.size() == 1);  // listening on a public address: inbound traffic
  CHECK(bind[0]["detail"].get<std::string>().find("0.0.0.0 port 47613") != std::string::npos);
  // The successful connect and bind name the kernel's own addresses.
  int kernel_named = 0;
  for (const auto& e : all)
    if ((e.value("name", "") == "connect" || e.value("name", "") == "bind") && e.value("ret", -1) == 0 &&
        e.value("family", "") == "AF_INET") {
      CHECK(e.value("addr_from_kernel", 0) == 1);
      ++kernel_named;
    }
  CHECK(kernel_named >= 2);
  std::string sandbox = all.front()["sandbox"].dump();
  CHECK(sandbox.find("127.0.0.1/32:" + std::to_string(allowed.port)) != std::string::npos);
  // Where lsm/socket_connect loads, it decides too, on the kernel's copy of
  // the address: the other port denied over UDP, and over TCP unless
  // Landlock's port rules (an earlier LSM) refused it first with EACCES;
  // the allowed one allowed.
  bool lsm_connect = false;
  for (const auto& c : all.front()["capture"]) lsm_connect = lsm_connect || c == "lsm/socket_connect";
  int lsm_denied = 0, lsm_allowed = 0;
  for (const auto& e : of_type(all, "lsm"))
    if (e["hook"] == "socket_connect" && e.value("addr", "") == "127.0.0.1") {
      if (e["decision"] == "deny" && e["port"] == other.port && e.value("rule_id", "") == "network.allow") ++lsm_denied;
      if (e["decision"] == "allow" && e["port"] == allowed.port) ++lsm_allowed;
    }
  bool landlock_first = r.out.find("errno 13") != std::string::npos;
  // UDP is not Landlock's: there the LSM hook always decides.
  CHECK(lsm_denied == (lsm_connect ? (landlock_first ? 1 : 2) : 0));
  CHECK(lsm_allowed == (lsm_connect ? 1 : 0));
  std::string said = lsm_connect ? "lsm/socket_connect decided the egress allowlist too"
                                  : "egress decided by the cgroup programs alone";
  MESSAGE(said);
}

namespace {

// An IPv4 address of this host that is not loopback ("" if none).
std::string host_address() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string out;
  for (ifaddrs* i = list; i && out.empty(); i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !(i->ifa_flags & IFF_LOOPBACK) && (i->ifa_flags & IFF_UP)) {
      char text[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof(text));
      out = text;
    }
  freeifaddrs(list);
  return out;
}

// 198.18.0.1 (a benchmarking range) on the loopback device as an alias, for
// hosts with no other address (the VM): a source that is not loopback.
struct OutsideAlias {
  bool added = false;
  OutsideAlias() {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "lo:frtest", IFNAMSIZ - 1);
    auto* sa = reinterpret_cast<sockaddr_in*>(&ifr.ifr_addr);
    sa->sin_family = AF_INET;
    inet_pton(AF_INET, "198.18.0.1", &sa->sin_addr);
    added = ioctl(s, SIOCSIFADDR, &ifr) == 0;
    close(s);
  }
  ~OutsideAlias() {
    if (!added) return;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "lo:frtest", IFNAMSIZ - 1);
    ifr.ifr_flags = 0;  // an alias taken down is removed
    ioctl(s, SIOCSIFFLAGS, &ifr);
    close(s);
  }
};

// Whether a TCP connection to addr:port completes within a second.
// Whether a TCP connection to addr:port completes within a second; if it
// does and `say` is given, sends it.
bool connects(const std::string& addr, int port, const std::string& say = "") {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(port));
  inet_pton(AF_INET, addr.c_str(), &sa.sin_addr);
  connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  pollfd p{s, POLLOUT, 0};
  int err = -1;
  socklen_t len = sizeof(err);
  bool ok = poll(&p, 1, 1000) == 1 && getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
  if (ok && !say.empty()) ok = ::write(s, say.data(), say.size()) == ssize_t(say.size());
  close(s);
  return ok;
}

std::string read_line(int fd) {
  std::string line;
  char c;
  pollfd p{fd, POLLIN, 0};
  while (poll(&p, 1, 20000) == 1 && read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

}  // namespace

TEST_CASE("egress allowlist: ICMP sockets refused, sendmsg destinations judged, listeners reachable from loopback only" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  std::string outside = host_address();
  std::unique_ptr<OutsideAlias> alias;
  if (outside.empty()) {
    alias = std::make_unique<OutsideAlias>();
    if (alias->added) outside = "198.18.0.1";
  }
  REQUIRE_MESSAGE(!outside.empty(), "this test needs a non-loopback IPv4 address on the host");
  TempDir dir;
  std::string db = dir.file("s.db");
  // Unprivileged ping sockets, as systemd configures most hosts.
  std::string ping_range = slurp("/proc/sys/net/ipv4/ping_group_range");
  std::ofstream("/proc/sys/net/ipv4/ping_group_range") << "0 2147483647\n";
  const char* script =
      "import socket, sys\n"
      "try:\n"
      "    socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP); print('icmp socket')\n"
      "except OSError as e:\n"
      "    print('icmp errno', e.errno)\n"
      "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
      "try:\n"
      "    u.sendmsg([b'x'], [], 0, ('127.0.0.1', 9)); print('sendmsg sent')\n"
      "except OSError as e:\n"
      "    print('sendmsg errno', e.errno)\n"
      "s = socket.socket()\n"
      "s.listen()\n"  // no bind: the kernel binds 0.0.0.0 and a free port
      "print(s.getsockname()[1], flush=True)\n"
      // Until the test says it is done (a connection that sends "q"), not
      // for a set time: the test's own connects come late on a slow machine.
      "s.settimeout(60)\n"
      "got = 0\n"
      "try:\n"
      "    while True:\n"
      "        c, peer = s.accept(); c.settimeout(60)\n"
      "        if c.recv(1) == b'q': break\n"
      "        got += 1; print('from', peer[0]); c.close()\n"
      "except OSError:\n"
      "    pass\n"
      "print('accepted', got)\n";
  // A non-empty allowlist shares the host's network stack (an empty one
  // gives the sandbox a namespace of its own): nothing listens on port 7.
  Proc p = start_in(dir.path.string(),
                    {FLIGHTREC_BIN, "run", "--db", db, "--allow", "127.0.0.1:7", "--", "python3", "-c", script}, {});
  std::string icmp = read_line(p.out_fd), sendmsg = read_line(p.out_fd);
  int port = std::atoi(read_line(p.out_fd).c_str());
  bool from_outside = port > 0 && connects(outside, port);
  bool from_loopback = port > 0 && connects("127.0.0.1", port);
  if (port > 0) connects("127.0.0.1", port, "q");
  Result r = wait(p);
  std::ofstream("/proc/sys/net/ipv4/ping_group_range") << ping_range;
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(icmp == "icmp errno 1");
  CHECK(sendmsg == "sendmsg errno 1");  // the destination inside the msghdr is checked and recorded
  REQUIRE(port > 0);
  CHECK_FALSE(from_outside);
  CHECK(from_loopback);
  CHECK(r.out == "from 127.0.0.1\naccepted 1\n");
  auto all = entries(db);
  auto socket_v = violations(all, "network.socket");
  REQUIRE(socket_v.size() == 1);
  CHECK(socket_v[0]["detail"] == "socket(AF_INET, type 2, protocol 1): only TCP and UDP sockets under an egress allowlist");
  auto sendmsg_v = violations(all, "network.allow");
  REQUIRE(sendmsg_v.size() == 1);
  CHECK(sendmsg_v[0]["detail"] == "sendmsg to 127.0.0.1 port 9 is not on the allowlist");
  auto inbound = violations(all, "network.inbound");
  REQUIRE(!inbound.empty());
  CHECK(inbound[0]["detail"].get<std::string>().find("from hosts outside loopback and the allowlist dropped (last: " +
                                                     outside + " port ") != std::string::npos);
}

namespace {

// Whether a stream connection to the abstract UNIX name @name completes.
bool unix_connects(const std::string& name) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path + 1, name.data(), name.size());
  bool ok = connect(s, reinterpret_cast<sockaddr*>(&sa), socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size())) == 0;
  close(s);
  return ok;
}

// Runs a sandboxed listener on the abstract name @name; returns whether a
// host process could connect to it, and the record.
std::pair<bool, std::vector<json>> abstract_listener(const std::string& name, const std::vector<std::string>& extra) {
  TempDir dir;
  std::string db = dir.file("s.db");
  std::string script =
      "import socket\n"
      "s = socket.socket(socket.AF_UNIX)\n"
      "s.bind('\\0" + name + "'); s.listen()\n"
      "print('ready', flush=True)\n"
      "s.settimeout(3)\n"
      "try:\n"
      "    s.accept(); print('accepted')\n"
      "except OSError:\n"
      "    print('nobody')\n";
  std::vector<std::string> argv = {FLIGHTREC_BIN, "run", "--db", db};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"--", "python3", "-c", script});
  Proc p = start_in(dir.path.string(), argv, {});
  std::string ready = read_line(p.out_fd);
  bool reached = ready == "ready" && unix_connects(name);
  Result r = wait(p);
  INFO(r.err);
  CHECK(ready == "ready");
  REQUIRE(r.code == 0);
  CHECK(r.out == (reached ? "accepted\n" : "nobody\n"));
  return {reached, entries(db)};
}

}  // namespace

TEST_CASE("egress allowlist: the host cannot reach the sandbox's abstract UNIX sockets" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  std::string name = "flightrec-test-" + std::to_string(getpid());
  SUBCASE("an empty allowlist: the sandbox has a network namespace, and abstract names, of its own") {
    auto [reached, all] = abstract_listener(name, {});
    CHECK_FALSE(reached);
    CHECK(all.front()["sandbox"].dump().find("allowlist, empty (own loopback only)") != std::string::npos);
    CHECK(violations(all, "network.inbound").empty());
  }
  SUBCASE("a non-empty allowlist shares the host's: BPF-LSM refuses outsiders, or the bind is an ALERT") {
    auto [reached, all] = abstract_listener(name, {"--allow", "127.0.0.1:7"});
    std::string capture = all.front()["capture"].dump();
    bool refused = capture.find("lsm/unix_stream_connect") != std::string::npos;
    auto v = violations(all, "network.inbound");
    REQUIRE(v.size() == 1);
    MESSAGE("BPF-LSM refuses inbound UNIX connections: " << refused << " (refused programs: " << all.front().value("capture_refused", json::array()).dump() << ")");
    if (refused) {
      CHECK_FALSE(reached);
      CHECK(v[0]["action"] == "denied");
      CHECK(v[0]["subject_pid"] == int64_t(getpid()));
      CHECK(v[0]["detail"].get<std::string>().find("session's UNIX socket @" + name + ": refused by BPF-LSM") !=
            std::string::npos);
    } else {
      CHECK(reached);  // this kernel has no hook to refuse it: the record says so
      CHECK(v[0]["action"] == "allowed");
      CHECK(v[0]["detail"].get<std::string>().find("bind to abstract socket @" + name +
                                                   ": processes outside the sandbox can connect") != std::string::npos);
      // The name is the kernel's, not the bind's argument in user memory.
      const json* bind = by_seq(all, v[0]["of_seq"].get<int64_t>());
      REQUIRE(bind);
      CHECK((*bind)["addr_from_kernel"] == 1);
    }
  }
}

TEST_CASE("useful agent work under agent: python3, node, pip from a local wheel, git" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("s.db");
  mkdir(work.c_str(), 0755);
  // A wheel built by hand (it is a zip with metadata), so no network and no
  // build tools are needed.
  Result w = run_in(work, {"python3", "-c",
                           "import zipfile,os\n"
                           "os.makedirs('wheels')\n"
                           "z=zipfile.ZipFile('wheels/frdemo-1.0-py3-none-any.whl','w')\n"
                           "z.writestr('frdemo/__init__.py','VALUE=42\\n')\n"
                           "z.writestr('frdemo-1.0.dist-info/METADATA','Metadata-Version: 2.1\\nName: frdemo\\nVersion: 1.0\\n')\n"
                           "z.writestr('frdemo-1.0.dist-info/WHEEL','Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n"
                           "z.writestr('frdemo-1.0.dist-info/RECORD','')\n"
                           "z.close()\n"});
  REQUIRE(w.code == 0);
  // A repository made on the host: a local clone hard-links its objects
  // out of the overlay's lower layer.
  REQUIRE(run_in(work, {"sh", "-c", "git init -q hostrepo && cd hostrepo && echo host > h.txt && git add h.txt && "
                                    "git -c user.name=t -c user.email=t@example.com commit -qm host"})
              .code == 0);
  bool node = run({"sh", "-c", "command -v node"}).code == 0;
  std::string script =
      "set -e\n"
      "python3 -c 'print(sum(range(10)))'\n" +
      std::string(node ? "node -e 'console.log(6*7)'\n" : "echo 42\n") +
      "python3 -m pip install -q --no-index --find-links wheels --target pylib frdemo\n"
      "PYTHONPATH=pylib python3 -c 'import frdemo; print(frdemo.VALUE)'\n"
      "git init -q repo && cd repo && echo hello > f.txt && git add f.txt\n"
      "git -c user.name=t -c user.email=t@example.com commit -qm first\n"
      "git log --oneline | wc -l\n"
      "cd .. && git clone -q " + work + "/hostrepo copy && cat copy/h.txt\n";
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--db", db, "--", "sh", "-c", script});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out == "45\n42\n42\n1\nhost\n");
  auto all = entries(db);
  CHECK(violations(all, "filesystem.read_only").empty());
  const json* f = change_of(all, work + "/repo/f.txt");
  REQUIRE(f);
  CHECK((*f)["sha256_after"] == sha256_hex("hello\n"));
  CHECK(change_of(all, work + "/pylib/frdemo/__init__.py"));
}

TEST_CASE("Docker's own seccomp profile (OCI JSON) is used as is") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  const std::string profile = "/var/cache/flightrec-test/docker-seccomp-default.json";
  REQUIRE_MESSAGE(access(profile.c_str(), R_OK) == 0, profile << " is missing: run tools/install-deps.sh");
  TempDir dir;
  std::string db = dir.file("s.db"), policy = dir.file("docker.yaml"), program = dir.file("escape_mount_tmpfs");
  std::filesystem::copy_file(ESCAPE_DIR "/escape_mount_tmpfs", program);
  write(policy, "version: 1\nname: docker-default\nnetwork:\n  mode: none\nseccomp:\n  profile: " + profile + "\n");
  Result r = run_in(dir.path.string(), {FLIGHTREC_BIN, "run", "--policy", policy, "--db", db, "--", "sh", "-c",
                                        "python3 -c 'print(6*7)' && " + program});
  INFO(r.err);
  CHECK(r.code == 1);  // the mount attempt was blocked; python ran
  CHECK(r.out.find("42\nBLOCKED") == 0);
  auto all = entries(db);
  CHECK(all.front()["policy_name"] == "docker-default");
  CHECK(all.front()["sandbox"].dump().find("profile " + profile) != std::string::npos);
  // mount is allowed only with CAP_SYS_ADMIN, which the sandbox does not
  // keep: Docker's defaultAction (errno) decides.
  auto v = violations(all, "seccomp.default");
  REQUIRE(v.size() == 1);
  const json* call = by_seq(all, v[0]["of_seq"]);
  REQUIRE(call);
  CHECK((*call)["name"] == "mount");
  CHECK((*call)["blocked"] == 1);
}

TEST_CASE("the sandbox dies with flightrec, even killed with SIGKILL" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string db = dir.file("s.db");
  Proc p = start_in(dir.path.string(), {FLIGHTREC_BIN, "run", "--db", db, "--", "sleep", "31.713"}, {});
  auto sleeping = [] { return run({"pgrep", "-f", "sleep 31.713"}).code == 0; };
  for (int i = 0; i < 100 && !sleeping(); ++i) usleep(50000);
  REQUIRE(sleeping());
  kill(p.pid, SIGKILL);
  wait(p);
  for (int i = 0; i < 100 && sleeping(); ++i) usleep(50000);
  CHECK_FALSE(sleeping());
}

TEST_CASE("a deep tree of changes is diffed without recursion limits; the record is sealed") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("s.db");
  mkdir(work.c_str(), 0755);
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--db", db, "--", "python3", "-c",
                           "import os\nfor i in range(2100):\n    os.mkdir('d'); os.chdir('d')\nopen('f','w').write('x')\n"});
  INFO(r.err);
  CHECK(r.code == 0);
  auto all = entries(db);
  CHECK(all.back()["type"] == "session_end");
  size_t dirs = 0;
  for (const auto& e : all)
    if (e["type"] == "file_change" && e["when"] == "end" && e["kind"] == "dir") ++dirs;
  CHECK(dirs > 1000);  // those whose path fits in PATH_MAX; the rest are counted in a note
  CHECK(flightrec({"verify", "--db", db}).code == 0);
}

TEST_CASE("the sandbox's private /tmp and /dev/shm: what the session leaves there is in the record" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string db = dir.file("s.db");
  // The work directory is under /tmp (a TempDir): the rest of /tmp is the sandbox's own.
  Result r = run_in(dir.path.string(), {FLIGHTREC_BIN, "run", "--db", db, "--", "sh", "-c",
                           "echo secret-plan > /tmp/notes; mkdir /tmp/d; ln -s / /tmp/d/up; "
                           "printf shm > /dev/shm/seg"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto all = entries(db);
  const json* notes = change_of(all, "/tmp/notes");
  REQUIRE(notes);
  CHECK((*notes)["change"] == "created");
  CHECK((*notes)["sha256_after"] == sha256_hex("secret-plan\n"));
  const json* seg = change_of(all, "/dev/shm/seg");
  REQUIRE(seg);
  CHECK((*seg)["sha256_after"] == sha256_hex("shm"));
  const json* up = change_of(all, "/tmp/d/up");
  REQUIRE(up);
  CHECK((*up)["kind"] == "symlink");
  CHECK((*up)["link_target"] == "/");
  REQUIRE(change_of(all, "/tmp/d"));
}

TEST_CASE("the host's device nodes in the sandbox's /dev work, but their inodes cannot be touched" * doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  struct stat before {};
  REQUIRE(stat("/dev/null", &before) == 0);
  Result r = run_in(dir.path.string(), {FLIGHTREC_BIN, "run", "--db", dir.file("s.db"), "--", "python3", "-c",
                                        "import os\n"
                                        "for dev in ['/dev/null', '/dev/zero', '/dev/urandom']:\n"
                                        "    try:\n"
                                        "        os.utime(dev); print(dev, 'touched')\n"
                                        "    except OSError as e:\n"
                                        "        print(dev, e.strerror)\n"
                                        "open('/dev/null', 'w').write('x'); print(len(open('/dev/zero', 'rb').read(8)))\n"});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out ==
        "/dev/null Read-only file system\n/dev/zero Read-only file system\n/dev/urandom Read-only file system\n8\n");
  struct stat after {};
  REQUIRE(stat("/dev/null", &after) == 0);
  CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec);
  CHECK(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
}

TEST_CASE("limits.record_rate: plain syscalls past the rate are counted in summary entries, the rest kept whole") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string db = dir.file("s.db"), work = dir.file("work");
  mkdir(work.c_str(), 0755);
  REQUIRE(run({"cp", BENCH_SYSCALLS_BIN, work + "/storm"}).code == 0);
  const int64_t calls = 300000;
  // The storm, then a file it opens: an act after the flood is recorded whole.
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--limit", "record_rate=1000", "--ring-size", "256M", "--db", db, "--",
                           "sh", "-c", "./storm getppid " + std::to_string(calls) + " && cat /etc/hostname >/dev/null"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  auto all = entries(db);
  int64_t storm_pid = 0;
  for (const auto& e : of_type(all, "exec"))
    if (e["filename"].get<std::string>().ends_with("/storm")) storm_pid = e["pid"];
  REQUIRE(storm_pid);
  int64_t kept = 0, summarised = 0, summaries = 0;
  for (const auto& e : all) {
    if (e["type"] == "syscall" && e["pid"] == storm_pid && e["name"] == "getppid") ++kept;
    if (e["type"] != "summary") continue;
    ++summaries;
    CHECK(e["rule_id"] == "limits.record_rate");
    CHECK(e["limit_per_second"] == 1000);
    int64_t total = 0;
    for (size_t i = 0; i < e["pids"].size(); ++i) {
      total += e["counts"][i].get<int64_t>();
      if (e["pids"][i] == storm_pid && e["names"][i] == "getppid") summarised += e["counts"][i].get<int64_t>();
    }
    CHECK(total == e["summarised"].get<int64_t>());
  }
  MESSAGE(kept << " getppid entries kept, " << summarised << " summarised in " << summaries << " summaries");
  CHECK(summaries >= 1);
  CHECK(kept > 0);  // the first of each second (with the other plain calls of the session)
  CHECK(summarised > 0);
  // Every call is accounted for: kept, summarised, or counted as lost.
  uint64_t lost = all.back()["lost_total"].get<uint64_t>();
  CHECK(kept + summarised <= calls);
  CHECK(kept + summarised + int64_t(lost) >= calls);
  bool opened = false;
  for (const auto& e : of_type(all, "file_open")) opened = opened || e.value("path", "") == "/etc/hostname";
  CHECK(opened);
  CHECK(flightrec({"verify", "--db", db}).code == 0);
}
