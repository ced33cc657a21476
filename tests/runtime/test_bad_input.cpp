// Bad input gets one clear line on stderr and a nonzero exit, and never
// touches an existing record.
#include <doctest/doctest.h>

#include <fstream>

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
  for (const char* cmd : {"run", "watch", "query", "verify", "probe"}) {
    Result r = flightrec({cmd, "--help"});
    CHECK(r.code == 0);
    CHECK(r.out.find("usage: flightrec " + std::string(cmd)) != std::string::npos);
  }
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
  std::string before = sqlite(db, "SELECT count(*) FROM entries; SELECT count(*) FROM sessions;");
  Result r = flightrec({"run", "--policy", "observe", "--db", db, "--", "no-such-command-flightrec"});
  CHECK(r.code == 127);
  CHECK(r.err.find("command not found") != std::string::npos);
  CHECK(count_lines(r.err) == 1);
  CHECK(sqlite(db, "SELECT count(*) FROM entries; SELECT count(*) FROM sessions;") == before);
  CHECK(flightrec({"verify", "--db", db}).code == 0);

  std::string noexec = dir.file("not-executable");
  std::ofstream(noexec) << "#!/bin/sh\n";
  r = flightrec({"run", "--policy", "observe", "--db", db, "--", noexec});
  CHECK(r.code == 127);
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
