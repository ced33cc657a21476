// The daemon's inputs as data: its config file (every field, and errors that
// point at the line and key), cgroup globs and the pruning discovery uses,
// pod identity from kubelet's cgroup names, and the process snapshot of a
// cgroup (a fake tree anywhere; a real cgroup v2 one as root).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/system.h"
#include "daemon/config.h"
#include "daemon/kubelet.h"
#include "session/snapshot.h"

using namespace flightrec;
using namespace flightrec::daemon;
using flightrec::session::ProcessInfo;
using flightrec::session::snapshot_cgroup;
using flightrec::session::snapshot_cgroups;

namespace {

std::string error_of(const std::string& yaml) {
  try {
    parse_config(yaml, "t.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

const std::string kBase = "version: 1\nstorage:\n  dir: /r\n";  // lines 1-3

const std::string kUid = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";
const std::string kUidSystemd = "0a1b2c3d_4e5f_6789_abcd_ef0123456789";
const std::string kId = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899";

// A child that has exec'd path (argv: argv0 arg) by the time this returns:
// the pipe's write end closes on exec, so read() sees EOF only then.
pid_t spawn(const char* path, const char* argv0, const char* arg) {
  int fds[2];
  REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    execl(path, argv0, arg, (char*)nullptr);
    int err = errno;
    (void)!write(fds[1], &err, sizeof(err));
    _exit(127);
  }
  close(fds[1]);
  int err = 0;
  ssize_t got = read(fds[0], &err, sizeof(err));
  close(fds[0]);
  REQUIRE_MESSAGE(got == 0, "exec " << path << " failed: errno " << err);
  return pid;
}

// Kills and reaps the children, removes the directories (deepest first),
// whatever the test's outcome.
struct Cleanup {
  std::vector<pid_t> pids;
  std::vector<std::string> dirs, files;
  ~Cleanup() {
    for (pid_t p : pids) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
    for (const auto& f : files) unlink(f.c_str());
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) rmdir(it->c_str());
  }
};

std::string temp_dir() {
  char tmpl[] = "/tmp/flightrec-test-daemon-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

std::string cwd() {
  char buf[4096];
  REQUIRE(getcwd(buf, sizeof(buf)) != nullptr);
  return buf;
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf));
  REQUIRE(n > 0);
  return std::string(buf, size_t(n));
}

const ProcessInfo* find_pid(const std::vector<ProcessInfo>& ps, int pid) {
  for (const auto& p : ps)
    if (p.pid == pid) return &p;
  return nullptr;
}

}  // namespace

TEST_CASE("daemon config: a full file, field by field") {
  const std::string text =
      "version: 1\n"
      "storage:\n"
      "  dir: /var/lib//flightrec/\n"
      "  rotate: {size: 256M, age: 1d}\n"
      "  retain: {total: 10G, age: 30d, count: 100}\n"
      "  disk_full_action: rotate\n"
      "  min_free: 128M\n"
      "socket: {path: /run/flightrec/d.sock, group: flightrec}\n"
      "metrics: {listen: \"127.0.0.1:9469\"}\n"
      "ring: 128M\n"
      "on_loss: backpressure\n"
      "key: /etc/flightrec/key\n"
      "watch:\n"
      "  - name: pods\n"                                                  // 13
      "    cgroup: \"kubepods.slice/*/*/cri-containerd-*.scope\"\n"
      "    mode: lite\n"
      "    policy: observe\n"
      "    tls: true\n"
      "    key: /etc/flightrec/pods-key\n"
      "    on_loss: kill\n"
      "  - name: agent_runs-2\n"                                          // 20
      "    cgroup: system.slice/agent-*.service/**\n"
      "    policy: /etc/flightrec/policies/agent.yaml\n";
  Config c = parse_config(text, "flightrecd.yaml");
  CHECK(c.source == "flightrecd.yaml");
  CHECK(c.storage_dir == "/var/lib/flightrec");
  CHECK(c.rotate_bytes == 256ull << 20);
  CHECK(c.rotate_age_ms == 86'400'000ull);
  CHECK(c.retain_bytes == 10ull << 30);
  CHECK(c.retain_age_ms == 30ull * 86'400'000);
  CHECK(c.retain_count == 100);
  CHECK(c.disk_full == Config::DiskFull::Rotate);
  CHECK(c.min_free_bytes == 128ull << 20);
  CHECK(c.socket_path == "/run/flightrec/d.sock");
  CHECK(c.socket_group == "flightrec");
  CHECK(c.metrics_listen == "127.0.0.1:9469");
  CHECK(c.ring_bytes == 128ull << 20);
  CHECK(c.on_loss == "backpressure");
  CHECK(c.key_dir == "/etc/flightrec/key");
  REQUIRE(c.watch.size() == 2);
  const WatchRule& a = c.watch[0];
  CHECK(a.name == "pods");
  CHECK(a.cgroup_glob == "kubepods.slice/*/*/cri-containerd-*.scope");
  CHECK(a.mode == WatchRule::Mode::Lite);
  CHECK(a.policy == "observe");
  CHECK(a.tls);
  CHECK(a.key_dir == "/etc/flightrec/pods-key");
  CHECK(a.on_loss == "kill");
  CHECK(a.line == 14);
  // What a rule leaves out it takes from the file, or the defaults.
  const WatchRule& b = c.watch[1];
  CHECK(b.name == "agent_runs-2");
  CHECK(b.cgroup_glob == "system.slice/agent-*.service/**");
  CHECK(b.mode == WatchRule::Mode::Full);
  CHECK(b.policy == "/etc/flightrec/policies/agent.yaml");
  CHECK_FALSE(b.tls);
  CHECK(b.key_dir == "/etc/flightrec/key");
  CHECK(b.on_loss == "backpressure");
  CHECK(b.line == 21);

  // The smallest file: every default.
  Config d = parse_config(kBase, "t.yaml");
  CHECK(d.storage_dir == "/r");
  CHECK(d.rotate_bytes == 0);
  CHECK(d.rotate_age_ms == 0);
  CHECK(d.retain_bytes == 0);
  CHECK(d.retain_age_ms == 0);
  CHECK(d.retain_count == 0);
  CHECK(d.disk_full == Config::DiskFull::Suspend);
  CHECK(d.min_free_bytes == 64ull << 20);
  CHECK(d.socket_path == "/run/flightrec/flightrecd.sock");
  CHECK(d.socket_group.empty());
  CHECK(d.metrics_listen.empty());
  CHECK(d.ring_bytes == 64ull << 20);
  CHECK(d.on_loss == "continue");
  CHECK(d.key_dir.empty());
  CHECK(d.watch.empty());
  CHECK(parse_config(kBase + "watch: []\n", "t.yaml").watch.empty());
  CHECK(parse_config(kBase + "watch:\n", "t.yaml").watch.empty());
  // A rule with no key anywhere has none; stop and suspend are spelled so.
  Config e = parse_config(
      "version: 1\nstorage: {dir: /r, disk_full_action: stop}\nwatch:\n  - {name: x, cgroup: a}\n", "t.yaml");
  CHECK(e.disk_full == Config::DiskFull::Stop);
  CHECK(e.watch.at(0).key_dir.empty());
  CHECK(e.watch.at(0).on_loss == "continue");
  CHECK(e.watch.at(0).policy.empty());
  CHECK(e.watch.at(0).line == 4);
}

TEST_CASE("daemon config: errors name the file, the line and the key") {
  CHECK(error_of(kBase + "rings: 64M\n") ==
        "t.yaml:4: rings: unknown key (known: key, lite, metrics, on_loss, outputs, ring, runs, socket, storage, version, watch)");
  CHECK(error_of("version: 1\nstorage:\n  dir: /r\n  rotate:\n    size: 1G\n    agee: 1d\n") ==
        "t.yaml:6: storage.rotate.agee: unknown key (known: age, size)");
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: x\n    polcy: observe\n") ==
        "t.yaml:7: watch.polcy: unknown key (known: cgroup, key, mode, name, on_loss, policy, tls)");
  // yaml-cpp would keep both and show only the first.
  CHECK(error_of(kBase + "ring: 64M\nring: 128M\n") == "t.yaml:5: ring: given twice");
  CHECK(error_of("version: 1\nstorage:\n  dir: /r\n  disk_full_action: panic\n") ==
        "t.yaml:4: storage.disk_full_action: 'panic' is not one of: rotate, stop, suspend");
  CHECK(error_of(kBase + "on_loss: drop\n") == "t.yaml:4: on_loss: 'drop' is not one of: backpressure, continue, kill");
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: x\n    on_loss: drop\n") ==
        "t.yaml:7: watch.on_loss: 'drop' is not one of: backpressure, continue, kill");
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: x\n    mode: fast\n") ==
        "t.yaml:7: watch.mode: 'fast' is not one of: full, lite");
  CHECK(error_of(kBase + "watch:\n  - name: pods\n    cgroup: a\n  - name: other\n    cgroup: b\n"
                         "  - name: pods\n    cgroup: c\n") ==
        "t.yaml:9: watch.name: 'pods' is already the name of the rule at line 5");
  CHECK(error_of(kBase + "watch:\n  - name: Pods\n    cgroup: a\n") ==
        "t.yaml:5: watch.name: 'Pods' is not a name (1-64 of a-z 0-9 _ -)");
  CHECK(error_of(kBase + "watch:\n  - name: " + std::string(65, 'a') + "\n    cgroup: a\n").find("t.yaml:5: watch.name:") == 0);
  CHECK(error_of(kBase + "watch:\n  - cgroup: a\n") == "t.yaml:5: watch.name: missing");
  CHECK(error_of(kBase + "watch:\n  - name: a\n") == "t.yaml:5: watch.cgroup: missing");
  // Globs stay inside the cgroup tree and have one spelling.
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: kubepods.slice/../system.slice\n") ==
        "t.yaml:6: watch.cgroup: 'kubepods.slice/../system.slice' must not have '..' components");
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: '..'\n") == "t.yaml:6: watch.cgroup: '..' must not have '..' components");
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: /kubepods.slice\n") ==
        "t.yaml:6: watch.cgroup: '/kubepods.slice' must be relative to the cgroup v2 root (no leading '/')");
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: a//b\n") == "t.yaml:6: watch.cgroup: 'a//b' has an empty component");
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: a/\n") == "t.yaml:6: watch.cgroup: 'a/' has an empty component");
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: a/./b\n") == "t.yaml:6: watch.cgroup: 'a/./b' must not have '.' components");
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: ''\n") == "t.yaml:6: watch.cgroup: must not be empty");
  // Policies: a name, or an absolute path (never relative to the daemon's cwd).
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: x\n    policy: my.yaml\n") ==
        "t.yaml:7: watch.policy: 'my.yaml' is a relative path; give a policy file as an absolute path");
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: x\n    policy: policies/my.yaml\n") ==
        "t.yaml:7: watch.policy: 'policies/my.yaml' must be an absolute path");
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: x\n    key: keys\n") == "t.yaml:7: watch.key: 'keys' must be an absolute path");
  // Paths.
  CHECK(error_of("version: 1\nstorage:\n  dir: var/lib/flightrec\n") ==
        "t.yaml:3: storage.dir: 'var/lib/flightrec' must be an absolute path");
  CHECK(error_of("version: 1\nstorage:\n  dir: /var/../etc\n") == "t.yaml:3: storage.dir: '/var/../etc' must not contain '..'");
  CHECK(error_of("version: 1\nstorage:\n  dir: /\n") == "t.yaml:3: storage.dir: cannot be /");
  CHECK(error_of(kBase + "socket:\n  path: /" + std::string(120, 's') + "\n").find(
            "t.yaml:5: socket.path: '/sss") == 0);
  CHECK(error_of(kBase + "socket:\n  group: -x\n") == "t.yaml:5: socket.group: '-x' is not a group name");
  CHECK(error_of(kBase + "key: etc/key\n") == "t.yaml:4: key: 'etc/key' must be an absolute path");
  // Missing and wrong versions, missing storage, wrong shapes.
  CHECK(error_of("version: 1\n") == "t.yaml:1: storage: missing (storage.dir is required)");
  CHECK(error_of("version: 1\nstorage:\n  rotate: {size: 1G}\n") == "t.yaml:3: storage.dir: missing");
  CHECK(error_of("storage: {dir: /r}\n") == "t.yaml:1: version: missing (this flightrec reads version 1)");
  CHECK(error_of("version: 2\nstorage: {dir: /r}\n") == "t.yaml:1: version: only version 1 is known");
  CHECK(error_of("version: one\nstorage: {dir: /r}\n") == "t.yaml:1: version: 'one' is not a non-negative integer");
  CHECK(error_of(kBase + "socket: /run/x.sock\n") == "t.yaml:4: socket: must be a mapping");
  CHECK(error_of(kBase + "watch:\n  name: a\n") == "t.yaml:5: watch: must be a list of rules");
  CHECK(error_of(kBase + "watch:\n  - pods\n") == "t.yaml:5: watch: must be a mapping");
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: x\n    tls: yes\n") ==
        "t.yaml:7: watch.tls: must be true or false, not 'yes'");
  CHECK(error_of(kBase + "watch:\n  - name: a\n    cgroup: [x]\n") == "t.yaml:6: watch.cgroup: must be a string");
  CHECK(error_of("- 1\n") == "t.yaml:1: top level: must be a mapping");
  CHECK(error_of("") == "t.yaml: empty (needs at least version: 1 and storage.dir)");
  CHECK(error_of("version: 1\nstorage: [\n").find("t.yaml:") == 0);
  CHECK(error_of("version: 1\nstorage: [\n").find(": not valid YAML: ") != std::string::npos);
  // Listen addresses: literals and localhost, a port 1-65535.
  CHECK(error_of(kBase + "metrics:\n  listen: 127.0.0.1\n") ==
        "t.yaml:5: metrics.listen: '127.0.0.1' is not HOST:PORT (an IPv4 address, [IPv6 address] or localhost; "
        "a port 1-65535)");
  for (const char* bad : {"example.com:80", "127.0.0.1:0", "127.0.0.1:65536", "::1:9469", "[::1]9469", "[::1]:",
                          "1.2.3:80", "127.0.0.1:+80", ":9469", "[127.0.0.1]:80", "localhost:http", "[::1:80"})
    CHECK_MESSAGE(error_of(kBase + "metrics: {listen: '" + bad + "'}\n").find("t.yaml:4: metrics.listen: '") == 0, bad);
  for (const char* good : {"127.0.0.1:9469", "0.0.0.0:1", "[::1]:9469", "[::]:65535", "localhost:9469"})
    CHECK_MESSAGE(parse_config(kBase + "metrics: {listen: '" + good + "'}\n", "t.yaml").metrics_listen == good, good);
  // The ring: a power of two, 64K to 1G.
  CHECK(error_of(kBase + "ring: 100M\n") == "t.yaml:4: ring: '100M' must be a power of two from 64K to 1G");
  for (const char* bad : {"32K", "2G", "0", "96K", "-64K", "64k", "big"})
    CHECK_MESSAGE(error_of(kBase + "ring: " + bad + "\n").find("t.yaml:4: ring: '") == 0, bad);
  CHECK(parse_config(kBase + "ring: 64K\n", "t.yaml").ring_bytes == 65536);
  CHECK(parse_config(kBase + "ring: 1G\n", "t.yaml").ring_bytes == 1ull << 30);
  CHECK(parse_config(kBase + "ring: 1048576\n", "t.yaml").ring_bytes == 1ull << 20);
  // Sizes, ages and counts.
  CHECK(error_of("version: 1\nstorage:\n  dir: /r\n  rotate: {size: 0}\n") ==
        "t.yaml:4: storage.rotate.size: '0' is not a size like 256M or 10G");
  CHECK(error_of("version: 1\nstorage:\n  dir: /r\n  rotate:\n    age: 1w\n") ==
        "t.yaml:5: storage.rotate.age: '1w' is not a duration like 30s, 10m, 12h or 30d");
  CHECK(error_of("version: 1\nstorage:\n  dir: /r\n  retain:\n    count: 0\n") ==
        "t.yaml:5: storage.retain.count: must be at least 1");
  CHECK(error_of("version: 1\nstorage:\n  dir: /r\n  retain:\n    total: 99999999999T\n") ==
        "t.yaml:5: storage.retain.total: '99999999999T' is too large");
}

TEST_CASE("daemon config: ages take days") {
  CHECK(parse_age_ms("1d") == 86'400'000ull);
  CHECK(parse_age_ms("30d") == 30ull * 86'400'000);
  CHECK(parse_age_ms("90m") == 90ull * 60'000);
  CHECK(parse_age_ms("500ms") == 500ull);
  CHECK(parse_age_ms("12h") == 12ull * 3'600'000);
  CHECK_FALSE(parse_age_ms("d"));
  CHECK_FALSE(parse_age_ms("1w"));
  CHECK_FALSE(parse_age_ms("1.5d"));
  CHECK_FALSE(parse_age_ms("-1d"));
  CHECK_FALSE(parse_age_ms(""));
  bool too_large = false;
  CHECK_FALSE(parse_age_ms("999999999999999d", &too_large));
  CHECK(too_large);
}

TEST_CASE("daemon config: load_config reads regular files of at most 1 MiB") {
  std::string dir = temp_dir();
  Cleanup clean;
  clean.dirs = {dir};
  std::string good = dir + "/flightrecd.yaml", big = dir + "/big.yaml";
  clean.files = {good, big};
  write_file(good, kBase + "watch:\n  - {name: a, cgroup: b}\n");
  Config c = load_config(good);
  CHECK(c.source == good);
  CHECK(c.watch.at(0).name == "a");
  write_file(big, kBase + "# " + std::string(1 << 20, 'x') + "\n");
  CHECK_THROWS_WITH_AS(load_config(big), (big + ": a config is at most 1 MiB").c_str(), ConfigError);
  CHECK_THROWS_WITH_AS(load_config(dir), (dir + ": the config must be a regular file").c_str(), ConfigError);
  CHECK_THROWS_WITH_AS(load_config(dir + "/none.yaml"),
                       ("cannot read config " + dir + "/none.yaml: No such file or directory").c_str(), ConfigError);
  // Errors inside name the file as given.
  write_file(good, kBase + "ring: 3M\n");
  CHECK_THROWS_WITH_AS(load_config(good), (good + ":4: ring: '3M' must be a power of two from 64K to 1G").c_str(),
                       ConfigError);
}

TEST_CASE("daemon cgroup globs match component by component") {
  const std::string pods = "kubepods.slice/*/*/cri-containerd-*.scope";
  const std::string one = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidSystemd +
                          ".slice/cri-containerd-" + kId + ".scope";
  CHECK(cgroup_glob_match(pods, one));
  CHECK(cgroup_glob_match(pods, "/" + one));  // as /proc/PID/cgroup writes it
  CHECK_FALSE(cgroup_glob_match(pods, "//" + one));
  CHECK_FALSE(cgroup_glob_match(pods, one + "/"));
  CHECK_FALSE(cgroup_glob_match(pods, one + "/sub"));
  CHECK_FALSE(cgroup_glob_match(pods, "kubepods.slice/kubepods-burstable.slice/cri-containerd-1.scope"));
  CHECK_FALSE(cgroup_glob_match(pods, "kubepods.slice/a/b/docker-1.scope"));
  // '*' stays inside one component.
  CHECK(cgroup_glob_match("a/*", "a/b"));
  CHECK_FALSE(cgroup_glob_match("a/*", "a/b/c"));
  CHECK_FALSE(cgroup_glob_match("a/*", "a"));
  CHECK_FALSE(cgroup_glob_match("*", ""));
  CHECK(cgroup_glob_match("*", "x"));
  CHECK_FALSE(cgroup_glob_match("a*", "ab/c"));
  // '?' and classes.
  CHECK(cgroup_glob_match("pod-[0-9]?", "pod-1a"));
  CHECK_FALSE(cgroup_glob_match("pod-[0-9]?", "pod-x1"));
  CHECK_FALSE(cgroup_glob_match("pod-[0-9]?", "pod-1"));
  CHECK(cgroup_glob_match("pod-[!0-9]", "pod-x"));
  // Backslash is a character (systemd escapes '-' as \x2d).
  CHECK(cgroup_glob_match("system.slice/system-getty\\x2dx.slice", "system.slice/system-getty\\x2dx.slice"));
  CHECK_FALSE(cgroup_glob_match("a\\*", "a*"));
  // '**': zero or more whole components.
  CHECK(cgroup_glob_match("a/**", "a"));
  CHECK(cgroup_glob_match("a/**", "a/b"));
  CHECK(cgroup_glob_match("a/**", "a/b/c/d"));
  CHECK_FALSE(cgroup_glob_match("a/**", "b/a"));
  CHECK(cgroup_glob_match("**", ""));
  CHECK(cgroup_glob_match("**", "x/y"));
  CHECK(cgroup_glob_match("**/x.scope", "x.scope"));
  CHECK(cgroup_glob_match("**/x.scope", "a/b/x.scope"));
  CHECK_FALSE(cgroup_glob_match("**/x.scope", "a/b/y.scope"));
  CHECK_FALSE(cgroup_glob_match("**/x.scope", "a/x.scope/b"));
  CHECK(cgroup_glob_match("a/**/b/**/c", "a/b/c"));
  CHECK(cgroup_glob_match("a/**/b/**/c", "a/x/b/y/z/c"));
  CHECK(cgroup_glob_match("a/**/b/**/c", "a/b/b/c/c"));
  CHECK_FALSE(cgroup_glob_match("a/**/b/**/c", "a/c"));
  CHECK_FALSE(cgroup_glob_match("a/**/b/**/c", "a/x/y/c"));
  CHECK(cgroup_glob_match("a**b", "axb"));  // not a whole component: two '*'
  CHECK_FALSE(cgroup_glob_match("a**b", "ax/b"));
  // Many '**' against a deep path that does not match: a table, not an explosion.
  std::string many, deep;
  for (int i = 0; i < 40; ++i) many += "**/";
  for (int i = 0; i < 200; ++i) deep += (i ? "/c" : "c") + std::to_string(i);
  CHECK_FALSE(cgroup_glob_match(many + "z", deep));
  CHECK(cgroup_glob_match(many + "c199", deep));
  // Odd input matches nothing.
  CHECK_FALSE(cgroup_glob_match("a/*", std::string("a/b\0c", 5)));
  CHECK_FALSE(cgroup_glob_match("a//*", "a/b"));
}

TEST_CASE("daemon cgroup globs: which directories discovery descends into") {
  const std::string pods = "kubepods.slice/*/*/cri-containerd-*.scope";
  CHECK(cgroup_glob_may_match_below(pods, ""));
  CHECK(cgroup_glob_may_match_below(pods, "/"));
  CHECK(cgroup_glob_may_match_below(pods, "kubepods.slice"));
  CHECK(cgroup_glob_may_match_below(pods, "kubepods.slice/kubepods-besteffort.slice"));
  CHECK(cgroup_glob_may_match_below(pods, "/kubepods.slice/a/b"));
  CHECK_FALSE(cgroup_glob_may_match_below(pods, "kubepods.slice/a/b/cri-containerd-1.scope"));  // matched; nothing below can
  CHECK_FALSE(cgroup_glob_may_match_below(pods, "kubepods.slice/a/b/c"));
  CHECK_FALSE(cgroup_glob_may_match_below(pods, "system.slice"));
  CHECK_FALSE(cgroup_glob_may_match_below(pods, "user.slice/user-1000.slice"));
  CHECK(cgroup_glob_may_match_below("system.slice/**", "system.slice"));
  CHECK(cgroup_glob_may_match_below("system.slice/**", "system.slice/a/b/c"));
  CHECK_FALSE(cgroup_glob_may_match_below("system.slice/**", "user.slice"));
  CHECK(cgroup_glob_may_match_below("**/agent.scope", "any/thing/deep"));
  CHECK(cgroup_glob_may_match_below("**/agent.scope", "x/agent.scope"));  // x/agent.scope/agent.scope
  CHECK(cgroup_glob_may_match_below("a/**/b", "a/x/b"));
  CHECK_FALSE(cgroup_glob_may_match_below("a/**/b", "c"));
  CHECK(cgroup_glob_may_match_below("a/*/c", "a/anything"));
  CHECK_FALSE(cgroup_glob_may_match_below("a/*/c", "a/x/c"));
  CHECK_FALSE(cgroup_glob_may_match_below("a/b", "a/b"));
  CHECK_FALSE(cgroup_glob_may_match_below("a", "a//b"));
  // Consistent with matching: whenever a child matches, its parent says so.
  for (const char* glob : {"kubepods.slice/*/*/cri-containerd-*.scope", "a/**/b", "**/x", "a/*/**"})
    for (const char* path : {"kubepods.slice/q/p/cri-containerd-1.scope", "a/b", "a/x/b", "x", "a/q/x", "a/q/r/s"}) {
      std::string p = path;
      for (size_t at = p.find('/'); at != std::string::npos; at = p.find('/', at + 1))
        if (cgroup_glob_match(glob, p))
          CHECK_MESSAGE(cgroup_glob_may_match_below(glob, p.substr(0, at)), glob << " " << p);
    }
}

TEST_CASE("daemon config: the first matching rule wins") {
  Config c = parse_config(kBase +
                              "watch:\n"
                              "  - {name: special, cgroup: 'kubepods.slice/*/kubepods-besteffort-pod*.slice/*'}\n"
                              "  - {name: pods, cgroup: 'kubepods.slice/**/cri-containerd-*.scope'}\n"
                              "  - {name: all, cgroup: '**'}\n",
                          "t.yaml");
  const std::string besteffort = "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + kUidSystemd +
                                 ".slice/cri-containerd-" + kId + ".scope";
  const std::string burstable = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidSystemd +
                                ".slice/cri-containerd-" + kId + ".scope";
  REQUIRE(c.match(besteffort));
  CHECK(c.match(besteffort)->name == "special");
  REQUIRE(c.match(burstable));
  CHECK(c.match(burstable)->name == "pods");
  REQUIRE(c.match("system.slice/cron.service"));
  CHECK(c.match("system.slice/cron.service")->name == "all");
  Config none = parse_config(kBase + "watch:\n  - {name: a, cgroup: 'system.slice/*'}\n", "t.yaml");
  CHECK(none.match("user.slice/x") == nullptr);
  CHECK(none.match("system.slice/x") == &none.watch[0]);
}

TEST_CASE("daemon kubelet cgroups: the systemd driver") {
  auto burstable = parse_kubelet_cgroup("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                                        kUidSystemd + ".slice/cri-containerd-" + kId + ".scope");
  REQUIRE(burstable);
  CHECK(burstable->pod_uid == kUid);
  CHECK(burstable->container_id == kId);
  CHECK(burstable->qos == "burstable");
  CHECK(burstable->runtime == "containerd");
  CHECK_FALSE(burstable->monitor);

  auto guaranteed = parse_kubelet_cgroup("/kubepods.slice/kubepods-pod" + kUidSystemd + ".slice/docker-" + kId + ".scope");
  REQUIRE(guaranteed);
  CHECK(guaranteed->pod_uid == kUid);
  CHECK(guaranteed->container_id == kId);
  CHECK(guaranteed->qos == "guaranteed");
  CHECK(guaranteed->runtime == "docker");

  auto besteffort = parse_kubelet_cgroup("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
                                         kUidSystemd + ".slice/crio-" + kId + ".scope");
  REQUIRE(besteffort);
  CHECK(besteffort->pod_uid == kUid);
  CHECK(besteffort->qos == "besteffort");
  CHECK(besteffort->runtime == "crio");
  CHECK(besteffort->container_id == kId);
  CHECK_FALSE(besteffort->monitor);

  auto conmon = parse_kubelet_cgroup("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
                                     kUidSystemd + ".slice/crio-conmon-" + kId + ".scope");
  REQUIRE(conmon);
  CHECK(conmon->monitor);
  CHECK(conmon->runtime == "crio");
  CHECK(conmon->container_id == kId);

  // The pod-level cgroup: no container.
  auto pod = parse_kubelet_cgroup("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidSystemd + ".slice");
  REQUIRE(pod);
  CHECK(pod->pod_uid == kUid);
  CHECK(pod->qos == "burstable");
  CHECK(pod->container_id.empty());
  CHECK(pod->runtime.empty());
  auto gpod = parse_kubelet_cgroup("kubepods.slice/kubepods-pod" + kUidSystemd + ".slice");
  REQUIRE(gpod);
  CHECK(gpod->qos == "guaranteed");

  // Only where kubelet puts it: a kubepods tree someone made below another
  // cgroup (a user's scope, a container's own) names no pod, or anyone who
  // may make cgroups there could claim another pod's identity.
  for (const std::string& forged : {"system.slice/k3s.service/kubepods.slice/kubepods-pod" + kUidSystemd + ".slice/cri-containerd-" + kId + ".scope",
                                    "user.slice/user-1000.slice/kubepods.slice/kubepods-pod" + kUidSystemd + ".slice",
                                    "agents/team/kubepods/pod" + kUid + "/" + kId,
                                    "other.slice/kubelet-kubepods.slice/kubelet-kubepods-pod" + kUidSystemd + ".slice",
                                    "a.slice/a-b-kubepods.slice/a-b-kubepods-pod" + kUidSystemd + ".slice"}) {
    INFO(forged);
    CHECK(!parse_kubelet_cgroup(forged));
  }
  // --cgroup-root=/a/b: P-kubepods.slice under exactly P's slices.
  auto deep = parse_kubelet_cgroup("a.slice/a-b.slice/a-b-kubepods.slice/a-b-kubepods-pod" + kUidSystemd + ".slice");
  REQUIRE(deep);
  CHECK(deep->qos == "guaranteed");
  // kind's --cgroup-root=/kubelet.
  auto kind = parse_kubelet_cgroup("kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
                                   "kubelet-kubepods-besteffort-pod" + kUidSystemd + ".slice/cri-containerd-" + kId + ".scope");
  REQUIRE(kind);
  CHECK(kind->pod_uid == kUid);
  CHECK(kind->qos == "besteffort");
  CHECK(kind->container_id == kId);

  // A static pod's uid: 32 hex digits, no dashes.
  auto static_pod = parse_kubelet_cgroup("kubepods.slice/kubepods-burstable.slice/"
                                         "kubepods-burstable-pod9f1c2b3a4d5e6f708192a3b4c5d6e7f8.slice/cri-containerd-" + kId + ".scope");
  REQUIRE(static_pod);
  CHECK(static_pod->pod_uid == "9f1c2b3a4d5e6f708192a3b4c5d6e7f8");
  // Short container ids.
  auto short_id = parse_kubelet_cgroup("kubepods.slice/kubepods-pod" + kUidSystemd + ".slice/docker-0123456789ab.scope");
  REQUIRE(short_id);
  CHECK(short_id->container_id == "0123456789ab");
}

TEST_CASE("daemon kubelet cgroups: the cgroupfs driver") {
  auto burstable = parse_kubelet_cgroup("kubepods/burstable/pod" + kUid + "/" + kId);
  REQUIRE(burstable);
  CHECK(burstable->pod_uid == kUid);
  CHECK(burstable->container_id == kId);
  CHECK(burstable->qos == "burstable");
  CHECK(burstable->runtime.empty());
  CHECK_FALSE(burstable->monitor);
  auto guaranteed = parse_kubelet_cgroup("/kubepods/pod" + kUid + "/" + kId);
  REQUIRE(guaranteed);
  CHECK(guaranteed->qos == "guaranteed");
  CHECK(guaranteed->pod_uid == kUid);
  CHECK(guaranteed->container_id == kId);
  auto besteffort = parse_kubelet_cgroup("kubepods/besteffort/pod" + kUid + "/" + kId);
  REQUIRE(besteffort);
  CHECK(besteffort->qos == "besteffort");
  auto pod = parse_kubelet_cgroup("kubepods/besteffort/pod" + kUid);
  REQUIRE(pod);
  CHECK(pod->qos == "besteffort");
  CHECK(pod->pod_uid == kUid);
  CHECK(pod->container_id.empty());
  auto rooted = parse_kubelet_cgroup("kubelet/kubepods/pod" + kUid + "/0123456789ab");
  REQUIRE(rooted);
  CHECK(rooted->container_id == "0123456789ab");
}

TEST_CASE("daemon kubelet cgroups: anything else is not a pod") {
  const std::string qos = "kubepods.slice/kubepods-burstable.slice/";
  const std::string pod = qos + "kubepods-burstable-pod" + kUidSystemd + ".slice";
  for (const std::string& bad : std::vector<std::string>{
           "", "/", "system.slice/docker.service", "system.slice/docker-" + kId + ".scope", "kubepods.slice",
           "kubepods.slice/kubepods-burstable.slice", "kubepods", "kubepods/burstable",
           // uids: the systemd form with dashes, upper case, cut, wrong dashes
           qos + "kubepods-burstable-pod" + kUid + ".slice",
           qos + "kubepods-burstable-pod0A1B2C3D_4E5F_6789_ABCD_EF0123456789.slice",
           qos + "kubepods-burstable-pod0a1b2c3d_4e5f_6789_abcd_ef012345678.slice",
           qos + "kubepods-burstable-pod0a1b2c3d4_e5f_6789_abcd_ef0123456789.slice",
           qos + "kubepods-burstable-pod.slice", qos + "kubepods-burstable-pod" + kUidSystemd,
           "kubepods/burstable/pod" + kUidSystemd, "kubepods/burstable/pod" + kUid + "x",
           // QoS and pod disagree, or the QoS level is skipped or made up
           qos + "kubepods-besteffort-pod" + kUidSystemd + ".slice",
           "kubepods.slice/kubepods-burstable-pod" + kUidSystemd + ".slice",
           "kubepods.slice/kubepods-gold.slice/kubepods-gold-pod" + kUidSystemd + ".slice",
           "kubepods/gold/pod" + kUid,
           // containers: unknown runtime, bad ids, no .scope, something below
           pod + "/containerd-" + kId + ".scope", pod + "/cri-containerd-" + kId, pod + "/cri-containerd-.scope",
           pod + "/cri-containerd-0123456789a.scope", pod + "/cri-containerd-" + kId + "0.scope",
           pod + "/cri-containerd-" + std::string(64, 'g') + ".scope", pod + "/docker-" + std::string(64, 'A') + ".scope",
           pod + "/cri-containerd-" + kId + ".scope/sub", pod + "/crio-conmon-.scope",
           "kubepods/burstable/pod" + kUid + "/" + kId + "/sub", "kubepods/burstable/pod" + kUid + "/xyz",
           "kubepods/burstable/pod" + kUid + "/docker-" + kId,
           // empty components, and a pod made up inside a container's own cgroup
           "kubepods//pod" + kUid, "kubepods/pod" + kUid + "/" + kId + "/", "kubepods.slice//kubepods-pod" + kUidSystemd + ".slice",
           pod + "/cri-containerd-" + kId + ".scope/kubepods.slice/kubepods-pod" + kUidSystemd + ".slice",
           "kubepods/pod" + kUid + "/" + kId + "/kubepods/pod" + kUid,
           "-kubepods.slice/-kubepods-pod" + kUidSystemd + ".slice"})
    CHECK_MESSAGE(!parse_kubelet_cgroup(bad), bad);
}

TEST_CASE("daemon snapshot: a directory tree of cgroup.procs files") {
  // Any directory with cgroup.procs files will do: recursion, symlinks not
  // followed, pids that are gone, and the /proc parsing (comm with ')').
  std::string dir = temp_dir();
  Cleanup clean;
  std::string sub = dir + "/sub", other = dir + "-other", link_name = dir + "/x) y (z";
  clean.dirs = {other, dir, sub};
  REQUIRE(mkdir(sub.c_str(), 0700) == 0);
  REQUIRE(mkdir(other.c_str(), 0700) == 0);
  REQUIRE(symlink("/bin/sleep", link_name.c_str()) == 0);
  clean.files.push_back(link_name);
  pid_t a = spawn("/bin/sleep", "sleep", "30");
  clean.pids.push_back(a);
  pid_t b = spawn(link_name.c_str(), "sleep", "31");  // comm "x) y (z"
  clean.pids.push_back(b);
  pid_t hidden = spawn("/bin/sleep", "sleep", "32");
  clean.pids.push_back(hidden);
  for (const auto& [path, text] : std::vector<std::pair<std::string, std::string>>{
           {dir + "/cgroup.procs", std::to_string(getpid()) + "\n999999999\nnot-a-pid\n" + std::to_string(a) + "\n"},
           {sub + "/cgroup.procs", std::to_string(b) + "\n" + std::to_string(a) + "\n"},
           {other + "/cgroup.procs", std::to_string(hidden) + "\n"}}) {
    write_file(path, text);
    clean.files.push_back(path);
  }
  REQUIRE(symlink(other.c_str(), (dir + "/link").c_str()) == 0);
  clean.files.push_back(dir + "/link");

  auto all = snapshot_cgroup(dir, -1);
  REQUIRE(all.size() == 3);  // us, a, b; not the gone pid, not the symlinked tree
  for (size_t i = 1; i < all.size(); ++i) CHECK(all[i - 1].pid < all[i].pid);
  CHECK(find_pid(all, hidden) == nullptr);
  const ProcessInfo* self = find_pid(all, getpid());
  REQUIRE(self);
  CHECK(self->ppid == getppid());
  CHECK(self->uid == getuid());
  CHECK(self->exe == self_exe());
  CHECK_FALSE(self->argv.empty());
  CHECK(self->cwd == cwd());
  const ProcessInfo* pa = find_pid(all, a);
  REQUIRE(pa);
  CHECK(pa->ppid == getpid());
  CHECK(pa->exe == "/usr/bin/sleep");
  CHECK(pa->argv == std::vector<std::string>{"sleep", "30"});
  CHECK(pa->comm == "sleep");
  CHECK(pa->cwd == cwd());
  CHECK_FALSE(pa->exe_unreadable);
  const ProcessInfo* pb = find_pid(all, b);
  REQUIRE(pb);
  CHECK(pb->comm == "x) y (z");
  CHECK(pb->ppid == getpid());  // read after the last ')'
  CHECK(pb->exe == "/usr/bin/sleep");
  CHECK(pb->argv == std::vector<std::string>{"sleep", "31"});

  auto without_us = snapshot_cgroup(dir, getpid());
  REQUIRE(without_us.size() == 2);
  CHECK(without_us[0].pid == std::min(a, b));
  CHECK(without_us[1].pid == std::max(a, b));
  // Only the subtree asked for.
  auto below = snapshot_cgroup(sub, -1);
  REQUIRE(below.size() == 2);
  CHECK(find_pid(below, getpid()) == nullptr);
  CHECK_THROWS_AS(snapshot_cgroup(dir + "/none", -1), Error);
  CHECK_THROWS_AS(snapshot_cgroup(other + "/cgroup.procs", -1), Error);  // not a directory
  // Several cgroups, nested: each process once. Their command lines share
  // one budget: "sleep\030\0" (9 bytes) fits in 12, the next one does not.
  auto both = snapshot_cgroups({sub, dir}, getpid(), 12);
  REQUIRE(both.size() == 2);
  CHECK(both[0].pid < both[1].pid);
  CHECK(both[0].argv.size() + both[1].argv.size() <= 2);
  size_t left_out = 0;
  for (const auto& p : both) {
    left_out += p.argv_left_out;
    CHECK(p.argv_left_out == p.argv.empty());
    CHECK(p.exe == "/usr/bin/sleep");  // the rest is read all the same
  }
  CHECK(left_out == 1);
  for (const auto& p : snapshot_cgroups({dir}, getpid(), 0)) CHECK(p.argv_left_out);
}

TEST_CASE("daemon snapshot: a real cgroup v2 tree") {
  if (geteuid() != 0) {
    MESSAGE("skipped: needs root to make a cgroup");
    return;
  }
  std::string root;
  for (const char* at : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
    struct statfs fs;
    if (statfs(at, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC) {
      root = at;
      break;
    }
  }
  if (root.empty()) {
    MESSAGE("skipped: no cgroup v2 hierarchy at /sys/fs/cgroup/unified or /sys/fs/cgroup");
    return;
  }
  Cleanup clean;  // kills first, then removes the (then empty) cgroups
  std::string dir = root + "/flightrec-test-snap-" + std::to_string(getpid()), inner = dir + "/inner";
  REQUIRE(mkdir(dir.c_str(), 0755) == 0);
  clean.dirs.push_back(dir);
  REQUIRE(mkdir(inner.c_str(), 0755) == 0);
  clean.dirs.push_back(inner);
  pid_t a = spawn("/bin/sleep", "sleep", "30");
  clean.pids.push_back(a);
  pid_t b = spawn("/bin/sleep", "sleep", "31");
  clean.pids.push_back(b);
  write_file(dir + "/cgroup.procs", std::to_string(a));
  write_file(inner + "/cgroup.procs", std::to_string(b));

  auto ps = snapshot_cgroup(dir, getpid());
  REQUIRE(ps.size() == 2);
  CHECK(ps[0].pid == std::min(a, b));
  CHECK(ps[1].pid == std::max(a, b));
  for (const auto& p : ps) {
    CHECK(p.ppid == getpid());
    CHECK(p.uid == 0);
    CHECK(p.exe == "/usr/bin/sleep");
    CHECK_FALSE(p.exe_unreadable);
    CHECK(p.comm == "sleep");
    CHECK(p.cwd == cwd());
    CHECK(p.argv == std::vector<std::string>{"sleep", p.pid == a ? "30" : "31"});
  }
  auto excluded = snapshot_cgroup(dir, a);
  REQUIRE(excluded.size() == 1);
  CHECK(excluded[0].pid == b);
  auto only_inner = snapshot_cgroup(inner, -1);
  REQUIRE(only_inner.size() == 1);
  CHECK(only_inner[0].pid == b);
  // A process gone by the time it is read is left out.
  kill(a, SIGKILL);
  waitpid(a, nullptr, 0);
  clean.pids.erase(clean.pids.begin());
  auto after = snapshot_cgroup(dir, -1);
  REQUIRE(after.size() == 1);
  CHECK(after[0].pid == b);
}

TEST_CASE("daemon config: lite.counts_interval, and settings refused rather than ignored") {
  Config c = parse_config(kBase + "lite:\n  counts_interval: 30s\n", "t.yaml");
  CHECK(c.lite_counts_ms == 30000);
  CHECK(parse_config(kBase, "t.yaml").lite_counts_ms == 60000);
  CHECK(error_of(kBase + "lite:\n  counts_interval: 500ms\n") ==
        "t.yaml:5: lite.counts_interval: must be from 1s to 24h");
  CHECK(error_of(kBase + "lite:\n  interval: 5s\n") == "t.yaml:5: lite.interval: unknown key (known: counts_interval)");
  // Lite rules are recorded, and a rule's policy judged (audit); on_loss
  // other than continue is not acted on yet, so it is refused, naming the line.
  Config lite = parse_config(kBase + "watch:\n  - name: a\n    cgroup: x\n    mode: lite\n", "t.yaml");
  CHECK(unsupported_setting(lite) == "");
  Config policed = parse_config(kBase + "watch:\n  - name: a\n    cgroup: x\n    policy: agent-pod\n", "t.yaml");
  CHECK(unsupported_setting(policed) == "");
  Config lossy = parse_config(kBase + "watch:\n  - name: a\n    cgroup: x\n    on_loss: kill\n", "t.yaml");
  CHECK(unsupported_setting(lossy).rfind("t.yaml:5: watch rule a: on_loss: kill is not supported", 0) == 0);
  Config killing = parse_config(kBase + "on_loss: kill\n", "t.yaml");
  CHECK(unsupported_setting(killing).rfind("t.yaml: on_loss: kill is not supported", 0) == 0);
}

TEST_CASE("daemon config: runs (flightrec run handed over): taken by default, with TLS and entry times") {
  Config c = parse_config(kBase, "t.yaml");
  CHECK(c.runs_accept);
  CHECK(c.runs_tls);
  CHECK(c.runs_entry_times);
  Config off = parse_config(kBase + "runs:\n  accept: false\n  tls: false\n  entry_times: false\n", "t.yaml");
  CHECK(!off.runs_accept);
  CHECK(!off.runs_tls);
  CHECK(!off.runs_entry_times);
  CHECK(error_of(kBase + "runs:\n  accept: yes\n") == "t.yaml:5: runs.accept: must be true or false, not 'yes'");
  CHECK(error_of(kBase + "runs:\n  group: x\n") == "t.yaml:5: runs.group: unknown key (known: accept, entry_times, tls)");
}

TEST_CASE("daemon config: otlp outputs, their endpoints, headers and what is refused") {
  Config c = parse_config(kBase + "outputs:\n  otlp:\n    - name: local\n      endpoint: http://127.0.0.1:4318/v1/traces\n"
                                "    - name: saas\n      endpoint: https://otel.example.com\n      encoding: json\n"
                                "      headers:\n        x-api-key: k3y\n      queue: 500\n"
                                "    - name: v6\n      endpoint: http://[::1]/otlp/traces\n",
                        "t.yaml");
  REQUIRE(c.otlp_outputs.size() == 3);
  const auto &local = c.otlp_outputs[0], &saas = c.otlp_outputs[1], &v6 = c.otlp_outputs[2];
  CHECK(local.host == "127.0.0.1");
  CHECK(local.port == 4318);
  CHECK(local.path == "/v1/traces");
  CHECK_FALSE(local.tls.on);
  CHECK_FALSE(local.json);
  CHECK(saas.host == "otel.example.com");
  CHECK(saas.port == 443);
  CHECK(saas.path == "/v1/traces");  // the OTLP default
  CHECK(saas.tls.on);
  CHECK(saas.tls.ca_file == "/etc/ssl/certs/ca-certificates.crt");
  CHECK(saas.json);
  CHECK(saas.headers == std::vector<std::pair<std::string, std::string>>{{"x-api-key", "k3y"}});
  CHECK(saas.queue_max == 500);
  CHECK(v6.host == "::1");
  CHECK(v6.port == 4318);
  CHECK(v6.path == "/otlp/traces");
  const std::string o = kBase + "outputs:\n  otlp:\n    - name: a\n";
  CHECK(error_of(o) == "t.yaml:6: outputs.otlp.endpoint: missing (the collector's OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces)");
  CHECK(error_of(o + "      endpoint: ftp://x\n").find("t.yaml:7: outputs.otlp.endpoint: 'ftp://x' is not http(s)://") == 0);
  CHECK(error_of(o + "      endpoint: http://user:pw@x\n").find("no user:password@: use headers") != std::string::npos);
  CHECK(error_of(o + "      endpoint: http://x:99999\n").find("is not http(s)://") != std::string::npos);
  CHECK(error_of(o + "      endpoint: \"http://x/a b\"\n").find("is not http(s)://") != std::string::npos);
  CHECK(error_of(o + "      endpoint: http://x\n      tls:\n        ca: /c.pem\n") == "t.yaml:9: outputs.otlp.tls: goes with an https:// endpoint");
  CHECK(error_of(o + "      endpoint: http://x\n      encoding: thrift\n") ==
        "t.yaml:8: outputs.otlp.encoding: 'thrift' is not one of: json, protobuf");
  CHECK(error_of(o + "      endpoint: http://x\n      headers:\n        \"a b\": c\n").find("is not a header name") != std::string::npos);
  CHECK(error_of(o + "      endpoint: http://x\n      headers:\n        x: \"a\\r\\nInjected: 1\"\n").find("one line") !=
        std::string::npos);
  CHECK(error_of(o + "      endpoint: http://x\n      headers:\n        Content-Length: \"1\"\n").find("is flightrec's to set") !=
        std::string::npos);
  CHECK(error_of(o + "      endpoint: http://x\n      content: true\n").find("unknown key") != std::string::npos);
}
