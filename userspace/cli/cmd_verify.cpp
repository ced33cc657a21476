// flightrec verify: recompute a record (database or bundle) and say
// whether it is intact, complete and signed.
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "common/system.h"
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
      "checkpoints of the session(s) kept elsewhere (a file of signed notes, appended one after another): prove the record was not truncated or rewritten since");
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
      "named with the reason; 2: usage.";
  if (!parse_options(args, desc, usage, vm, &pos)) return 0;
  if (db.empty() == bundle.empty()) throw UsageError("give a bundle or --db, not both");

  std::optional<ledger::VerifierKey> pinned;
  if (!pubkey_file.empty()) {
    pinned = ledger::VerifierKey::parse(read_file(pubkey_file));
    if (!pinned) throw Error(pubkey_file + " is not a verifier key (the flightrec.pub that keygen writes)");
  }
  std::optional<std::string> external;
  if (!checkpoint_file.empty()) {
    // Notes are small (one is under 1 KiB): a saved file past 64 MiB is not one.
    std::error_code ec;
    auto kind = std::filesystem::status(checkpoint_file, ec).type();
    if (!ec && kind != std::filesystem::file_type::regular) throw Error(checkpoint_file + " is not a regular file");
    auto size = std::filesystem::file_size(checkpoint_file, ec);
    if (!ec && size > (64u << 20))
      throw Error(checkpoint_file + " is larger than 64 MiB: not a saved-checkpoint file");
    external = read_file(checkpoint_file);
  }

  std::vector<std::pair<int64_t, ledger::SessionVerdict>> verdicts;
  if (!bundle.empty()) {
    auto r = ledger::verify_bundle(bundle, pinned ? &*pinned : nullptr, external);
    verdicts.emplace_back(r.session, r.verdict);
  } else {
    ledger::Store store(db, ledger::Store::Mode::Read);
    auto only = vm.count("session") ? std::optional<int64_t>(session) : std::nullopt;
    verdicts = ledger::verify_store(store, only, pinned ? &*pinned : nullptr, external).sessions;
    if (verdicts.empty()) {
      std::cout << "FAIL: " << (only ? "no session " + std::to_string(*only) : "no sessions") << " in " << db
                << "\n";
      return 1;
    }
  }
  int64_t entries = 0;
  for (const auto& [id, v] : verdicts) {
    if (!v.ok) {
      std::cout << "FAIL: session " << id << (v.where.empty() ? "" : " " + v.where) << ": " << v.reason << "\n";
      return 1;
    }
    entries += v.entries;
  }
  std::cout << "OK: " << verdicts.size() << (verdicts.size() == 1 ? " session, " : " sessions, ") << entries
            << " entries\n";
  for (const auto& [id, v] : verdicts) std::cout << "  session " << id << ": " << v.entries << " entries, " << describe(v) << "\n";
  return 0;
}

}  // namespace flightrec::cli
