// flightrec verify: recompute a record (database or bundle) and say
// whether it is intact, complete and signed.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "common/progress.h"
#include "common/system.h"
#include "common/text.h"
#include "ledger/bundle.h"
#include "ledger/store.h"
#include "ledger/verify.h"

namespace flightrec::cli {
namespace {

std::string describe(const ledger::SessionVerdict& v) {
  std::string s = std::to_string(v.checkpoints) + " checkpoints";
  if (v.signed_checkpoints)
    s += " signed by " + v.key + (v.key_from_record ? " (the key the record names; pin it with --pubkey)" : "");
  else
    s += ", unsigned";
  if (!v.terminated)
    s += "; unterminated session (no end checkpoint): " +
         std::to_string(v.entries - int64_t(v.last_checkpoint)) + " entries after the last checkpoint";
  s += v.gaps ? "; complete with " + std::to_string(v.gaps) + " gaps (" + std::to_string(v.lost) +
                    " events lost)"
              : "; complete, no gaps";
  return s;
}

nlohmann::json session_json(int64_t id, const ledger::SessionVerdict& v) {
  nlohmann::json j = {{"session", id}, {"ok", v.ok}, {"entries", v.entries}};
  if (!v.ok) {
    j["where"] = v.where;
    if (v.bad_seq) j["bad_seq"] = v.bad_seq;
    j["reason"] = v.reason;
    return j;
  }
  j["checkpoints"] = v.checkpoints;
  j["signed_checkpoints"] = v.signed_checkpoints;
  j["key"] = v.key.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.key);
  j["key_from_record"] = v.key_from_record;
  j["terminated"] = v.terminated;
  j["entries_after_last_checkpoint"] = v.entries - int64_t(v.last_checkpoint);
  j["gaps"] = v.gaps;
  j["lost"] = v.lost;
  j["origin"] = v.origin;
  return j;
}

}  // namespace

int cmd_verify(const Args& args) {
  po::options_description desc("options");
  std::string db, bundle, pubkey_file, checkpoint_file;
  int64_t session = 0;
  desc.add_options()("help,h", "show this help")("db", po::value(&db), "SQLite record to verify")(
      "bundle", po::value(&bundle), "bundle to verify (also the first plain argument)")(
      "session", po::value(&session), "with --db: only this session")(
      "pubkey", po::value(&pubkey_file), "verifier key file (flightrec.pub) the checkpoints must be signed with")(
      "checkpoint", po::value(&checkpoint_file),
      "checkpoints of the session(s) kept elsewhere (a file of signed notes, appended one after another): prove the record was not truncated or rewritten since")(
      "json", po::bool_switch(), "print the verdict as one JSON object (exit codes unchanged)");
  po::positional_options_description pos;
  pos.add("bundle", 1);
  po::variables_map vm;
  const char* usage =
      "usage: flightrec verify BUNDLE [--pubkey KEY] [--checkpoint SAVED]\n"
      "       flightrec verify --db FILE [--session N] [--pubkey KEY] [--checkpoint SAVED]\n\n"
      "Recomputes every entry's canonical form, leaf hash and chain hash, the Merkle root\n"
      "of every checkpoint and its Ed25519 signature, and checks that the last checkpoint\n"
      "covers the whole session. Exit 0: intact (an unterminated session, e.g. after a\n"
      "crash, is reported but is not a failure); 1: the first bad entry or checkpoint is\n"
      "named with the reason; 2: usage. --json prints {\"ok\":..., \"entries\":N,\n"
      "\"sessions\":[{\"session\", \"ok\", \"entries\", then \"where\", \"bad_seq\", \"reason\" when not\n"
      "ok, or \"checkpoints\", \"signed_checkpoints\", \"key\", \"key_from_record\", \"terminated\",\n"
      "\"entries_after_last_checkpoint\", \"gaps\", \"lost\", \"origin\"}]}; a record that cannot be\n"
      "read at all is an error on stderr (exit 1), as without --json.";
  if (!parse_options(args, desc, usage, vm, &pos)) return 0;
  if (db.empty() == bundle.empty()) throw UsageError("give a bundle or --db, not both");

  std::optional<ledger::VerifierKey> pinned;
  if (!pubkey_file.empty()) pinned = read_verifier_key(pubkey_file);
  std::optional<std::string> external;
  if (!checkpoint_file.empty()) {
    external = read_small_file(checkpoint_file, "a saved-checkpoint file");  // a note is under 1 KiB
  }

  bool json = vm["json"].as<bool>();
  std::vector<std::pair<int64_t, ledger::SessionVerdict>> verdicts;
  std::string missing;  // why there is nothing to verify
  if (!bundle.empty()) {
    auto r = ledger::verify_bundle(bundle, pinned ? &*pinned : nullptr, external);
    verdicts.emplace_back(r.session, r.verdict);
  } else {
    ledger::Store store(db, ledger::Store::Mode::Read);
    auto only = vm.count("session") ? std::optional<int64_t>(session) : std::nullopt;
    Progress progress("verifying " + db, store.stored_entries(only));
    verdicts = ledger::verify_store(store, only, pinned ? &*pinned : nullptr, external, &progress).sessions;
    if (verdicts.empty()) missing = (only ? "no session " + std::to_string(*only) : "no sessions") + " in " + db;
  }
  bool ok = missing.empty();
  int64_t entries = 0;
  for (const auto& [id, v] : verdicts) {
    ok = ok && v.ok;
    entries += v.entries;
  }
  if (json) {
    nlohmann::json out = {{"ok", ok}, {"entries", entries}, {"sessions", nlohmann::json::array()}};
    if (!missing.empty()) out["reason"] = missing;
    for (const auto& [id, v] : verdicts) out["sessions"].push_back(session_json(id, v));
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return ok ? 0 : 1;
  }
  if (!missing.empty()) {
    std::cout << "FAIL: " << printable(missing) << "\n";
    return 1;
  }
  for (const auto& [id, v] : verdicts)
    if (!v.ok) {
      // The reason may quote the record (a type, a path): escaped, it cannot rewrite the line.
      std::cout << "FAIL: session " << id << printable((v.where.empty() ? "" : " " + v.where) + ": " + v.reason) << "\n";
      return 1;
    }
  std::cout << "OK: " << verdicts.size() << (verdicts.size() == 1 ? " session, " : " sessions, ") << entries
            << " entries\n";
  for (const auto& [id, v] : verdicts) std::cout << "  session " << id << ": " << v.entries << " entries, " << printable(describe(v)) << "\n";
  return 0;
}

}  // namespace flightrec::cli
