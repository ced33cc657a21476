// A real recorded session, tampered with in SQLite: verify fails and names
// the right entry.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>

#include "runtime/harness.h"
#include "support/record_edit.h"

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

int64_t seq_of_open(const std::string& db, const std::string& path) {
  for (const auto& e : testsupport::stored_entries(db))
    if (e.type == "file_open" && e.body.find("\"path\":\"" + path + "\"") != std::string::npos) return e.seq;
  FAIL("no file_open of " << path);
  return 0;
}

// Edits the stored entries of the record, no hash recomputed.
void edit(const std::string& db, const std::function<void(std::vector<testsupport::StoredEntry>&)>& fn) {
  auto es = testsupport::stored_entries(db);
  fn(es);
  testsupport::store_entries(db, es);
}

}  // namespace

TEST_CASE("tampering with a recorded session is caught at the right entry") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = record(dir);
  int64_t n_open = seq_of_open(db, "/etc/hostname");
  std::string seq = std::to_string(n_open);

  SUBCASE("one field changed") {
    std::string c = copy(dir, db, "edit.db");
    edit(c, [&](auto& es) {
      auto& body = es.at(size_t(n_open - 1)).body;
      body.replace(body.find("/etc/hostname"), 13, "/etc/shadow");
    });
    Result r = flightrec({"verify", "--db", c});
    CHECK(r.code == 1);
    CHECK(r.out.find("FAIL: session 1 entry " + seq + ":") == 0);
    CHECK(r.out.find("altered") != std::string::npos);
  }
  SUBCASE("one entry deleted") {
    std::string c = copy(dir, db, "delete.db");
    edit(c, [&](auto& es) { es.erase(es.begin() + (n_open - 1)); });
    Result r = flightrec({"verify", "--db", c});
    CHECK(r.code == 1);
    CHECK(r.out.find("FAIL: session 1 entry " + seq + ": entry is missing") == 0);
  }
  SUBCASE("two entries swapped") {
    std::string c = copy(dir, db, "swap.db");
    edit(c, [&](auto& es) {
      std::swap(es.at(size_t(n_open - 1)).body, es.at(size_t(n_open)).body);
      std::swap(es.at(size_t(n_open - 1)).leaf, es.at(size_t(n_open)).leaf);
    });
    Result r = flightrec({"verify", "--db", c});
    CHECK(r.code == 1);
    CHECK(r.out.find("FAIL: session 1 entry " + seq + ":") == 0);
  }
  SUBCASE("the last entries cut off") {
    std::string c = copy(dir, db, "tail.db");
    std::string n;
    edit(c, [&](auto& es) {
      n = std::to_string(es.back().seq);
      es.resize(es.size() - 3);
    });
    Result r = flightrec({"verify", "--db", c});
    CHECK(r.code == 1);
    // The end checkpoint still claims every entry.
    CHECK(r.out.find("FAIL: session 1 checkpoint at size " + n + ": it covers more entries than the record "
                     "holds") == 0);
  }
}
