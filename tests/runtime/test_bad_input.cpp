// Bad input gets one clear line on stderr and a nonzero exit, and never
// touches an existing record.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

#include <unistd.h>

#include <fstream>
#include <vector>

#include "runtime/harness.h"

using namespace rt;

TEST_CASE("usage errors exit 2 with one line") {
  Result r = flightrec({"run", "--policy", "observe", "--db", "/tmp/x.db"});
  CHECK(r.code == 2);
  CHECK(r.err.find("missing command") != std::string::npos);
  CHECK(count_lines(r.err) == 1);

  r = flightrec({"run", "--policy", "observe", "--bogus", "--db", "/tmp/x.db", "--", "true"});
  CHECK(r.code == 2);
  CHECK(r.err.find("bogus") != std::string::npos);
  CHECK(count_lines(r.err) == 1);

  r = flightrec({"run", "--policy", "observe", "--", "true"});
  CHECK(r.code == 2);
  CHECK(r.err.find("--db") != std::string::npos);

  r = flightrec({"run", "--policy", "observe", "--db", "/tmp/x.db", "--ring-size", "3M", "--", "true"});
  CHECK(r.code == 2);
  CHECK(r.err.find("power of two") != std::string::npos);

  r = flightrec({"verify"});
  CHECK(r.code == 2);
  r = flightrec({"frobnicate"});
  CHECK(r.code == 2);
  CHECK(r.err.find("unknown command") != std::string::npos);
}

TEST_CASE("--help explains each command") {
  // Every command `flightrec --help` lists, so a new one is held to it too.
  Result top = flightrec({"--help"});
  REQUIRE(top.code == 0);
  std::istringstream lines(top.out);
  std::vector<std::string> commands;
  bool in_list = false;
  for (std::string line; std::getline(lines, line);) {
    if (line == "commands:") in_list = true;
    else if (in_list && line.rfind("  ", 0) == 0) commands.push_back(line.substr(2, line.find(' ', 2) - 2));
    else if (in_list) break;
  }
  REQUIRE(commands.size() >= 20);
  for (const auto& cmd : commands) {
    INFO(cmd);
    Result r = flightrec({cmd, "--help"});
    CHECK(r.code == 0);
    CHECK(r.out.find("usage: flightrec " + cmd) != std::string::npos);
    // What it does, not only its options: a paragraph before them.
    size_t options = r.out.find("\noptions:");
    CHECK(std::count(r.out.begin(), r.out.begin() + long(std::min(options, r.out.size())), '\n') >= 3);
  }
  Result d = run({FLIGHTRECD_BIN, "--help"});
  CHECK(d.code == 0);
  CHECK(d.out.find("Usage: flightrecd") != std::string::npos);
}

TEST_CASE("a database that cannot be written or is not a record is refused untouched") {
  REQUIRE(is_root());
  TempDir dir;
  Result r = flightrec({"run", "--policy", "observe", "--db", dir.file("no/such/dir/s.db"), "--", "true"});
  CHECK(r.code == 125);
  CHECK(r.err.find("cannot open database") != std::string::npos);
  CHECK(count_lines(r.err) == 1);

  std::string text = dir.file("notes.txt");
  std::ofstream(text) << "my notes, not a database\n";
  r = flightrec({"run", "--policy", "observe", "--db", text, "--", "true"});
  CHECK(r.code == 125);
  CHECK(r.err.find("not a SQLite database") != std::string::npos);
  CHECK(slurp(text) == "my notes, not a database\n");

  r = flightrec({"verify", "--db", text});
  CHECK(r.code == 1);
  CHECK(r.err.find("not a SQLite database") != std::string::npos);
}

TEST_CASE("a command that does not exist fails before touching the record") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("s.db");
  REQUIRE(flightrec({"run", "--policy", "observe", "--db", db, "--", "true"}).code == 0);
  std::string before = sqlite(db, "SELECT sum(count) FROM blocks; SELECT count(*) FROM sessions;");
  Result r = flightrec({"run", "--policy", "observe", "--db", db, "--", "no-such-command-flightrec"});
  CHECK(r.code == 127);
  CHECK(r.err.find("command not found") != std::string::npos);
  CHECK(count_lines(r.err) == 1);
  CHECK(sqlite(db, "SELECT sum(count) FROM blocks; SELECT count(*) FROM sessions;") == before);
  CHECK(flightrec({"verify", "--db", db}).code == 0);

  // A file that exists but may not be executed: 126, as a shell says.
  std::string noexec = dir.file("not-executable");
  std::ofstream(noexec) << "#!/bin/sh\n";
  r = flightrec({"run", "--policy", "observe", "--db", db, "--", noexec});
  CHECK(r.code == 126);
  CHECK(r.err == "flightrec: not executable (no execute permission): " + noexec + "\n");
  CHECK(sqlite(db, "SELECT sum(count) FROM blocks; SELECT count(*) FROM sessions;") == before);
}

TEST_CASE("a command in the host's /tmp, which the sandbox cannot see, is refused with what to do instead") {
  REQUIRE(is_root());
  TempDir dir, elsewhere;
  std::string tool = dir.file("mytool"), db = elsewhere.file("s.db");
  REQUIRE(run({"cp", "/bin/true", tool}).code == 0);
  // From another directory: the sandbox's /tmp is its own.
  Result r = run_in(elsewhere.path.string(), {FLIGHTREC_BIN, "run", "--db", db, "--", tool});
  CHECK(r.code == 127);
  CHECK(r.err.find(tool + " is in the host's /tmp, which the sandbox does not see") != std::string::npos);
  CHECK(r.err.find("run flightrec from the directory that holds it") != std::string::npos);
  CHECK(access(db.c_str(), F_OK) != 0);
  // From the directory that holds it, it is the work directory: it runs.
  r = run_in(dir.path.string(), {FLIGHTREC_BIN, "run", "--db", db, "--", "./mytool"});
  INFO(r.err);
  CHECK(r.code == 0);
}

TEST_CASE("values that cannot take effect are usage errors, never wrapped, ignored or guessed") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("s.db");
  auto run_with = [&](std::vector<std::string> opts) {
    std::vector<std::string> args = {"run", "--db", db};
    args.insert(args.end(), opts.begin(), opts.end());
    args.insert(args.end(), {"--", "true"});
    return flightrec(args);
  };
  struct Case {
    std::vector<std::string> opts;
    std::string says;
  } cases[] = {
      {{"--checkpoint-ms", "-1"}, "--checkpoint-ms takes a non-negative whole number, not '-1'"},
      {{"--checkpoint-entries", "99999999999999999999999"}, "--checkpoint-entries: '99999999999999999999999' is too large"},
      {{"--limit", "open_files=0"}, "--limit: limits.open_files: must be at least 1"},
      {{"--limit", "memory=99999999999999999999T"}, "--limit: limits.memory: '99999999999999999999T' is too large"},
      {{"--limit", "memory=lots"}, "--limit: limits.memory: 'lots' is not a size like 512M or 2G"},
      {{"--ring-size", "99999999999999999999999"}, "--ring-size: '99999999999999999999999' is too large"},
  };
  for (const auto& c : cases) {
    Result r = run_with(c.opts);
    INFO(c.opts[0] << " " << c.opts[1] << ": " << r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find(c.says) != std::string::npos);
    CHECK(count_lines(r.err) == 1);
  }
  // What is neither an address nor a host name in a policy file: an error
  // naming the file and line, as --allow on the command line is. (A name
  // is not resolved at load: the session's resolver admits its answers.)
  std::string policy = dir.file("p.yaml");
  for (const char* bad : {"no_such host:443", "a.*.example.com:443", "*.:443", "x..example.com:443"}) {
    std::ofstream(policy) << "version: 1\nname: p\nnetwork:\n  mode: allowlist\n  allow:\n    - \"" << bad << "\"\n";
    Result r = run_with({"--policy", policy});
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find(policy + ":6: network.allow: '" + std::string(bad) + "'") != std::string::npos);
    CHECK(count_lines(r.err) == 1);
    CHECK(access(db.c_str(), F_OK) != 0);  // nothing recorded
  }
  // An entry type that does not exist (a typo) is not an empty answer.
  REQUIRE(flightrec({"run", "--policy", "observe", "--db", db, "--", "true"}).code == 0);
  Result q = flightrec({"query", "--db", db, "--type", "violaton"});
  CHECK(q.code == 2);
  CHECK(q.err.find("--type violaton: no such entry type") != std::string::npos);
}

TEST_CASE("not root: one sentence saying so") {
  REQUIRE(is_root());
  TempDir dir;
  Result r = run({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", FLIGHTREC_BIN,
                  "run", "--policy", "observe", "--db", "/tmp/flightrec-nonroot.db", "--", "true"});
  CHECK(r.code == 125);
  CHECK(r.err.find("must run as root") != std::string::npos);
  CHECK(count_lines(r.err) == 1);
}

TEST_CASE("watch refuses cgroup paths that are missing or not cgroup v2") {
  REQUIRE(is_root());
  TempDir dir;
  Result r = flightrec({"watch", "--cgroup", "/sys/fs/cgroup/unified/no-such-cgroup", "--db",
                        dir.file("w.db"), "--duration", "1"});
  CHECK(r.code == 1);
  CHECK(r.err.find("cannot open cgroup") != std::string::npos);
  CHECK(count_lines(r.err) == 1);
  r = flightrec({"watch", "--cgroup", "/tmp", "--db", dir.file("w.db"), "--duration", "1"});
  CHECK(r.code == 1);
  CHECK(r.err.find("not a cgroup v2 directory") != std::string::npos);
}
