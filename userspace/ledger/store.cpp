#include "ledger/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cctype>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "common/error.h"
#include "common/text.h"
#include "ledger/path_index.h"

namespace flightrec::ledger {
namespace {

struct Stmt {
  sqlite3_stmt* s = nullptr;
  Stmt(sqlite3* db, const std::string& sql) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
      throw Error(std::string("database error: ") + sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(s); }
  std::optional<int64_t> opt_int(int col) {
    if (sqlite3_column_type(s, col) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_int64(s, col);
  }
  std::string text(int col) {
    auto p = reinterpret_cast<const char*>(sqlite3_column_blob(s, col));
    return p ? std::string(p, sqlite3_column_bytes(s, col)) : std::string();
  }
};

const char* kSchema = R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('format', 'flightrec-record'), ('format_version', '3');
CREATE TABLE sessions(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  mode TEXT NOT NULL,
  command TEXT NOT NULL,
  host TEXT NOT NULL,
  start_real_ns INTEGER NOT NULL,
  end_real_ns INTEGER,
  exit_status INTEGER,
  entry_count INTEGER,
  chain_head TEXT);
CREATE TABLE blocks(
  id INTEGER PRIMARY KEY,  -- session << 40 | seq of its first entry
  count INTEGER NOT NULL,
  types TEXT NOT NULL,
  pid_bits INTEGER NOT NULL,
  ts_min INTEGER NOT NULL,
  ts_max INTEGER NOT NULL,
  chain BLOB NOT NULL,
  data BLOB NOT NULL,
  session INTEGER GENERATED ALWAYS AS (id >> 40) VIRTUAL,
  first_seq INTEGER GENERATED ALWAYS AS (id & 1099511627775) VIRTUAL,
  path_bits BLOB);
CREATE TABLE checkpoints(
  session INTEGER NOT NULL,
  tree_size INTEGER NOT NULL,
  note TEXT NOT NULL,
  PRIMARY KEY(session, tree_size));
)sql";

}  // namespace

namespace {

// A path as an SQLite URI (https://sqlite.org/uri.html): everything but
// unreserved characters and '/' percent-encoded, so '?', '#' and '%' in a
// file name stay part of the name.
std::string file_uri(const std::string& path) {
  static const char hex[] = "0123456789ABCDEF";
  std::string uri = "file:";
  for (unsigned char c : std::filesystem::absolute(path).string()) {
    if (isalnum(c) || c == '/' || c == '-' || c == '.' || c == '_' || c == '~') {
      uri += char(c);
    } else {
      uri += '%';
      uri += hex[c >> 4];
      uri += hex[c & 15];
    }
  }
  return uri;
}

}  // namespace

// A commit never waits for a checkpoint. SQLite's own runs inside the
// commit that crosses wal_autocheckpoint: at 64 MiB of log it took ~0.3 s,
// the recorder's writer stopped, and the ring buffer behind it overflowed
// (a loss at 700k entries/s that CPU alone did not explain). Here a thread
// with a connection of its own copies the log into the file (PASSIVE:
// beside the writer, never blocking it) once the log passes kWakePages.
// The log restarts only when a checkpoint has caught up with it, which a
// sustained stream of commits may not allow: past kInlinePages the commit
// checkpoints itself, by then mostly copied already.
class Store::Checkpointer {
 public:
  static constexpr int kWakePages = 4096;     // 16 MiB of log
  static constexpr int kInlinePages = 32768;  // 128 MiB

  explicit Checkpointer(const std::string& path) : path_(path), thread_([this] { run(); }) {}
  ~Checkpointer() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void wake() {
    {
      std::lock_guard lock(mu_);
      due_ = true;
    }
    cv_.notify_one();
  }

 private:
  void run() {
    sqlite3* db = nullptr;
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return due_ || stop_; });
      if (stop_) break;
      due_ = false;
      lock.unlock();
      // (A connection learns that the file is in WAL mode from its first read.)
      if (!db && (sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK ||
                  sqlite3_exec(db, "SELECT 1 FROM sqlite_schema LIMIT 1", nullptr, nullptr, nullptr) != SQLITE_OK)) {
        sqlite3_close(db);  // the commits' inline checkpoints bound the log instead
        db = nullptr;
      }
      if (db) sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      lock.lock();
    }
    lock.unlock();
    sqlite3_close(db);  // before the writer's: the last connection to close removes the log
  }

  std::string path_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool due_ = false, stop_ = false;
  std::thread thread_;
};

int Store::on_wal_commit(void* self, sqlite3* db, const char*, int pages) {
  auto* store = static_cast<Store*>(self);
  if (pages >= Checkpointer::kInlinePages) {
    sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  } else if (pages >= Checkpointer::kWakePages) {
    try {
      // (SQLite's own full name of the file: the working directory may have changed.)
      if (!store->checkpointer_) store->checkpointer_ = std::make_unique<Checkpointer>(sqlite3_db_filename(db, "main"));
      store->checkpointer_->wake();
    } catch (...) {
      // No thread to be had: the inline checkpoint bounds the log.
    }
  }
  return SQLITE_OK;
}

void Store::open(const std::string& name, int flags) {
  // Page caches start empty instead of with 20 pages each (before SQLite
  // initializes; later it is refused, harmlessly): a daemon holds hundreds.
  static const int lean_caches = sqlite3_config(SQLITE_CONFIG_PAGECACHE, nullptr, 0, 0);
  (void)lean_caches;
  if (sqlite3_open_v2(name.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error("cannot open database " + path_ + ": " + msg);
  }
  sqlite3_busy_timeout(db_, 5000);
  // No lookaside slab (~18 KB resident per connection): a daemon holds a
  // connection per session, and the recorder's statements are few.
  if (flags & SQLITE_OPEN_READWRITE) sqlite3_db_config(db_, SQLITE_DBCONFIG_LOOKASIDE, nullptr, 0, 0);
}

Store::Store(const std::string& path, Mode mode) : path_(path), mode_(mode) {
  if (mode == Mode::Read) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) throw Error(errno_message("cannot open " + path, errno));
  }
  if (mode == Mode::Write) {
    // A new record is its owner's alone (TLS bodies, command lines): made
    // 0600 before SQLite opens it, whose -wal and -shm take its mode.
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
  }
  open(path, mode == Mode::Read ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  try {
    // A new record is made in WAL mode from the start: its schema then goes
    // to the log, without a rollback journal and its 4 fsyncs (~1 ms on a
    // short run's path). A file with anything in it is not touched before
    // it is known to be a record (asked of the file opened, not its path).
    if (mode == Mode::Write && page_count() == 0) {
      exec("PRAGMA journal_mode=WAL");
      exec("PRAGMA synchronous=NORMAL");
    }
    try {
      check_or_create_schema();
    } catch (const Error&) {
      // Only what a missing -shm causes: a locked, busy or foreign file is
      // reported as it is.
      int code = sqlite3_errcode(db_);
      if (mode != Mode::Read || (code != SQLITE_CANTOPEN && code != SQLITE_READONLY)) throw;
      reopen_immutable();
      check_or_create_schema();
    }
    if (mode == Mode::Write) {
      // WAL: readers (query, verify) never block the recorder. NORMAL: a
      // commit is durable once the WAL is checkpointed; a crash of the
      // process loses nothing committed, a power loss the last commits.
      exec("PRAGMA journal_mode=WAL");
      exec("PRAGMA synchronous=NORMAL");
      // Appends at 100k+ entries/s: keep the B-tree pages hot; the log is
      // folded back beside the commits, not in them (Checkpointer).
      exec("PRAGMA cache_size=-8192");
      sqlite3_wal_hook(db_, &Store::on_wal_commit, this);  // (in place of wal_autocheckpoint)
    }
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

// A record in WAL mode can only be read by someone who may open (or
// create) its -shm file beside it: an auditor without write permission,
// or read-only media, cannot. When the record has no write-ahead log with
// content (it was closed, or never crashed), its main file is the whole
// record and is read as immutable. A log with content holds committed
// entries the main file lacks: reading without it would show a partial
// record as if whole, so that is refused, saying why.
void Store::reopen_immutable() {
  // SQLite keeps the log beside the file a symlink points to.
  std::error_code ec;
  std::string real = std::filesystem::canonical(path_, ec).string();
  if (ec) real = path_;
  auto wal_size = std::filesystem::file_size(real + "-wal", ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw Error("cannot read " + path_ + ": cannot tell whether its write-ahead log " + real + "-wal holds entries: " +
                ec.message());
  if (!ec && wal_size > 0)
    throw Error("cannot read " + path_ + ": its write-ahead log " + path_ +
                "-wal holds entries not yet in the main file, and this user cannot open the log's index (" + path_ +
                "-shm; the recorder is running, or crashed). Read it as its owner, or copy the record with the "
                "files beside it (-wal, -shm) to a writable place and read the copy");
  sqlite3_close(db_);
  db_ = nullptr;
  open(file_uri(real) + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
}

Store::~Store() {
  checkpointer_.reset();
  sqlite3_finalize(insert_);
  sqlite3_finalize(insert_checkpoint_);
  if (db_) sqlite3_close(db_);
}

void Store::fail(const std::string& what) {
  throw Error(path_ + ": " + what + ": " + sqlite3_errmsg(db_));
}

void Store::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw Error(path_ + ": database error: " + msg);
  }
}

int64_t Store::page_count() {
  sqlite3_stmt* raw = nullptr;
  int64_t pages = -1;
  if (sqlite3_prepare_v2(db_, "PRAGMA page_count", -1, &raw, nullptr) == SQLITE_OK && sqlite3_step(raw) == SQLITE_ROW)
    pages = sqlite3_column_int64(raw, 0);
  sqlite3_finalize(raw);
  return pages;
}

void Store::check_schema_objects() {
  // A record file is anyone's to edit: a view, trigger, virtual table or
  // generated column of theirs would run inside every reader's query (a
  // recursive view hangs it for ever). Only what flightrec makes is read.
  static const std::set<std::string> tables = {"meta", "sessions", "blocks", "checkpoints", "entries", "sqlite_sequence", "sqlite_stat1"};
  Stmt s(db_, "SELECT type, name, coalesce(sql, '') FROM sqlite_master");
  std::vector<std::pair<std::string, std::string>> made;  // (table, its CREATE statement)
  std::string foreign;
  bool meta = false;
  while (sqlite3_step(s.s) == SQLITE_ROW) {
    std::string type = s.text(0), name = s.text(1), sql = s.text(2);
    std::string upper = sql.substr(0, 32);
    for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
    bool ours = (type == "table" && tables.count(name) && !upper.starts_with("CREATE VIRTUAL")) ||
                (type == "index" && name.starts_with("sqlite_autoindex_") && sql.empty());
    if (!ours && foreign.empty()) foreign = "a " + printable(type) + " named " + printable(name);
    if (type == "table") made.emplace_back(name, sql);
    meta = meta || (type == "table" && name == "meta");
  }
  if (!meta) throw Error(path_ + " is a SQLite database but not a flightrec record; refusing to use it");
  if (!foreign.empty())
    throw Error(path_ + " holds " + foreign +
                " that flightrec does not make; refusing to read it (an edited record: its queries could run anything)");
  // Generated columns are computed as they are read: flightrec's two, and
  // only those (a session and a seq cut from the row id).
  for (auto& [name, sql] : made) {
    Stmt g(db_, "SELECT count(*) FROM pragma_table_xinfo(?1) WHERE hidden IN (2, 3)");
    sqlite3_bind_text(g.s, 1, name.c_str(), -1, SQLITE_TRANSIENT);
    int64_t generated = sqlite3_step(g.s) == SQLITE_ROW ? sqlite3_column_int64(g.s, 0) : -1;
    int64_t known = 0;
    for (std::string_view ours : {"GENERATED ALWAYS AS (id >> 40) VIRTUAL", "GENERATED ALWAYS AS (id & 1099511627775) VIRTUAL"})
      for (size_t at; (at = sql.find(ours)) != std::string::npos; ++known) sql.erase(at, ours.size());
    std::string upper = sql;
    for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
    bool other = upper.find("GENERATED") != std::string::npos || upper.find(" AS ") != std::string::npos ||
                 upper.find(" AS(") != std::string::npos;
    if (generated != known || other)
      throw Error(path_ + ": table " + name + " has columns flightrec does not make (computed as they are read); refusing to read it");
  }
}

void Store::check_or_create_schema() {
  // Reading sqlite_master is the first access to the file: a file that is
  // not SQLite fails here, before anything is written.
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT count(*) FROM sqlite_master", -1, &raw, nullptr) != SQLITE_OK ||
      sqlite3_step(raw) != SQLITE_ROW) {
    int code = sqlite3_errcode(db_);
    sqlite3_finalize(raw);
    if (code == SQLITE_NOTADB) throw Error(path_ + " is not a SQLite database");
    fail("cannot read database");
  }
  int64_t objects = sqlite3_column_int64(raw, 0);
  sqlite3_finalize(raw);
  if (objects == 0) {
    if (sqlite3_db_readonly(db_, "main") == 1)
      throw Error(path_ + " is empty: not a flightrec record");
    exec("BEGIN IMMEDIATE");
    try {
      exec(kSchema);
      exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    version_ = kFormatVersion;
    path_bits_column_ = true;
    return;
  }
  check_schema_objects();  // before any query of its tables: one of them could be a view of anything
  std::optional<std::string> format, version;
  try {
    Stmt s(db_, "SELECT key, value FROM meta");
    while (sqlite3_step(s.s) == SQLITE_ROW) {
      if (s.text(0) == "format") format = s.text(1);
      if (s.text(0) == "format_version") version = s.text(1);
    }
  } catch (const Error&) {  // no meta table: format stays empty, and the check below refuses the file
  }
  if (format != "flightrec-record")
    throw Error(path_ + " is a SQLite database but not a flightrec record; refusing to use it");
  for (int v = kOldestReadableVersion; v <= kFormatVersion; ++v)
    if (version == std::to_string(v)) version_ = v;
  if (!version_)
    throw Error(path_ + " has record format version " + version.value_or("?") + ", this flightrec reads versions " +
                std::to_string(kOldestReadableVersion) + " to " + std::to_string(kFormatVersion));
  if (version_ != kFormatVersion && mode_ == Mode::Write)
    throw Error(path_ + " has record format version " + *version + " (an older flightrec); this flightrec reads it "
                "but appends only to version " + std::to_string(kFormatVersion) + ": record into a new file");
  if (version_ == 2) return;
  // Records of builds before the path index have no path_bits column:
  // read without it (no block is skipped by path), and given it before
  // blocks are appended (their older blocks keep NULL: no index).
  auto has_column = [&] {
    sqlite3_stmt* probe = nullptr;
    bool has = sqlite3_prepare_v2(db_, "SELECT path_bits FROM blocks LIMIT 0", -1, &probe, nullptr) == SQLITE_OK;
    sqlite3_finalize(probe);
    return has;
  };
  path_bits_column_ = has_column();
  if (!path_bits_column_ && mode_ == Mode::Write) {
    exec("BEGIN IMMEDIATE");  // another writer may be adding it this moment
    try {
      if (!has_column()) exec("ALTER TABLE blocks ADD COLUMN path_bits BLOB");
      exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    path_bits_column_ = true;
  }
}

void Store::release_memory() { sqlite3_db_release_memory(db_); }

void Store::limit_cache(int kib) { exec(("PRAGMA cache_size=-" + std::to_string(kib > 64 ? kib : 64)).c_str()); }

int64_t Store::begin_session(const SessionRow& s) {
  Stmt st(db_, "INSERT INTO sessions(mode, command, host, start_real_ns) VALUES (?,?,?,?)");
  sqlite3_bind_text(st.s, 1, s.mode.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 2, s.command.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 3, s.host.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st.s, 4, s.start_real_ns);
  if (sqlite3_step(st.s) != SQLITE_DONE) fail("cannot create session");
  return sqlite3_last_insert_rowid(db_);
}

void Store::end_session(int64_t id, int64_t end_real_ns, int64_t exit_status, int64_t entry_count,
                        const std::string& chain_head_hex) {
  Stmt st(db_,
          "UPDATE sessions SET end_real_ns=?, exit_status=?, entry_count=?, chain_head=? WHERE id=?");
  sqlite3_bind_int64(st.s, 1, end_real_ns);
  sqlite3_bind_int64(st.s, 2, exit_status);
  sqlite3_bind_int64(st.s, 3, entry_count);
  sqlite3_bind_text(st.s, 4, chain_head_hex.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st.s, 5, id);
  if (sqlite3_step(st.s) != SQLITE_DONE) fail("cannot end session");
}

int64_t Store::stored_entries(std::optional<int64_t> session) {
  std::string sql = version_ == 2 ? "SELECT count(*) FROM entries" : "SELECT coalesce(sum(count), 0) FROM blocks";
  if (session) sql += " WHERE session = " + std::to_string(*session);
  Stmt st(db_, sql);
  return sqlite3_step(st.s) == SQLITE_ROW ? sqlite3_column_int64(st.s, 0) : 0;
}

void Store::begin() { exec("BEGIN"); }
void Store::commit() { exec("COMMIT"); }
void Store::rollback() noexcept { sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr); }

void Store::insert_block(const BlockRow& b) {
  if (!insert_ &&
      sqlite3_prepare_v2(db_,
                         "INSERT INTO blocks(id, count, types, pid_bits, ts_min, ts_max, chain, data, path_bits)"
                         " VALUES (?,?,?,?,?,?,?,?,?)",
                         -1, &insert_, nullptr) != SQLITE_OK)
    fail("cannot prepare insert");
  if (b.session < 1 || b.session >= kMaxSessions || b.first_seq < 1 || b.count < 1 ||
      b.first_seq + b.count > kMaxSeq)
    throw Error(path_ + ": entry position out of range");
  sqlite3_bind_int64(insert_, 1, b.session << kSeqBits | b.first_seq);
  sqlite3_bind_int64(insert_, 2, b.count);
  sqlite3_bind_text(insert_, 3, b.types.data(), int(b.types.size()), SQLITE_STATIC);
  sqlite3_bind_int64(insert_, 4, int64_t(b.pid_bits));
  sqlite3_bind_int64(insert_, 5, b.ts_min);
  sqlite3_bind_int64(insert_, 6, b.ts_max);
  sqlite3_bind_blob(insert_, 7, b.chain.data(), int(b.chain.size()), SQLITE_STATIC);
  sqlite3_bind_blob(insert_, 8, b.data.data(), int(b.data.size()), SQLITE_STATIC);
  // (a zero-length blob, not NULL, where no entry names a path)
  sqlite3_bind_blob(insert_, 9, b.path_bits.empty() ? "" : b.path_bits.data(), int(b.path_bits.size()), SQLITE_STATIC);
  int rc = sqlite3_step(insert_);
  sqlite3_reset(insert_);
  if (rc != SQLITE_DONE) fail("cannot insert entries");
}

void Store::insert_checkpoint(int64_t session, uint64_t tree_size, const std::string& note) {
  if (!insert_checkpoint_ &&
      sqlite3_prepare_v2(db_, "INSERT INTO checkpoints(session, tree_size, note) VALUES (?,?,?)", -1,
                         &insert_checkpoint_, nullptr) != SQLITE_OK)
    fail("cannot prepare insert");
  sqlite3_bind_int64(insert_checkpoint_, 1, session);
  sqlite3_bind_int64(insert_checkpoint_, 2, int64_t(tree_size));
  sqlite3_bind_text(insert_checkpoint_, 3, note.data(), int(note.size()), SQLITE_STATIC);
  int rc = sqlite3_step(insert_checkpoint_);
  sqlite3_reset(insert_checkpoint_);
  if (rc != SQLITE_DONE) fail("cannot insert checkpoint");
}

std::vector<CheckpointRow> Store::checkpoints(int64_t session) {
  std::vector<CheckpointRow> out;
  Stmt s(db_, "SELECT tree_size, note FROM checkpoints WHERE session=? ORDER BY tree_size");
  sqlite3_bind_int64(s.s, 1, session);
  int rc;
  while ((rc = sqlite3_step(s.s)) == SQLITE_ROW)
    out.push_back({sqlite3_column_int64(s.s, 0), s.text(1)});
  if (rc != SQLITE_DONE) fail("cannot read checkpoints");
  return out;
}

std::vector<int64_t> Store::session_ids() {
  std::vector<int64_t> out;
  Stmt s(db_,
         std::string("SELECT id FROM sessions UNION SELECT DISTINCT id >> 40 FROM ") +
             (version_ == 2 ? "entries" : "blocks") + " UNION SELECT DISTINCT session FROM checkpoints ORDER BY 1");
  int rc;
  while ((rc = sqlite3_step(s.s)) == SQLITE_ROW) out.push_back(sqlite3_column_int64(s.s, 0));
  if (rc != SQLITE_DONE) fail("cannot read sessions");
  return out;
}

std::vector<SessionRow> Store::sessions() {
  std::vector<SessionRow> out;
  Stmt s(db_,
         "SELECT id, mode, command, host, start_real_ns, end_real_ns, exit_status, entry_count,"
         " chain_head FROM sessions ORDER BY id");
  int rc;
  while ((rc = sqlite3_step(s.s)) == SQLITE_ROW) {
    SessionRow r;
    r.id = sqlite3_column_int64(s.s, 0);
    r.mode = s.text(1);
    r.command = s.text(2);
    r.host = s.text(3);
    r.start_real_ns = sqlite3_column_int64(s.s, 4);
    r.end_real_ns = s.opt_int(5);
    r.exit_status = s.opt_int(6);
    r.entry_count = s.opt_int(7);
    if (sqlite3_column_type(s.s, 8) != SQLITE_NULL) r.chain_head = s.text(8);
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) fail("cannot read sessions");
  return out;
}

void Store::for_each_entry(const EntryFilter& f, const std::function<bool(const EntryRow&)>& fn) {
  if (version_ == 2) for_each_v2_entry(f, fn);
  else for_each_block_entry(f, fn);
}

void Store::for_each_block_entry(const EntryFilter& f, const std::function<bool(const EntryRow&)>& fn) {
  std::string sql = std::string("SELECT id, count, types, pid_bits, chain, data, ts_min, ts_max, ") +
                    (path_bits_column_ ? "path_bits" : "NULL") + " FROM blocks";
  if (f.session) sql += " WHERE id BETWEEN ? AND ?";
  sql += " ORDER BY id";
  Stmt s(db_, sql);
  if (f.session) {
    sqlite3_bind_int64(s.s, 1, *f.session << kSeqBits);
    sqlite3_bind_int64(s.s, 2, (*f.session << kSeqBits) | (kMaxSeq - 1));
  }
  uint64_t want_pid = f.pid ? index_bit(*f.pid) : 0;
  // A query for "/" (or "") matches every absolute path: only a block naming none is skipped.
  std::optional<uint64_t> want_path;
  if (f.path && *f.path != "/" && !f.path->empty()) want_path = path_hash(*f.path);
  std::string scratch;
  EntryRow r;
  BlockIndex index;
  r.block = &index;
  int rc;
  while ((rc = sqlite3_step(s.s)) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(s.s, 0);
    int64_t count = sqlite3_column_int64(s.s, 1);
    if (id < 0 || count < 1 || count > int64_t(kBlockMaxEntries) || (id & (kMaxSeq - 1)) == 0 ||
        count > kMaxSeq - (id & (kMaxSeq - 1)))
      throw Error(path_ + ": a block has an impossible position or size: the record is corrupt");
    if (!f.types.empty()) {
      std::string types = s.text(2);
      if (std::none_of(f.types.begin(), f.types.end(), [&](const std::string& t) { return has_type(types, t); }))
        continue;
    }
    if (want_pid && !(uint64_t(sqlite3_column_int64(s.s, 3)) & want_pid)) continue;
    int64_t ts_min = sqlite3_column_int64(s.s, 6), ts_max = sqlite3_column_int64(s.s, 7);
    // ts_min..ts_max spans the entries that have a time (both 0: none has
    // one). verify checks that it holds each; a span edited wider only
    // skips less, so one bound alone at 0 is taken as it stands.
    bool timeless = ts_min == 0 && ts_max == 0;
    if ((f.since_ns && (timeless || ts_max < *f.since_ns)) || (f.until_ns && (timeless || ts_min > *f.until_ns)))
      continue;
    // A filter longer than any flightrec writes is no index (it would hide
    // nothing anyway): not copied, not checked.
    bool has_path_bits =
        sqlite3_column_type(s.s, 8) != SQLITE_NULL && size_t(sqlite3_column_bytes(s.s, 8)) <= kPathBitsMaxBytes;
    std::string_view path_bits;
    if (has_path_bits) {
      auto bits = static_cast<const char*>(sqlite3_column_blob(s.s, 8));
      path_bits = std::string_view(bits ? bits : "", size_t(sqlite3_column_bytes(s.s, 8)));
      if (f.path && (want_path ? !path_bits_may_hold(path_bits, *want_path) : path_bits.empty())) continue;
    }
    index.first_seq = id & (kMaxSeq - 1);
    index.types = s.text(2);
    index.pid_bits = uint64_t(sqlite3_column_int64(s.s, 3));
    index.ts_min = ts_min;
    index.ts_max = ts_max;
    if (has_path_bits) index.path_bits = std::string(path_bits);
    else index.path_bits.reset();
    r.session = id >> kSeqBits;
    int64_t seq = id & (kMaxSeq - 1);
    std::string chain = s.text(4);
    if (!chain.empty() && chain.size() != 32)
      throw Error(path_ + ": a block's chain value is not 32 bytes: the record is corrupt");
    auto data = static_cast<const char*>(sqlite3_column_blob(s.s, 5));
    std::string_view bytes(data ? data : "", size_t(sqlite3_column_bytes(s.s, 5)));
    bool go_on = true;
    int64_t at = 0;
    try {
      read_block(bytes, count, scratch, [&](const BlockEntry& e) {
        r.seq = seq + at;
        bool last = ++at == count;
        if (!f.types.empty() && std::find(f.types.begin(), f.types.end(), e.type) == f.types.end()) return true;
        if (f.pid && e.pid != *f.pid) return true;
        r.type.assign(e.type);
        r.pid = e.pid;
        r.body.assign(e.body);
        r.leaf.assign(e.leaf_prefix);
        if (last) r.chain = chain;
        else r.chain.clear();
        return go_on = fn(r);
      });
    } catch (const Error& e) {
      throw Error(path_ + ": session " + std::to_string(r.session) + ", entries from " + std::to_string(seq) + ": " +
                  e.what());
    }
    if (!go_on) return;
  }
  if (rc != SQLITE_DONE) fail("cannot read entries");
}

void Store::for_each_v2_entry(const EntryFilter& f, const std::function<bool(const EntryRow&)>& fn) {
  std::string sql = "SELECT id, type, pid, body, leaf, chain FROM entries WHERE 1";
  if (f.session) sql += " AND id BETWEEN ? AND ?";
  sql += " ORDER BY id";
  Stmt s(db_, sql);
  int i = 1;
  if (f.session) {
    sqlite3_bind_int64(s.s, i++, *f.session << kSeqBits);
    sqlite3_bind_int64(s.s, i++, (*f.session << kSeqBits) | (kMaxSeq - 1));
  }
  int rc;
  EntryRow r;
  while ((rc = sqlite3_step(s.s)) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(s.s, 0);
    r.session = id >> kSeqBits;
    r.seq = id & (kMaxSeq - 1);
    r.type = s.text(1);
    r.pid = sqlite3_column_int64(s.s, 2);
    if (!f.types.empty() && std::find(f.types.begin(), f.types.end(), r.type) == f.types.end()) continue;
    if (f.pid && r.pid != *f.pid) continue;
    r.body = s.text(3);
    r.leaf = s.text(4);
    r.chain = s.text(5);
    if (!fn(r)) return;
  }
  if (rc != SQLITE_DONE) fail("cannot read entries");
}

}  // namespace flightrec::ledger
