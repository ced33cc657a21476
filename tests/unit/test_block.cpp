// Blocks: the record's storage unit (docs/FORMAT.md §7), written and read
// back through real SQLite files; corrupt and hostile blocks are refused
// with a message, never a crash; format 2 records still read and verify.
#include <doctest/doctest.h>

#include <sqlite3.h>
#include <unistd.h>
#include <zstd.h>

#include <filesystem>
#include <random>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "unit/files.h"
#include "ledger/block.h"
#include "ledger/checkpoint.h"
#include "ledger/merkle.h"
#include "ledger/store.h"
#include "ledger/verify.h"
#include "ledger/writer.h"

using namespace flightrec;
using namespace flightrec::ledger;
using unit::sql;
using unit::TempDir;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string body(int64_t seq, const std::string& type, int64_t pid) {
  return json{{"type", type}, {"seq", seq}, {"session", 1}, {"pid", pid}}.dump();
}

// One frame as flightrec writes them: its size and, unless told, its checksum.
std::string compress(const std::string& raw, bool checksum = true) {
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, checksum ? 1 : 0);
  out.resize(ZSTD_compress2(c, out.data(), out.size(), raw.data(), raw.size()));
  ZSTD_freeCCtx(c);
  return out;
}

// How read_block fails on `data` claiming `count` entries ("" if it does not).
std::string read_error(const std::string& data, int64_t count) {
  std::string scratch;
  try {
    read_block(data, count, scratch, [](const BlockEntry&) { return true; });
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a block gives back what was put in, in order, with its index") {
  BlockBuilder b;
  std::vector<std::string> bodies;
  for (int i = 1; i <= 300; ++i) {
    bodies.push_back(body(i, i % 3 ? "syscall" : "file_open", 100 + i % 4));
    b.add(i % 3 ? "syscall" : "file_open", 100 + i % 4, 1000 + i, leaf_hash(bodies.back()), bodies.back(), {}, false);
  }
  Hash chain = sha256("chain");
  BlockRow row = b.seal(1, 1, chain);
  CHECK(b.empty());
  CHECK(row.count == 300);
  CHECK(row.chain == as_bytes(chain));
  CHECK(row.ts_min == 1001);
  CHECK(row.ts_max == 1300);
  CHECK(row.types == "file_open syscall");
  CHECK(has_type(row.types, "syscall"));
  CHECK_FALSE(has_type(row.types, "file"));
  CHECK((row.pid_bits & index_bit(int64_t(103))));
  CHECK(row.data.size() * 3 < 300 * bodies[0].size());  // similar entries compress
  std::string scratch;
  size_t i = 0;
  read_block(row.data, row.count, scratch, [&](const BlockEntry& e) {
    CHECK(e.body == bodies[i]);
    CHECK(e.pid == 100 + int64_t(i + 1) % 4);
    CHECK(e.leaf_prefix == as_bytes(leaf_hash(bodies[i])).substr(0, kStoredLeafBytes));
    ++i;
    return true;
  });
  CHECK(i == 300);
}

TEST_CASE("a corrupt or hostile block is refused with a message, never read past") {
  BlockBuilder b;
  std::string one = body(1, "syscall", 7);
  b.add("syscall", 7, 0, leaf_hash(one), one, {}, false);
  BlockRow row = b.seal(1, 1, kChainStart);
  CHECK(read_error(row.data, 1) == "");
  CHECK(read_error(row.data, 2).find("a block is malformed") != std::string::npos);
  CHECK(read_error(row.data.substr(0, row.data.size() - 3), 1).find("does not decompress") != std::string::npos);
  CHECK(read_error("not zstd at all", 1).find("not a zstd frame") != std::string::npos);
  CHECK(read_error("", 1).find("not a zstd frame") != std::string::npos);
  std::string flipped = row.data;
  flipped[flipped.size() / 2] ^= 0x40;  // the frame's checksum catches it
  CHECK(read_error(flipped, 1) != "");
  // Lengths inside the frame that point past its end.
  std::string raw = "\x07syscall" + std::string(8, '\0') + std::string(kStoredLeafBytes, 'L') + std::string("\xff\xff\xff\x7f", 4) + "{}";
  CHECK(read_error(compress(raw), 1).find("bodies are cut") != std::string::npos);
  CHECK(read_error(compress(std::string(1, '\0')), 1).find("entry 1 is cut") != std::string::npos);
  CHECK(read_error(compress(std::string(64, 'x')), 1).find("malformed") != std::string::npos);
  // Trailing bytes beyond the entries it claims.
  std::string two = body(2, "syscall", 7);
  b.add("syscall", 7, 0, leaf_hash(one), one, {}, false);
  b.add("syscall", 7, 0, leaf_hash(two), two, {}, false);
  BlockRow row2 = b.seal(1, 1, kChainStart);
  CHECK(read_error(row2.data, 1).find("more than its 1 entries") != std::string::npos);
  // More entries than any block holds: refused before a head is read.
  CHECK(read_error(row2.data, int64_t(kBlockMaxEntries) + 1).find("it claims 1025 entries") != std::string::npos);
  // One frame with its checksum, nothing beside it (docs/FORMAT.md §7).
  std::string one_raw = "\x07syscall" + std::string(8, '\0') + std::string(kStoredLeafBytes, 'L') +
                        std::string("\x02\0\0\0", 4) + "{}";
  CHECK(read_error(compress(one_raw), 1) == "");
  CHECK(read_error(compress(one_raw, false), 1).find("with its size and checksum") != std::string::npos);
  std::string skippable("\x50\x2a\x4d\x18\x01\0\0\0x", 9);  // a skippable frame of one byte
  CHECK(read_error(compress(one_raw) + skippable, 1).find("more than its one zstd frame") != std::string::npos);
  CHECK(read_error(compress(one_raw) + compress(""), 1).find("more than its one zstd frame") != std::string::npos);
  CHECK(read_error(skippable + compress(one_raw), 1) != "");
  // A frame that says it decompresses to more than any block is refused up front.
  std::string huge(kBlockMaxRawBytes + 1, 'a');
  CHECK(read_error(compress(huge), 1).find("more than any block flightrec writes") != std::string::npos);
}

TEST_CASE("the store skips blocks a filter cannot match, and names a corrupt block's place") {
  TempDir dir;
  std::string db = dir.file("r.db");
  {
    Store s(db, Store::Mode::Write);
    SessionRow row{0, "run", "[]", "h", 1, {}, {}, {}, {}};
    int64_t id = s.begin_session(row);
    SessionWriter w(s, id);
    for (int i = 1; i <= 3000; ++i) {
      std::string type = i == 2500 ? "exec" : "syscall";
      w.append(body(i, type, i < 2000 ? 10 : 20), type, i < 2000 ? 10 : 20, i);
    }
    w.flush();
  }
  Store s(db, Store::Mode::Read);
  auto count = [&](EntryFilter f) {
    int n = 0;
    s.for_each_entry(f, [&](const EntryRow&) { return ++n; });
    return n;
  };
  CHECK(count({}) == 3000);
  EntryFilter execs;
  execs.types = {"exec"};
  CHECK(count(execs) == 1);
  EntryFilter pid20;
  pid20.pid = 20;
  CHECK(count(pid20) == 1001);
  // Blocks of 1024 entries: three of them, the chain stored after each.
  sqlite3* h = s.handle();
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(h, "SELECT count(*), sum(count), min(length(chain)) FROM blocks", -1, &st, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  CHECK(sqlite3_column_int(st, 0) == 3);
  CHECK(sqlite3_column_int(st, 1) == 3000);
  CHECK(sqlite3_column_int(st, 2) == 32);
  sqlite3_finalize(st);

  std::string bad = dir.file("bad.db");
  fs::copy_file(db, bad);
  // What reading the whole record says (empty: nothing wrong).
  auto read_error_of = [&] {
    try {
      Store(bad, Store::Mode::Read).for_each_entry({}, [](const EntryRow&) { return true; });
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  sql(bad, "UPDATE blocks SET data=substr(data, 1, 100) WHERE first_seq=1025");
  CHECK(read_error_of().find("session 1, entries from 1025: a block does not decompress") != std::string::npos);
  for (const char* count : {"0", "1025", "9223372036854775807"}) {
    sql(bad, std::string("UPDATE blocks SET count=") + count + " WHERE first_seq=1");
    CHECK(read_error_of().find("impossible position or size") != std::string::npos);
  }
}

TEST_CASE("a format 2 record (one row per entry) still reads and verifies; nothing is appended to it") {
  TempDir dir;
  std::string db = dir.file("v2.db");
  sql(db, R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('format', 'flightrec-record'), ('format_version', '2');
CREATE TABLE sessions(id INTEGER PRIMARY KEY AUTOINCREMENT, mode TEXT NOT NULL, command TEXT NOT NULL,
  host TEXT NOT NULL, start_real_ns INTEGER NOT NULL, end_real_ns INTEGER, exit_status INTEGER,
  entry_count INTEGER, chain_head TEXT);
CREATE TABLE entries(id INTEGER PRIMARY KEY, type TEXT NOT NULL, pid INTEGER NOT NULL, body TEXT NOT NULL,
  leaf BLOB NOT NULL, chain BLOB NOT NULL,
  session INTEGER GENERATED ALWAYS AS (id >> 40) VIRTUAL,
  seq INTEGER GENERATED ALWAYS AS (id & 1099511627775) VIRTUAL);
CREATE TABLE checkpoints(session INTEGER NOT NULL, tree_size INTEGER NOT NULL, note TEXT NOT NULL,
  PRIMARY KEY(session, tree_size));
)sql");
  std::string origin = "flightrec/h/" + std::string(32, '0');
  std::vector<std::string> bodies = {
      json{{"type", "genesis"}, {"seq", 1}, {"session", 1}, {"origin", origin}, {"host", "h"}, {"policy", "p"},
           {"policy_sha256", to_hex(sha256("p"))}}.dump(),
      body(2, "syscall", 5)};
  CompactTree tree;
  Hash head = kChainStart;
  std::string inserts;
  for (size_t i = 0; i < bodies.size(); ++i) {
    Hash leaf = leaf_hash(bodies[i]);
    head = chain_next(head, leaf);
    tree.append(leaf);
    inserts += "INSERT INTO entries VALUES ((1<<40)+" + std::to_string(i + 1) + (i ? ", 'syscall', 5, '" : ", 'genesis', 0, '") + bodies[i] +
               "', X'" + to_hex(leaf) + "', X'" + to_hex(head) + "');";
    Checkpoint c{origin, i + 1, tree.root(), head};
    inserts += "INSERT INTO checkpoints VALUES (1, " + std::to_string(i + 1) + ", '" + sign_checkpoint(c, nullptr) + "');";
  }
  sql(db, inserts);
  {
    Store s(db, Store::Mode::Read);
    CHECK(s.format_version() == 2);
    auto r = verify_store(s, std::nullopt, nullptr, std::nullopt);
    REQUIRE(r.sessions.size() == 1);
    CHECK(r.sessions[0].second.ok);
    CHECK(r.sessions[0].second.entries == 2);
  }
  sql(db, "UPDATE entries SET body=replace(body,'\"pid\":5','\"pid\":6') WHERE id=(1<<40)+2");
  {
    Store s(db, Store::Mode::Read);
    auto r = verify_store(s, std::nullopt, nullptr, std::nullopt);
    CHECK_FALSE(r.ok);
    CHECK(r.sessions[0].second.where == "entry 2");
  }
  std::string err;
  try {
    Store s(db, Store::Mode::Write);
  } catch (const Error& e) {
    err = e.what();
  }
  CHECK(err == db + " has record format version 2 (an older flightrec); this flightrec reads it but appends only to "
                    "version 3: record into a new file");
}

TEST_CASE("the write-ahead log is folded into the file beside the commits, not inside one") {
  // SQLite's own checkpoint runs inside the commit that crosses its mark
  // and stops the writer meanwhile (~0.3 s at 64 MiB of log). Here a commit
  // that takes the log past 16 MiB only wakes a thread; with no commit
  // after it, the main file still fills up (it stays at one page while
  // SQLite's own waits for 64 MiB).
  TempDir dir;
  std::string db = dir.file("r.db");
  Store s(db, Store::Mode::Write);
  SessionRow row{0, "run", "[]", "h", 1, {}, {}, {}, {}};
  int64_t id = s.begin_session(row);
  SessionWriter w(s, id);
  std::mt19937_64 random(7);
  std::string pad(4000, ' ');
  int64_t seq = 0;
  auto log_bytes = [&] { return fs::exists(db + "-wal") ? fs::file_size(db + "-wal") : 0; };
  // Until a commit takes the log past the mark (it grows at least that
  // far before any checkpoint starts; once one has caught up the log
  // restarts and the file keeps its size).
  while (log_bytes() < (16u << 20) + (64u << 10)) {
    for (int i = 0; i < 500; ++i) {
      for (char& c : pad) c = char('a' + random() % 26);  // ~4.7 bits a byte: still ~2.5 KB compressed
      ++seq;
      w.append(json{{"type", "syscall"}, {"seq", seq}, {"session", id}, {"pad", pad}}.dump(), "syscall", 0, 0);
    }
    w.flush();
    REQUIRE(seq < 100000);
  }
  uintmax_t before = fs::file_size(db);
  for (int i = 0; i < 200 && fs::file_size(db) < (8u << 20); ++i) usleep(50'000);
  INFO("main file " << before << " bytes after the last commit, " << fs::file_size(db) << " later");
  CHECK(fs::file_size(db) >= (8u << 20));
  // ...and the record is whole: every entry reads back.
  int64_t n = 0;
  Store(db, Store::Mode::Read).for_each_entry({}, [&](const EntryRow&) { return ++n; });
  CHECK(n == seq);
}
