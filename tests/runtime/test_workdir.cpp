// The work directory under a confining policy: what the agent changes is
// written to the host at the end (work_dir_mode: write) or kept aside for
// `flightrec changes` / `flightrec apply` (overlay), never a protected
// path, never over what someone else changed meanwhile; the command's
// environment as the policy says; violations named after their process.
#include <doctest/doctest.h>

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/harness.h"

using nlohmann::json;
using namespace rt;

namespace {

void put(const std::string& path, const std::string& data) { std::ofstream(path) << data; }

const json* end_change(const std::vector<json>& all, const std::string& path) {
  for (const auto& e : all)
    if (e["type"] == "file_change" && e["when"] == "end" && e["path"] == path) return &e;
  return nullptr;
}

std::vector<json> violations(const std::vector<json>& all, const std::string& rule) {
  std::vector<json> out;
  for (const auto& e : all)
    if (e["type"] == "violation" && e["rule_id"] == rule) out.push_back(e);
  return out;
}

// A git work tree made by the real git: hooks/ and config exist.
std::string git_work(const TempDir& dir) {
  std::string work = dir.file("work");
  mkdir(work.c_str(), 0755);
  REQUIRE(run_in(work, {"git", "init", "-q", "."}).code == 0);
  put(work + "/keep.txt", "host\n");
  put(work + "/edit.txt", "before\n");
  put(work + "/gone.txt", "bye\n");
  return work;
}

std::string policy_file(const TempDir& dir, const std::string& mode) {
  std::string path = dir.file("p.yaml");
  put(path, "version: 1\nname: wd\nfilesystem:\n  read_only: [/usr, /bin, /lib, /lib64, /etc]\n  work_dir_mode: " + mode +
                "\n  protect: [.git/hooks, .git/config, .claude]\nnetwork:\n  mode: none\n");
  return path;
}

}  // namespace

TEST_CASE("work_dir_mode write (agent's default): edits land on the host, each recorded with hashes; protected paths never") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string work = git_work(dir), db = dir.file("s.db");
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--db", db, "--", "sh", "-c",
                           "echo after > edit.txt; rm gone.txt; mkdir -p sub/deep; echo new > sub/deep/new.txt; "
                           "ln -s edit.txt link; chmod 755 keep.txt; "
                           "echo evil > .git/hooks/pre-commit; echo '[core]' >> .git/config; "
                           "mkdir .claude && echo '{}' > .claude/settings.json; echo done"});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out == "done\n");
  CHECK(slurp(work + "/edit.txt") == "after\n");
  CHECK(access((work + "/gone.txt").c_str(), F_OK) != 0);
  CHECK(slurp(work + "/sub/deep/new.txt") == "new\n");
  char target[64] = {};
  CHECK(readlink((work + "/link").c_str(), target, sizeof(target)) == 8);
  CHECK(std::string(target) == "edit.txt");
  struct stat st;
  REQUIRE(stat((work + "/keep.txt").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0755);
  CHECK(slurp(work + "/keep.txt") == "host\n");
  // Protected: refused inside (read-only), and what was made there never reaches the host.
  CHECK(access((work + "/.git/hooks/pre-commit").c_str(), F_OK) != 0);
  CHECK(slurp(work + "/.git/config").find("[core]\n[core]") == std::string::npos);
  CHECK(access((work + "/.claude").c_str(), F_OK) != 0);
  CHECK(r.err.find("2 refused") != std::string::npos);

  auto all = entries(db);
  const json* edit = end_change(all, work + "/edit.txt");
  REQUIRE(edit);
  CHECK((*edit)["change"] == "modified");
  CHECK((*edit)["applied"] == 1);
  CHECK((*edit)["sha256_before"] == "9160d4be34c8695bd172a76c7c7966587ea5a4d991ad22c87b2b91af54aa9ebb");  // "before\n"
  CHECK((*edit)["sha256_after"] == "7b9a72466d3960eb2aacccfc848939453490db0678bd4725def3f789b891c919");   // "after\n"
  const json* gone = end_change(all, work + "/gone.txt");
  REQUIRE(gone);
  CHECK((*gone)["change"] == "deleted");
  CHECK((*gone)["applied"] == 1);
  const json* claude = end_change(all, work + "/.claude/settings.json");
  REQUIRE(claude);
  CHECK((*claude)["applied"] == 0);
  CHECK((*claude)["refused"] == "a protected path (filesystem.protect)");
  auto prot = violations(all, "filesystem.protect");
  // Two refused at the call (hooks, config: read-only), one at the end (.claude: one per protected tree).
  REQUIRE(prot.size() == 3);
  CHECK(prot[0]["comm"] == "sh");
  CHECK(prot[0]["action"] == "denied");
  CHECK(prot[0]["path"] == ".git/hooks/pre-commit");
  CHECK(prot[1]["path"] == ".git/config");
  CHECK(prot[2]["subject_pid"] == -1);
  CHECK(prot[2]["detail"] == "created " + work + "/.claude not written to the work directory: " + work + "/.claude is protected");
}

TEST_CASE("work_dir_mode write: a file changed on the host while the session ran is refused by name, not overwritten") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string work = git_work(dir), db = dir.file("s.db");
  // The command edits edit.txt, then waits for a line on stdin; meanwhile
  // the host edits the same file.
  Proc p = start_in(work, {FLIGHTREC_BIN, "run", "--db", db, "--", "sh", "-c",
                           "echo agent > edit.txt; echo agent > keep.txt.new; echo ready; read line"},
                    {}, true);
  std::string ready;
  char c;
  while (ready.find("ready") == std::string::npos && read(p.out_fd, &c, 1) == 1) ready += c;
  put(work + "/edit.txt", "the user's own edit\n");
  REQUIRE(write(p.in_fd, "go\n", 3) == 3);
  Result r = wait(p);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(slurp(work + "/edit.txt") == "the user's own edit\n");
  CHECK(slurp(work + "/keep.txt.new") == "agent\n");
  CHECK(r.err.find(work + "/edit.txt: changed on the host while the session ran or since") != std::string::npos);
  auto all = entries(db);
  const json* edit = end_change(all, work + "/edit.txt");
  REQUIRE(edit);
  CHECK((*edit)["applied"] == 0);
  CHECK((*edit)["refused"] == "changed on the host while the session ran or since");
}

TEST_CASE("work_dir_mode overlay: changes kept aside, shown by flightrec changes, applied by flightrec apply; a conflict refused by name") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string work = git_work(dir), db = dir.file("s.db");
  put(work + "/other.txt", "host other\n");
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--db", db, "--policy", policy_file(dir, "overlay"), "--", "/bin/sh",
                           "-c", "echo after > edit.txt; rm gone.txt; echo new > new.txt; echo agent > other.txt; "
                                 "printf 'a\\0b' > bin.dat"});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(slurp(work + "/edit.txt") == "before\n");  // nothing written yet
  CHECK(access((work + "/new.txt").c_str(), F_OK) != 0);
  auto all = entries(db);
  auto kept = of_type(all, "changes_kept");
  REQUIRE(kept.size() == 1);
  std::string kept_dir = kept[0]["work_dir_changes"];
  CHECK(kept_dir.starts_with("/var/lib/flightrec/changes/"));
  CHECK(slurp(kept_dir + "/files/new.txt") == "new\n");

  Result diff = flightrec({"changes", "--db", db, "--session", "1"});
  INFO(diff.err);
  CHECK(diff.code == 0);
  CHECK(diff.out.find("=== modified edit.txt (file, 6 bytes, mode 0644)\n--- a/edit.txt\n+++ b/edit.txt\n@@ -1 +1 @@\n-before\n+after\n") !=
        std::string::npos);
  CHECK(diff.out.find("=== deleted gone.txt") != std::string::npos);
  CHECK(diff.out.find("+++ b/new.txt\n@@ -0,0 +1 @@\n+new\n") != std::string::npos);
  CHECK(diff.out.find("=== created bin.dat (file, 3 bytes, mode 0644)\n    binary: sha256 - -> ") != std::string::npos);
  // The report shows the same diffs, from the kept copy, under What changed.
  Result rep = flightrec({"report", "--db", db, "--session", "1", "--out", dir.file("r.html")});
  REQUIRE(rep.code == 0);
  std::string page = slurp(dir.file("r.html"));
  auto diffs = page.find("id=\"diffs\"");
  REQUIRE(diffs != std::string::npos);
  CHECK(page.find("--- a/edit.txt\n+++ b/edit.txt\n@@ -1 +1 @@\n-before\n+after\n", diffs) != std::string::npos);
  CHECK(page.find("+++ b/new.txt\n@@ -0,0 +1 @@\n+new\n", diffs) != std::string::npos);
  CHECK(page.find("binary: sha256 - -&gt; ", diffs) != std::string::npos);
  CHECK(page.find("id=\"changes\"") < diffs);
  CHECK(diffs < page.find("id=\"overview\""));

  // The user changes other.txt after the session: that one conflicts.
  put(work + "/other.txt", "user again\n");
  Result dry = flightrec({"apply", "--db", db, "--session", "1", "--dry-run"});
  CHECK(dry.code == 1);
  CHECK(dry.out.find("would apply modified " + work + "/edit.txt\n") != std::string::npos);
  CHECK(dry.out.find("REFUSED modified " + work + "/other.txt: changed on the host while the session ran or since\n") !=
        std::string::npos);
  CHECK(slurp(work + "/edit.txt") == "before\n");  // a dry run changes nothing
  Result applied = flightrec({"apply", "--db", db, "--session", "1"});
  CHECK(applied.code == 1);
  CHECK(applied.out.find("4 of 5 change(s) applied, 1 refused") != std::string::npos);
  CHECK(slurp(work + "/edit.txt") == "after\n");
  CHECK(slurp(work + "/new.txt") == "new\n");
  CHECK(access((work + "/gone.txt").c_str(), F_OK) != 0);
  CHECK(slurp(work + "/other.txt") == "user again\n");
  // Applied twice: the new file exists with the same bytes, the rest conflicts now.
  Result again = flightrec({"apply", "--db", db, "--session", "1"});
  CHECK(again.out.find("REFUSED modified " + work + "/edit.txt") != std::string::npos);
}

TEST_CASE("env: the host's secrets stay out unless named, and a passed one's value is not in the record") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("s.db");
  mkdir(work.c_str(), 0755);
  const std::string secret = "flightrec-test-secret-value-4711";
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--db", db, "--", "sh", "-c", "echo \"[$X_API_KEY][$HOME][$LANG]\""},
                    {"X_API_KEY=" + secret, "LANG=C.UTF-8"});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out == "[][/tmp/home][C.UTF-8]\n");
  auto all = entries(db);
  CHECK(all.front()["env_passed"].dump().find("LANG") != std::string::npos);
  CHECK(all.front()["env_passed"].dump().find("X_API_KEY") == std::string::npos);

  std::string p = dir.file("pass.yaml");
  put(p, "version: 1\nname: pass\nfilesystem:\n  read_only: [/usr, /bin, /lib, /lib64, /etc]\nnetwork:\n  mode: none\n"
         "env:\n  pass: [\"*\", X_API_KEY]\n  set: {GREETING: hello}\n");
  std::string db2 = dir.file("s2.db");
  r = run_in(work, {FLIGHTREC_BIN, "run", "--db", db2, "--policy", p, "--", "sh", "-c",
                    "echo \"[$X_API_KEY][$GREETING]\"; echo \"$X_API_KEY\" > /dev/null"},
             {"X_API_KEY=" + secret, "OTHER_TOKEN=not-passed-by-a-glob"});
  CHECK(r.code == 0);
  CHECK(r.out == "[" + secret + "][hello]\n");
  all = entries(db2);
  CHECK(all.front()["env_passed"].dump().find("X_API_KEY") != std::string::npos);
  CHECK(all.front()["env_passed"].dump().find("OTHER_TOKEN") == std::string::npos);
  CHECK(all.front()["env_set"] == json::array({"GREETING"}));
  for (const auto& e : all) CHECK(e.dump().find(secret) == std::string::npos);
}

TEST_CASE("a violation names the process that did it: pid, comm, exe and path, found by query --comm/--exec/--path") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("s.db");
  mkdir(work.c_str(), 0755);
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--db", db, "--", "sh", "-c", "cat /etc/shadow; true"});
  CHECK(r.code == 0);
  CHECK(r.err.find("openat of hidden /etc/shadow (cat, pid ") != std::string::npos);
  auto all = entries(db);
  auto hidden = violations(all, "filesystem.hidden");
  REQUIRE(hidden.size() == 1);
  const json& v = hidden[0];
  const json& judged = all.at(size_t(v["of_seq"].get<int64_t>() - 1));
  CHECK(v["comm"] == "cat");
  CHECK(v["pid"] == judged["pid"]);
  CHECK(v["tid"] == judged["tid"]);
  CHECK(v["uid"] == judged["uid"]);
  CHECK(v["exe"] == "/usr/bin/cat");
  CHECK(v["path"] == "/etc/shadow");
  for (const auto& filter : std::vector<std::vector<std::string>>{{"--comm", "cat"}, {"--exec", "cat"}, {"--path", "/etc/shadow"}}) {
    std::vector<std::string> args = {"query", "--db", db, "--type", "violation", "--json"};
    args.insert(args.end(), filter.begin(), filter.end());
    Result q = flightrec(args);
    CHECK(q.code == 0);
    CHECK(occurrences(q.out, "\"rule_id\":\"filesystem.hidden\"") == 1);
  }
}

TEST_CASE("no resolver in the sandbox: every lookup is answered NXDOMAIN at once by flightrec's stub, in either network namespace") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string work = dir.file("work");
  mkdir(work.c_str(), 0755);
  // One query to the nameserver resolv.conf names; its answer's rcode, or
  // "none" when nothing answered within 5 s (musl's resolver would wait
  // that long, then fail).
  put(work + "/q.py",
      "import socket, struct\n"
      "ns = [l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver')][0]\n"
      "q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 1) + b'\\x07example\\x03com\\x00' + struct.pack('>HH', 1, 1)\n"
      "q += b'\\x00\\x00\\x29\\x04\\xd0\\x00\\x00\\x00\\x00\\x00\\x00'  # EDNS OPT, dropped from the answer\n"
      "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5); s.sendto(q, (ns, 53))\n"
      "try:\n    r = s.recv(512)\n    print(ns.startswith('127.53.'), hex(struct.unpack('>H', r[:2])[0]), r[3] & 15, r[4:12].hex(), r[12:] == q[12:29])\n"
      "except socket.timeout:\n    print('none')\n");
  for (const auto& allow : std::vector<std::vector<std::string>>{{}, {"--allow", "127.0.0.1:9"}}) {
    std::string db = dir.file("s" + std::to_string(allow.size()) + ".db");
    std::vector<std::string> argv = {FLIGHTREC_BIN, "run", "--db", db};
    argv.insert(argv.end(), allow.begin(), allow.end());
    argv.insert(argv.end(), {"--", "sh", "-c", "python3 q.py; getent hosts example.com; echo getent=$?"});
    Result r = run_in(work, argv);
    INFO(r.err);
    CHECK(r.code == 0);
    // The stub's address, the query's id, NXDOMAIN, one question and nothing else, the question echoed.
    CHECK(r.out == "True 0x1234 3 0001000000000000 True\ngetent=2\n");
    CHECK(r.err.find("ALERT") == std::string::npos);
    auto all = entries(db);
    CHECK(all.front()["sandbox"].dump().find("dns: every name refused at once by flightrec's resolver at 127.53.") != std::string::npos);
    CHECK_FALSE(end_change(all, "/etc/resolv.conf"));
  }
}

TEST_CASE("filesystem.home: the invoking user's agent config is read from the host, written only in the session") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("s.db");
  mkdir(work.c_str(), 0755);
  // In the invoking user's home (root's: the tests run as root, not via sudo).
  const std::string name = ".flightrec-test-home-" + std::to_string(getpid());
  const std::string host = std::string(getpwuid(0)->pw_dir) + "/" + name;
  mkdir(host.c_str(), 0700);
  put(host + "/config", "from the host\n");
  put(host + ".json", "{\"a\": 1}\n");
  symlink("/etc/shadow", (host + "-link").c_str());  // never followed
  std::string p = dir.file("home.yaml");
  put(p, "version: 1\nname: home\nextends: agent\nfilesystem:\n  home: [" + name + ", " + name + ".json, " + name + "-link]\n");
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--db", db, "--policy", p, "--", "sh", "-c",
                           "cat $HOME/" + name + "/config $HOME/" + name + ".json; echo session > $HOME/" + name +
                               "/config; echo new > $HOME/" + name + "/new; ls -A $HOME"});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out == "from the host\n{\"a\": 1}\n" + name + "\n" + name + ".json\n");
  CHECK(slurp(host + "/config") == "from the host\n");  // the host's is untouched
  CHECK(access((host + "/new").c_str(), F_OK) != 0);
  auto all = entries(db);
  CHECK(all.front()["sandbox"].dump().find("home: /tmp/home, private; from the invoking user's home, read there and written here: " +
                                           name + ", " + name + ".json") != std::string::npos);
  const json* changed = end_change(all, "/tmp/home/" + name + "/config");
  REQUIRE(changed);
  CHECK((*changed)["change"] == "modified");
  CHECK(end_change(all, "/tmp/home/" + name + "/new"));
  std::filesystem::remove_all(host);
  unlink((host + ".json").c_str());
  unlink((host + "-link").c_str());
}
