// Reading records. An auditor reads a record it may not write: another
// user's 0644 file on a read-only mount. Reading commands open records
// read-only and never need to create anything beside them; a record whose
// unmerged write-ahead log cannot be read is refused rather than shown in
// part. Verdicts come as JSON for programs; progress shows on a terminal only.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "runtime/harness.h"
#include "support/record_edit.h"

using namespace rt;
namespace fs = std::filesystem;

namespace {

// A directory the auditor can reach, holding a copy of flightrec it can run
// (the build tree may sit under a directory closed to other users).
struct AuditorSetup {
  TempDir dir;
  std::string records = dir.file("records"), mount = dir.file("ro"), out = dir.file("out"), bin = dir.file("flightrec");
  AuditorSetup() {
    fs::create_directories(records);
    fs::create_directories(mount);
    fs::create_directories(out);
    fs::copy_file(FLIGHTREC_BIN, bin);
    chmod(dir.path.c_str(), 0755);
    chmod(records.c_str(), 0755);
    chmod(mount.c_str(), 0755);
    chmod(out.c_str(), 0777);
    chmod(bin.c_str(), 0755);
  }
  // flightrec ARGS as uid/gid 65534, with `records` bind-mounted read-only
  // at `mount`, in a mount namespace of its own.
  Result as_auditor(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {"unshare", "--mount", "--propagation", "private", "sh", "-c",
                                     "mount --bind \"$1\" \"$2\" && mount -o remount,bind,ro \"$2\" && shift 2 && "
                                     "exec setpriv --reuid=65534 --regid=65534 --clear-groups \"$@\"",
                                     "sh", records, mount, bin};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv);
  }
};

}  // namespace

TEST_CASE("an auditor queries, verifies and exports a root-owned record on a read-only mount") {
  REQUIRE(is_root());
  AuditorSetup a;
  std::string keys = a.dir.file("keys");
  REQUIRE(flightrec({"keygen", "--out", keys}).code == 0);
  std::string db = a.records + "/r.db";
  REQUIRE(flightrec({"run", "--policy", "observe", "--key", keys, "--db", db, "--", "sh", "-c", "echo hi >/dev/null"}).code == 0);
  // What makes this hard for SQLite: the record is in WAL mode, whose
  // readers need a -shm file that nobody may create here.
  CHECK(sqlite(db, "PRAGMA journal_mode") == "wal\n");
  chmod(db.c_str(), 0644);
  fs::copy_file(keys + "/flightrec.pub", a.out + "/flightrec.pub");
  chmod((a.out + "/flightrec.pub").c_str(), 0644);

  std::string ro_db = a.mount + "/r.db";
  Result mine = flightrec({"query", "--db", db, "--json"});
  REQUIRE(mine.code == 0);
  // Root's readers leave an empty log and its index behind; media written
  // from a closed record carry the main file alone.
  for (const char* beside : {"-wal", "-shm"})
    if (fs::exists(db + beside)) {
      if (std::string(beside) == "-wal") REQUIRE(fs::file_size(db + beside) == 0);
      fs::remove(db + beside);
    }
  Result q = a.as_auditor({"query", "--db", ro_db, "--json"});
  INFO(q.err);
  CHECK(q.code == 0);
  CHECK(q.out == mine.out);
  CHECK(count_lines(q.out) > 10);

  Result v = a.as_auditor({"verify", "--db", ro_db, "--pubkey", a.out + "/flightrec.pub"});
  INFO(v.err);
  CHECK(v.code == 0);
  CHECK(v.out.find("OK: 1 session") != std::string::npos);

  Result e = a.as_auditor({"export", "--db", ro_db, "--session", "1", "--out", a.out + "/s.json"});
  INFO(e.err);
  CHECK(e.code == 0);
  CHECK(flightrec({"verify", a.out + "/s.json", "--pubkey", keys + "/flightrec.pub"}).code == 0);

  // Nothing was left beside the record.
  CHECK(!fs::exists(db + "-shm"));
  CHECK(!fs::exists(db + "-wal"));
}

TEST_CASE("a crashed record whose write-ahead log the auditor cannot open is refused, never shown in part") {
  REQUIRE(is_root());
  AuditorSetup a;
  std::string db = a.records + "/c.db";
  Proc p = start({FLIGHTREC_BIN, "run", "--policy", "observe", "--db", db, "--", BENCH_SYSCALLS_BIN, "rate", "100000", "30"});
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  kill(p.pid, SIGKILL);
  wait(p);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  REQUIRE(fs::exists(db + "-wal"));
  REQUIRE(fs::file_size(db + "-wal") > 0);  // committed entries the main file lacks
  // Records are their owner's alone (0600): the owner hands this one to the auditor.
  chmod(db.c_str(), 0644);
  chmod((db + "-wal").c_str(), 0644);
  std::string ro_db = a.mount + "/c.db";
  int root_lines = count_lines(flightrec({"query", "--db", db, "--json"}).out);
  REQUIRE(root_lines > 1000);

  SUBCASE("with the log's index readable, the auditor reads all of it") {
    chmod((db + "-shm").c_str(), 0644);
    Result q = a.as_auditor({"query", "--db", ro_db, "--json"});
    INFO(q.err);
    CHECK(q.code == 0);
    CHECK(count_lines(q.out) == root_lines);
    Result v = a.as_auditor({"verify", "--db", ro_db});
    CHECK(v.code == 0);
    CHECK(v.out.find("unterminated session") != std::string::npos);
  }
  SUBCASE("through a symlink, whose target the log lies beside, it is refused too") {
    if (fs::exists(db + "-shm")) chmod((db + "-shm").c_str(), 0600);
    fs::create_symlink(db, a.records + "/link.db");
    Result r = a.as_auditor({"query", "--db", a.mount + "/link.db"});
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find("write-ahead log") != std::string::npos);
  }
  SUBCASE("with the index closed to it, or gone, one line says why and nothing is printed") {
    if (fs::exists(db + "-shm")) chmod((db + "-shm").c_str(), 0600);
    for (int round = 0; round < 2; ++round) {
      for (const char* cmd : {"query", "verify"}) {
        Result r = a.as_auditor({cmd, "--db", ro_db});
        INFO(cmd << ": " << r.err);
        CHECK(r.code == 1);
        CHECK(r.out.empty());
        CHECK(count_lines(r.err) == 1);
        CHECK(r.err.find("write-ahead log") != std::string::npos);
      }
      fs::remove(db + "-shm");
    }
  }
}

TEST_CASE("verify --json: the verdict as one object, the same exit codes") {
  REQUIRE(is_root());
  TempDir dir;
  std::string keys = dir.file("keys"), db = dir.file("v.db");
  REQUIRE(flightrec({"keygen", "--out", keys}).code == 0);
  REQUIRE(flightrec({"run", "--policy", "observe", "--key", keys, "--db", db, "--", "cat", "/etc/hostname"}).code == 0);
  Result r = flightrec({"verify", "--db", db, "--json", "--pubkey", keys + "/flightrec.pub"});
  REQUIRE(r.code == 0);
  CHECK(count_lines(r.out) == 1);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["ok"] == true);
  REQUIRE(j["sessions"].size() == 1);
  auto s = j["sessions"][0];
  CHECK(s["session"] == 1);
  CHECK(s["ok"] == true);
  CHECK(s["entries"] == j["entries"]);
  CHECK(s["entries"].get<int64_t>() == int64_t(entries(db).size()));
  CHECK(s["terminated"] == true);
  CHECK(s["entries_after_last_checkpoint"] == 0);
  CHECK(s["signed_checkpoints"] == s["checkpoints"]);
  CHECK(s["signed_checkpoints"].get<int64_t>() >= 2);
  CHECK(s["key_from_record"] == false);
  CHECK(s["gaps"] == 0);

  // One body changed: exit 1, and the entry named as the text verdict names it.
  auto stored = testsupport::stored_entries(db);
  size_t at = 0;
  while (at < stored.size() && stored[at].body.find("/etc/hostname") == std::string::npos) ++at;
  REQUIRE(at < stored.size());
  auto& body = stored[at].body;
  body.replace(body.find("/etc/hostname"), 13, "/etc/shadow");
  testsupport::store_entries(db, stored);
  Result text = flightrec({"verify", "--db", db});
  r = flightrec({"verify", "--db", db, "--json"});
  CHECK(r.code == 1);
  CHECK(text.code == 1);
  j = nlohmann::json::parse(r.out);
  CHECK(j["ok"] == false);
  s = j["sessions"][0];
  CHECK(s["ok"] == false);
  CHECK(s["bad_seq"] == stored[at].seq);
  CHECK(s["where"] == "entry " + std::to_string(stored[at].seq));
  CHECK(text.out.find("FAIL: session 1 entry " + std::to_string(stored[at].seq) + ": " + s["reason"].get<std::string>()) == 0);

  r = flightrec({"verify", "--db", db, "--json", "--session", "7"});
  CHECK(r.code == 1);
  j = nlohmann::json::parse(r.out);
  CHECK(j["ok"] == false);
  CHECK(j["reason"].get<std::string>().find("no session 7") == 0);
}

TEST_CASE("probe --json says what the text says") {
  REQUIRE(is_root());
  Result text = flightrec({"probe"});
  Result r = flightrec({"probe", "--json"});
  CHECK(r.code == text.code);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["ok"] == (text.code == 0));
  REQUIRE(j["features"].size() > 3);
  for (const auto& f : j["features"]) {
    // Each feature is a line of the text form, with its verdict.
    std::string name = f["name"];
    auto line = text.out.find(name);
    REQUIRE(line != std::string::npos);
    std::string rest = text.out.substr(line, text.out.find('\n', line) - line);
    CHECK(rest.find(f["available"] ? "yes" : "no") != std::string::npos);
  }
  bool btf = false;
  for (const auto& f : j["features"]) btf = btf || (f["name"] == "kernel BTF" && f["available"] == true);
  CHECK(btf);
  // The programs a session attaches on this kernel (tp_btf at least).
  bool sys_exit = false;
  for (const auto& p : j["programs"]) sys_exit = sys_exit || (p["attached"] == true && p["section"].get<std::string>().find("sys_exit") != std::string::npos);
  CHECK(sys_exit);
}

TEST_CASE("progress of verify and export shows on a terminal, never in a pipe") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("p.db");
  REQUIRE(flightrec({"run", "--policy", "observe", "--db", db, "--", BENCH_SYSCALLS_BIN, "getppid", "50000"}).code == 0);
  for (std::string cmd : {std::string(FLIGHTREC_BIN) + " verify --db " + db,
                          std::string(FLIGHTREC_BIN) + " export --db " + db + " --session 1 --out " + dir.file("b.json")}) {
    INFO(cmd);
    Result piped = run({"sh", "-c", cmd + " 2>&1 | cat"});
    CHECK(piped.code == 0);
    CHECK(piped.out.find('\r') == std::string::npos);
    std::filesystem::remove(dir.file("b.json"));
    // script(1) gives the command a terminal; the line is redrawn and erased with \r ESC[K.
    Result tty = run({"script", "-qec", cmd, "/dev/null"});
    CHECK(tty.code == 0);
    CHECK(tty.out.find("\r\033[K") != std::string::npos);
    CHECK(tty.out.find(" entries (") != std::string::npos);
    std::filesystem::remove(dir.file("b.json"));
  }
}

TEST_CASE("query's filters on a real agent session agree with the entries themselves") {
  REQUIRE(is_root());
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("q.db");
  fs::create_directories(work);
  Listener refused;  // a port off the allowlist: the connect is denied
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--policy", "agent", "--db", db, "--", "sh", "-c",
                           "cat /etc/hostname >/dev/null; echo hi > out.txt; "
                           "python3 -c \"import socket; socket.socket().connect(('127.0.0.1', " +
                               std::to_string(refused.port) + "))\" 2>/dev/null; cat /etc/shadow 2>/dev/null; true"});
  REQUIRE(r.code == 0);
  auto all = entries(db);
  auto lines = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"query", "--db", db});
    Result q = flightrec(args);
    INFO(q.err);
    REQUIRE(q.code == 0);
    return q.out;
  };
  auto json_of = [&](std::vector<std::string> args) {
    args.push_back("--json");
    std::vector<nlohmann::json> out;
    std::istringstream in(lines(args));
    for (std::string l; std::getline(in, l);) out.push_back(nlohmann::json::parse(l));
    return out;
  };

  // Human output: one decoded line per entry, starting with the time; never the entry's JSON.
  std::string human = lines({});
  CHECK(count_lines(human) == int(all.size()));
  std::istringstream in(human);
  std::regex start(R"(^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} 1:\d+ \d+ \S+ [a-z_]+ )");
  for (std::string l; std::getline(in, l);) {
    INFO(l);
    CHECK(std::regex_search(l, start));
    CHECK(l.find("\"ts_mono_ns\"") == std::string::npos);
  }
  CHECK(human.find(" violation [ALERT] network.allow denied") != std::string::npos);
  CHECK(human.find(" file_open openat /etc/hostname = ") != std::string::npos);
  CHECK(human.find(" file_change created " + work + "/out.txt (file, 3 bytes") != std::string::npos);

  // Each filter keeps exactly the entries that satisfy it.
  auto expect = [&](std::vector<std::string> args, const std::function<bool(const nlohmann::json&)>& want) {
    auto got = json_of(args);
    std::vector<nlohmann::json> should;
    for (const auto& e : all)
      if (want(e)) should.push_back(e);
    INFO(args[0] << " " << (args.size() > 1 ? args[1] : ""));
    CHECK(got == should);
    return got.size();
  };
  CHECK(expect({"--rule", "network"}, [](const auto& e) {
          return e.contains("rule_id") && e["rule_id"].template get<std::string>().rfind("network.", 0) == 0;
        }) >= 1);
  CHECK(expect({"--level", "alert"}, [](const auto& e) {
          return e.contains("level") && (e["level"] == "ALERT" || e["level"] == "CRITICAL");
        }) >= 2);
  auto under_etc = [](const auto& e) {
    for (const char* k : {"path", "kernel_path", "oldpath", "newpath", "target", "linkpath", "filename", "new_path"})
      if (e.contains(k) && e[k].is_string()) {
        std::string p = e[k];
        if (p == "/etc" || p.rfind("/etc/", 0) == 0) return true;
      }
    return false;
  };
  CHECK(expect({"--path", "/etc"}, under_etc) >= 3);
  CHECK(expect({"--comm", "python3"}, [](const auto& e) { return e.value("comm", "") == "python3"; }) > 10);
  // The cat processes: by what they ran, whatever their comm.
  std::set<int64_t> cats;
  for (const auto& e : all)
    if (e["type"] == "exec" && e["filename"] == "/usr/bin/cat") cats.insert(e["pid"].get<int64_t>());
  REQUIRE(cats.size() == 2);
  auto cat_entries = json_of({"--exec", "cat"});
  CHECK(cat_entries.size() > 20);
  for (const auto& e : cat_entries) CHECK(cats.count(e["pid"].get<int64_t>()) == 1);
  CHECK(json_of({"--exec", "/usr/bin/cat", "--type", "file_open", "--path", "/etc/hostname"}).size() == 1);
  // Time: from a middle entry on, given in UTC with nanoseconds.
  int64_t mid = all[all.size() / 2]["ts_real_ns"];
  time_t secs = time_t(mid / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char when[64];
  size_t n = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(when + n, sizeof(when) - n, ".%09lldZ", (long long)(mid % 1'000'000'000));
  CHECK(expect({"--since", when}, [&](const auto& e) { return e["ts_real_ns"].template get<int64_t>() >= mid; }) > 0);
  CHECK(expect({"--until", when}, [&](const auto& e) { return e["ts_real_ns"].template get<int64_t>() <= mid; }) > 0);

  // Mistakes are usage errors that say what is wrong, not empty output.
  for (std::vector<std::string> bad : {std::vector<std::string>{"--type", "violaton"}, {"--rule", "netwrok.allow"},
                                       {"--level", "loud"}, {"--since", "yesterday"}, {"--path", "etc"},
                                       {"--since", "2026-12-02", "--until", "2026-12-01"}}) {
    bad.insert(bad.begin(), {"query", "--db", db});
    Result q = flightrec(bad);
    INFO(bad[3]);
    CHECK(q.code == 2);
    CHECK(q.out.empty());
    CHECK(count_lines(q.err) == 1);
  }
  Result q = flightrec({"query", "--db", db, "--rule", "netwrok.allow"});
  CHECK(q.err.find("this record's entries name ") != std::string::npos);
  CHECK(q.err.find("network.allow") != std::string::npos);
}

TEST_CASE("summary: programs, files, hosts, violations and loss of each session, as its entries say") {
  REQUIRE(is_root());
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("s.db");
  fs::create_directories(work);
  Listener allowed, refused;
  std::string connect = "import socket\nfor port in (" + std::to_string(allowed.port) + ", " +
                        std::to_string(refused.port) + "):\n  try: socket.create_connection(('127.0.0.1', port), 2)\n"
                        "  except OSError: pass\n";
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--policy", "agent", "--allow", "127.0.0.1:" + std::to_string(allowed.port),
                           "--db", db, "--", "sh", "-c",
                           "cat /etc/hostname >/dev/null; echo hi > out.txt; cat out.txt >/dev/null; python3 -c \"" +
                               connect + "\"; exit 3"});
  REQUIRE(r.code == 3);
  REQUIRE(flightrec({"run", "--policy", "observe", "--db", db, "--", "true"}).code == 0);

  Result s = flightrec({"summary", "--db", db, "--json"});
  INFO(s.err);
  REQUIRE(s.code == 0);
  REQUIRE(count_lines(s.out) == 2);
  auto j = nlohmann::json::parse(s.out.substr(0, s.out.find('\n')));
  auto all = entries(db);
  std::map<std::string, int64_t> types;
  int64_t in_session_1 = 0;
  for (const auto& e : all)
    if (e["session"] == 1) {
      ++types[e["type"].get<std::string>()];
      ++in_session_1;
    }
  CHECK(j["session"] == 1);
  CHECK(j["entries"] == in_session_1);
  CHECK(j["types"] == nlohmann::json(types));
  CHECK(j["terminated"] == true);
  CHECK(j["exit_code"] == 3);
  CHECK(j["lost"] == 0);
  CHECK(j["policy"] == "agent");
  auto has = [](const nlohmann::json& rows, nlohmann::json want) {
    for (const auto& row : rows) {
      bool all_match = true;
      for (const auto& [k, v] : want.items()) all_match = all_match && row.contains(k) && row[k] == v;
      if (all_match) return true;
    }
    return false;
  };
  CHECK(has(j["executables"], {{"path", "/usr/bin/cat"}, {"count", 2}}));
  CHECK((has(j["executables"], {{"path", "/usr/bin/python3.11"}}) || has(j["executables"], {{"path", "/usr/bin/python3"}})));
  CHECK(has(j["files_written"], {{"path", work + "/out.txt"}, {"count", 1}}));
  CHECK(has(j["files_changed"], {{"change", "created"}, {"path", work + "/out.txt"}}));
  CHECK(has(j["connected"], {{"addr", "127.0.0.1"}, {"port", allowed.port}}));
  CHECK(has(j["connect_failed"], {{"addr", "127.0.0.1"}, {"port", refused.port}}));
  CHECK_FALSE(has(j["connected"], {{"port", refused.port}}));
  CHECK(has(j["violations"], {{"level", "ALERT"}, {"rule_id", "network.allow"}, {"action", "denied"}, {"count", 1}}));
  CHECK(j["duration_ns"].get<int64_t>() > 0);

  Result text = flightrec({"summary", "--db", db, "--session", "1"});
  CHECK(text.code == 0);
  CHECK(text.out.find("session 1 on ") == 0);
  CHECK(text.out.find("exit code 3") != std::string::npos);
  CHECK(text.out.find("1  ALERT network.allow denied") != std::string::npos);
  CHECK(text.out.find("127.0.0.1:" + std::to_string(allowed.port)) != std::string::npos);
  CHECK(text.out.find("nothing lost") != std::string::npos);
  CHECK(text.out.find("session 2") == std::string::npos);
  Result none = flightrec({"summary", "--db", db, "--session", "9"});
  CHECK(none.code == 1);
  CHECK(none.err.find("no session 9") != std::string::npos);
}

TEST_CASE("replay: the recorded policy agrees with itself; a stricter and a looser one differ exactly where they should" * doctest::test_suite("vm-sandbox")) {
  REQUIRE(is_root());
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("r.db");
  fs::create_directories(work);
  Listener refused;
  std::string port = std::to_string(refused.port);
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--shadow", "--db", db, "--", "sh", "-c",
                           "uname >/dev/null; cat /etc/shadow >/dev/null 2>&1; python3 -c \"import socket; "
                           "socket.socket().connect_ex(('127.0.0.1', " + port + "))\"; true"});
  REQUIRE(r.code == 0);
  auto all = entries(db);
  std::set<int64_t> judged, unames, refused_connects;
  for (const auto& e : all) {
    if (e["type"] == "violation" && e["of_seq"].get<int64_t>() > 0) {
      judged.insert(e["of_seq"].get<int64_t>());
      if (e["rule_id"] == "network.allow") refused_connects.insert(e["of_seq"].get<int64_t>());
    }
    if (e.value("name", "") == "uname") unames.insert(e["seq"].get<int64_t>());
  }
  REQUIRE(refused_connects.size() == 1);
  REQUIRE(!unames.empty());
  REQUIRE(judged.size() >= 2);  // /etc/shadow and the connect at least

  auto replay = [&](const std::string& policy) {
    Result q = flightrec({"replay", "--db", db, "--session", "1", "--policy", policy, "--json", "--limit", "100000"});
    INFO(q.err);
    REQUIRE(q.code == 0);
    return nlohmann::json::parse(q.out);
  };
  auto seqs = [](const nlohmann::json& rows) {
    std::set<int64_t> out;
    for (const auto& row : rows) out.insert(row["seq"].get<int64_t>());
    return out;
  };
  // The policy the session was recorded under: exactly its own decisions.
  auto same = replay("agent");
  CHECK(same["recorded_policy"]["sha256"] == same["policy"]["sha256"]);
  CHECK(same["would_deny"] == judged.size());
  CHECK(same["both_deny"] == judged.size());
  CHECK(same["new_only_count"] == 0);
  CHECK(same["recorded_only_count"] == 0);

  std::string agent = slurp(std::string(SOURCE_DIR) + "/policies/agent.yaml");
  auto variant = [&](const std::string& name, const std::string& from, const std::string& to) {
    std::string text = agent;
    REQUIRE(text.find(from) != std::string::npos);
    text.replace(text.find(from), from.size(), to);
    text.replace(text.find("name: agent"), 11, "name: " + name);
    std::string path = dir.file(name + ".yaml");
    std::ofstream(path) << text;
    return path;
  };
  // Stricter: uname denied too. Exactly the uname calls are new; nothing is lost.
  auto stricter = replay(variant("stricter", "  deny:\n    - mount\n", "  deny:\n    - uname\n    - mount\n"));
  CHECK(seqs(stricter["new_only"]) == unames);
  for (const auto& row : stricter["new_only"]) CHECK(row["rule_id"] == "seccomp.deny.uname");
  CHECK(stricter["recorded_only_count"] == 0);
  CHECK(stricter["both_deny"] == judged.size());
  // Looser: the refused port allowed. Exactly that connect is no longer denied.
  auto looser = replay(variant("looser", "  allow: []", "  allow: [127.0.0.1:" + port + "]"));
  CHECK(seqs(looser["recorded_only"]) == refused_connects);
  CHECK(looser["recorded_only"][0]["rule_id"] == "network.allow");
  CHECK(looser["new_only_count"] == 0);
  CHECK(looser["both_deny"] == judged.size() - 1);

  // Text for people names both lists.
  Result text = flightrec({"replay", "--db", db, "--session", "1", "--policy", dir.file("looser.yaml")});
  CHECK(text.code == 0);
  CHECK(text.out.find("1 that the recorded policy objected to and looser would allow:") != std::string::npos);
  CHECK(text.out.find("network.allow") != std::string::npos);

  // A session recorded without a confining policy does not say its work
  // directory: replay asks for it rather than guessing.
  std::string plain = dir.file("plain.db");
  REQUIRE(flightrec({"run", "--policy", "observe", "--db", plain, "--", "true"}).code == 0);
  Result ask = flightrec({"replay", "--db", plain, "--session", "1", "--policy", "agent"});
  CHECK(ask.code == 2);
  CHECK(ask.err.find("--work-dir") != std::string::npos);
  CHECK(flightrec({"replay", "--db", plain, "--session", "1", "--policy", "agent", "--work-dir", work}).code == 0);
  CHECK(flightrec({"replay", "--db", plain, "--session", "1", "--policy", dir.file("nonexistent.yaml")}).code == 2);
  CHECK(flightrec({"replay", "--db", plain, "--session", "4", "--policy", "agent", "--work-dir", work}).code == 1);
}

// The shadow -> replay -> enforce workflow begins with "does the record
// agree with itself": a session replayed against the policy it ran under
// (the default, with its command line's overrides) differs nowhere.
TEST_CASE("replay: each shipped policy's sessions replayed as recorded differ nowhere") {
  REQUIRE(is_root());
  TempDir dir;
  std::string work = dir.file("work");
  fs::create_directories(work);
  Listener allowed, refused;
  HttpsServer tls;  // curl's TLS: uprobes, and on 6.11+ their return trampoline's uretprobe calls
  std::string ap = std::to_string(allowed.port), rp = std::to_string(refused.port);
  std::string connect = "python3 -c \"import socket\nfor p in (" + ap + ", " + rp +
                        "): socket.socket().connect_ex(('127.0.0.1', p))\"; ";
  // The three false denials replay used to report: flightrec's own set-up
  // (setns), a symlink's target read as a write, a connect allowed by --allow.
  std::string script = "ln -sf /etc/hostname link1; cat link1 >/dev/null; " + connect +
                       "curl -sk -o /dev/null " + tls.url("/") + "; cat /etc/shadow >/dev/null 2>&1; "
                       "echo x > /usr/flightrec-replay-test 2>/dev/null; echo y > made.txt; true";
  struct Session {
    std::vector<std::string> options;
    std::string command;
    bool violations;  // the session must have some, or the check proves little
  };
  std::vector<Session> sessions = {
      {{"--policy", "agent", "--allow", "127.0.0.1:" + ap, "--allow", "127.0.0.1:" + std::to_string(tls.port),
        "--limit", "wall_time=10m", "--env", "LANG"}, script, true},
      {{"--policy", "agent", "--shadow"}, script, true},
      {{"--policy", "claude-code"}, script, true},
      {{"--policy", "codex"}, script, true},
      {{"--policy", "observe"}, script, false},
      {{"--policy", "strict"}, "", true},
      {{"--policy", dir.file("mine.yaml")}, script, true},  // extends team.yaml, which extends agent
  };
  std::ofstream(dir.file("team.yaml")) << "version: 1\nname: team\nextends: agent\nlimits: {pids: 200}\n";
  std::ofstream(dir.file("mine.yaml")) << "version: 1\nname: mine\nextends: team.yaml\nnetwork: {mode: allowlist, allow: [127.0.0.1:" + ap + "]}\n";
  for (size_t i = 0; i < sessions.size(); ++i) {
    const Session& s = sessions[i];
    std::string db = dir.file("s" + std::to_string(i) + ".db");
    std::vector<std::string> argv{FLIGHTREC_BIN, "run", "--db", db};
    argv.insert(argv.end(), s.options.begin(), s.options.end());
    argv.push_back("--");
    if (s.command.empty()) {
      // strict runs only the command's own file: a fork and a read outside its paths are refused.
      for (const char* a : {"/usr/bin/python3", "-c", "import os\ntry: os.fork()\nexcept OSError: pass\n"
                                                     "try: open('/etc/hostname').read()\nexcept OSError: pass\n"})
        argv.push_back(a);
    } else {
      for (const char* a : {"sh", "-c"}) argv.push_back(a);
      argv.push_back(s.command);
    }
    CAPTURE(s.options);
    Result r = run_in(work, argv);
    INFO(r.err);
    REQUIRE(r.code == 0);
    if (i == 6) {
      // The chain is in the record: changing a base afterwards changes nothing replayed as recorded.
      auto genesis = of_type(entries(db), "genesis").at(0);
      CHECK(genesis["policy_bases"] == nlohmann::json::array({dir.file("team.yaml"), "builtin:agent"}));
      CHECK(genesis["policy_base_texts"][0].get<std::string>().find("pids: 200") != std::string::npos);
      std::ofstream(dir.file("team.yaml")) << "version: 1\nname: team\nextends: strict\n";
    }
    Result q = flightrec({"replay", "--db", db, "--session", "1", "--json", "--limit", "1000"});
    INFO(q.out);
    INFO(q.err);
    REQUIRE(q.code == 0);
    auto j = nlohmann::json::parse(q.out);
    CHECK(j["new_only_count"] == 0);
    CHECK(j["recorded_only_count"] == 0);
    CHECK(j["would_deny"] == j["both_deny"]);
    if (s.violations) CHECK(j["both_deny"].get<int>() > 0);
    bool sandboxed = s.options[1] != "observe" && s.options.back() != "--shadow";
    CHECK((j["setup_entries"].get<int>() > 0) == sandboxed);
  }
  // The file chain as it is now (team.yaml changed since): another policy,
  // judged by its rules, not by the kernel's answers to the old one.
  Result now = flightrec({"replay", "--db", dir.file("s6.db"), "--session", "1", "--policy", dir.file("mine.yaml"), "--json"});
  REQUIRE(now.code == 0);
  CHECK(nlohmann::json::parse(now.out)["judged_by"] == "the policy's rules (shadow)");
  Result then = flightrec({"replay", "--db", dir.file("s6.db"), "--session", "1", "--json"});
  REQUIRE(then.code == 0);
  CHECK(nlohmann::json::parse(then.out)["judged_by"] == "the kernel's answers (it enforced this policy)");
  // Replayed against the named policy without the run's --allow: exactly the
  // connect that override allowed is new (and the TLS server's).
  Result q = flightrec({"replay", "--db", dir.file("s0.db"), "--session", "1", "--policy", "agent", "--json"});
  REQUIRE(q.code == 0);
  auto j = nlohmann::json::parse(q.out);
  CHECK(j["new_only_count"] == 2);
  for (const auto& row : j["new_only"]) CHECK(row["rule_id"] == "network.allow");
  // With the same overrides on replay's command line: nothing new.
  q = flightrec({"replay", "--db", dir.file("s0.db"), "--session", "1", "--policy", "agent", "--allow",
                 "127.0.0.1:" + ap, "--allow", "127.0.0.1:" + std::to_string(tls.port), "--json"});
  REQUIRE(q.code == 0);
  CHECK(nlohmann::json::parse(q.out)["new_only_count"] == 0);
  CHECK(flightrec({"replay", "--db", dir.file("s0.db"), "--session", "1", "--limit", "0"}).code == 2);
  CHECK(flightrec({"replay", "--db", dir.file("s0.db"), "--session", "1", "--limit", "memory=lots"}).code == 2);
}

TEST_CASE("hostile stored entries: nested without bound, or an index with terminal escapes") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("h.db");
  REQUIRE(flightrec({"run", "--policy", "observe", "--db", db, "--", "true"}).code == 0);
  auto stored = testsupport::stored_entries(db);
  REQUIRE(stored.size() > 5);
  // Entry 3's body nested 60000 deep: not canonical, so never parsed further.
  std::string deep = "{\"path\":" + std::string(60000, '[') + std::string(60000, ']') + "}";
  stored[2].body = deep;
  // Entry 4's type in the index rewrites the terminal line.
  stored[3].type = "\r\033[KOK:_1_session,_9_entries";  // no spaces: the block's type list is space-separated
  testsupport::store_entries(db, stored);
  Result q = flightrec({"query", "--db", db});
  CHECK(q.code == 0);
  CHECK(q.out.find("1:3 (not canonical JSON: run flightrec verify)") != std::string::npos);
  CHECK(q.out.find('\033') == std::string::npos);
  Result f = flightrec({"query", "--db", db, "--path", "/"});
  CHECK(f.code == 0);
  Result s = flightrec({"summary", "--db", db});
  CHECK(s.code == 0);
  Result v = flightrec({"verify", "--db", db});
  CHECK(v.code == 1);
  CHECK(v.out.find("FAIL: session 1 entry 3: ") == 0);
  // In a record with only the forged type, that is what verify names, escaped.
  TempDir again;
  std::string db2 = again.file("h2.db");
  REQUIRE(flightrec({"run", "--policy", "observe", "--db", db2, "--", "true"}).code == 0);
  auto fresh = testsupport::stored_entries(db2);
  fresh[3].type = "\r\033[KOK:_1_session,_9_entries";
  testsupport::store_entries(db2, fresh);
  v = flightrec({"verify", "--db", db2});
  CHECK(v.code == 1);
  CHECK(v.out.find("FAIL: session 1 entry 4: the record's index disagrees") == 0);
  CHECK(v.out.find('\033') == std::string::npos);
  CHECK(v.out.find('\r') == std::string::npos);
}

TEST_CASE("alerts on stderr: repeats folded with a count, probes at INFO; the record keeps every one") {
  REQUIRE(is_root());
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("a.db");
  fs::create_directories(work);
  std::string missing = "/root/.flightrec-probe-" + std::to_string(getpid());
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--db", db, "--", "sh", "-c",
                           "for i in $(seq 20); do cat /etc/shadow 2>/dev/null; done; cat " + missing +
                               " 2>/dev/null; true"});
  REQUIRE(r.code == 0);
  INFO(r.err);
  int shown = 0;
  std::istringstream lines(r.err);
  for (std::string l; std::getline(lines, l);)
    if (l.find("openat of hidden /etc/shadow") != std::string::npos) ++shown;
  CHECK(shown == 1);
  CHECK(r.err.find("flightrec: ALERT filesystem.hidden denied 19 more times (cat, /etc/shadow; every one is in the record)") !=
        std::string::npos);
  CHECK(r.err.find(missing) == std::string::npos);  // INFO: not on stderr
  int recorded = 0, probes = 0;
  for (const auto& e : entries(db)) {
    if (e["type"] != "violation") continue;
    std::string detail = e["detail"];
    if (detail.find("hidden /etc/shadow") != std::string::npos && e["level"] == "ALERT") ++recorded;
    if (detail.find(missing) != std::string::npos && e["level"] == "INFO") ++probes;
  }
  CHECK(recorded == 20);
  CHECK(probes >= 1);
}

namespace {

// DIR/NAME-1.0-py3-none-any.whl: a pure-Python wheel of one module, made
// here, so pip installs it inside a session without a network.
void write_wheel(const std::string& dir, const std::string& name) {
  REQUIRE(run({"python3", "-c",
               "import zipfile, hashlib, base64, sys\n"
               "n = sys.argv[2]\n"
               "files = {n + '/__init__.py': b'def hi():\\n    return 1\\n',\n"
               "  n + '-1.0.dist-info/METADATA': ('Metadata-Version: 2.1\\nName: %s\\nVersion: 1.0\\n' % n).encode(),\n"
               "  n + '-1.0.dist-info/WHEEL': b'Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n'}\n"
               "rec = ''.join('%s,sha256=%s,%d\\n' % (f, base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode(), len(d)) for f, d in files.items())\n"
               "with zipfile.ZipFile(sys.argv[1], 'w') as z:\n"
               "  [z.writestr(f, d) for f, d in files.items()]\n"
               "  z.writestr(n + '-1.0.dist-info/RECORD', rec + n + '-1.0.dist-info/RECORD,,\\n')\n",
               dir + "/" + name + "-1.0-py3-none-any.whl", name})
              .code == 0);
}

// Chromium, headless, as a reviewer's browser: the DOM after loading, or a screenshot.
Result chromium(const std::vector<std::string>& what, const std::string& page) {
  std::vector<std::string> argv = {"timeout", "120", "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                                   "--hide-scrollbars", "--enable-logging=stderr", "--v=0"};
  argv.insert(argv.end(), what.begin(), what.end());
  argv.push_back("file://" + page);
  return run(argv);
}

}  // namespace

TEST_CASE("report: a real agent session as one page, rendered by Chromium, every section right") {
  REQUIRE(is_root());
  REQUIRE_MESSAGE(run({"sh", "-c", "command -v chromium"}).code == 0, "chromium is not installed (tools/install-deps.sh)");
  TempDir dir;
  chmod(dir.path.c_str(), 0755);
  std::string work = dir.file("work"), db = dir.file("r.db"), page = dir.file("report.html"), keys = dir.file("keys");
  fs::create_directories(work);
  REQUIRE(flightrec({"keygen", "--out", keys}).code == 0);
  Listener refused;
  // A wheel built here, installed by pip inside the session without a network.
  write_wheel(work, "hello_fr");
  // An agent's session: git, python, pip from a local wheel, a denied curl, a secret read attempt.
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--key", keys, "--db", db, "--", "sh", "-c",
                           "git init -q repo && cd repo && echo 'print(1)' > main.py && git add main.py && "
                           "git -c user.email=a@b.c -c user.name=agent commit -qm init && cd .. && "
                           "python3 repo/main.py >/dev/null && "
                           "python3 -m pip install -q --no-index --target site ./hello_fr-1.0-py3-none-any.whl 2>/dev/null && "
                           "echo hi > out.txt; curl -s -m 2 http://127.0.0.1:" + std::to_string(refused.port) +
                               "/; cat /etc/shadow 2>/dev/null; true"});
  REQUIRE(r.code == 0);
  Result rep = flightrec({"report", "--db", db, "--session", "1", "--out", page, "--pubkey", keys + "/flightrec.pub"});
  INFO(rep.err);
  REQUIRE(rep.code == 0);
  chmod(page.c_str(), 0644);

  Result dom = chromium({"--dump-dom"}, page);
  REQUIRE(dom.code == 0);
  const std::string& d = dom.out;
  auto section = [&](const std::string& id) {
    auto at = d.find("id=\"" + id + "\"");
    REQUIRE_MESSAGE(at != std::string::npos, id);
    return d.substr(at, std::min<size_t>(d.size() - at, 20000));
  };
  CHECK(section("verdict").find("<b>Intact</b>") != std::string::npos);
  CHECK(section("verdict").find("(pinned)") != std::string::npos);
  CHECK(section("violation-list").find("network.allow") != std::string::npos);
  CHECK(section("violation-list").find("openat of hidden /etc/shadow") != std::string::npos);
  CHECK(section("process-tree").find("/usr/bin/cat</span>") == std::string::npos);  // escaped, not markup
  for (const char* command : {"git init -q repo", "git -c user.email=a@b.c -c user.name=agent commit -qm init",
                              "python3 repo/main.py", "python3 -m pip install -q --no-index --target site",
                              "curl -s -m 2 http://127.0.0.1:"})
    CHECK_MESSAGE(section("process-tree").find(command) != std::string::npos, command);
  for (const char* program : {"/usr/bin/git", "/usr/bin/curl", "/usr/bin/python3"})
    CHECK_MESSAGE(section("programs").find(program) != std::string::npos, program);
  auto files = section("edits");
  for (std::string path : {"out.txt", "repo/main.py", "site/hello_fr/__init__.py"})
    CHECK_MESSAGE(files.find(path + "</td>") != std::string::npos, path);
  CHECK(files.find("<td>created</td>") != std::string::npos);
  CHECK(files.find("- → ") != std::string::npos);  // created: no hash before
  CHECK(section("changes").find("repo/.git/ — git's own data") != std::string::npos);  // folded
  CHECK(section("connect-failed").find(std::to_string(refused.port)) != std::string::npos);
  CHECK(d.find("id=\"no-loss\"") != std::string::npos);
  CHECK(section("timeline-table").find("exec") != std::string::npos);
  // Nothing to fetch, nothing to run: no script at all, and the console is quiet.
  CHECK(d.find("<script") == std::string::npos);
  CHECK(dom.err.find("Uncaught") == std::string::npos);
  CHECK(dom.err.find(":CONSOLE") == std::string::npos);

  std::string png = dir.file("report.png");
  Result shot = chromium({"--window-size=1280,2000", "--screenshot=" + png}, page);
  REQUIRE(shot.code == 0);
  std::string image = slurp(png);
  REQUIRE(image.size() > 20000);
  CHECK(image.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);

  // A tampered record still gets a page, and the page says so first.
  auto stored = testsupport::stored_entries(db);
  auto& body = stored.at(3).body;
  body.replace(body.find("\"pid\":"), 6, "\"pid\":1");
  testsupport::store_entries(db, stored);
  REQUIRE(flightrec({"report", "--db", db, "--session", "1", "--out", page}).code == 0);
  std::string bad = slurp(page);
  auto verdict = bad.find("id=\"verdict\"");
  REQUIRE(verdict != std::string::npos);
  CHECK(bad.substr(verdict, 200).find("FAILED") != std::string::npos);
}

TEST_CASE("report: a session that builds a venv and edits two files shows those two edits first, the generated trees folded") {
  REQUIRE(is_root());
  REQUIRE_MESSAGE(run({"sh", "-c", "command -v chromium"}).code == 0, "chromium is not installed (tools/install-deps.sh)");
  TempDir dir;
  chmod(dir.path.c_str(), 0755);
  std::string work = dir.file("work"), db = dir.file("v.db"), page = dir.file("v.html");
  fs::create_directories(work);
  std::ofstream(work + "/app.py") << "print('v1')\n";
  std::ofstream(work + "/notes.md") << "# notes\n";
  write_wheel(work, "vdemo");
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--db", db, "--", "sh", "-c",
                           "python3 -m venv --without-pip env && "
                           "python3 -m pip install -q --no-index --target \"$(echo env/lib/python3*)/site-packages\" "
                           "./vdemo-1.0-py3-none-any.whl 2>/dev/null && "
                           "mkdir -p node_modules/left-pad && for i in $(seq 60); do echo $i > node_modules/left-pad/f$i.js; done && "
                           "echo \"print('v2')\" > app.py && echo '- venv built' >> notes.md"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  Result rep = flightrec({"report", "--db", db, "--session", "1", "--out", page});
  INFO(rep.err);
  REQUIRE(rep.code == 0);
  chmod(page.c_str(), 0644);
  Result dom = chromium({"--dump-dom"}, page);
  REQUIRE(dom.code == 0);
  const std::string& d = dom.out;
  auto at = [&](const std::string& text) {
    auto pos = d.find(text);
    CHECK_MESSAGE(pos != std::string::npos, text);
    return pos;
  };
  // The section comes right after the verdict, before everything else.
  CHECK(at("id=\"verdict\"") < at("id=\"changes\""));
  CHECK(at("id=\"changes\"") < at("id=\"overview\""));
  // The two edits are the first rows, the files that existed before first.
  size_t edits = at("id=\"edits\"");
  size_t row1 = d.find("<tr class=", edits), row2 = d.find("<tr class=", row1 + 1), row3 = d.find("<tr", row2 + 1);
  REQUIRE(row3 != std::string::npos);
  CHECK(d.substr(row1, row2 - row1).find("<td>modified</td><td class=\"mono\">app.py</td>") != std::string::npos);
  CHECK(d.substr(row2, row3 - row2).find("<td>modified</td><td class=\"mono\">notes.md</td>") != std::string::npos);
  // Nothing of the venv or node_modules among the edits; each folded into one row with its counts.
  std::string edit_list = d.substr(edits, d.find("<details", edits) - edits);
  CHECK(edit_list.find("site-packages") == std::string::npos);
  CHECK(edit_list.find("left-pad") == std::string::npos);
  CHECK(at("env/ — a Python virtual environment: ") > edits);
  CHECK(at("node_modules/ — npm packages: 62 created") > edits);  // the two directories and 60 files
  CHECK(d.find("<script") == std::string::npos);
}

TEST_CASE("report of a session of a million entries and thousands of programs stays within its bound") {
  // Their command lines are 3000 quotes each: six times that once escaped.
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("big.db"), page = dir.file("big.html");
  Result r = flightrec({"run", "--policy", "observe", "--db", db, "--", "sh", "-c",
                        std::string(BENCH_SYSCALLS_BIN) + " getppid 1000000; q=$(printf '%01000d' 0 | tr 0 '\"'); "
                        "i=0; while [ $i -lt 3500 ]; do /bin/true \"$q\" \"$q\" \"$q\"; i=$((i+1)); done"});
  REQUIRE(r.code == 0);
  Result rep = flightrec({"report", "--db", db, "--session", "1", "--out", page});
  INFO(rep.err);
  REQUIRE(rep.code == 0);
  auto size = fs::file_size(page);
  CHECK(size < (8u << 20));  // the bound --help states
  std::string html = slurp(page);
  CHECK(html.find("more timeline rows are not shown") != std::string::npos);
  CHECK(html.find("more processes are not shown") != std::string::npos);
  CHECK(html.find(">getppid<") == std::string::npos);  // plain syscalls are counted, not listed
}

TEST_CASE("a command pushed past argv's first 4096 bytes by padding is shown by query and in the report") {
  REQUIRE(is_root());
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("a.db"), html = dir.file("r.html");
  fs::create_directories(work);
  std::string padding(5000, ' ');
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--policy", "observe", "--db", db, "--", "sh", "-c",
                           padding + "echo hidden-after-padding > /dev/null", "x", "second-hidden-arg"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  Result q = flightrec({"query", "--db", db, "--type", "exec_argv"});
  REQUIRE(q.code == 0);
  CHECK(q.out.find("hidden-after-padding") != std::string::npos);
  CHECK(q.out.find("second-hidden-arg") != std::string::npos);
  Result rep = flightrec({"report", "--db", db, "--session", "1", "--out", html});
  INFO(rep.err);
  REQUIRE(rep.code == 0);
  std::string page = slurp(html);
  CHECK(page.find("hidden-after-padding") != std::string::npos);
}
