// Policies as data: the shipped files parse, errors point at the line and
// key, sizes and durations, OCI profiles, and the judge's rule naming.
#include <doctest/doctest.h>

#include <fstream>

#include "files.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <map>

#include "events/entry.h"
#include "policy/judge.h"
#include "policy/policy.h"
#include "policy/processes.h"
#include "policy_error.h"

using namespace flightrec;
using namespace flightrec::policy;
using policy_test::error_of;

namespace {

events::Entry syscall(const char* name, int nr, int64_t ret, std::vector<int64_t> args = {0, 0, 0, 0, 0, 0}) {
  events::Entry e;
  e.set("type", "syscall");
  e.set("name", name);
  e.set("nr", nr);
  e.set("args", std::move(args));
  e.set("ret", ret);
  return e;
}

}  // namespace

TEST_CASE("the shipped policies parse and say what they are") {
  REQUIRE(shipped().size() == 6);  // agent, agent-pod, claude-code, codex, observe, strict
  Policy agent = load("agent");
  CHECK(agent.name == "agent");
  CHECK(agent.confine);
  CHECK(agent.mode == Mode::Enforce);
  CHECK(agent.network == Network::Allowlist);
  CHECK(agent.allow.empty());
  CHECK(agent.seccomp.default_action == Action::Allow);
  CHECK(agent.seccomp.rules.size() > 50);
  CHECK(agent.limits.pids == 1024);
  CHECK(agent.limits.memory_bytes == 4ull << 30);
  Policy strict = load("strict");
  CHECK(strict.seccomp.default_action == Action::Errno);
  CHECK(strict.filesystem.exec_only_command);
  CHECK(strict.network == Network::None);
  size_t allowed = 0;
  for (const auto& r : strict.seccomp.rules) allowed += r.action == Action::Allow ? r.numbers.size() : 0;
  CHECK(allowed >= 55);
  CHECK(allowed <= 80);
  CHECK_FALSE(load("observe").confine);
  CHECK_THROWS_AS(load("nosuch"), PolicyError);
  // Every path list is also a BPF-LSM rule list: bounded.
  std::string many = "version: 1\nname: t\nfilesystem:\n  hidden: [";
  for (int i = 0; i < 257; ++i) many += (i ? ", /h" : "/h") + std::to_string(i);
  CHECK_THROWS_WITH_AS(parse(many + "]\n", "t.yaml"), "t.yaml:4: filesystem.hidden: at most 256 paths", PolicyError);
  // One spelling per path.
  auto spelled = parse("version: 1\nname: t\nfilesystem:\n  hidden: [/a//b/./c/, /d/.]\n", "t.yaml");
  CHECK(spelled.filesystem.hidden == std::vector<std::string>{"/a/b/c", "/d"});
}

TEST_CASE("policy errors name the file, the line and the key") {
  CHECK(error_of("version: 1\nname: x\nfilesystem:\n  hiden: [/a]\n").find("t.yaml:4: filesystem.hiden: unknown key") == 0);
  // Of two equal keys yaml-cpp would let the first hide the second: an error.
  CHECK(error_of("version: 1\nname: x\nfilesystem:\n  hidden: [/a]\n  hidden: [/b]\n").find("t.yaml:5: filesystem.hidden: given twice") == 0);
  CHECK(error_of("version: 1\nname: x\nlimits:\n  pids: -3\n").find("t.yaml:4: limits.pids:") == 0);
  // Entries inside the sandbox's private /tmp or /dev/shm cannot take effect.
  CHECK(error_of("version: 1\nname: x\nfilesystem:\n  read_only: [/usr, /tmp/data]\n")
            .find("t.yaml:4: filesystem.read_only: '/tmp/data' is inside /tmp, which the sandbox gets as a private, "
                  "empty tmpfs") == 0);
  CHECK(error_of("version: 1\nname: x\nfilesystem:\n  read_write:\n    - /dev/shm/x\n")
            .find("t.yaml:5: filesystem.read_write: '/dev/shm/x' is inside /dev/shm") == 0);
  CHECK(error_of("version: 1\nname: x\nfilesystem:\n  hidden: [/tmp/later]\n").empty());  // BPF-LSM enforces it
  CHECK(error_of("version: 1\nname: x\nfilesystem:\n  read_write: [/tmp]\n").empty());  // /tmp itself: its own
  CHECK(error_of("version: 1\nname: x\nmode: sometimes\n").find("t.yaml:3: mode: 'sometimes' is not one of") == 0);
  CHECK(error_of("version: 2\nname: x\n").find("t.yaml:1: version: only version 1") == 0);
  CHECK(error_of("version: 1\nname: x\nseccomp:\n  deny:\n    - {syscall: clone, args: [{index: 9, value: 1}]}\n")
            .find("must be 0-5") != std::string::npos);
  CHECK(error_of("version: 1\nname: x\nconfine: false\nseccomp:\n  deny: [ptrace]\n").find("confine") != std::string::npos);
  CHECK(error_of("version: 1\nname: x\nnetwork:\n  mode: none\n  allow: [\"1.2.3.4:80\"]\n").find("only with mode: allowlist") !=
        std::string::npos);
  CHECK(error_of("version: 1\nname: x\nnetwork:\n  mode: allowlist\n  allow: [\"1.2.3.4:99999\"]\n").find("not a port") !=
        std::string::npos);
}

TEST_CASE("sizes, durations, endpoints and limit overrides") {
  CHECK(parse_bytes("512M") == 512ull << 20);
  CHECK(parse_bytes("2G") == 2ull << 30);
  CHECK(parse_bytes("1000") == 1000);
  CHECK_FALSE(parse_bytes("12X"));
  CHECK_FALSE(parse_bytes("-1"));
  CHECK_FALSE(parse_bytes("99999999999999999999T"));
  CHECK(parse_duration_ms("30s") == 30000);
  CHECK(parse_duration_ms("2h") == 7'200'000);
  CHECK(parse_duration_ms("250ms") == 250);
  CHECK_FALSE(parse_duration_ms("5"));
  Policy p = parse("version: 1\nname: x\nnetwork:\n  mode: allowlist\n  allow: [\"10.0.0.0/8:443\", \"[::1]:*\"]\nlimits:\n  cpu: 0.5\n",
                   "t.yaml");
  REQUIRE(p.allow.size() == 2);
  CHECK(p.allow[0].prefix == 8);
  CHECK(p.allow[0].port == 443);
  CHECK(p.allow[1].family == 10);
  CHECK(p.allow[1].port == 0);
  CHECK(p.limits.cpu_millicores == 500);
  override_limit(p, "memory=256M");
  CHECK(p.limits.memory_bytes == 256ull << 20);
  CHECK(p.limits.cpu_millicores == 500);  // untouched
  CHECK_THROWS_AS(override_limit(p, "memory"), PolicyError);
  CHECK_THROWS_AS(override_limit(p, "colour=red"), PolicyError);
  add_allowed(p, "192.168.1.7:8080");
  CHECK(p.allow.size() == 3);
  CHECK(p.overrides.size() == 2);
  Judge j(p, "/w");
  CHECK(j.allowed_endpoint(2, "10.200.1.1", 443));
  CHECK_FALSE(j.allowed_endpoint(2, "10.200.1.1", 80));
  CHECK_FALSE(j.allowed_endpoint(2, "11.0.0.1", 443));
  CHECK(j.allowed_endpoint(10, "::1", 22));
  CHECK(j.allowed_endpoint(2, "192.168.1.7", 8080));
}

TEST_CASE("an OCI profile is read as Docker reads it") {
  const char* json = R"({
    "defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
    "syscalls": [
      {"names": ["read", "write", "no_such_call_here"], "action": "SCMP_ACT_ALLOW"},
      {"names": ["chroot"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_CHROOT"]}},
      {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38, "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
      {"names": ["personality"], "action": "SCMP_ACT_ALLOW", "args": [
         {"index": 0, "value": 0, "op": "SCMP_CMP_EQ"}, {"index": 0, "value": 8, "op": "SCMP_CMP_EQ"}]},
      {"names": ["sync_file_range2"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["ppc64le"]}}
    ]})";
  Seccomp s = parse_oci_profile(json, "p.json", {});
  CHECK(s.default_action == Action::Errno);
  REQUIRE(s.rules.size() == 4);  // chroot (no cap) and the ppc64le rule left out
  CHECK(s.rules[0].names == std::vector<std::string>{"read", "write"});
  CHECK(s.rules[1].errno_value == 38);
  CHECK(s.rules[2].args.size() == 1);  // one index, two values: two rules
  CHECK(s.rules[3].args.size() == 1);
  CHECK(parse_oci_profile(json, "p.json", {"CAP_SYS_CHROOT"}).rules.size() == 5);
  CHECK_THROWS_AS(parse_oci_profile("{\"syscalls\": []}", "p.json", {}), PolicyError);
  CHECK_THROWS_AS(parse_oci_profile("not json", "p.json", {}), PolicyError);
  CHECK_THROWS_AS(parse_oci_profile(R"({"defaultAction": "SCMP_ACT_NOTIFY"})", "p.json", {}), PolicyError);
}

TEST_CASE("the judge: under an allowlist only TCP and UDP sockets, and binds on loopback or as a client") {
  Policy p = load("agent");
  REQUIRE(p.network == Network::Allowlist);
  Judge j(p, "/work");
  auto sock = [](int64_t af, int64_t type, int64_t proto, int64_t ret) {
    return syscall("socket", 41, ret, {af, type, proto, 0, 0, 0});
  };
  auto icmp = j.judge(sock(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_ICMP, -EPERM));
  REQUIRE(icmp);
  CHECK(icmp->rule == "network.socket");
  CHECK(icmp->detail == "socket(AF_INET, type 2, protocol 1): only TCP and UDP sockets under an egress allowlist");
  REQUIRE(j.judge(sock(AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6, -EPERM)));
  CHECK(j.judge(sock(AF_INET, SOCK_STREAM, 262 /* MPTCP */, -EPERM))->rule == "network.socket");
  CHECK_FALSE(j.judge(sock(AF_INET, SOCK_STREAM, 0, 3)));
  CHECK_FALSE(j.judge(sock(AF_INET6, SOCK_DGRAM, IPPROTO_UDP, 3)));
  CHECK_FALSE(j.judge(sock(AF_UNIX, SOCK_DGRAM, 0, 3)));
  auto bind = [](const char* addr, int64_t port, int64_t ret) {
    auto e = syscall("bind", 49, ret);
    e.set("family", std::string(addr).find(':') == std::string::npos ? "AF_INET" : "AF_INET6");
    e.set("addr", addr);
    e.set("port", port);
    return e;
  };
  CHECK_FALSE(j.judge(bind("127.0.0.1", 8000, 0)));
  CHECK_FALSE(j.judge(bind("::ffff:127.0.0.1", 8000, 0)));
  CHECK_FALSE(j.judge(bind("0.0.0.0", 0, 0)));
  REQUIRE(j.judge(bind("192.0.2.2", 0, -EPERM)));
  CHECK(j.judge(bind("192.0.2.2", 0, -EPERM))->rule == "network.bind");
  CHECK(j.judge(bind("::", 8000, -EPERM))->rule == "network.bind");
}

TEST_CASE("the judge names the rule behind a denial") {
  Policy p = load("agent");
  Judge j(p, "/work");
  // A call seccomp stopped names its rule; the same call unblocked does not.
  auto e = syscall("ptrace", 101, -EPERM);
  e.set("blocked", 1);
  auto v = j.judge(e);
  REQUIRE(v);
  CHECK(v->rule == "seccomp.deny.ptrace");
  CHECK(std::string(v->action) == "denied");
  CHECK_FALSE(j.judge(syscall("ptrace", 101, 0)));
  // 32-bit arguments are matched on their low half, as the kernel reads them.
  auto sti = syscall("ioctl", 16, -EPERM, {0, 0x100005412, 0, 0, 0, 0});
  sti.set("blocked", 1);
  REQUIRE(j.judge(sti));
  CHECK(j.judge(sti)->rule == "seccomp.deny.tiocsti");
  // Argument rules: clone with CLONE_NEWUSER, not a plain fork-like clone.
  auto c = syscall("clone", 56, -EPERM, {0x10000000 | 17, 0, 0, 0, 0, 0});
  c.set("blocked", 1);
  REQUIRE(j.judge(c));
  CHECK(j.judge(c)->rule == "seccomp.deny.clone-newuser");
  // Paths: hidden, through /proc/N/root, and writes outside the writable trees.
  auto open = syscall("openat", 257, -EACCES);
  open.set("path", "/proc/1/root/etc/../etc/shadow");
  open.set("flags", int64_t(0));
  REQUIRE(j.judge(open));
  CHECK(j.judge(open)->rule == "filesystem.hidden");
  auto w = syscall("openat", 257, -EACCES);
  w.set("path", "/usr/bin/x");
  w.set("flags", int64_t(01101));  // O_WRONLY|O_CREAT|O_TRUNC
  REQUIRE(j.judge(w));
  CHECK(j.judge(w)->rule == "filesystem.read_only");
  auto ok = syscall("openat", 257, 3);
  ok.set("path", "/work/notes.txt");
  ok.set("flags", int64_t(01101));
  CHECK_FALSE(j.judge(ok));
  // The work directory under a hidden tree stays reachable; a hidden path in it does not.
  Policy home = p;
  home.filesystem.hidden = {"/home", "/home/u/proj/.env"};
  Judge in_home(home, "/home/u/proj");
  auto missing = [](const char* path) {
    auto e = syscall("openat", 257, -ENOENT);
    e.set("path", path);
    e.set("flags", int64_t(0));
    return e;
  };
  CHECK_FALSE(in_home.judge(missing("/home/u/proj/missing.txt")));
  REQUIRE(in_home.judge(missing("/home/u/proj/.env")));
  CHECK(in_home.judge(missing("/home/u/proj/.env"))->rule == "filesystem.hidden");
  CHECK(in_home.judge(missing("/home/other/x")));
  // BPF-LSM's refusals carry their rule; its allowed opens are no violation.
  auto lsm = [](const char* decision, const char* rule_id) {
    flightrec::events::Entry e;
    e.set("type", "lsm");
    e.set("hook", "file_open");
    e.set("path", "/tmp/x");
    e.set("decision", decision);
    if (*rule_id) e.set("rule_id", rule_id);
    return e;
  };
  REQUIRE(j.judge(lsm("deny", "filesystem.exec")));
  CHECK(j.judge(lsm("deny", "filesystem.exec"))->rule == "filesystem.exec");
  CHECK(j.judge(lsm("deny", "filesystem.hidden"))->detail == "open of /tmp/x refused by BPF-LSM (hidden)");
  CHECK_FALSE(j.judge(lsm("allow", "")));
  // Shadow mode: the same rules, nothing refused.
  p.mode = Mode::Shadow;
  Judge shadow(p, "/work");
  auto v2 = shadow.judge(syscall("ptrace", 101, 0));
  REQUIRE(v2);
  CHECK(std::string(v2->action) == "would-deny");
  // A path argument rewritten during the open names a decoy; the file the
  // kernel opened is what the rules judge.
  auto opened = [](const char* path, const char* kernel_path) {
    auto e = syscall("openat", 257, 3);
    e.set("path", path);
    e.set("kernel_path", kernel_path);
    e.set("flags", int64_t(0));
    return e;
  };
  auto v3 = shadow.judge(opened("/usr/share/decoy", "/etc/shadow"));
  REQUIRE(v3);
  CHECK(v3->rule == "filesystem.hidden");
  CHECK(v3->detail == "openat of hidden /etc/shadow");
  CHECK_FALSE(v3->from_user_memory);
  CHECK_FALSE(shadow.judge(opened("/usr/share/decoy", "/usr/share/decoy")));
  // ... and a decoy the other way round is not blamed on the process.
  CHECK_FALSE(shadow.judge(opened("/etc/shadow", "/usr/share/decoy")));
  // A failed open has no kernel_path: what it names is the caller's memory.
  auto refused = syscall("openat", 257, -EACCES);
  refused.set("path", "/etc/shadow");
  refused.set("flags", int64_t(0));
  auto v4 = j.judge(refused);
  REQUIRE(v4);
  CHECK(v4->rule == "filesystem.hidden");
  CHECK(v4->from_user_memory);
}

TEST_CASE("path normalisation for rule matching") {
  CHECK(normalize_path("/a/./b//c/../d") == "/a/b/d");
  CHECK(normalize_path("/proc/self/root/etc/shadow") == "/etc/shadow");
  CHECK(normalize_path("/proc/42/root/proc/self/root/x") == "/x");
  CHECK(normalize_path("/proc/42/cwd/x") == "/proc/42/cwd/x");
  CHECK(normalize_path("/../..") == "/");
  CHECK(normalize_path("rel/../x") == "rel/../x");
  CHECK(path_under("/etc/shadow", "/etc"));
  CHECK_FALSE(path_under("/etcx", "/etc"));
  CHECK(path_under("/anything", "/"));
}

TEST_CASE("harmless probing is INFO, the same acts on what exists are ALERT, and each names its scope") {
  Policy p = load("agent");
  Judge j(p, "/w");
  // clone3, answered ENOSYS so libc falls back to clone.
  auto clone3 = syscall("clone3", 435, -ENOSYS);
  clone3.set("blocked", 1);
  auto v = j.judge(clone3);
  REQUIRE(v);
  CHECK(v->rule == "seccomp.deny.clone3");
  CHECK(std::string(v->level) == "INFO");
  // ENOSYS from the default action, or for a call with no fallback, is no probe.
  Policy quiet = load("agent");
  quiet.seccomp.default_action = Action::Errno;
  quiet.seccomp.default_errno = ENOSYS;
  Judge jq(quiet, "/w");
  auto statx = syscall("statx", 332, -ENOSYS);  // a call with a fallback, but answered by the default
  statx.set("blocked", 1);
  auto kv = jq.judge(statx);
  REQUIRE(kv);
  CHECK(std::string(kv->level) == "ALERT");
  // ptrace is denied with EPERM: that is an alert.
  auto ptrace = syscall("ptrace", 101, -EPERM);
  ptrace.set("blocked", 1);
  v = j.judge(ptrace);
  REQUIRE(v);
  CHECK(std::string(v->level) == "ALERT");
  CHECK(v->scope == "ptrace");
  auto open_of = [](const std::string& path, int64_t flags, int64_t ret) {
    auto e = syscall("openat", 257, ret);
    e.set("type", "file_open");
    e.set("path", path);
    e.set("flags", flags);
    return e;
  };
  // A hidden file that exists on the host is an alert; one that does not is a probe.
  v = j.judge(open_of("/etc/shadow", O_RDONLY, -ENOENT));
  REQUIRE(v);
  CHECK(std::string(v->level) == "ALERT");
  CHECK(v->scope == "/etc/shadow");
  v = j.judge(open_of("/root/.curlrc-that-is-not-there-" + std::to_string(getpid()), O_RDONLY, -ENOENT));
  REQUIRE(v);
  CHECK(std::string(v->level) == "INFO");
  CHECK(v->detail.find("no such file on the host") != std::string::npos);
  CHECK(v->scope == "/root/.curlrc-that-is-not-there-" + std::to_string(getpid()));
  // What looks like a credential is an alert even where there is none to take.
  v = j.judge(open_of("/root/.ssh/id_rsa-not-there-" + std::to_string(getpid()), O_RDONLY, -ENOENT));
  REQUIRE(v);
  CHECK(std::string(v->level) == "ALERT");
  v = j.judge(open_of("/home/u/.aws/config-not-there", O_RDONLY, -ENOENT));
  REQUIRE(v);
  CHECK(std::string(v->level) == "ALERT");
  // A replay judges on another host: absence there lowers nothing.
  Judge replaying(p, "/w");
  replaying.set_host_checks(false);
  v = replaying.judge(open_of("/root/.curlrc-that-is-not-there-" + std::to_string(getpid()), O_RDONLY, -ENOENT));
  REQUIRE(v);
  CHECK(std::string(v->level) == "ALERT");
  // Side-channel facts under /sys are no runtime's sizing probe.
  v = j.judge(open_of("/sys/devices/system/cpu/vulnerabilities/meltdown", O_RDONLY, -ENOENT));
  REQUIRE(v);
  CHECK(std::string(v->level) == "ALERT");
  // A runtime reading how many CPUs it has; writing there is another matter.
  v = j.judge(open_of("/sys/devices/system/cpu/online", O_RDONLY, -ENOENT));
  REQUIRE(v);
  CHECK(std::string(v->level) == "INFO");
  v = j.judge(open_of("/sys/devices/system/cpu/online", O_WRONLY, -EACCES));
  REQUIRE(v);
  CHECK(std::string(v->level) == "ALERT");
  // Connects are scoped by endpoint.
  auto c = syscall("connect", 42, -EPERM);
  c.set("type", "connect");
  c.set("family", "AF_INET");
  c.set("addr", "1.2.3.4");
  c.set("port", 443);
  v = j.judge(c);
  REQUIRE(v);
  CHECK(v->scope == "1.2.3.4 port 443");
  CHECK(v->from_user_memory);  // a refused connect: the caller's buffer
  c.set("addr_from_kernel", 1);
  v = j.judge(c);
  REQUIRE(v);
  CHECK_FALSE(v->from_user_memory);
}

TEST_CASE("extends: a shipped policy with the file's keys laid over it; nested_sandboxes lifts the namespace rules") {
  Policy p = parse("version: 1\nname: mine\nextends: agent\nlimits: {wall_time: 30m}\nnested_sandboxes: true\n", "mine.yaml");
  Policy agent = load("agent");
  CHECK(p.name == "mine");
  CHECK(p.source == "mine.yaml (extends builtin:agent)");
  CHECK(p.limits.wall_ms == 30 * 60 * 1000);
  CHECK(p.limits.memory_bytes == agent.limits.memory_bytes);  // merged, not replaced
  CHECK(p.filesystem.hidden == agent.filesystem.hidden);
  CHECK(p.filesystem.work_dir_mode == WorkDirMode::Write);
  // Lifted: the rules on mount, unshare and clone's CLONE_NEW* flags; kept: the rest.
  auto has = [](const Policy& q, const std::string& id) {
    for (const auto& r : q.seccomp.rules)
      if (r.id == id) return true;
    return false;
  };
  for (const char* id : {"seccomp.deny.mount", "seccomp.deny.unshare", "seccomp.deny.pivot_root", "seccomp.deny.clone-newns",
                         "seccomp.deny.clone-newuser", "seccomp.deny.setns"}) {
    CHECK(has(agent, id));
    CHECK_FALSE(has(p, id));
  }
  for (const char* id : {"seccomp.deny.ptrace", "seccomp.deny.bpf", "seccomp.deny.clone3", "seccomp.deny.raw-socket",
                         "seccomp.deny.open_tree", "seccomp.deny.fsopen"})
    CHECK(has(p, id));
  CHECK(p.seccomp.rules.size() == agent.seccomp.rules.size() - 12);  // 7 clone flags, mount, umount2, pivot_root, unshare, setns
  CHECK(load("codex").nested_sandboxes);
  CHECK(load("claude-code").nested_sandboxes);
  CHECK_FALSE(agent.nested_sandboxes);
  try {
    parse("version: 1\nname: x\nextends: agnet\n", "x.yaml");
    FAIL("an unknown base was accepted");
  } catch (const PolicyError& e) {
    CHECK(std::string(e.what()).starts_with("x.yaml:3: extends: 'agnet' is not a shipped policy (shipped: "));
  }
}

TEST_CASE("extends: chains of files and shipped policies, each base recorded; cycles and missing bases refused at their line") {
  unit::TempDir dir;
  auto write = [&](const char* name, const std::string& text) { std::ofstream(dir.file(name)) << text; };
  write("team.yaml", "version: 1\nname: team\nextends: codex\nlimits: {wall_time: 20m, pids: 100}\n");
  write("mine.yaml", "version: 1\nname: mine\n\nextends: team.yaml\nlimits: {pids: 50}\n");
  Policy p = load(dir.file("mine.yaml"));
  CHECK(p.name == "mine");
  CHECK(p.limits.pids == 50);                      // the file's own
  CHECK(p.limits.wall_ms == 20 * 60 * 1000);       // team's
  CHECK(p.nested_sandboxes);                       // codex's
  CHECK(p.filesystem.hidden == load("agent").filesystem.hidden);  // agent's, at the root
  REQUIRE(p.bases.size() == 3);
  CHECK(p.bases[0].source == dir.file("team.yaml"));
  CHECK(p.bases[1].source == "builtin:codex");
  CHECK(p.bases[2].source == "builtin:agent");
  CHECK(p.bases[0].text.find("name: team") != std::string::npos);
  CHECK(p.text.find("extends: team.yaml") != std::string::npos);  // the file's own bytes
  CHECK(p.source == dir.file("mine.yaml") + " (extends " + dir.file("team.yaml") + " builtin:codex builtin:agent)");
  // The effective policy: every key merged, no extends left, and it reads back the same.
  std::string effective = effective_yaml(p);
  CHECK(effective.find("extends") == std::string::npos);
  Policy again = parse(effective, "effective");
  CHECK(again.limits.pids == 50);
  CHECK(again.limits.wall_ms == p.limits.wall_ms);
  CHECK(again.nested_sandboxes);
  CHECK(again.seccomp.rules.size() == p.seccomp.rules.size());
  CHECK(again.filesystem.read_only == p.filesystem.read_only);
  // The chain can come from elsewhere (a record): the resolver decides.
  int asked = 0;
  Policy from_record = parse(p.text, "recorded", [&](const std::string&, const std::string&) {
    return p.bases[asked++];
  });
  CHECK(asked == 3);
  CHECK(from_record.limits.wall_ms == p.limits.wall_ms);

  auto refused = [&](const char* name, const std::string& starts) {
    try {
      load(dir.file(name));
      FAIL(name << " was accepted");
    } catch (const PolicyError& e) {
      INFO(std::string(e.what()));
      CHECK(std::string(e.what()).starts_with(starts));
    }
  };
  write("a.yaml", "version: 1\nname: a\nextends: b.yaml\n");
  write("b.yaml", "version: 1\nname: b\nextends: ./a.yaml\n");
  refused("a.yaml", dir.file("b.yaml") + ":3: extends: a cycle: " + dir.file("a.yaml") + " -> " + dir.file("b.yaml") +
                        " -> " + dir.file("a.yaml"));
  write("self.yaml", "version: 1\nname: s\nextends: self.yaml\n");
  refused("self.yaml", dir.file("self.yaml") + ":3: extends: a cycle");
  write("gone.yaml", "version: 1\nname: g\nlimits: {pids: 5}\nextends: missing.yaml\n");
  refused("gone.yaml", dir.file("gone.yaml") + ":4: extends: cannot read policy " + dir.file("missing.yaml"));
  write("bad-base.yaml", "version: 1\nname: bb\nextends: typo.yaml\n");
  write("typo.yaml", "version: 1\nname: t\nlimitz: {}\n");
  refused("bad-base.yaml", dir.file("typo.yaml") + ":3: limitz: unknown key");
  write("bad-value.yaml", "version: 1\nname: bv\nextends: lots.yaml\n");
  write("lots.yaml", "version: 1\nname: l\n\nlimits: {pids: lots}\n");
  refused("bad-value.yaml", dir.file("lots.yaml") + ":4: limits.pids");
  // A shipped policy never reaches for files.
  CHECK_THROWS_AS(find_base("x.yaml", "builtin:agent"), PolicyError);
  // Nine deep is too deep.
  for (int i = 0; i < 10; ++i)
    write(("c" + std::to_string(i) + ".yaml").c_str(),
          "version: 1\nname: c" + std::to_string(i) + "\n" + (i < 9 ? "extends: c" + std::to_string(i + 1) + ".yaml\n" : ""));
  refused("c0.yaml", dir.file("c8.yaml") + ":3: extends: more than 8 bases");
}

TEST_CASE("processes: a shell or interpreter whose parent runs none of expected_parents is processes.unexpected_parent") {
  Policy p = load("agent-pod");
  REQUIRE(!p.processes.watched.empty());
  Judge j(p, "/");
  std::map<int64_t, std::string> exe = {{10, "/usr/sbin/nginx"}, {11, "/usr/bin/node"}, {12, "/usr/bin/python3.11"},
                                        {13, "/opt/app/bin/worker"}};
  auto exec = [](const std::string& file, int64_t ppid) {
    events::Entry e;
    e.set("type", "exec");
    e.set("filename", file);
    e.set("pid", int64_t(99));
    e.set("ppid", ppid);
    return e;
  };
  // Without the record's view of who runs what, nothing is judged.
  CHECK_FALSE(j.judge(exec("/bin/sh", 10)));
  j.set_exe_resolver([&](int64_t pid) -> const std::string* {
    auto it = exe.find(pid);
    return it == exe.end() ? nullptr : &it->second;
  });
  auto v = j.judge(exec("/bin/sh", 10));
  REQUIRE(v);
  CHECK(v->rule == "processes.unexpected_parent");
  CHECK(std::string(v->level) == "ALERT");
  CHECK(std::string(v->action) == "would-deny");  // agent-pod is shadow mode
  CHECK(v->detail == "/bin/sh started by /usr/sbin/nginx (pid 10), which is not among processes.expected_parents");
  CHECK(v->scope == "nginx > sh");
  REQUIRE(j.judge(exec("/usr/bin/python3.11", 13)));  // an interpreter, by a trailing *
  CHECK(j.judge(exec("nc", 13))->rule == "processes.unexpected_parent");
  CHECK_FALSE(j.judge(exec("/bin/bash", 11)));         // node starts shells: an agent's runtime
  CHECK_FALSE(j.judge(exec("/bin/sh", 12)));           // python3.11, by python*
  CHECK_FALSE(j.judge(exec("/usr/bin/git", 10)));      // not a watched program
  CHECK_FALSE(j.judge(exec("/bin/sh", 77)));           // a parent outside the record: not judged
  // Enforce mode: the exec happened; the violation says it was not refused.
  Policy enforce = parse("version: 1\nname: t\nprocesses:\n  watched: [sh]\n  expected_parents: [bash]\n", "t.yaml");
  Judge k(enforce, "/");
  k.set_exe_resolver([&](int64_t pid) -> const std::string* { return pid == 10 ? &exe[10] : nullptr; });
  REQUIRE(k.judge(exec("/bin/sh", 10)));
  CHECK(std::string(k.judge(exec("/bin/sh", 10))->action) == "allowed");
}

TEST_CASE("processes: programs are base names, a * only at their end; watched needs expected_parents") {
  std::string head = "version: 1\nname: t\nprocesses:\n";
  CHECK(error_of(head + "  watched: [/bin/sh]\n  expected_parents: [bash]\n") ==
        "t.yaml:4: processes.watched: '/bin/sh' is not a program's base name (no '/'; a '*' only at its end: python3*)");
  CHECK(error_of(head + "  watched: [\"*sh\"]\n  expected_parents: [bash]\n").find("'*sh' is not a program's base name") !=
        std::string::npos);
  CHECK(error_of(head + "  watched: [\"*\"]\n  expected_parents: [bash]\n").find("'*' is not") != std::string::npos);
  CHECK(error_of(head + "  watched: [sh]\n") == "t.yaml:4: processes: watched needs expected_parents (the programs that may start them)");
  CHECK(error_of(head + "  watched: sh\n  expected_parents: [bash]\n").find("must be a list") != std::string::npos);
  CHECK(error_of(head + "  parents: [bash]\n").find("processes.parents: unknown key") != std::string::npos);
  CHECK(program_named({"python3*"}, "/usr/bin/python3.11"));
  CHECK(program_named({"sh"}, "sh"));
  CHECK_FALSE(program_named({"sh"}, "/bin/bash"));
  CHECK_FALSE(program_named({"sh"}, "/bin/sh/"));
}
