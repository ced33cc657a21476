// flightrec verify-proof: check a proof from `prove` with the public key
// alone, so one entry can be shown to someone without the whole record.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "common/text.h"
#include "inspect/describe.h"
#include "ledger/checkpoint.h"
#include "ledger/proof.h"

namespace flightrec::cli {

int cmd_verify_proof(const Args& args) {
  po::options_description desc("options");
  std::string proof_file, pubkey_file, checkpoint_file;
  desc.add_options()("help,h", "show this help")("proof", po::value(&proof_file)->required(),
                                                 "the proof (JSON from flightrec prove; also the first plain argument)")(
      "pubkey", po::value(&pubkey_file)->required(), "verifier key file (flightrec.pub) the checkpoints must be signed with")(
      "checkpoint", po::value(&checkpoint_file),
      "checkpoints kept elsewhere (flightrec checkpoint >> FILE), each signed by KEY: those of the proof's log at the smaller tree's size (consistency) or at its tree size (inclusion) must all match the proof (catches a rewritten history); for a consistency proof one stands in when the proof has none")(
      "json", po::bool_switch(), "print the verdict as one JSON object");
  po::positional_options_description pos;
  pos.add("proof", 1);
  po::variables_map vm;
  const char* usage =
      "usage: flightrec verify-proof PROOF --pubkey KEY [--checkpoint SAVED] [--json]\n\n"
      "Checks a proof from 'flightrec prove' with nothing but the proof and the public\n"
      "key: for an inclusion proof, that the entry is canonical, is the entry its\n"
      "position says, hashes to its leaf, and lies on the path to the root of a tree\n"
      "that a checkpoint signed by KEY names; for a consistency proof, that the smaller\n"
      "signed tree is a prefix of the larger one (RFC 9162 2.1.3.2 and 2.1.4.2).\n"
      "Every member is checked; a changed byte anywhere fails. Exit 0: proven, and the\n"
      "entry is printed (decoded); 1: not proven, with the reason; 2: usage.";
  if (!parse_options(args, desc, usage, vm, &pos)) return 0;
  ledger::VerifierKey key = read_verifier_key(pubkey_file);
  std::vector<std::string> saved;
  if (!checkpoint_file.empty()) {
    std::string why;
    auto notes = ledger::split_saved_checkpoints(read_small_file(checkpoint_file, "a saved-checkpoint file"), &why);
    if (!notes || notes->empty()) throw Error(checkpoint_file + ": not a file of signed checkpoints" + (why.empty() ? "" : ": " + why));
    saved = *notes;
  }
  auto v = ledger::check_proof(read_small_file(proof_file, "a proof"), key, saved);
  if (vm["json"].as<bool>()) {
    nlohmann::json out = {{"ok", v.ok}};
    if (v.ok) out["proven"] = v.what;
    else out["reason"] = v.reason;
    if (!v.entry.empty()) out["entry"] = v.entry;
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return v.ok ? 0 : 1;
  }
  if (!v.ok) {
    std::cout << "FAIL: " << printable(v.reason) << "\n";
    return 1;
  }
  std::cout << "OK: " << printable(v.what) << "\n";
  if (!v.entry.empty()) {
    auto entry = nlohmann::json::parse(v.entry, nullptr, false);  // canonical: checked above
    std::cout << "  " << inspect::entry_line(entry.value("session", int64_t(0)), entry.value("seq", int64_t(0)), entry) << "\n";
  }
  return 0;
}

}  // namespace flightrec::cli
