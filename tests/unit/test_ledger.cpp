// The record with real SQLite files and a real Ed25519 key: written through
// the real writer, then attacked the ways docs/FORMAT.md says verify catches.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <span>

#include <cstdio>
#include <functional>
#include <tuple>

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "unit/files.h"
#include "common/system.h"
#include "ledger/bundle.h"
#include "ledger/checkpoint.h"
#include "ledger/store.h"
#include "ledger/verify.h"
#include "ledger/merkle.h"
#include "ledger/proof.h"
#include "ledger/writer.h"
#include "support/record_edit.h"

using namespace flightrec;
using namespace flightrec::ledger;
using unit::sql;
using unit::TempDir;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const SigningKey& test_key() {
  static SigningKey k = SigningKey::generate("test-key");
  return k;
}

// As the recorder names a log: flightrec/<host>/<32 hex digits>, unique per session.
std::string origin_of(int64_t id) {
  char tail[33];
  std::snprintf(tail, sizeof(tail), "%032llx", static_cast<unsigned long long>(id));
  return std::string("flightrec/host/") + tail;
}

// A session of n entries (genesis, syscalls, session_end) with a checkpoint
// every 5 entries and at the end, through the real writer.
int64_t write_session(Store& store, int n, const SigningKey* key, bool end = true, bool timed = false) {
  SessionRow row;
  row.mode = "run";
  row.command = "[\"x\"]";
  row.host = "host";
  row.start_real_ns = 1;
  int64_t id = store.begin_session(row);
  SessionWriter w(store, id);
  // The genesis members the format ties together (§5): host and origin,
  // policy and its hash, public key and key id.
  json g = {{"type", "genesis"}, {"seq", 1}, {"session", id}, {"origin", origin_of(id)}, {"host", "host"},
            {"policy", "p"}, {"policy_sha256", to_hex(sha256("p"))}, {"checkpoint_every_entries", 5}};
  if (key) {
    g["public_key"] = key->verifier().vkey();
    g["key_id"] = key->verifier().key_id_hex();
  }
  w.append(g.dump(), "genesis", 0, 0);
  w.checkpoint(origin_of(id), key);  // sealed with the genesis entry, as the recorder does
  for (int i = 2; i <= n; ++i) {
    bool last = end && i == n;
    json j = {{"type", last ? "session_end" : "syscall"}, {"seq", i}, {"session", id}, {"pid", 42}, {"nr", i}};
    if (last) {
      j["lost_total"] = n >= 7 ? 12 : 0;
      j["entries_before"] = i - 1;
    }
    if (i == 7) j = {{"type", "lost"}, {"seq", i}, {"session", id}, {"lost", 12}};
    if (timed) j["ts_real_ns"] = 1'000'000 + i;
    w.append(j.dump(), j["type"].get<std::string>(), j.value("pid", 0), j.value("ts_real_ns", int64_t(0)));
    if (i % 5 == 0) w.checkpoint(origin_of(id), key);
  }
  if (end) w.checkpoint(origin_of(id), key);
  w.flush();
  if (end) store.end_session(id, 2, 0, w.count(), to_hex(w.head()));
  return id;
}


// Session 1's verdict (or the first failure).
SessionVerdict verify_file(const std::string& path, const VerifierKey* pinned = nullptr,
                           std::optional<std::string> external = std::nullopt) {
  Store s(path, Store::Mode::Read);
  auto r = verify_store(s, std::nullopt, pinned, external);
  for (auto& [id, v] : r.sessions)
    if (!v.ok) return v;
  REQUIRE(!r.sessions.empty());
  return r.sessions.front().second;
}

std::vector<std::string> bodies(const std::string& path, int64_t session) {
  Store s(path, Store::Mode::Read);
  std::vector<std::string> out;
  EntryFilter f;
  f.session = session;
  s.for_each_entry(f, [&](const EntryRow& e) {
    out.push_back(e.body);
    return true;
  });
  return out;
}

// The strongest attacker without the key: rewrites a session's entries
// with every seq and leaf recomputed, and leaves the checkpoints.
void rewrite_session(const std::string& path, int64_t session, std::vector<json> entries) {
  std::vector<testsupport::StoredEntry> kept;
  for (auto& e : testsupport::stored_entries(path))
    if (e.session != session) kept.push_back(std::move(e));
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i]["seq"] = i + 1;
    kept.push_back({session, int64_t(i + 1), entries[i]["type"], entries[i].value("pid", int64_t(0)), entries[i].dump(), ""});
  }
  std::stable_sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.session < b.session; });
  testsupport::store_entries(path, kept);
}

// Edits the stored entries in place, no hash recomputed (a disk editor's view).
void edit_entries(const std::string& path, const std::function<void(std::vector<testsupport::StoredEntry>&)>& edit) {
  auto es = testsupport::stored_entries(path);
  edit(es);
  testsupport::store_entries(path, es);
}

// Removes the entries of `session` whose seq satisfies `which`.
void delete_entries(const std::string& path, int64_t session, const std::function<bool(int64_t)>& which) {
  edit_entries(path, [&](auto& es) {
    std::erase_if(es, [&](const auto& e) { return e.session == session && which(e.seq); });
  });
}

// A fresh copy of the record for each tampering, so subcases do not meet.
std::function<std::string()> copies_of(const TempDir& dir, const std::string& db) {
  return [&dir, db, n = 0]() mutable {
    std::string copy = dir.file(("c" + std::to_string(n++) + ".db").c_str());
    fs::copy_file(db, copy);
    return copy;
  };
}

std::vector<json> parsed(const std::vector<std::string>& bs) {
  std::vector<json> out;
  for (const auto& b : bs) out.push_back(json::parse(b));
  return out;
}

}  // namespace

TEST_CASE("a signed session verifies, counting checkpoints and gaps") {
  TempDir dir;
  std::string db = dir.file("r.db");
  {
    Store s(db, Store::Mode::Write);
    write_session(s, 23, &test_key());
  }
  auto v = verify_file(db, &test_key().verifier());
  CHECK(v.ok);
  CHECK(v.entries == 23);
  CHECK(v.checkpoints == 6);  // 1, 5, 10, 15, 20, 23
  CHECK(v.signed_checkpoints == 6);
  CHECK(v.terminated);
  CHECK(v.gaps == 1);
  CHECK(v.lost == 12);
  CHECK_FALSE(v.key_from_record);
  CHECK(verify_file(db).key_from_record);
}

TEST_CASE("tampering is caught, each with its reason") {
  TempDir dir;
  std::string db = dir.file("r.db");
  int64_t id;
  {
    Store s(db, Store::Mode::Write);
    id = write_session(s, 23, &test_key());
    write_session(s, 12, &test_key());
  }
  const VerifierKey& pub = test_key().verifier();
  auto fresh = copies_of(dir, db);
  SUBCASE("a field edited") {
    std::string c = fresh();
    edit_entries(c, [](auto& es) {
      for (auto& e : es)
        if (e.session == 1 && e.seq == 9) e.body.replace(e.body.find("\"pid\":42"), 8, "\"pid\":43");
    });
    auto v = verify_file(c, &pub);
    CHECK(v.where == "entry 9");
    CHECK(v.reason.find("altered") != std::string::npos);
  }
  SUBCASE("a field edited, every hash recomputed: the checkpoint root disagrees") {
    std::string c = fresh();
    auto es = parsed(bodies(c, id));
    es[8]["pid"] = 43;
    rewrite_session(c, id, es);
    auto v = verify_file(c, &pub);
    CHECK(v.where == "checkpoint at size 10");
    CHECK(v.reason.find("root hash") != std::string::npos);
  }
  SUBCASE("an entry deleted") {
    std::string c = fresh();
    delete_entries(c, 1, [](int64_t seq) { return seq == 7; });
    auto v = verify_file(c, &pub);
    CHECK(v.where == "entry 7");
    CHECK(v.reason.find("missing") != std::string::npos);
  }
  SUBCASE("an entry inserted, everything after renumbered and rehashed") {
    std::string c = fresh();
    auto es = parsed(bodies(c, id));
    es.insert(es.begin() + 3, json{{"type", "syscall"}, {"session", id}, {"pid", 1}, {"nr", 59}});
    rewrite_session(c, id, es);
    auto v = verify_file(c, &pub);
    CHECK(v.where == "checkpoint at size 5");
    CHECK_FALSE(v.ok);
  }
  SUBCASE("two entries reordered and rehashed") {
    std::string c = fresh();
    auto es = parsed(bodies(c, id));
    std::swap(es[11], es[12]);
    rewrite_session(c, id, es);
    auto v = verify_file(c, &pub);
    CHECK(v.where == "checkpoint at size 15");
  }
  SUBCASE("the tail truncated, checkpoints kept") {
    std::string c = fresh();
    delete_entries(c, 1, [](int64_t seq) { return seq > 20; });
    auto v = verify_file(c, &pub);
    CHECK(v.where == "checkpoint at size 23");
    CHECK(v.reason.find("removed from the end") != std::string::npos);
  }
  SUBCASE("the tail and its checkpoints removed: only a checkpoint saved elsewhere tells") {
    std::string c = fresh();
    std::string saved;
    {
      Store s(c, Store::Mode::Read);
      saved = s.checkpoints(id).back().note;  // the end checkpoint, kept off the host
    }
    delete_entries(c, 1, [](int64_t seq) { return seq > 20; });
    sql(c, "DELETE FROM checkpoints WHERE session=1 AND tree_size>20");
    auto v = verify_file(c, &pub);
    CHECK(v.ok);  // indistinguishable from a crash on its own
    CHECK_FALSE(v.terminated);
    v = verify_file(c, &pub, saved);
    CHECK(v.where == "saved checkpoint");
    CHECK(v.reason.find("truncated or rolled back") != std::string::npos);
  }
  SUBCASE("history rewritten under a checkpoint saved elsewhere") {
    std::string c = fresh();
    std::string saved;
    {
      Store s(c, Store::Mode::Read);
      saved = s.checkpoints(id)[1].note;  // size 5
    }
    auto es = parsed(bodies(c, id));
    es[2]["nr"] = 1000;
    rewrite_session(c, id, es);
    sql(c, "DELETE FROM checkpoints WHERE session=1 AND tree_size>1");  // hide the evidence
    auto v = verify_file(c, &pub, saved);
    CHECK(v.where == "saved checkpoint");
    CHECK(v.reason.find("history was rewritten") != std::string::npos);
  }
  SUBCASE("several checkpoints appended to one saved file: each is checked") {
    std::string c = fresh();
    std::vector<std::string> notes;
    {
      Store s(c, Store::Mode::Read);
      for (const auto& cp : s.checkpoints(id)) notes.push_back(cp.note);
    }
    REQUIRE(notes.size() >= 3);
    std::string file = notes[1] + notes[2] + notes.back();  // as `checkpoint ... >> saved` leaves it
    auto v = verify_file(c, &pub, file);
    CHECK(v.ok);
    CHECK(v.saved_matched == std::vector<size_t>{0, 1, 2});
    // The tail removed: the last of them catches it, and says which.
    delete_entries(c, 1, [](int64_t seq) { return seq > 20; });
    sql(c, "DELETE FROM checkpoints WHERE session=1 AND tree_size>20");
    v = verify_file(c, &pub, file);
    CHECK(v.where == "saved checkpoint 3");
    CHECK(v.reason.find("truncated or rolled back") != std::string::npos);
    // A note of no session verified, a cut file, an unsigned note: refused.
    std::string other = notes[1];
    other.replace(0, other.find('\n'), "flightrec/other-host/0123456789abcdef0123456789abcdef");
    v = verify_file(fresh(), &pub, notes[1] + other);
    CHECK(v.where == "saved checkpoint");
    CHECK(v.reason == "checkpoint 2 of 2 belongs to none of the sessions verified (another origin)");
    v = verify_file(fresh(), &pub, notes[1] + notes[2].substr(0, notes[2].size() - 1));
    CHECK(v.where == "saved checkpoint");
    CHECK(v.reason == "the file does not end in a newline");
    v = verify_file(fresh(), &pub, notes[1] + notes[2].substr(0, notes[2].find("\n\n") + 1));
    CHECK(v.reason == "checkpoint 2 has no signature (a blank line, then signature lines)");
  }
  SUBCASE("the last checkpoint dropped") {
    std::string c = fresh();
    sql(c, "DELETE FROM checkpoints WHERE session=1 AND tree_size=23");
    auto v = verify_file(c, &pub);
    CHECK(v.where == "entry 23");
    CHECK(v.reason.find("not covered by a checkpoint") != std::string::npos);
  }
  SUBCASE("checkpoints re-signed with another key") {
    std::string c = fresh();
    auto other = SigningKey::generate("test-key");  // same name, other key
    Store s(c, Store::Mode::Read);
    auto cps = s.checkpoints(id);
    for (auto& cp : cps) {
      std::string why;
      auto note = parse_note(cp.note, &why);
      auto parsed_cp = parse_checkpoint(note->text, &why);
      std::string resigned = sign_checkpoint(*parsed_cp, &other);
      sql(c, "UPDATE checkpoints SET note='" + resigned + "' WHERE session=1 AND tree_size=" +
                 std::to_string(cp.tree_size));
    }
    auto v = verify_file(c, &pub);
    CHECK(v.where == "checkpoint at size 1");
    CHECK(v.reason.find("not signed by the expected key") != std::string::npos);
    // And with the genesis entry rewritten to name the other key: pinning catches it.
    auto es = parsed(bodies(c, id));
    es[0]["public_key"] = other.verifier().vkey();
    rewrite_session(c, id, es);
    v = verify_file(c, &pub);
    CHECK(v.where == "entry 1");
    CHECK(v.reason.find("names another signing key") != std::string::npos);
  }
  SUBCASE("two sessions spliced") {
    std::string c = fresh();
    edit_entries(c, [](auto& es) {
      std::erase_if(es, [](const auto& e) { return e.session == 1 && e.seq >= 4 && e.seq <= 6; });
      for (auto& e : es)
        if (e.session == 2 && e.seq >= 4 && e.seq <= 6) e.session = 1;
      std::stable_sort(es.begin(), es.end(), [](const auto& a, const auto& b) {
        return std::pair(a.session, a.seq) < std::pair(b.session, b.seq);
      });
    });
    auto v = verify_file(c, &pub);
    CHECK(v.where == "entry 4");
    CHECK(v.reason.find("spliced") != std::string::npos);
  }
  SUBCASE("a checkpoint forged with a wrong size") {
    std::string c = fresh();
    Store s(c, Store::Mode::Read);
    auto cps = s.checkpoints(id);
    std::string forged = cps[2].note;  // size 10
    forged.replace(forged.find("\n10\n"), 4, "\n11\n");
    sql(c, "DELETE FROM checkpoints WHERE session=1 AND tree_size=10;"
           "INSERT INTO checkpoints VALUES (1, 11, '" + forged + "')");
    auto v = verify_file(c, &pub);
    CHECK(v.where == "checkpoint at size 11");
    CHECK(v.reason.find("does not verify") != std::string::npos);
  }
}

TEST_CASE("what a verifier can tell from the format alone: cadence, one checkpoint per size, every signature, copies") {
  TempDir dir;
  std::string db = dir.file("r.db");
  int64_t id;
  {
    Store s(db, Store::Mode::Write);
    id = write_session(s, 23, &test_key());  // checkpoints at 1, 5, 10, 15, 20, 23, every 5 entries
    write_session(s, 22, &test_key(), false);  // unterminated: at 1, 5, 10, 15, 20
  }
  const VerifierKey& pub = test_key().verifier();
  auto fresh = copies_of(dir, db);
  SUBCASE("a checkpoint removed from the middle") {
    std::string c = fresh();
    sql(c, "DELETE FROM checkpoints WHERE session=1 AND tree_size=10");
    auto v = verify_file(c, &pub);
    CHECK(v.where == "checkpoint at size 15");
    CHECK(v.reason == "the previous checkpoint is at size 5, more than 5 entries earlier: a checkpoint between was removed");
  }
  SUBCASE("the last checkpoints of an unterminated session removed") {
    std::string c = fresh();
    sql(c, "DELETE FROM checkpoints WHERE session=2 AND tree_size=20");
    Store s(c, Store::Mode::Read);
    auto r = verify_store(s, std::optional<int64_t>(2), &pub, std::nullopt);
    REQUIRE(r.sessions.size() == 1);
    auto v = r.sessions[0].second;
    CHECK_FALSE(v.ok);
    CHECK(v.where == "entry 20");
    CHECK(v.reason.find("no checkpoint covers it, though one is taken every 5 entries") != std::string::npos);
  }
  SUBCASE("a second signature line by the trusted key that does not verify") {
    std::string c = fresh();
    Store s(c, Store::Mode::Read);
    std::string note = s.checkpoints(id)[1].note;  // size 5
    std::string line = note.substr(note.rfind("\n\xe2\x80\x94 ") + 1);  // the signature line
    std::string bad = line;
    size_t sig = bad.rfind(' ') + 1;
    bad[sig + 10] = bad[sig + 10] == 'A' ? 'B' : 'A';  // inside the signature, past the key hash
    sql(c, "UPDATE checkpoints SET note='" + note + bad + "' WHERE session=1 AND tree_size=5");
    auto v = verify_file(c, &pub);
    CHECK(v.where == "checkpoint at size 5");
    CHECK(v.reason == "a signature line by test-key does not verify");
  }
  SUBCASE("the genesis entry's copies disagree with what they copy") {
    for (auto [member, value, reason] : {std::tuple{"policy_sha256", json(std::string(64, '0')), "policy_sha256 is not the SHA-256 of its policy"},
                                         std::tuple{"key_id", json("00000000"), "key_id is not the hash of its public_key"},
                                         std::tuple{"host", json("elsewhere"), "origin does not name its host as the format says"}}) {
      std::string c = fresh();
      auto es = parsed(bodies(c, id));
      es[0][member] = value;
      rewrite_session(c, id, es);
      auto v = verify_file(c, &pub);
      CHECK(v.where == "entry 1");
      CHECK(v.reason == reason);
    }
  }
  SUBCASE("members read strictly: a type's form, a lost count, key_id alone, a member and its _b64 both") {
    auto lost_at = [](const std::vector<json>& es) {
      for (size_t i = 0; i < es.size(); ++i)
        if (es[i]["type"] == "lost") return i;
      return size_t(0);
    };
    struct Case {
      std::function<void(std::vector<json>&)> edit;
      const char* where;
      std::string reason;
    };
    std::vector<Case> cases = {
        {[](auto& es) { es[3]["type"] = "Syscall"; }, "entry 4", "entry's type is not a word of a-z, 0-9 and _ (1 to 255 bytes)"},
        {[](auto& es) { es[3]["type"] = "sys-call"; }, "entry 4", "entry's type is not a word of a-z, 0-9 and _ (1 to 255 bytes)"},
        {[&](auto& es) { es[lost_at(es)]["lost"] = -5; }, "", "a lost entry without a count of events lost (lost)"},
        {[&](auto& es) { es[lost_at(es)]["lost"] = "5"; }, "", "a lost entry without a count of events lost (lost)"},
        {[&](auto& es) { es[lost_at(es)].erase("lost"); }, "", "a lost entry without a count of events lost (lost)"},
        {[](auto& es) { es[0]["checkpoint_every_entries"] = 0; }, "entry 1", "checkpoint_every_entries is not a positive integer"},
        {[](auto& es) { es[0]["checkpoint_every_entries"] = "5"; }, "entry 1", "checkpoint_every_entries is not a positive integer"},
        {[](auto& es) { es[0]["host_b64"] = "aG9zdA=="; }, "entry 1", "genesis entry has both host and host_b64"},
        {[](auto& es) { es[0]["policy_b64"] = "eA=="; }, "entry 1", "genesis entry has both policy and policy_b64"},
        {[](auto& es) { es[0].erase("public_key"); }, "entry 1", "key_id without a public_key"},
    };
    for (const auto& k : cases) {
      std::string c = fresh();
      auto es = parsed(bodies(c, id));
      k.edit(es);
      rewrite_session(c, id, es);
      auto v = verify_file(c);
      INFO(k.reason);
      CHECK_FALSE(v.ok);
      if (*k.where) CHECK(v.where == k.where);
      CHECK(v.reason == k.reason);
    }
    // Two lost entries whose counts pass 2^64 between them.
    std::string c = fresh();
    auto es = parsed(bodies(c, id));
    json second = es[lost_at(es)];
    es[lost_at(es)]["lost"] = UINT64_MAX;
    es.insert(es.begin() + long(lost_at(es)) + 1, second);
    rewrite_session(c, id, es);
    auto v = verify_file(c);
    CHECK(v.reason == "the lost entries' counts add up past 2^64");
  }
  SUBCASE("a saved checkpoint without its chain line is refused") {
    std::string c = fresh();
    Store s(c, Store::Mode::Read);
    std::string note = s.checkpoints(id)[1].note;  // size 5
    std::string why;
    Checkpoint cp = *parse_checkpoint(note.substr(0, note.find("\n\n") + 1), &why);
    cp.chain.reset();
    auto v = verify_file(c, &pub, sign_checkpoint(cp, &test_key()));
    CHECK_FALSE(v.ok);
    CHECK(v.reason == "it has no chain line");
  }
  SUBCASE("session_end says another lost total than the record holds") {
    std::string c = fresh();
    auto es = parsed(bodies(c, id));
    es[22]["lost_total"] = 0;
    rewrite_session(c, id, es);
    auto v = verify_file(c, &pub);
    CHECK(v.where == "entry 23");
    CHECK(v.reason == "lost_total 0 is not the sum of the lost entries (12)");
  }
}

TEST_CASE("a whole session made up without the key does not verify") {
  TempDir dir;
  std::string db = dir.file("r.db");
  {
    Store s(db, Store::Mode::Write);
    write_session(s, 12, &test_key());
  }
  // Genesis naming the real (public) key, chain recomputed, no session_end,
  // no checkpoints: it would pass as an unterminated session.
  json g = {{"type", "genesis"}, {"seq", 1}, {"session", 1}, {"origin", origin_of(7)}, {"host", "host"},
            {"policy", "p"}, {"policy_sha256", to_hex(sha256("p"))},
            {"public_key", test_key().verifier().vkey()}, {"key_id", test_key().verifier().key_id_hex()}};
  std::vector<json> es{g};
  for (int i = 0; i < 5; ++i) es.push_back({{"type", "syscall"}, {"session", 1}, {"nr", 59}});
  rewrite_session(db, 1, es);
  sql(db, "DELETE FROM checkpoints");
  auto v = verify_file(db, &test_key().verifier());
  CHECK_FALSE(v.ok);
  CHECK(v.where == "entry 1");
  CHECK(v.reason.find("not sealed by a checkpoint of size 1") != std::string::npos);
}

TEST_CASE("a long session is read and hashed a batch ahead: a change far in is still named exactly") {
  // verify_store hashes leaves on a second thread, thousands of entries
  // ahead of the checks; what it reports must not depend on that.
  TempDir dir;
  std::string db = dir.file("r.db");
  {
    Store s(db, Store::Mode::Write);
    write_session(s, 9000, &test_key());
    write_session(s, 30, &test_key());
  }
  const VerifierKey& pub = test_key().verifier();
  auto whole = verify_file(db, &pub);
  CHECK(whole.ok);
  CHECK(whole.entries == 9000);
  auto fresh = copies_of(dir, db);
  SUBCASE("a field edited in the fourth batch") {
    std::string c = fresh();
    edit_entries(c, [](auto& es) {
      for (auto& e : es)
        if (e.session == 1 && e.seq == 7001) e.body.replace(e.body.find("\"pid\":42"), 8, "\"pid\":43");
    });
    auto v = verify_file(c, &pub);
    CHECK(v.where == "entry 7001");
    CHECK(v.reason.find("altered") != std::string::npos);
  }
  SUBCASE("an entry deleted after the first batch, and the second session still read") {
    std::string c = fresh();
    delete_entries(c, 1, [](int64_t seq) { return seq == 4097; });
    auto v = verify_file(c, &pub);
    CHECK(v.where == "entry 4097");
    CHECK(v.reason.find("missing") != std::string::npos);
    Store s(fresh(), Store::Mode::Read);
    auto r = verify_store(s, std::nullopt, &pub, std::nullopt);
    REQUIRE(r.sessions.size() == 2);
    CHECK(r.sessions[1].second.ok);
    CHECK(r.sessions[1].second.entries == 30);
  }
}

TEST_CASE("a busy session's batches reuse their room: every entry is stored as it was appended") {
  // Twelve full batches and more: from the third one the writer hands
  // emptied batches back for reuse; nothing of an earlier batch may show.
  TempDir dir;
  std::string db = dir.file("r.db");
  const int n = 12 * int(SessionWriter::kBatch) + 17;
  {
    Store s(db, Store::Mode::Write);
    write_session(s, n, &test_key());
  }
  auto v = verify_file(db, &test_key().verifier());
  CHECK(v.ok);
  CHECK(v.entries == n);
  int64_t expected = 0;
  size_t mismatched = 0;
  for (const auto& e : testsupport::stored_entries(db)) {
    ++expected;
    json j = json::parse(e.body);
    if (e.seq != expected || j["seq"] != expected || (j["type"] == "syscall" && j["nr"] != expected)) ++mismatched;
  }
  CHECK(expected == n);
  CHECK(mismatched == 0);
}

TEST_CASE("an index that misdescribes an entry fails verification: queries skip by it") {
  // query --type/--pid skip blocks by the index, which no hash covers; an
  // edited index could hide an entry from them in a record that verifies.
  TempDir dir;
  std::string db = dir.file("r.db");
  {
    Store s(db, Store::Mode::Write);
    write_session(s, 30, nullptr, true, true);
  }
  REQUIRE(verify_file(db).ok);
  auto fresh = copies_of(dir, db);
  auto fails_at = [](const std::string& c, const char* says, const char* where = "entry 2") {
    auto v = verify_file(c);
    INFO(v.where << ": " << v.reason);
    CHECK_FALSE(v.ok);
    CHECK(v.where == where);
    CHECK(v.reason.find("the record's index disagrees with the entry (it says " + std::string(says)) == 0);
  };
  std::string c = fresh();
  sql(c, "UPDATE blocks SET types='genesis lost session_end'");
  fails_at(c, "a block without this type");
  c = fresh();
  sql(c, "UPDATE blocks SET pid_bits=0");
  fails_at(c, "a block without this pid", "entry 1");  // the genesis entry's pid 0 has its bit too
  c = fresh();
  sql(c, "UPDATE blocks SET ts_min=ts_min+1");
  fails_at(c, "a block of another time span");
  c = fresh();
  edit_entries(c, [](auto& es) { es.at(1).pid = 7; });
  fails_at(c, "pid 7");
  c = fresh();
  edit_entries(c, [](auto& es) { es.at(1).type = "fork"; });
  fails_at(c, "type fork");
}

TEST_CASE("deleting a session's row does not hide it from verification") {
  TempDir dir;
  std::string db = dir.file("r.db");
  {
    Store s(db, Store::Mode::Write);
    write_session(s, 12, &test_key());
    write_session(s, 12, &test_key());
  }
  sql(db, "DELETE FROM sessions WHERE id=2");
  edit_entries(db, [](auto& es) {
    for (auto& e : es)
      if (e.session == 2 && e.seq == 4) e.body.replace(e.body.find("\"pid\":42"), 8, "\"pid\":7");
  });
  Store s(db, Store::Mode::Read);
  auto r = verify_store(s, std::nullopt, &test_key().verifier(), std::nullopt);
  CHECK_FALSE(r.ok);
  CHECK(r.bad_session == 2);
}

TEST_CASE("a proof is checked with the public key alone, and any changed byte fails it") {
  TempDir dir;
  std::string db = dir.file("p.db");
  {
    Store s(db, Store::Mode::Write);
    write_session(s, 23, &test_key());
  }
  Store s(db, Store::Mode::Read);
  const VerifierKey& key = test_key().verifier();
  auto other = SigningKey::generate("other");
  // Compact, so that every byte means something (whitespace would not).
  auto compact = [](const std::string& p) { return json::parse(p).dump(); };
  for (int64_t entry : {1, 2, 9, 16, 23}) {
    std::string proof = compact(make_inclusion_proof(s, 1, entry));
    auto v = check_proof(proof, key);
    INFO(entry << ": " << v.reason);
    REQUIRE(v.ok);
    CHECK(v.what.find("entry " + std::to_string(entry) + " of session 1 is in the tree of size 23") == 0);
    CHECK(json::parse(v.entry)["seq"] == entry);
    CHECK_FALSE(check_proof(proof, other.verifier()).ok);  // another key signed nothing here
  }
  std::string proof = compact(make_inclusion_proof(s, 1, 9));
  std::string consistency = compact(make_consistency_proof(s, 1, 10, std::nullopt));
  REQUIRE(check_proof(consistency, key).ok);
  for (const std::string* p : {&proof, &consistency}) {
    int rejected = 0;
    for (size_t i = 0; i < p->size(); ++i) {
      std::string m = *p;
      m[i] = char(m[i] ^ 1);
      auto v = check_proof(m, key);
      INFO("byte " << i << " of " << *p);
      CHECK_FALSE(v.ok);
      rejected += !v.ok;
    }
    CHECK(rejected == int(p->size()));
  }
  // A consistency proof from a size without a checkpoint needs the one saved elsewhere.
  std::string unsaved = compact(make_consistency_proof(s, 1, 7, std::nullopt));
  auto v = check_proof(unsaved, key);
  CHECK_FALSE(v.ok);
  CHECK(v.reason.find("give the one you saved") != std::string::npos);
  auto notes = s.checkpoints(1);
  CHECK_FALSE(check_proof(unsaved, key, {notes.front().note}).ok);  // size 1, not 7
  // A saved note of the smaller size must agree with the proof, even when
  // the proof brings its own (signed) checkpoint of that size.
  std::string note10;
  for (const auto& c : notes)
    if (c.tree_size == 10) note10 = c.note;
  REQUIRE(!note10.empty());
  CHECK(check_proof(consistency, key, {notes.front().note, note10}).ok);
  {
    // The key holder rewrote entry 3 and signed a second tree of size 10.
    std::vector<Hash> leaves;
    for (const auto& b : bodies(db, 1)) leaves.push_back(leaf_hash(b));
    leaves[2] = leaf_hash("{\"forged\":1}");
    Checkpoint forked{origin_of(1), 10, root_of(std::span<const Hash>(leaves.data(), 10)), std::nullopt};
    json forged = json::parse(consistency);
    forged["root_from"] = to_hex(forked.root);
    forged["checkpoint_from"] = sign_checkpoint(forked, &test_key());
    forged["proof"] = json::array();
    for (const auto& h : consistency_proof(10, std::span<const Hash>(leaves.data(), 23))) forged["proof"].push_back(to_hex(h));
    forged["root_to"] = to_hex(root_of(std::span<const Hash>(leaves.data(), 23)));
    Checkpoint forked_to{origin_of(1), 23, root_of(std::span<const Hash>(leaves.data(), 23)), std::nullopt};
    forged["checkpoint_to"] = sign_checkpoint(forked_to, &test_key());
    REQUIRE(check_proof(forged.dump(), key).ok);  // signed by the key: alone, it proves the fork
    auto caught = check_proof(forged.dump(), key, {note10});
    CHECK_FALSE(caught.ok);
    CHECK(caught.reason.find("history was rewritten") != std::string::npos);
  }
  {
    // A second, forked note of the smaller size among the saved ones fails
    // the proof wherever it stands in the file.
    std::vector<Hash> leaves;
    for (const auto& b : bodies(db, 1)) leaves.push_back(leaf_hash(b));
    leaves[2] = leaf_hash("{\"forged\":1}");
    Checkpoint forked{origin_of(1), 10, root_of(std::span<const Hash>(leaves.data(), 10)), sha256("chain")};
    std::string forked_note = sign_checkpoint(forked, &test_key());
    CHECK_FALSE(check_proof(consistency, key, {forked_note, note10}).ok);
    CHECK_FALSE(check_proof(consistency, key, {note10, forked_note}).ok);
    // A note of another log (a fleet's file: another host's key) is passed
    // over; one of this log must be signed by the key.
    Checkpoint elsewhere{"flightrec/else/0123456789abcdef0123456789abcdef", 3, forked.root, sha256("c")};
    CHECK(check_proof(consistency, key, {note10, sign_checkpoint(elsewhere, &other)}).ok);
    Checkpoint here_by_other{origin_of(1), 10, forked.root, sha256("c")};
    CHECK_FALSE(check_proof(consistency, key, {note10, sign_checkpoint(here_by_other, &other)}).ok);
    // An inclusion proof is held to the saved notes of its tree size too.
    Checkpoint forked23{origin_of(1), 23, root_of(std::span<const Hash>(leaves.data(), 23)), sha256("chain")};
    CHECK(check_proof(proof, key, {note10}).ok);
    auto rewritten = check_proof(proof, key, {sign_checkpoint(forked23, &test_key())});
    CHECK(rewritten.reason.find("history was rewritten") != std::string::npos);
  }
  // From A to A proves nothing (RFC 9162 2.1.4.2 fails an empty path); prove refuses to make one.
  json same = json::parse(consistency);
  same["to"] = same["from"];
  same["root_to"] = same["root_from"];
  same["proof"] = json::array();
  same["checkpoint_to"] = same["checkpoint_from"];
  CHECK(check_proof(same.dump(), key).reason == "from and to are not 1 <= from < to");
  CHECK_THROWS_AS(make_consistency_proof(s, 1, 10, 10), Error);
  // Bytes a JSON parser would skip or stop at.
  CHECK(check_proof("\xEF\xBB\xBF" + proof, key).reason == "the proof starts with a byte order mark");
  CHECK(check_proof(proof + std::string(1, '\0') + "junk", key).reason == "the proof holds a NUL byte");
  json zero = json::parse(proof);
  zero["session"] = 0;
  CHECK_FALSE(check_proof(zero.dump(), key).ok);
  CHECK(check_proof(R"({"type":"inclusion","type":"consistency"})", key).reason == "a member is given twice");
  // Members added, removed or of the wrong kind.
  json j = json::parse(proof);
  j["extra"] = 1;
  CHECK(check_proof(j.dump(), key).reason.find("unknown member") == 0);
  j = json::parse(proof);
  j.erase("checkpoint");
  CHECK_FALSE(check_proof(j.dump(), key).ok);
  j = json::parse(proof);
  j["proof"] = "x";
  CHECK_FALSE(check_proof(j.dump(), key).ok);
  CHECK_FALSE(check_proof("[]", key).ok);
  CHECK_FALSE(check_proof("", key).ok);
}

TEST_CASE("a record edited to run queries of its own (a recursive view, a trigger, a computed column) is refused, not run") {
  TempDir dir;
  auto fresh = [&](const char* name) {
    std::string path = dir.file(name);
    Store s(path, Store::Mode::Write);
    write_session(s, 12, &test_key());
    return path;
  };
  auto refused = [](const std::string& path, const std::string& why) {
    for (auto mode : {Store::Mode::Read, Store::Mode::Write}) {
      try {
        Store s(path, mode);
        FAIL("opened " << path);
      } catch (const flightrec::Error& e) {
        std::string what = e.what();
        CHECK_MESSAGE(what.find(why) != std::string::npos, what);
      }
    }
  };
  // The blocks every reader reads, become an endless recursive query.
  std::string view = fresh("view.db");
  sql(view, "ALTER TABLE blocks RENAME TO b; CREATE VIEW blocks AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL "
            "SELECT x + 1 FROM r) SELECT x AS id, 1 AS count, '' AS types, 0 AS pid_bits, 0 AS ts_min, 0 AS ts_max, "
            "x'' AS chain, x'' AS data, 1 AS session, x AS first_seq, NULL AS path_bits FROM r");
  refused(view, "that flightrec does not make");
  std::string trigger = fresh("trigger.db");
  sql(trigger, "CREATE TRIGGER t AFTER INSERT ON checkpoints BEGIN SELECT 1; END");
  refused(trigger, "holds a trigger named t");
  std::string table = fresh("table.db");
  sql(table, "CREATE TABLE extra(x)");
  refused(table, "holds a table named extra");
  // A column computed as it is read, one gigabyte a row.
  std::string column = fresh("column.db");
  sql(column, "ALTER TABLE checkpoints ADD COLUMN big BLOB GENERATED ALWAYS AS (zeroblob(1000000000)) VIRTUAL");
  refused(column, "columns flightrec does not make");
  // The record as flightrec made it still reads.
  CHECK(verify_file(fresh("plain.db"), &test_key().verifier()).ok);
}

TEST_CASE("a new record and its write-ahead log are its owner's alone (0600), whatever the umask") {
  TempDir dir;
  std::string path = dir.file("mine.db");
  mode_t old = umask(0);
  {
    Store s(path, Store::Mode::Write);
    write_session(s, 6, &test_key(), false);
    struct stat st {};
    REQUIRE(stat((path + "-wal").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
  }
  umask(old);
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("bundles: bytes a JSON parser would skip or stop at fail, as does a session id that is none (docs/FORMAT.md 4)") {
  TempDir dir;
  std::string db = dir.file("b.db");
  int64_t id;
  {
    Store s(db, Store::Mode::Write);
    id = write_session(s, 12, &test_key());
  }
  const VerifierKey& pub = test_key().verifier();
  std::string json_doc, lines;
  {
    Store s(db, Store::Mode::Read);
    std::ostringstream a, b;
    export_bundle(s, id, a, BundleFormat::Json);
    export_bundle(s, id, b, BundleFormat::Lines);
    json_doc = a.str();
    lines = b.str();
  }
  auto verdict = [&](const std::string& bytes) {
    std::string path = dir.file("x.bundle");
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    return verify_bundle(path, &pub, std::nullopt).verdict;
  };
  for (const std::string* doc : {&json_doc, &lines}) {
    REQUIRE(verdict(*doc).ok);
    CHECK(verdict("\xEF\xBB\xBF" + *doc).reason == "bundle: it starts with a byte order mark");
    CHECK_FALSE(verdict(*doc + std::string(1, '\0') + "junk").ok);
  }
  CHECK(verdict(json_doc + std::string(1, '\0')).reason == "bundle: it holds a NUL byte");
  std::string crlf_header = lines;
  crlf_header.insert(crlf_header.find('\n'), "\r");
  CHECK(verdict(crlf_header).reason == "bundle header: it holds a carriage return or NUL byte");
  std::string crlf_checkpoint = lines;
  size_t cp = crlf_checkpoint.find("{\"checkpoint\":");
  crlf_checkpoint.insert(crlf_checkpoint.find('\n', cp), "\r");
  CHECK(verdict(crlf_checkpoint).reason.find("holds a carriage return or NUL byte") != std::string::npos);
  std::string zero = json_doc;
  zero.replace(zero.find("\"session\":" + std::to_string(id)), 10 + std::to_string(id).size(), "\"session\":0");
  CHECK(verdict(zero).reason == "bundle: session is not a session id (1 or more)");
}
