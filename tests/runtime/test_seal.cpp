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
  auto key = ledger::VerifierKey::parse_file(slurp(keys + "/flightrec.pub"));
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

  // A third party holds the proof and the public key, nothing else.
  TempDir elsewhere;
  std::string proof = elsewhere.file("entry37.json"), pub = elsewhere.file("flightrec.pub");
  std::filesystem::copy_file(keys + "/flightrec.pub", pub);
  std::ofstream(proof) << rt::flightrec({"prove", "--db", db, "--session", "1", "--entry", "37"}).out;
  r = rt::flightrec({"verify-proof", proof, "--pubkey", pub});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("OK: entry 37 of session 1 is in the tree of size ") == 0);
  CHECK(count_lines(r.out) == 2);  // and the entry, decoded
  std::string text = slurp(proof);
  std::string root = json::parse(text)["root"];
  std::string forged = root;
  forged[10] = forged[10] == '0' ? '1' : '0';
  text.replace(text.find(root), root.size(), forged);
  std::ofstream(proof) << text;
  r = rt::flightrec({"verify-proof", proof, "--pubkey", pub});
  CHECK(r.code == 1);
  CHECK(r.out.find("FAIL: ") == 0);
  std::string consistency = elsewhere.file("41-81.json");
  std::ofstream(consistency) << rt::flightrec({"prove", "--db", db, "--session", "1", "--from", "41", "--to", "81"}).out;
  r = rt::flightrec({"verify-proof", consistency, "--pubkey", pub, "--json"});
  CHECK(r.code == 0);
  CHECK(json::parse(r.out)["ok"] == true);
  REQUIRE(rt::flightrec({"keygen", "--out", elsewhere.file("other")}).code == 0);
  CHECK(rt::flightrec({"verify-proof", consistency, "--pubkey", elsewhere.file("other") + "/flightrec.pub"}).code == 1);
  CHECK(rt::flightrec({"verify-proof", consistency}).code == 2);  // no key, no proof
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
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--ring-size", "64K", "--on-loss", "continue", "--",
                            BENCH_SYSCALLS_BIN, "getppid", "300000"});
  REQUIRE(r.code == 0);
  CHECK(r.err.find("flightrec: WARNING: ") != std::string::npos);  // never silent
  CHECK(r.err.find(" events lost (the ring buffer was full): the record has a gap") != std::string::npos);
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

TEST_CASE("a saved-checkpoint file of notes appended by `checkpoint >>`: both verifiers check every note") {
  REQUIRE(is_root());
  TempDir dir;
  std::string keys = dir.file("keys"), db = dir.file("s.db"), saved = dir.file("saved.txt");
  REQUIRE(rt::flightrec({"keygen", "--out", keys}).code == 0);
  std::string pub = keys + "/flightrec.pub";
  REQUIRE(rt::flightrec({"run", "--policy", "observe", "--key", keys, "--db", db, "--checkpoint-entries", "20",
                         "--checkpoint-ms", "0", "--", "sh", "-c", "ls / /usr /etc >/dev/null"})
              .code == 0);
  // Three notes appended one after the other, as `checkpoint ... >> saved.txt` does.
  std::string file;
  for (const char* size : {"1", "21", "41"}) {
    Result c = rt::flightrec({"checkpoint", "--db", db, "--session", "1", "--size", size});
    REQUIRE(c.code == 0);
    file += c.out;
  }
  write(saved, file);
  std::string bundle = dir.file("b.jsonl");
  REQUIRE(rt::flightrec({"export", "--db", db, "--session", "1", "--out", bundle, "--format", "jsonl"}).code == 0);
  Result ours = rt::flightrec({"verify", bundle, "--pubkey", pub, "--checkpoint", saved});
  Result theirs = run({"/usr/bin/python3", FORMAT_VERIFIER, bundle, "--pubkey", pub, "--checkpoint", saved});
  INFO(ours.out << ours.err << theirs.out << theirs.err);
  CHECK(ours.code == 0);
  CHECK(theirs.code == 0);
  CHECK(rt::flightrec({"verify", "--db", db, "--pubkey", pub, "--checkpoint", saved}).code == 0);
  // Cut back to 30 entries: the third note (size 41) tells both.
  auto ls = lines_of(slurp(bundle));
  std::vector<std::string> cut;
  int entries = 0;
  for (const auto& l : ls) {
    bool checkpoint = l.rfind("{\"checkpoint\"", 0) == 0, header = cut.empty();
    if (!checkpoint && !header && ++entries > 30) break;
    cut.push_back(l);
  }
  write(bundle, join(cut));
  ours = rt::flightrec({"verify", bundle, "--pubkey", pub, "--checkpoint", saved});
  theirs = run({"/usr/bin/python3", FORMAT_VERIFIER, bundle, "--pubkey", pub, "--checkpoint", saved});
  CHECK(ours.code == 1);
  CHECK(ours.out.find("FAIL: session 1 saved checkpoint 3: the record holds 30 entries") == 0);
  CHECK(theirs.code == 1);
  CHECK(theirs.out.rfind("FAIL:", 0) == 0);
  // A note cut short (no signature) makes the file unusable for both.
  write(saved, file.substr(0, file.rfind("\n\n") + 1));
  CHECK(rt::flightrec({"verify", "--db", db, "--pubkey", pub, "--checkpoint", saved}).code == 1);
  CHECK(run({"/usr/bin/python3", FORMAT_VERIFIER, dir.file("b.jsonl"), "--pubkey", pub, "--checkpoint", saved}).code == 1);
}

TEST_CASE("bundles are read by the format's rules alone: both verifiers refuse the same doubtful bundles") {
  REQUIRE(is_root());
  TempDir dir;
  std::string keys = dir.file("keys"), db = dir.file("s.db");
  REQUIRE(rt::flightrec({"keygen", "--out", keys}).code == 0);
  // A checkpoint every 5 entries, none on time: the cadence rule has teeth.
  REQUIRE(rt::flightrec({"run", "--policy", "observe", "--key", keys, "--db", db, "--checkpoint-entries", "5",
                         "--checkpoint-ms", "0", "--", "sh", "-c", "ls / >/dev/null"})
              .code == 0);
  std::string pub = keys + "/flightrec.pub";
  std::string json_bundle = dir.file("b.json"), lines_bundle = dir.file("b.jsonl");
  REQUIRE(rt::flightrec({"export", "--db", db, "--session", "1", "--out", json_bundle}).code == 0);
  REQUIRE(rt::flightrec({"export", "--db", db, "--session", "1", "--out", lines_bundle, "--format", "jsonl"}).code == 0);
  std::string json_text = slurp(json_bundle), lines_text = slurp(lines_bundle);
  auto both_refuse = [&](const std::string& what, const std::string& text, const std::string& ours_says) {
    std::string f = dir.file("doubtful");
    write(f, text);
    Result ours = rt::flightrec({"verify", f, "--pubkey", pub});
    Result theirs = run({"/usr/bin/python3", FORMAT_VERIFIER, f, "--pubkey", pub});
    INFO(what << "\nours: " << ours.out << ours.err << "\ntheirs: " << theirs.out << theirs.err);
    CHECK(ours.code == 1);
    CHECK(ours.out.find(ours_says) != std::string::npos);
    CHECK(theirs.code == 1);
    CHECK(theirs.out.rfind("FAIL:", 0) == 0);
  };
  // Both accept the bundles as exported.
  for (const auto& f : {json_bundle, lines_bundle}) {
    CHECK(rt::flightrec({"verify", f, "--pubkey", pub}).code == 0);
    CHECK(run({"/usr/bin/python3", FORMAT_VERIFIER, f, "--pubkey", pub}).code == 0);
  }
  // A member given twice: the first copy is what other readers show.
  both_refuse("session twice", "{\"session\":2," + json_text.substr(1), "given twice");
  size_t entries_at = json_text.find("\"entries\":");
  both_refuse("entries twice", "{\"entries\":[]," + json_text.substr(1), "given twice");
  // A member the format does not have.
  both_refuse("an extra member", "{\"note\":\"x\"," + json_text.substr(1), "members other than those of the format");
  // Nested deeper than the format allows.
  std::string nested = json_text;
  nested.insert(entries_at + 11, "[[]],");
  both_refuse("nested", nested, "nested more than 2 deep");
  // JSON Lines cut short (no final newline), or with a checkpoint repeated.
  both_refuse("no final newline", lines_text.substr(0, lines_text.size() - 1), "does not end with a newline");
  size_t cp_line = lines_text.find("{\"checkpoint\":");
  size_t cp_end = lines_text.find('\n', cp_line) + 1;
  std::string repeated = lines_text;
  repeated.insert(cp_end, lines_text.substr(cp_line, cp_end - cp_line));
  both_refuse("checkpoint repeated", repeated, "a second checkpoint of the same tree size");
  // A checkpoint removed from the middle (the cadence says one was there).
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = lines_text.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(lines_text.substr(at, nl - at + 1));
  int seen = 0;
  std::string without;
  for (const auto& l : lines) {
    bool cp = l.starts_with("{\"checkpoint\":");
    if (cp && ++seen == 2) continue;  // the one at size 5
    without += l;
  }
  REQUIRE(seen >= 3);
  both_refuse("checkpoint removed", without, "a checkpoint between was removed");
  // A second signature line with the trusted key's name that does not verify.
  std::string cp_json = lines_text.substr(cp_line, cp_end - cp_line);
  auto cp = json::parse(cp_json);
  std::string note = cp["checkpoint"];
  std::string sig_line = note.substr(note.rfind("\n\xe2\x80\x94 ") + 1);
  std::string forged = sig_line;
  size_t blob = forged.rfind(' ') + 1;
  forged[blob + 10] = forged[blob + 10] == 'A' ? 'B' : 'A';
  std::string two_sigs = lines_text;
  two_sigs.replace(cp_line, cp_end - cp_line, json({{"checkpoint", note + forged}}).dump() + "\n");
  both_refuse("a forged second signature", two_sigs, "a signature line by");
  // The JSON document is read as a stream: its shape is still checked whole.
  std::string not_string = json_text;
  not_string.insert(entries_at + 11, "42,");
  both_refuse("an entry that is not a string", not_string, "an entry is not a string");
  size_t cps_at = json_text.find("\"checkpoints\":[") + 15;
  size_t second_cp = json_text.find("\",\"", cps_at) + 2;
  std::string swapped = json_text;  // the second checkpoint moved to the front
  size_t second_end = json_text.find("\",\"", second_cp) + 1;
  std::string second = json_text.substr(second_cp, second_end - second_cp);
  swapped.erase(second_cp - 1, second_end - second_cp + 1);
  swapped.insert(cps_at, second + ",");
  both_refuse("checkpoints out of order", swapped, "increasing tree size");
  both_refuse("entries as an object", std::string(json_text).replace(entries_at, 11, "\"entries\":{\"a\":\"b\"},\"x\":["),
              "bundle");
  both_refuse("a second document after the first", json_text + "{}\n", "");
  // Bytes some JSON parsers skip (a byte order mark), stop at (NUL) or
  // take for whitespace (a carriage return in JSON Lines): refused by both.
  both_refuse("a byte order mark before a JSON bundle", "\xEF\xBB\xBF" + json_text, "byte order mark");
  both_refuse("a byte order mark before a JSON Lines bundle", "\xEF\xBB\xBF" + lines_text, "byte order mark");
  both_refuse("a NUL, then anything", json_text + std::string(1, '\0') + "{\"x\":1}", "NUL byte");
  std::string crlf = lines_text;
  crlf.insert(crlf.find('\n'), "\r");
  both_refuse("CRLF after the header", crlf, "carriage return");
  std::string cr_checkpoint = lines_text;
  cr_checkpoint.insert(cp_end - 1, "\r");
  both_refuse("CRLF after a checkpoint line", cr_checkpoint, "carriage return");
  std::string session0 = lines_text;
  session0.replace(session0.find("\"session\":1}"), 12, "\"session\":0}");
  both_refuse("session 0", session0, "not a session id");
  // Members in another order (JSON objects are unordered): the checkpoints
  // after the entries still verify (a second pass), and a session member
  // that is not the entries' session is refused wherever it stands.
  size_t entries_end = json_text.find("],\"format\"") + 1;
  std::string reordered = "{" + json_text.substr(entries_at, entries_end - entries_at) + "," +
                          json_text.substr(1, entries_at - 1) + json_text.substr(entries_end + 1);
  {
    std::string f = dir.file("reordered.json");
    write(f, reordered);
    Result r = rt::flightrec({"verify", f, "--pubkey", pub});
    CHECK_MESSAGE(r.code == 0, r.out << r.err);
    CHECK(run({"/usr/bin/python3", FORMAT_VERIFIER, f, "--pubkey", pub}).code == 0);
  }
  std::string other_session = json_text;
  other_session.replace(other_session.rfind("\"session\":1}"), 12, "\"session\":2}");
  both_refuse("another session", other_session, "session");
  Result cut = [&] {
    std::string f = dir.file("cut.json");
    write(f, json_text.substr(0, json_text.size() / 2));
    return rt::flightrec({"verify", f, "--pubkey", pub});
  }();
  CHECK(cut.code == 1);
  CHECK(cut.err.find("is not a flightrec bundle") != std::string::npos);
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
