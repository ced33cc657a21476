#pragma once
// The record on disk: one SQLite file (WAL) holding sessions and their
// hash-chained entries. This layer knows bytes and hashes, not syscalls.
#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ledger/hash.h"

namespace flightrec::ledger {

struct SessionRow {
  int64_t id = 0;
  std::string mode;      // "run" | "watch"
  std::string command;   // JSON array of strings
  std::string host;
  int64_t start_real_ns = 0;
  std::optional<int64_t> end_real_ns;   // unset: the session never ended cleanly
  std::optional<int64_t> exit_status;
  std::optional<int64_t> entry_count;
  std::optional<std::string> chain_head;  // hex
};

struct EntryRow {
  int64_t session = 0;
  int64_t seq = 0;
  std::string type;
  int64_t pid = 0;
  std::string body;      // canonical JSON
  std::string leaf;      // 32 raw bytes as stored
  std::string chain;     // 32 raw bytes as stored
};

struct CheckpointRow {
  int64_t tree_size = 0;
  std::string note;  // signed note text
};

struct EntryFilter {
  std::optional<int64_t> session;
};

class Store {
 public:
  enum class Mode { Read, Write };
  // Write mode creates the file and schema when new, and refuses any file
  // that is not SQLite or not a flightrec record, before changing a byte.
  Store(const std::string& path, Mode mode);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  int64_t begin_session(const SessionRow& s);
  void end_session(int64_t id, int64_t end_real_ns, int64_t exit_status, int64_t entry_count,
                   const std::string& chain_head_hex);

  void begin();   // transaction
  void commit();
  void rollback() noexcept;
  void insert_entry(const EntryRow& e);

  void insert_checkpoint(int64_t session, uint64_t tree_size, const std::string& note);
  std::vector<CheckpointRow> checkpoints(int64_t session);  // by tree size

  std::vector<SessionRow> sessions();
  // Every session id with entries, checkpoints or a session row.
  std::vector<int64_t> session_ids();
  // Entries in (session, seq) order; stops when fn returns false.
  void for_each_entry(const EntryFilter& filter, const std::function<bool(const EntryRow&)>& fn);

  const std::string& path() const { return path_; }
  sqlite3* handle() { return db_; }

 private:
  void exec(const char* sql);
  void check_or_create_schema();
  [[noreturn]] void fail(const std::string& what);

  std::string path_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
  sqlite3_stmt* insert_checkpoint_ = nullptr;
};

constexpr int kFormatVersion = 2;
// An entry's row id is session << kSeqBits | seq.
constexpr int kSeqBits = 40;
constexpr int64_t kMaxSeq = int64_t(1) << kSeqBits;
constexpr int64_t kMaxSessions = int64_t(1) << (62 - kSeqBits);

}  // namespace flightrec::ledger
