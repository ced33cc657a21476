// The SQLite record with real files: writing, verifying, refusing files
// that are not ours, and catching edits.
#include <doctest/doctest.h>

#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/system.h"
#include "ledger/store.h"
#include "ledger/verify.h"
#include "ledger/writer.h"

using namespace flightrec;
using namespace flightrec::ledger;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/flightrec-unit-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

// A session of n entries written through the real writer.
void write_session(Store& store, int n, bool end = true) {
  SessionRow row;
  row.mode = "run";
  row.command = "[\"x\"]";
  row.host = "host";
  row.start_real_ns = 1;
  int64_t id = store.begin_session(row);
  SessionWriter w(store, id);
  for (int i = 0; i < n; ++i) {
    nlohmann::json j = {{"type", "syscall"}, {"seq", w.next_seq()}, {"session", id},
                        {"pid", 42},         {"nr", i}};
    w.append(j.dump(), "syscall", 42);
  }
  w.flush();
  if (end) store.end_session(id, 2, 0, w.count(), to_hex(w.head()));
}

void sql(const std::string& path, const std::string& statement) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, statement.c_str(), nullptr, nullptr, &err);
  INFO(statement << ": " << (err ? err : ""));
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

VerifyResult verify_file(const std::string& path) {
  Store s(path, Store::Mode::Read);
  return verify_store(s);
}

}  // namespace

TEST_CASE("a written session verifies") {
  TempDir dir;
  std::string db = dir.path / "r.db";
  {
    Store s(db, Store::Mode::Write);
    write_session(s, 50);
    write_session(s, 3);
  }
  auto r = verify_file(db);
  CHECK(r.ok);
  CHECK(r.sessions == 2);
  CHECK(r.entries == 53);
  CHECK(r.unterminated == 0);
}

TEST_CASE("edits, deletions, swaps and tail cuts are caught at the right entry") {
  TempDir dir;
  std::string db = dir.path / "r.db";
  {
    Store s(db, Store::Mode::Write);
    write_session(s, 20);
  }
  auto fresh = [&](const char* name) {
    std::string copy = dir.path / name;
    fs::copy_file(db, copy);
    return copy;
  };
  SUBCASE("field edited") {
    std::string c = fresh("edit.db");
    sql(c, "UPDATE entries SET body=replace(body,'\"pid\":42','\"pid\":43') WHERE seq=5");
    auto r = verify_file(c);
    CHECK_FALSE(r.ok);
    CHECK(r.bad_seq == 5);
    CHECK(r.reason.find("altered") != std::string::npos);
  }
  SUBCASE("entry deleted") {
    std::string c = fresh("del.db");
    sql(c, "DELETE FROM entries WHERE seq=7");
    auto r = verify_file(c);
    CHECK_FALSE(r.ok);
    CHECK(r.bad_seq == 7);
    CHECK(r.reason.find("missing") != std::string::npos);
  }
  SUBCASE("two entries swapped") {
    std::string c = fresh("swap.db");
    sql(c,
        "UPDATE entries SET id=-1 WHERE seq=3; UPDATE entries SET id=(1<<40)+3 WHERE seq=4;"
        "UPDATE entries SET id=(1<<40)+4 WHERE id=-1;");
    auto r = verify_file(c);
    CHECK_FALSE(r.ok);
    CHECK(r.bad_seq == 3);
  }
  SUBCASE("tail cut") {
    std::string c = fresh("tail.db");
    sql(c, "DELETE FROM entries WHERE seq>=18");
    auto r = verify_file(c);
    CHECK_FALSE(r.ok);
    CHECK(r.bad_seq == 18);
  }
  SUBCASE("edit with recomputed leaf still breaks the chain") {
    std::string c = fresh("releaf.db");
    {
      Store s(c, Store::Mode::Read);
      std::string body;
      EntryFilter f;
      s.for_each_entry(f, [&](const EntryRow& e) {
        if (e.seq == 9) body = e.body;
        return true;
      });
      auto j = nlohmann::json::parse(body);
      j["nr"] = 999;
      std::string forged = j.dump();
      std::string leaf = to_hex(leaf_hash(forged));
      sql(c, "UPDATE entries SET body='" + forged + "', leaf=x'" + leaf + "' WHERE seq=9");
    }
    auto r = verify_file(c);
    CHECK_FALSE(r.ok);
    CHECK(r.bad_seq == 9);
    CHECK(r.reason.find("chain") != std::string::npos);
  }
}

TEST_CASE("a session that never ended is reported, not failed") {
  TempDir dir;
  std::string db = dir.path / "r.db";
  {
    Store s(db, Store::Mode::Write);
    write_session(s, 4, false);
  }
  auto r = verify_file(db);
  CHECK(r.ok);
  CHECK(r.unterminated == 1);
}

TEST_CASE("files that are not flightrec records are refused and left untouched") {
  TempDir dir;
  std::string text = dir.path / "notes.txt";
  {
    std::ofstream(text) << "this is not a database, it is a text file of some length\n";
  }
  std::string before = read_file(text);
  CHECK_THROWS_WITH_AS(Store(text, Store::Mode::Write), doctest::Contains("not a SQLite database"),
                       Error);
  CHECK(read_file(text) == before);

  std::string other = dir.path / "other.db";
  sql(other, "CREATE TABLE t(x); INSERT INTO t VALUES (1);");
  std::string other_before = read_file(other);
  CHECK_THROWS_WITH_AS(Store(other, Store::Mode::Write), doctest::Contains("not a flightrec record"),
                       Error);
  CHECK(read_file(other) == other_before);

  CHECK_THROWS_AS(Store((dir.path / "no/such/dir/x.db").string(), Store::Mode::Write), Error);
  CHECK_THROWS_AS(Store((dir.path / "missing.db").string(), Store::Mode::Read), Error);
}
