// The blocks' path and time index (docs/FORMAT.md §7): what query --path
// and --since/--until skip by. A skipped block must never hold a match, so
// the tests compare every filtered read with a read of the whole record, on
// real SQLite files; verify must catch an index edited to hide an entry.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "events/entry.h"
#include "ledger/block.h"
#include "ledger/canonical.h"
#include "ledger/hash.h"
#include "ledger/path_index.h"
#include "ledger/store.h"
#include "ledger/verify.h"
#include "ledger/writer.h"
#include "inspect/filter.h"
#include "policy/judge.h"
#include "recorder/recorder.h"
#include "support/record_edit.h"
#include "unit/files.h"

using namespace flightrec;
using namespace flightrec::ledger;
using unit::sql;
using unit::TempDir;
using nlohmann::json;

namespace {

std::vector<uint64_t> prefixes(std::string_view path) {
  std::vector<uint64_t> out;
  REQUIRE(path_prefix_hashes(path, out));
  return out;
}

// Paths of every awkward shape: doubled and trailing slashes, relative
// ones, bytes that are not UTF-8, look-alike components.
std::string random_path(std::mt19937& rng) {
  static const char* parts[] = {"etc", "etcx", "e", "passwd", "usr", "lib", "a b", "\xff\xfe", "..", ".", "", "q\"b\\c\t"};
  std::string p = rng() % 8 ? "/" : "";
  int n = 1 + int(rng() % 5);
  for (int i = 0; i < n; ++i) {
    p += parts[rng() % std::size(parts)];
    if (i + 1 < n || rng() % 6 == 0) p += "/";
  }
  return p;
}

// Every query a user could give (absolute, no trailing '/': query strips
// it) that matches p.
std::vector<std::string> queries_matching(const std::string& p) {
  std::vector<std::string> out;
  for (size_t i = 1; i <= p.size(); ++i)
    if (i == p.size() || p[i] == '/') {
      std::string q = p.substr(0, i);
      if (q[0] == '/' && (q == "/" || q.back() != '/')) out.push_back(q);
    }
  return out;
}

// An entry as the recorder builds one, with paths in the members given.
events::Entry entry_with(int64_t seq, const std::vector<std::pair<const char*, std::string>>& paths, bool numbered = true) {
  events::Entry e;
  e.set("type", "syscall");
  if (numbered) {
    e.set("seq", seq);
    e.set("session", int64_t(1));
  }
  e.set("pid", int64_t(40 + seq % 3));
  e.set("ts_real_ns", int64_t(1'000'000 + seq));
  for (const auto& [key, value] : paths) e.set_bytes(key, value);
  return e;
}

// Every (session, seq) query's own matcher wants of what the store gives
// for these criteria (the store may skip blocks; the bodies decide).
std::set<std::pair<int64_t, int64_t>> read_matching(const std::string& db, const inspect::Criteria& c) {
  Store s(db, Store::Mode::Read);
  inspect::Matcher matcher(c);
  std::set<std::pair<int64_t, int64_t>> out;
  TopLevel top;
  int not_canonical = 0;
  s.for_each_entry(matcher.store_filter(std::nullopt), [&](const EntryRow& e) {
    if (!check_canonical(e.body, &top).empty()) ++not_canonical;
    else if (matcher.matches(e.session, top)) out.insert({e.session, e.seq});
    return true;
  });
  CHECK(not_canonical == 0);
  return out;
}

inspect::Criteria by_path(const std::string& path) {
  inspect::Criteria c;
  c.path = path;
  return c;
}

int64_t blocks_read(const std::string& db, const inspect::Criteria& c) {
  Store s(db, Store::Mode::Read);
  std::set<int64_t> firsts;
  s.for_each_entry(inspect::Matcher(c).store_filter(std::nullopt), [&](const EntryRow& e) {
    firsts.insert(e.block->first_seq);
    return true;
  });
  return int64_t(firsts.size());
}

// Appends e (seq and session set here) as the recorder does: its paths
// hashed from its fields, not parsed back.
void append(SessionWriter& w, events::Entry& e) {
  e.set("seq", w.next_seq());
  e.set("session", w.session());
  std::string body;
  e.append_canonical(body);
  std::vector<uint64_t> scratch;
  w.append(body, e.type(), e.int_or("pid"), e.int_or("ts_real_ns"), recorder::entry_paths(e, scratch));
}

// A new session's writer, its genesis entry sealed by the checkpoint of size 1.
std::unique_ptr<SessionWriter> begin_session(Store& store) {
  SessionRow row;
  row.mode = "run";
  row.command = "[]";
  row.host = "h";
  row.start_real_ns = 1;
  int64_t id = store.begin_session(row);
  auto w = std::make_unique<SessionWriter>(store, id);
  char origin[64];
  std::snprintf(origin, sizeof(origin), "flightrec/h/%032llx", static_cast<unsigned long long>(id));
  events::Entry g;
  g.set("type", "genesis");
  g.set("origin", origin);
  g.set("host", "h");
  g.set("policy", "p");
  g.set("policy_sha256", to_hex(sha256("p")));
  append(*w, g);
  w->checkpoint(origin, nullptr);
  return w;
}

// A session through the recorder's own path hashing and the real writer:
// n entries after its genesis, most naming no path (a syscall storm), some
// naming paths.
void write_mixed(const std::string& db, int n, std::mt19937& rng, std::vector<std::string>* named) {
  Store store(db, Store::Mode::Write);
  auto w = begin_session(store);
  for (int seq = 2; seq <= n + 1; ++seq) {
    std::vector<std::pair<const char*, std::string>> paths;
    if (seq % 97 == 0) {
      static const char* members[] = {"path", "filename", "kernel_path", "oldpath", "exe", "cgroup"};
      paths.push_back({members[rng() % std::size(members)], random_path(rng)});
      if (rng() % 3 == 0) paths.push_back({"newpath", random_path(rng)});
      for (auto& [k, v] : paths) named->push_back(v);
    }
    events::Entry e = entry_with(seq, paths, false);
    append(*w, e);
    if (seq % 1500 == 0) w->flush();  // blocks of several sizes
  }
  w->flush();
}

// A record of one such session, at dir/r.db.
std::string mixed_record(const TempDir& dir, int n, unsigned seed, std::vector<std::string>* named) {
  std::string db = dir.file("r.db");
  std::mt19937 rng(seed);
  write_mixed(db, n, rng, named);
  return db;
}

StoreVerdict verdict(const std::string& db) {
  Store s(db, Store::Mode::Read);
  return verify_store(s, std::nullopt, nullptr, std::nullopt);
}

}  // namespace

// A filter of these paths, as a block stores it.
std::string filter_of(const std::vector<std::string>& paths) {
  PathFilter f;
  std::vector<uint64_t> hashes;
  for (const auto& p : paths) path_prefix_hashes(p, hashes, SIZE_MAX);
  for (uint64_t h : hashes) f.add(h);
  return f.stored();
}

TEST_CASE("a path's index hashes are its own and every directory above it, as query --path matches") {
  CHECK(prefixes("/etc/passwd") == std::vector<uint64_t>{path_hash("/etc"), path_hash("/etc/passwd")});
  CHECK(prefixes("/") == std::vector<uint64_t>{path_hash("/")});
  CHECK(prefixes("/etc/") == std::vector<uint64_t>{path_hash("/etc"), path_hash("/etc/")});
  CHECK(prefixes("a/b") == std::vector<uint64_t>{path_hash("a"), path_hash("a/b")});
  CHECK(path_hash("/etc") != path_hash("/etcx"));
  // Too many parts for the recorder: nothing listed (its block then matches every path).
  std::string deep;
  for (size_t i = 0; i < kMaxPathHashes; ++i) deep += "/d";
  std::vector<uint64_t> out;
  CHECK(path_prefix_hashes(deep, out));
  CHECK(out.size() == kMaxPathHashes);
  out.clear();
  CHECK_FALSE(path_prefix_hashes(deep + "/d", out));
  CHECK(out.empty());
  CHECK(path_prefix_hashes(deep + "/d", out, SIZE_MAX));  // verify's reading has no bound
  CHECK(out.size() == kMaxPathHashes + 1);
}

TEST_CASE("the path index is FNV-1a-64 and two bits per hash, as docs/FORMAT.md §7 says") {
  // FNV-1a-64's published values (offset basis 14695981039346656037).
  CHECK(path_hash("") == 0xcbf29ce484222325ull);
  CHECK(path_hash("a") == 0xaf63dc4c8601ec8cull);
  CHECK(path_hash("foobar") == 0x85944171f73967e8ull);
  // One path in the smallest filter: bits (h >> 20) mod 64 and (h >> 40)
  // mod 64 of each hash, bit b in byte b / 8 at (b mod 8), LSB first.
  std::string bits = filter_of({"/etc"});
  REQUIRE(bits.size() == 8);
  uint64_t want = 0, h = path_hash("/etc");
  want |= 1ull << ((h >> 20) % 64);
  want |= 1ull << ((h >> 40) % 64);
  uint64_t got = 0;
  for (size_t i = 0; i < 8; ++i) got |= uint64_t(uint8_t(bits[i])) << (8 * i);
  CHECK(got == want);
  // The pid set's hash (§7: FNV-1a-64 from 1469598103934665603, the
  // constant records have carried since format 3).
  for (int64_t pid : {0, 1, 42, 4194304, -1}) {
    uint64_t f = 1469598103934665603ull;
    for (int i = 0; i < 8; ++i) f = (f ^ uint8_t(uint64_t(pid) >> (8 * i))) * 1099511628211ull;
    CHECK(index_bit(pid) == 1ull << (f % 64));
  }
}

TEST_CASE("the Bloom filter never says no to a path it holds; empty means no path, all-ones every path") {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> paths;
    int n = 1 + int(rng() % (round < 100 ? 8 : 700));
    for (int i = 0; i < n; ++i) paths.push_back(random_path(rng));
    std::string bits = filter_of(paths);
    INFO("round " << round);
    CHECK(bits.size() >= 8);
    CHECK(bits.size() <= kPathBitsMaxBytes);
    CHECK((bits.size() & (bits.size() - 1)) == 0);
    int missed = 0;
    for (const auto& p : paths)
      for (const auto& q : queries_matching(p))
        missed += q != "/" && !path_bits_may_hold(bits, path_hash(q));
    CHECK(missed == 0);
  }
  CHECK(filter_of({}).empty());
  CHECK_FALSE(path_bits_may_hold("", path_hash("/etc")));
  PathFilter all;
  all.set_all();
  CHECK(path_bits_may_hold(all.stored(), path_hash("/anything")));
  // Lengths flightrec never writes hide nothing.
  CHECK(path_bits_may_hold(std::string(3, '\0'), path_hash("/etc")));
  CHECK(path_bits_may_hold(std::string(1024, '\0'), path_hash("/etc")));
  // Sparse filters say no to most other paths (what makes skipping pay),
  // small and large alike.
  for (int n : {1, 30, 300}) {
    std::vector<std::string> paths;
    for (int i = 0; i < n; ++i) paths.push_back("/work/src/f" + std::to_string(i) + ".c");
    std::string bits = filter_of(paths);
    int maybe = 0;
    for (int i = 0; i < 1000; ++i) maybe += path_bits_may_hold(bits, path_hash("/other/" + std::to_string(i)));
    INFO(n << " paths, " << bits.size() << " bytes");
    CHECK(maybe < 100);
  }
}

TEST_CASE("the recorder lists at least the paths verify reads from an entry's canonical form") {
  std::mt19937 rng(11);
  std::vector<uint64_t> scratch;
  for (int i = 0; i < 500; ++i) {
    std::vector<std::pair<const char*, std::string>> paths;
    static const char* members[] = {"path", "target", "to_cgroup", "mount_source", "new_root", "linkpath"};
    int n = int(rng() % 4);
    for (int k = 0; k < n; ++k) paths.push_back({members[(i + k) % std::size(members)], random_path(rng)});
    events::Entry e = entry_with(i + 1, paths);
    e.set("argv", std::vector<std::string>{"/not/a/path/member"});
    e.set("comm", "/nor/this");
    std::string body;
    e.append_canonical(body);
    auto listed = recorder::entry_paths(e, scratch);
    std::set<uint64_t> have(listed.hashes.begin(), listed.hashes.end());
    TopLevel top;
    REQUIRE(check_canonical(body, &top).empty());
    std::vector<uint64_t> wanted;
    REQUIRE(entry_path_hashes(top, wanted));
    INFO(body);
    CHECK_FALSE(listed.all);
    CHECK(std::set<uint64_t>(wanted.begin(), wanted.end()) == have);
    CHECK(have.count(path_hash("/nor/this")) == 0);
  }
  // A member that is not a string names no path; its _b64 twin then does, as query reads it.
  TopLevel top;
  std::string body = R"({"path":7,"path_b64":")" + base64_encode("/b64/only") + R"(","type":"x"})";
  REQUIRE(check_canonical(body, &top).empty());
  std::vector<uint64_t> wanted;
  REQUIRE(entry_path_hashes(top, wanted));
  CHECK(std::set<uint64_t>(wanted.begin(), wanted.end()) == std::set<uint64_t>{path_hash("/b64"), path_hash("/b64/only")});
}

TEST_CASE("query --path and --since/--until skip blocks, and find everything a whole read finds") {
  TempDir dir;
  std::vector<std::string> named;
  const int n = 20000;
  std::string db = mixed_record(dir, n, 3, &named);
  REQUIRE(verdict(db).ok);
  // The same record without its index: every block read whole.
  std::string bare = dir.file("bare.db");
  std::filesystem::copy_file(db, bare);
  sql(bare, "UPDATE blocks SET path_bits=NULL, ts_min=1, ts_max=9223372036854775807");

  std::set<std::string> queries = {"/", "/etc", "/etcx", "/etc/passwd", "/usr/lib", "/nowhere", "/e/e"};
  for (size_t i = 0; i < named.size(); i += 5)  // every fifth path named: each read is of the whole record
    for (const auto& q : queries_matching(named[i])) queries.insert(q);
  int64_t all_blocks = blocks_read(bare, {});
  for (const auto& q : queries) {
    INFO("--path " << q);
    CHECK(read_matching(db, by_path(q)) == read_matching(bare, by_path(q)));
    if (q == "/nowhere") {
      CHECK(read_matching(db, by_path(q)).empty());
      CHECK(blocks_read(db, by_path(q)) * 4 < all_blocks);  // most blocks skipped
    }
  }
  // A span edited wider (one bound at 0) only skips less; verify accepts it.
  std::string wider = dir.file("wider.db");
  std::filesystem::copy_file(db, wider);
  sql(wider, "UPDATE blocks SET ts_min=0");
  CHECK(verdict(wider).ok);
  for (auto range : std::vector<std::pair<int64_t, int64_t>>{
           {1'000'000 + 5000, 1'000'000 + 5100}, {0, 1'000'000 + 3}, {1'000'000 + n + 1, 1'000'000 + n + 9}, {2'000'000, 3'000'000}}) {
    int64_t since = range.first, until = range.second;  // (not a structured binding: INFO's lambda captures them)
    inspect::Criteria c;
    c.since_ns = since;
    c.until_ns = until;
    INFO(since << " .. " << until);
    CHECK(read_matching(db, c) == read_matching(bare, c));
    CHECK(read_matching(wider, c) == read_matching(bare, c));
    CHECK(blocks_read(db, c) <= 2);
  }
}

TEST_CASE("a path index edited to hide an entry fails verification; one removed hides nothing") {
  TempDir dir;
  std::vector<std::string> named;
  std::string db = mixed_record(dir, 3000, 5, &named);
  REQUIRE(verdict(db).ok);
  int copies = 0;
  auto fresh = [&] {
    std::string c = dir.file(("c" + std::to_string(copies++) + ".db").c_str());
    std::filesystem::copy_file(db, c);
    return c;
  };
  for (const char* edit : {"UPDATE blocks SET path_bits=x''", "UPDATE blocks SET path_bits=zeroblob(length(path_bits))"}) {
    std::string c = fresh();
    sql(c, edit);
    auto v = verdict(c);
    INFO(edit);
    CHECK_FALSE(v.ok);
    CHECK(v.sessions.back().second.reason.find("it says a block without a path it names") != std::string::npos);
  }
  // NULL: no index (a record of an older build), so nothing is skipped.
  std::string c = fresh();
  sql(c, "UPDATE blocks SET path_bits=NULL");
  CHECK(verdict(c).ok);
  auto q = by_path(named.front()[0] == '/' ? named.front() : "/etc");
  CHECK(read_matching(c, q) == read_matching(db, q));
}

TEST_CASE("verify takes any filter holding every part of a path, also one deeper than flightrec lists") {
  TempDir dir;
  std::string db = dir.file("r.db");
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "/d" + std::to_string(i);
  {
    Store store(db, Store::Mode::Write);
    auto w = begin_session(store);
    events::Entry e;
    e.set("type", "file_open");
    e.set("path", deep);
    append(*w, e);
    w->flush();
  }
  REQUIRE(verdict(db).ok);
  // flightrec's own filter for it: all bits set.
  REQUIRE(unit::sql_int(db, "SELECT count(*) FROM blocks WHERE path_bits = x'ffffffffffffffff'") == 1);
  auto hex = [](const std::string& bytes) {
    std::string out;
    for (unsigned char c : bytes) out += "0123456789abcdef"[c >> 4], out += "0123456789abcdef"[c & 15];
    return out;
  };
  auto store_filter = [&](const std::string& bits) {
    sql(db, "UPDATE blocks SET path_bits = x'" + hex(bits) + "' WHERE length(path_bits) > 0");
  };
  // Another writer's: every one of its 100 parts hashed.
  store_filter(filter_of({deep}));
  CHECK(verdict(db).ok);
  // One part left out: verify finds it missing.
  std::vector<uint64_t> hashes;
  REQUIRE(path_prefix_hashes(deep, hashes, SIZE_MAX));
  for (size_t skip : {size_t(0), size_t(57), hashes.size() - 1}) {
    PathFilter f;
    for (size_t i = 0; i < hashes.size(); ++i)
      if (i != skip) f.add(hashes[i]);
    std::string bits = f.stored();
    if (path_bits_may_hold(bits, hashes[skip])) continue;  // its bits set by others: nothing is missing
    store_filter(bits);
    auto v = verdict(db);
    INFO("without part " << skip);
    CHECK_FALSE(v.ok);
  }
}

TEST_CASE("a record without the path column (an older build's) reads, verifies, and takes new blocks with it") {
  TempDir dir;
  std::vector<std::string> named;
  std::string db = mixed_record(dir, 2000, 9, &named);
  sql(db, "ALTER TABLE blocks DROP COLUMN path_bits");
  CHECK(verdict(db).ok);
  auto f = by_path("/etc");
  auto before = read_matching(db, f);
  // Appending gives the table its column; the old blocks keep none.
  {
    Store s(db, Store::Mode::Write);
    auto w = begin_session(s);
    events::Entry e;
    e.set("type", "file_open");
    e.set("path", "/etc/hosts");
    append(*w, e);
    w->flush();
  }
  CHECK(verdict(db).ok);
  auto after = read_matching(db, f);
  CHECK(after.count({2, 2}) == 1);
  after.erase({2, 2});
  CHECK(after == before);
  CHECK(unit::sql_int(db, "SELECT count(*) FROM blocks WHERE path_bits IS NULL") > 0);
  CHECK(unit::sql_int(db, "SELECT count(*) FROM blocks WHERE path_bits IS NOT NULL AND length(path_bits) > 0") == 1);
}
