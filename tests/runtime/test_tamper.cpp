// A real recorded session, tampered with in SQLite: verify fails and names
// the right entry.
#include <doctest/doctest.h>

#include <filesystem>

#include "runtime/harness.h"

using namespace rt;

namespace {

std::string record(const TempDir& dir) {
  std::string db = dir.file("orig.db");
  Result r = flightrec({"run", "--policy", "observe", "--db", db, "--", "sh", "-c", "cat /etc/hostname; ls / >/dev/null"});
  REQUIRE(r.code == 0);
  REQUIRE(flightrec({"verify", "--db", db}).code == 0);
  return db;
}

std::string copy(const TempDir& dir, const std::string& db, const std::string& name) {
  std::string c = dir.file(name);
  // The source is closed and checkpointed: copying the main file is enough.
  std::filesystem::copy_file(db, c);
  return c;
}

std::string seq_of_open(const std::string& db, const std::string& path) {
  std::string out = sqlite(db, "SELECT seq FROM entries WHERE type='file_open' AND body LIKE '%\"path\":\"" +
                                   path + "\"%' LIMIT 1");
  REQUIRE(!out.empty());
  return out.substr(0, out.size() - 1);
}

}  // namespace

TEST_CASE("tampering with a recorded session is caught at the right entry") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = record(dir);
  std::string seq = seq_of_open(db, "/etc/hostname");

  SUBCASE("one field changed") {
    std::string c = copy(dir, db, "edit.db");
    sqlite(c, "UPDATE entries SET body=replace(body,'/etc/hostname','/etc/shadow') WHERE seq=" + seq);
    Result r = flightrec({"verify", "--db", c});
    CHECK(r.code == 1);
    CHECK(r.out.find("FAIL: session 1 entry " + seq + ":") == 0);
    CHECK(r.out.find("altered") != std::string::npos);
  }
  SUBCASE("one entry deleted") {
    std::string c = copy(dir, db, "delete.db");
    sqlite(c, "DELETE FROM entries WHERE seq=" + seq);
    Result r = flightrec({"verify", "--db", c});
    CHECK(r.code == 1);
    CHECK(r.out.find("FAIL: session 1 entry " + seq + ": entry is missing") == 0);
  }
  SUBCASE("two entries swapped") {
    std::string c = copy(dir, db, "swap.db");
    sqlite(c, "UPDATE entries SET id=-1 WHERE seq=" + seq + "; UPDATE entries SET id=(1<<40)+" + seq +
                  " WHERE seq=" + seq + "+1; UPDATE entries SET id=(1<<40)+" + seq + "+1 WHERE id=-1;");
    Result r = flightrec({"verify", "--db", c});
    CHECK(r.code == 1);
    CHECK(r.out.find("FAIL: session 1 entry " + seq + ":") == 0);
  }
  SUBCASE("the last entries cut off") {
    std::string c = copy(dir, db, "tail.db");
    std::string n = sqlite(c, "SELECT max(seq) FROM entries");
    n.pop_back();
    sqlite(c, "DELETE FROM entries WHERE seq>=" + n + "-2");  // seq is a generated column
    Result r = flightrec({"verify", "--db", c});
    CHECK(r.code == 1);
    // The end checkpoint still claims every entry.
    CHECK(r.out.find("FAIL: session 1 checkpoint at size " + n + ": it covers more entries than the record "
                     "holds") == 0);
  }
}
