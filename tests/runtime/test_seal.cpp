// Signed records end to end with the real binary: keys, bundles, proofs,
// rollback, a crash (SIGKILL) in a busy session, and --on-loss.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "common/text.h"
#include "ledger/checkpoint.h"
#include "ledger/keys.h"
#include "ledger/merkle.h"
#include "runtime/harness.h"

using nlohmann::json;
using namespace rt;
namespace ledger = flightrec::ledger;
using flightrec::hex_decode;

namespace {

ledger::Hash hash_of(const std::string& hex) {
  auto b = hex_decode(hex);
  REQUIRE(b);
  REQUIRE(b->size() == 32);
  ledger::Hash h;
  std::copy(b->begin(), b->end(), h.begin());
  return h;
}

std::vector<ledger::Hash> hashes_of(const json& arr) {
  std::vector<ledger::Hash> out;
  for (const auto& x : arr) out.push_back(hash_of(x.get<std::string>()));
  return out;
}

void write(const std::string& path, const std::string& data) { std::ofstream(path, std::ios::binary) << data; }

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace

TEST_CASE("keygen writes a 0600 private key and never overwrites") {
  TempDir dir;
  std::string keys = dir.file("keys");
  Result r = rt::flightrec({"keygen", "--out", keys, "--name", "test-host"});
  REQUIRE(r.code == 0);
  struct stat st {};
  REQUIRE(stat((keys + "/flightrec.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  std::string before = slurp(keys + "/flightrec.key");
  CHECK(slurp(keys + "/flightrec.pub").rfind("test-host+", 0) == 0);
  r = rt::flightrec({"keygen", "--out", keys});
  CHECK(r.code == 1);
  CHECK(r.err.find("never overwrites") != std::string::npos);
  CHECK(slurp(keys + "/flightrec.key") == before);
}

TEST_CASE("a signed session exports to bundles that verify elsewhere, and tampering shows") {
  REQUIRE(is_root());
  TempDir dir;
  std::string keys = dir.file("keys"), other = dir.file("other"), db = dir.file("s.db");
  REQUIRE(rt::flightrec({"keygen", "--out", keys}).code == 0);
  REQUIRE(rt::flightrec({"keygen", "--out", other}).code == 0);
  Result r = rt::flightrec({"run", "--policy", "observe", "--key", keys, "--checkpoint-entries", "50", "--checkpoint-ms", "0", "--db", db, "--", "sh", "-c",
                        "ls / >/dev/null; cat /etc/hostname"});
  REQUIRE(r.code == 0);
  std::string pub = keys + "/flightrec.pub";
  Result v = rt::flightrec({"verify", "--db", db, "--pubkey", pub});
  CHECK(v.code == 0);
  CHECK(v.out.find("signed by " + slurp(pub).substr(0, slurp(pub).size() - 1)) != std::string::npos);
  CHECK(v.out.find("complete, no gaps") != std::string::npos);
  v = rt::flightrec({"verify", "--db", db, "--pubkey", other + "/flightrec.pub"});
  CHECK(v.code == 1);
  CHECK(v.out.find("FAIL: session 1 entry 1: the record names another signing key") == 0);

  std::string bundle = dir.file("s1.json"), lines = dir.file("s1.jsonl");
  REQUIRE(rt::flightrec({"export", "--db", db, "--session", "1", "--out", bundle}).code == 0);
  REQUIRE(rt::flightrec({"export", "--db", db, "--session", "1", "--out", lines, "--format", "jsonl"}).code == 0);
  CHECK(rt::flightrec({"verify", bundle, "--pubkey", pub}).code == 0);
  CHECK(rt::flightrec({"verify", lines, "--pubkey", pub}).code == 0);

  json doc = json::parse(slurp(bundle));
  CHECK(doc["format"] == "flightrec-bundle");
  size_t n = doc["entries"].size();
  REQUIRE(n > 100);
  CHECK(doc["checkpoints"].size() >= n / 50);

  SUBCASE("an entry edited in the JSON bundle") {
    std::string e = doc["entries"][10];
    size_t at = e.find("\"pid\":");
    REQUIRE(at != std::string::npos);
    e.replace(at, 6, "\"pid\":1");
    doc["entries"][10] = e;
    write(bundle, doc.dump());
    Result f = rt::flightrec({"verify", bundle, "--pubkey", pub});
    CHECK(f.code == 1);
    // Checkpoints at 1 (genesis), 51, 101...: entry 11 is first covered at 51.
    CHECK(f.out.find("FAIL: session 1 checkpoint at size 51: its root hash") == 0);
  }
  SUBCASE("a line deleted from the JSON Lines bundle") {
    auto ls = lines_of(slurp(lines));
    ls.erase(ls.begin() + 20);  // header is line 0: entry 20 or so
    write(lines, join(ls));
    Result f = rt::flightrec({"verify", lines, "--pubkey", pub});
    CHECK(f.code == 1);
    CHECK(f.out.find("FAIL: session 1 entry ") == 0);
    CHECK(f.out.find("removed, inserted, reordered or spliced") != std::string::npos);
  }
  SUBCASE("the tail cut off the JSON Lines bundle: caught with a checkpoint saved earlier") {
    std::string saved = dir.file("saved.txt");
    write(saved, doc["checkpoints"].back().get<std::string>());  // the end checkpoint, kept elsewhere
    auto ls = lines_of(slurp(lines));
    ls.resize(ls.size() - 3);  // session_end, its checkpoint, and one more entry
    while (ls.back().rfind("{\"checkpoint\"", 0) != 0) ls.pop_back();  // end at a checkpoint
    write(lines, join(ls));
    Result f = rt::flightrec({"verify", lines, "--pubkey", pub});
    CHECK(f.code == 0);  // on its own it looks like a crash
    CHECK(f.out.find("unterminated session") != std::string::npos);
    f = rt::flightrec({"verify", lines, "--pubkey", pub, "--checkpoint", saved});
    CHECK(f.code == 1);
    CHECK(f.out.find("FAIL: session 1 saved checkpoint: the record holds") == 0);
    CHECK(f.out.find("truncated or rolled back") != std::string::npos);
  }
}

TEST_CASE("inclusion and consistency proofs verify against the signed checkpoint") {
  REQUIRE(is_root());
  TempDir dir;
  std::string keys = dir.file("keys"), db = dir.file("s.db");
  REQUIRE(rt::flightrec({"keygen", "--out", keys}).code == 0);
  REQUIRE(rt::flightrec({"run", "--policy", "observe", "--key", keys, "--checkpoint-entries", "40", "--checkpoint-ms", "0", "--db", db, "--", "sh", "-c",
                     "cat /etc/hostname /etc/os-release >/dev/null"})
              .code == 0);
  auto key = ledger::VerifierKey::parse(slurp(keys + "/flightrec.pub"));
  REQUIRE(key);

  Result r = rt::flightrec({"prove", "--db", db, "--session", "1", "--entry", "37"});
  REQUIRE(r.code == 0);
  json p = json::parse(r.out);
  CHECK(p["leaf_index"] == 36);
  // The checkpoint is signed and its root is the proof's root.
  std::string why;
  auto note = ledger::parse_note(p["checkpoint"].get<std::string>(), &why);
  REQUIRE(note);
  CHECK(ledger::check_signature(*note, *key).empty());
  auto cp = ledger::parse_checkpoint(note->text, &why);
  REQUIRE(cp);
  CHECK(cp->size == p["tree_size"].get<uint64_t>());
  CHECK(ledger::to_hex(cp->root) == p["root"]);
  // The leaf is the entry's hash, and the path leads to the root.
  CHECK(ledger::to_hex(ledger::leaf_hash(p["entry"].get<std::string>())) == p["leaf_hash"]);
  CHECK(ledger::verify_inclusion(36, cp->size, hash_of(p["leaf_hash"]), hashes_of(p["proof"]), cp->root));
  CHECK_FALSE(ledger::verify_inclusion(35, cp->size, hash_of(p["leaf_hash"]), hashes_of(p["proof"]), cp->root));

  // Checkpoints at 1 (genesis), 41, 81...
  r = rt::flightrec({"prove", "--db", db, "--session", "1", "--from", "41", "--to", "81"});
  REQUIRE(r.code == 0);
  p = json::parse(r.out);
  CHECK(ledger::verify_consistency(41, 81, hashes_of(p["proof"]), hash_of(p["root_from"]), hash_of(p["root_to"])));
  auto n40 = ledger::parse_note(p["checkpoint_from"].get<std::string>(), &why);
  REQUIRE(n40);
  CHECK(ledger::to_hex(ledger::parse_checkpoint(n40->text, &why)->root) == p["root_from"]);

  CHECK(rt::flightrec({"prove", "--db", db, "--session", "1", "--entry", "999999"}).code == 1);
  CHECK(rt::flightrec({"prove", "--db", db, "--session", "1"}).code == 2);
}

TEST_CASE("SIGKILL of flightrec in a busy session: committed entries verify, the session is unterminated") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("s.db"), keys = dir.file("keys");
  REQUIRE(rt::flightrec({"keygen", "--out", keys}).code == 0);
  Proc p = start({FLIGHTREC_BIN, "run", "--policy", "observe", "--key", keys, "--db", db, "--", BENCH_SYSCALLS_BIN, "rate", "100000", "30"});
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  kill(p.pid, SIGKILL);
  Result r = wait(p);
  CHECK(r.code == 128 + SIGKILL);
  // The command died with it (no unrecorded survivor).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(run({"pgrep", "-f", std::string(BENCH_SYSCALLS_BIN) + " rate 100000 30"}).code == 1);

  Result v = rt::flightrec({"verify", "--db", db, "--pubkey", keys + "/flightrec.pub"});
  INFO(v.out);
  CHECK(v.code == 0);
  CHECK(v.out.find("unterminated session (no end checkpoint)") != std::string::npos);
  auto all = entries(db);
  CHECK(all.size() > 10000);
  CHECK(all.back()["type"] != "session_end");
}

TEST_CASE("lost events: verify reports the gaps; --on-loss freeze and kill act on them") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("c.db");
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--ring-size", "64K", "--", BENCH_SYSCALLS_BIN, "getppid", "300000"});
  REQUIRE(r.code == 0);
  Result v = rt::flightrec({"verify", "--db", db});
  CHECK(v.code == 0);
  CHECK(v.out.find("complete with ") != std::string::npos);
  CHECK(v.out.find(" events lost)") != std::string::npos);
  auto genesis = entries(db).front();
  CHECK(genesis["on_loss"] == "continue");

  std::string fdb = dir.file("f.db");
  r = rt::flightrec({"run", "--policy", "observe", "--db", fdb, "--ring-size", "64K", "--on-loss", "freeze", "--", BENCH_SYSCALLS_BIN,
                 "getppid", "300000"});
  CHECK(r.code == 0);
  auto all = entries(fdb);
  CHECK(all.front()["on_loss"] == "freeze");
  CHECK_FALSE(of_type(all, "freeze").empty());
  CHECK_FALSE(of_type(all, "thaw").empty());
  CHECK(rt::flightrec({"verify", "--db", fdb}).code == 0);

  std::string kdb = dir.file("k.db");
  r = rt::flightrec({"run", "--policy", "observe", "--db", kdb, "--ring-size", "64K", "--on-loss", "kill", "--", BENCH_SYSCALLS_BIN,
                 "getppid", "50000000"});
  CHECK(r.code == 128 + SIGKILL);
  all = entries(kdb);
  CHECK(all.back()["reason"] == "events were lost and --on-loss kill ended the session");
  CHECK_FALSE(of_type(all, "lost").empty());
  CHECK(rt::flightrec({"verify", "--db", kdb}).code == 0);
}

TEST_CASE("an independent verifier written from docs/FORMAT.md alone agrees with ours") {
  REQUIRE(is_root());
  TempDir dir;
  std::string keys = dir.file("keys"), db = dir.file("s.db");
  REQUIRE(rt::flightrec({"keygen", "--out", keys}).code == 0);
  REQUIRE(rt::flightrec({"run", "--policy", "observe", "--key", keys, "--db", db, "--", "sh", "-c", "ls / >/dev/null; cat /etc/hostname"})
              .code == 0);
  std::string pub = keys + "/flightrec.pub";
  for (const char* format : {"json", "jsonl"}) {
    std::string bundle = dir.file(std::string("b.") + format);
    REQUIRE(rt::flightrec({"export", "--db", db, "--session", "1", "--out", bundle, "--format", format}).code == 0);
    Result r = run({"/usr/bin/python3", FORMAT_VERIFIER, bundle, "--pubkey", pub});
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.out.rfind("OK:", 0) == 0);
    // One byte of one entry changed: both verifiers refuse it.
    std::string text = slurp(bundle);
    size_t at = text.find("/etc/hostname");
    REQUIRE(at != std::string::npos);
    text[at + 5] = 'H';
    write(bundle, text);
    r = run({"/usr/bin/python3", FORMAT_VERIFIER, bundle, "--pubkey", pub});
    CHECK(r.code == 1);
    CHECK(r.out.rfind("FAIL:", 0) == 0);
    CHECK(rt::flightrec({"verify", bundle, "--pubkey", pub}).code == 1);
  }
}

TEST_CASE("a checkpoint after every entry (and two wanted at one size) still ends the session") {
  REQUIRE(is_root());
  TempDir dir;
  std::string db = dir.file("s.db");
  Result r = rt::flightrec({"run", "--policy", "observe", "--checkpoint-entries", "1", "--checkpoint-ms", "0", "--db", db, "--", "true"});
  CHECK(r.code == 0);
  auto all = entries(db);
  REQUIRE(!all.empty());
  CHECK(all.back()["type"] == "session_end");
  Result v = rt::flightrec({"verify", "--db", db});
  CHECK(v.code == 0);
  CHECK(v.out.find(std::to_string(all.size()) + " checkpoints") != std::string::npos);
}

TEST_CASE("hostile inputs from traced processes and databases do not stop or crash flightrec") {
  REQUIRE(is_root());
  TempDir dir;
  // memfd_create's name once collided with the entry's syscall name.
  std::string db = dir.file("m.db");
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", "/usr/bin/python3", "-c", "import os; os.memfd_create('mine')"});
  CHECK(r.code == 0);
  bool seen = false;
  for (const auto& e : entries(db)) seen = seen || (e.value("name", "") == "memfd_create" && e.value("memfd_name", "") == "mine");
  CHECK(seen);
  CHECK(rt::flightrec({"verify", "--db", db}).code == 0);

  // A FIFO named like libssl: opening it must not block the recorder.
  std::string fifo = dir.file("libssl.so.3");
  std::string fdb = dir.file("f.db");
  // Opened without blocking and closed again: no writer is left, so a
  // blocking open of it by flightrec would never return.
  r = run({"timeout", "-s", "KILL", "60", FLIGHTREC_BIN, "run", "--policy", "observe", "--db", fdb, "--", "/usr/bin/python3", "-c",
           "import os, time\nos.mkfifo('" + fifo + "')\nos.close(os.open('" + fifo +
               "', os.O_RDONLY | os.O_NONBLOCK))\ntime.sleep(0.3)\nprint('opened')"});
  CHECK(r.code == 0);
  CHECK(r.out == "opened\n");
  CHECK(rt::flightrec({"verify", "--db", fdb}).code == 0);

  // prove against a database with a checkpoint row claiming a huge tree.
  sqlite(db, "INSERT INTO checkpoints VALUES (1, 99999999, 'forged')");
  r = rt::flightrec({"prove", "--db", db, "--session", "1", "--entry", "3"});
  CHECK(r.code == 1);
  CHECK(r.err.find("run flightrec verify") != std::string::npos);
}
