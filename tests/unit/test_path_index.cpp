// The blocks' path and time index (docs/FORMAT.md §7): what query --path
// and --since/--until skip by. A skipped block must never hold a match, so
// the tests compare every filtered read with a read of the whole record, on
// real SQLite files; verify must catch an index edited to hide an entry.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "events/entry.h"
#include "ledger/canonical.h"
#include "ledger/hash.h"
#include "ledger/path_index.h"
#include "ledger/store.h"
#include "ledger/verify.h"
#include "ledger/writer.h"
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
  static const char* parts[] = {"etc", "etcx", "e", "passwd", "usr", "lib", "a b", "\xff\xfe", "..", ".", ""};
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

// Every (session, seq) a filter yields after checking each body the way
// query does (the store may skip blocks; the bodies decide).
std::set<std::pair<int64_t, int64_t>> read_matching(const std::string& db, const EntryFilter& f) {
  Store s(db, Store::Mode::Read);
  std::set<std::pair<int64_t, int64_t>> out;
  TopLevel top;
  int not_canonical = 0;
  s.for_each_entry(f, [&](const EntryRow& e) {
    if (!check_canonical(e.body, &top).empty()) {
      ++not_canonical;
      return true;
    }
    bool any = !f.path;
    if (f.path)
      for (auto m : path_members()) {
        std::optional<std::string> p = top.string(m);
        if (!p)
          if (auto b64 = top.string(std::string(m) + "_b64")) p = base64_decode(*b64);
        if (p && policy::path_under(*p, *f.path)) any = true;
      }
    auto ts = top.integer("ts_real_ns");
    if ((f.since_ns || f.until_ns) && (!ts || (f.since_ns && *ts < *f.since_ns) || (f.until_ns && *ts > *f.until_ns)))
      any = false;
    if (any) out.insert({e.session, e.seq});
    return true;
  });
  CHECK(not_canonical == 0);
  return out;
}

int64_t blocks_read(const std::string& db, const EntryFilter& f) {
  Store s(db, Store::Mode::Read);
  std::set<int64_t> firsts;
  s.for_each_entry(f, [&](const EntryRow& e) {
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

TEST_CASE("a path's index hashes are its own and every directory above it, as query --path matches") {
  CHECK(prefixes("/etc/passwd") == std::vector<uint64_t>{path_hash("/etc"), path_hash("/etc/passwd")});
  CHECK(prefixes("/") == std::vector<uint64_t>{path_hash("/")});
  CHECK(prefixes("/etc/") == std::vector<uint64_t>{path_hash("/etc"), path_hash("/etc/")});
  CHECK(prefixes("a/b") == std::vector<uint64_t>{path_hash("a"), path_hash("a/b")});
  CHECK(path_hash("/etc") != path_hash("/etcx"));
  // Too many parts: nothing listed, and the caller marks its block as matching every path.
  std::string deep;
  for (size_t i = 0; i < kMaxPathHashes; ++i) deep += "/d";
  std::vector<uint64_t> out;
  CHECK(path_prefix_hashes(deep, out));
  CHECK(out.size() == kMaxPathHashes);
  out.clear();
  CHECK_FALSE(path_prefix_hashes(deep + "/d", out));
  CHECK(out.empty());
}

TEST_CASE("the Bloom filter never says no to a path it holds; empty means no path, all-ones every path") {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> paths;
    std::vector<uint64_t> hashes;
    int n = 1 + int(rng() % (round < 100 ? 8 : 700));
    for (int i = 0; i < n; ++i) {
      paths.push_back(random_path(rng));
      path_prefix_hashes(paths.back(), hashes);
    }
    std::string bits = path_bits_of(hashes);
    INFO("round " << round);
    CHECK(bits.size() >= 8);
    CHECK(bits.size() <= 512);
    CHECK((bits.size() & (bits.size() - 1)) == 0);
    int missed = 0;
    for (const auto& p : paths)
      for (const auto& q : queries_matching(p))
        missed += q != "/" && !path_bits_may_hold(bits, path_hash(q));
    CHECK(missed == 0);
  }
  std::vector<uint64_t> none;
  CHECK(path_bits_of(none).empty());
  CHECK_FALSE(path_bits_may_hold("", path_hash("/etc")));
  CHECK(path_bits_may_hold(path_bits_all(), path_hash("/anything")));
  CHECK(path_bits_hold_all(path_bits_all()));
  // Lengths flightrec never writes hide nothing.
  CHECK(path_bits_may_hold(std::string(3, '\0'), path_hash("/etc")));
  CHECK(path_bits_may_hold(std::string(1024, '\0'), path_hash("/etc")));
  // A sparse filter says no to most other paths (what makes skipping pay).
  std::vector<uint64_t> one = prefixes("/work/src/main.c");
  std::string bits = path_bits_of(one);
  int maybe = 0;
  for (int i = 0; i < 1000; ++i) maybe += path_bits_may_hold(bits, path_hash("/other/" + std::to_string(i)));
  CHECK(maybe < 100);
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
    EntryFilter f;
    f.path = q;
    INFO("--path " << q);
    CHECK(read_matching(db, f) == read_matching(bare, f));
    if (q == "/nowhere") {
      CHECK(read_matching(db, f).empty());
      CHECK(blocks_read(db, f) * 4 < all_blocks);  // most blocks skipped
    }
  }
  for (auto [since, until] : std::vector<std::pair<int64_t, int64_t>>{
           {1'000'000 + 5000, 1'000'000 + 5100}, {0, 1'000'000 + 3}, {1'000'000 + n + 1, 1'000'000 + n + 9}, {2'000'000, 3'000'000}}) {
    EntryFilter f;
    f.since_ns = since;
    f.until_ns = until;
    INFO(since << " .. " << until);
    CHECK(read_matching(db, f) == read_matching(bare, f));
    CHECK(blocks_read(db, f) <= 2);
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
  EntryFilter f;
  f.path = named.front()[0] == '/' ? named.front() : "/etc";
  CHECK(read_matching(c, f) == read_matching(db, f));
}

TEST_CASE("a record without the path column (an older build's) reads, verifies, and takes new blocks with it") {
  TempDir dir;
  std::vector<std::string> named;
  std::string db = mixed_record(dir, 2000, 9, &named);
  sql(db, "ALTER TABLE blocks DROP COLUMN path_bits");
  CHECK(verdict(db).ok);
  EntryFilter f;
  f.path = "/etc";
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
