// The session pipeline without root: hand-made ring records (hostile ones
// too) go through decode, the real record (SQLite, hash chain, checkpoints)
// and observers; what the observers emit is sealed right after what they saw.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "ledger/store.h"
#include "ledger/verify.h"
#include "recorder/recorder.h"
#include "session/pipeline.h"
#include "unit/files.h"
#include "unit/records.h"

using namespace flightrec;
using nlohmann::json;

namespace {

constexpr uint32_t kGetppid = 110, kOpenat = 257;

// Notes every entry it sees; emits one entry after each openat.
struct Watcher : session::Observer {
  std::string name;
  std::vector<int64_t> seen;
  std::vector<std::string> types;
  explicit Watcher(std::string n) : name(std::move(n)) {}
  void observe(const events::Entry& e, session::Emitted& out) override {
    seen.push_back(e.int_or("seq"));
    types.push_back(e.type());
    if (e.string_or("name") == "openat") {
      auto& v = out.add("violation");
      v.set("rule_id", "test." + name);
      v.set("of_seq", e.int_or("seq"));
    }
  }
};

std::vector<json> stored(const std::string& db) {
  ledger::Store store(db, ledger::Store::Mode::Read);
  std::vector<json> out;
  store.for_each_entry({}, [&](const ledger::EntryRow& r) {
    out.push_back(json::parse(r.body));
    return true;
  });
  return out;
}

// A real record with a recorder and a pipeline on it; finish() ends the session.
struct Recording {
  static recorder::SessionMeta meta(uint64_t record_rate) {
    recorder::SessionMeta m;
    m.mode = "run";
    m.record_rate = record_rate;
    return m;
  }
  ledger::Store store;
  recorder::Recorder rec;
  session::Pipeline pipeline{rec};
  explicit Recording(const std::string& db, uint64_t record_rate = 0)
      : store(db, ledger::Store::Mode::Write), rec(store, meta(record_rate)) {}
  void feed(const std::vector<uint8_t>& r) { pipeline.on_record(r.data(), r.size()); }
  void finish() { rec.finish(0, "done"); }
};

bool verifies(const std::string& db) {
  ledger::Store store(db, ledger::Store::Mode::Read);
  return ledger::verify_store(store, std::nullopt, nullptr, std::nullopt).ok;
}

}  // namespace

TEST_CASE("each kernel entry is sealed, then seen by the observers in order, then what they emitted") {
  unit::TempDir dir;
  std::string db = dir.file("p.db");
  Watcher first("first"), second("second");
  {
    Recording r(db);
    r.pipeline.add(first);
    r.pipeline.add(second);
    for (int i = 0; i < 50; ++i)
      r.feed(i % 10 == 3 ? unit::syscall_record(kOpenat, 3, {"/etc/hostname"}) : unit::syscall_record(kGetppid, 1, {}));
    r.finish();
  }
  auto all = stored(db);
  REQUIRE(all.size() == 1 + 50 + 5 * 2 + 1);  // genesis, kernel entries, two per openat, session_end
  CHECK(verifies(db));
  CHECK(first.seen == second.seen);
  REQUIRE(first.seen.size() == 50);
  size_t at = 1;  // after genesis
  for (size_t k = 0; k < 50; ++k) {
    const json& e = all.at(at);
    CHECK(e["seq"] == first.seen[k]);  // the observers saw it as recorded
    ++at;
    if (e["name"] == "openat") {
      CHECK(all.at(at)["type"] == "violation");
      CHECK(all.at(at)["rule_id"] == "test.first");  // in the order the observers were added
      CHECK(all.at(at)["of_seq"] == e["seq"]);
      CHECK(all.at(at + 1)["rule_id"] == "test.second");
      CHECK(all.at(at)["comm"] == "flightrec");  // flightrec's own entries, with its header
      at += 2;
    }
  }
  CHECK(all.at(at)["type"] == "session_end");
}

TEST_CASE("hostile records become malformed entries that observers see too; the record still verifies") {
  unit::TempDir dir;
  std::string db = dir.file("h.db");
  Watcher w("w");
  std::vector<std::vector<uint8_t>> records;
  auto lying = unit::syscall_record(kOpenat, 3, {"/etc/hostname"});
  lying[4] ^= 1;  // the header's size disagrees with the record
  records.push_back(lying);
  auto past_end = unit::syscall_record(kOpenat, 3, {"/etc/hostname"});
  fr_syscall r;
  std::memcpy(&r, past_end.data(), sizeof(r));
  r.str_len[0] = 60000;  // a string past the end
  std::memcpy(past_end.data(), &r, sizeof(r));
  records.push_back(past_end);
  records.push_back(std::vector<uint8_t>(10, 0xff));  // shorter than any header
  fr_header h = unit::header(12345, sizeof(fr_header));
  std::vector<uint8_t> unknown(sizeof(h));
  std::memcpy(unknown.data(), &h, sizeof(h));
  records.push_back(unknown);
  std::vector<uint8_t> huge = unit::syscall_record(kGetppid, 0, {});
  fr_header big = unit::header(FR_REC_SYSCALL, 0xffffffffu);
  std::memcpy(huge.data(), &big, sizeof(big));
  records.push_back(huge);
  {
    Recording r(db);
    r.pipeline.add(w);
    for (const auto& bad : records) r.feed(bad);
    r.feed(unit::syscall_record(kGetppid, 1, {}));
    r.finish();
  }
  CHECK(w.types == std::vector<std::string>{"malformed", "malformed", "malformed", "malformed", "malformed", "syscall"});
  auto all = stored(db);
  REQUIRE(all.size() == 1 + records.size() + 1 + 1);
  for (size_t i = 0; i < records.size(); ++i) {
    CHECK(all[1 + i]["type"] == "malformed");
    CHECK(all[1 + i]["size"] == records[i].size());
  }
  CHECK(verifies(db));
}

TEST_CASE("entries the rate limit leaves out reach no observer, and their summary is sealed") {
  unit::TempDir dir;
  std::string db = dir.file("r.db");
  Watcher w("w");
  {
    Recording r(db, 10);
    r.pipeline.add(w);
    for (int i = 0; i < 100; ++i)
      r.feed(unit::syscall_record(kGetppid, 1, {}, nullptr, 0, 1000 + uint64_t(i)));  // all in one second
    r.feed(unit::syscall_record(kOpenat, 3, {"/etc/hostname"}, nullptr, 0, 2000));  // never left out
    r.finish();
  }
  CHECK(w.seen.size() == 10 + 1);
  auto all = stored(db);
  size_t summaries = 0, plain = 0;
  for (const auto& e : all) {
    summaries += e["type"] == "summary";
    plain += e.value("name", "") == "getppid";
  }
  CHECK(plain == 10);
  CHECK(summaries == 1);
  CHECK(verifies(db));
}

namespace {

// An AEAD seal's record of `bytes` for process `pid`, unbound (its ssl the
// AEAD context) or bound; at time ts.
std::string aead_record(uint32_t pid, uint64_t ssl, bool unbound, uint64_t ts, const std::string& bytes) {
  std::string raw(sizeof(fr_tls) + bytes.size(), '\0');
  fr_tls r{};
  r.h.type = FR_REC_TLS;
  r.h.size = uint32_t(raw.size());
  r.h.ts_mono_ns = ts;
  r.h.pid = r.h.tid = pid;
  r.h.session = 1;
  r.ssl = ssl;
  r.fd = unbound ? -1 : 5;
  r.func = FR_TLS_AEAD_SEAL;
  r.call_bytes = r.len = uint32_t(bytes.size());
  r.flags = unbound ? FR_TLS_UNBOUND : 0;
  std::memcpy(raw.data(), &r, sizeof(r));
  std::memcpy(raw.data() + sizeof(r), bytes.data(), bytes.size());
  return raw;
}

std::string bind_record(uint32_t pid, uint64_t ctx, uint64_t conn, int32_t fd, uint64_t ts) {
  fr_tls_bind b{};
  b.h.type = FR_REC_TLS_BIND;
  b.h.size = sizeof(b);
  b.h.ts_mono_ns = ts;
  b.h.pid = b.h.tid = pid;
  b.h.session = 1;
  b.ctx = ctx;
  b.conn = conn;
  b.fd = fd;
  return std::string(reinterpret_cast<const char*>(&b), sizeof(b));
}

struct Passed {
  std::vector<fr_tls> tls;
  std::vector<std::string> data;
  size_t others = 0;
  session::TlsBinder::Pass pass() {
    return [this](const void* p, size_t n) {
      if (n < sizeof(fr_tls)) {
        ++others;
        return;
      }
      fr_header h;
      std::memcpy(&h, p, sizeof(h));
      if (h.type != FR_REC_TLS) {
        ++others;
        return;
      }
      fr_tls r;
      std::memcpy(&r, p, sizeof(r));
      tls.push_back(r);
      data.emplace_back(static_cast<const char*>(p) + sizeof(r), n - sizeof(r));
    };
  }
};

}  // namespace

TEST_CASE("tls binder: unbound seals wait for their binding, then go on with its connection, in order") {
  session::TlsBinder binder;
  Passed out;
  auto feed = [&](const std::string& raw) { binder.on_record(raw.data(), raw.size(), out.pass()); };
  feed(aead_record(7, 0xc0, true, 1000, "POST /v1/responses"));
  feed(aead_record(8, 0xc0, true, 1001, "other process, same context address"));
  feed(aead_record(7, 0xc0, true, 1002, " HTTP/1.1\r\n"));
  CHECK(out.tls.empty());
  CHECK(binder.held() == 3);
  feed(aead_record(7, 0xd0, false, 1003, "bound already"));  // passes at once
  REQUIRE(out.tls.size() == 1);
  feed(bind_record(7, 0xc0, 4242, 9, 1004));
  REQUIRE(out.tls.size() == 3);
  CHECK(out.others == 0);  // the binding itself is consumed
  CHECK(out.data[1] == "POST /v1/responses");
  CHECK(out.data[2] == " HTTP/1.1\r\n");
  for (size_t i : {1, 2}) {
    CHECK(out.tls[i].ssl == 4242);
    CHECK(out.tls[i].fd == 9);
    CHECK((out.tls[i].flags & FR_TLS_UNBOUND) == 0);
  }
  CHECK(binder.held() == 1);  // process 8's waits on
  // A binding that never comes: let go after 2 s, as it was.
  feed(aead_record(9, 0xe0, false, 3'000'000'000ull, "later"));
  REQUIRE(out.tls.size() == 5);
  CHECK(out.tls[3].h.pid == 8);
  CHECK(out.tls[3].ssl == 0xc0);
  CHECK((out.tls[3].flags & FR_TLS_UNBOUND) != 0);
  CHECK(out.data[4] == "later");
  CHECK(binder.held() == 0);
}

TEST_CASE("tls binder: what it holds is bounded; the session's end lets all of it go") {
  session::TlsBinder binder;
  Passed out;
  for (uint32_t i = 0; i < 1100; ++i) {
    std::string raw = aead_record(7, 0x100 + i, true, 1000 + i, std::to_string(i));
    binder.on_record(raw.data(), raw.size(), out.pass());
  }
  CHECK(binder.held() == 1024);
  REQUIRE(out.tls.size() == 76);
  CHECK(out.data[0] == "0");  // the oldest first
  // 4 MiB at most: 300 records of 16 KiB.
  for (uint32_t i = 0; i < 300; ++i) {
    std::string raw = aead_record(8, 0x10000 + i, true, 5000, std::string(16384, 'x'));
    binder.on_record(raw.data(), raw.size(), out.pass());
  }
  CHECK(binder.held() * (sizeof(fr_tls) + 16384) <= (4u << 20) + 1024 * (sizeof(fr_tls) + 8));
  size_t before = out.tls.size();
  size_t held = binder.held();
  binder.release_all(out.pass());
  CHECK(out.tls.size() == before + held);
  CHECK(binder.held() == 0);
  // Short or odd records pass as they are, for decode to report.
  std::string shortrec(10, '\x05');
  binder.on_record(shortrec.data(), shortrec.size(), out.pass());
  std::string odd_bind = bind_record(7, 1, 2, 3, 4).substr(0, 70);
  binder.on_record(odd_bind.data(), odd_bind.size(), out.pass());
  CHECK(out.others == 2);
}
