#pragma once
// Real files for unit tests: a temporary directory removed at the end, and
// SQL run straight on a record file (as someone editing it would).
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace unit {

// Built with AddressSanitizer (tools/sanitize.sh): its allocator and
// quarantine stand in for glibc's, so checks of malloc's own behaviour or
// of the process's RSS do not apply there.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAsan = true;
#else
inline constexpr bool kAsan = false;
#endif
#else
inline constexpr bool kAsan = false;
#endif

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/flightrec-unit-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const char* name) const { return (path / name).string(); }
};

inline void sql(const std::string& path, const std::string& statement) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, statement.c_str(), nullptr, nullptr, &err);
  INFO(statement << ": " << (err ? err : ""));
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

// The first column of the first row of a query, as an integer.
inline int64_t sql_int(const std::string& path, const std::string& query) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db, query.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  INFO(query);
  REQUIRE(v >= 0);
  return v;
}

}  // namespace unit
