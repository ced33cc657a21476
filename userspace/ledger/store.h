#pragma once
// The record on disk: one SQLite file (WAL) holding sessions and their
// hash-chained entries. This layer knows bytes and hashes, not syscalls.
#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ledger/block.h"
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

// One entry as read back. type and pid are the store's index, not the
// entry's own (trusted) members.
// A block's index (format 3), shared by the entries of the block.
struct BlockIndex {
  int64_t first_seq = 0;
  std::string types;  // distinct types, sorted, space-separated
  uint64_t pid_bits = 0;
  int64_t ts_min = 0, ts_max = 0;
  std::optional<std::string> path_bits;  // none: written without a path index
};

struct EntryRow {
  int64_t session = 0;
  int64_t seq = 0;
  std::string type;
  int64_t pid = 0;
  std::string body;      // canonical JSON
  std::string leaf;      // the start of its leaf hash as stored (format 2: all 32 bytes)
  std::string chain;     // the chain value after it as stored (32 raw bytes), or empty
  const BlockIndex* block = nullptr;  // its block's index (format 2: none); valid during the callback
};

struct CheckpointRow {
  int64_t tree_size = 0;
  std::string note;  // signed note text
};

// What a reader wants. The store may skip blocks (and entries) whose index
// says they cannot match; callers still check each entry's own body.
struct EntryFilter {
  std::optional<int64_t> session;
  std::vector<std::string> types;  // any of these (empty: all)
  std::optional<int64_t> pid;
  std::optional<int64_t> since_ns, until_ns;  // ts_real_ns within (entries without one never match)
  std::optional<std::string> path;            // names this path or one under it (policy::path_under)
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

  // Caps SQLite's page cache of this connection (write mode keeps 8 MiB
  // hot for one fast session; a daemon with thousands of files cannot).
  void limit_cache(int kib);
  // Gives back the page cache's unused pages (the OS keeps the file's).
  void release_memory();

  int64_t begin_session(const SessionRow& s);
  void end_session(int64_t id, int64_t end_real_ns, int64_t exit_status, int64_t entry_count,
                   const std::string& chain_head_hex);

  void begin();   // transaction
  void commit();
  void rollback() noexcept;
  void insert_block(const BlockRow& b);

  void insert_checkpoint(int64_t session, uint64_t tree_size, const std::string& note);
  std::vector<CheckpointRow> checkpoints(int64_t session);  // by tree size

  std::vector<SessionRow> sessions();
  // Every session id with entries, checkpoints or a session row.
  std::vector<int64_t> session_ids();
  // How many entries the index says are stored (for progress; the
  // index is not evidence).
  int64_t stored_entries(std::optional<int64_t> session);
  // Entries in (session, seq) order; stops when fn returns false.
  void for_each_entry(const EntryFilter& filter, const std::function<bool(const EntryRow&)>& fn);

  const std::string& path() const { return path_; }
  int format_version() const { return version_; }
  sqlite3* handle() { return db_; }

 private:
  void open(const std::string& name, int flags);
  void reopen_immutable();
  void exec(const char* sql);
  void check_or_create_schema();
  void check_schema_objects();  // only tables and indexes flightrec makes (throws Error)
  int64_t page_count();  // of the main file; -1 if it cannot be read (not SQLite)
  [[noreturn]] void fail(const std::string& what);
  void for_each_block_entry(const EntryFilter& filter, const std::function<bool(const EntryRow&)>& fn);
  void for_each_v2_entry(const EntryFilter& filter, const std::function<bool(const EntryRow&)>& fn);

  // Folds the write-ahead log into the file on a thread of its own.
  class Checkpointer;
  static int on_wal_commit(void* store, sqlite3* db, const char* name, int pages);

  std::string path_;
  Mode mode_;
  sqlite3* db_ = nullptr;
  std::unique_ptr<Checkpointer> checkpointer_;  // made when the log first grows large
  int version_ = 0;
  bool path_bits_column_ = false;  // blocks.path_bits exists (not in records of earlier builds)
  sqlite3_stmt* insert_ = nullptr;
  sqlite3_stmt* insert_checkpoint_ = nullptr;
};

constexpr int kFormatVersion = 3;
// Format 2 (one row per entry) is still read; nothing is appended to it.
constexpr int kOldestReadableVersion = 2;
// A block's row id is session << kSeqBits | the seq of its first entry.
constexpr int kSeqBits = 40;
constexpr int64_t kMaxSeq = int64_t(1) << kSeqBits;
constexpr int64_t kMaxSessions = int64_t(1) << (62 - kSeqBits);

}  // namespace flightrec::ledger
