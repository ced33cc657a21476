// flightrec prove: RFC 9162 inclusion and consistency proofs from a record.
#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "ledger/proof.h"
#include "ledger/store.h"

namespace flightrec::cli {

int cmd_prove(const Args& args) {
  po::options_description desc("options");
  std::string db;
  int64_t session = 0, entry = 0, from = 0, to = 0;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(), "SQLite record")(
      "session", po::value(&session)->required(), "session")(
      "entry", po::value(&entry), "inclusion proof of this entry (seq)")(
      "from", po::value(&from), "consistency proof from this tree size...")(
      "to", po::value(&to), "...to this one (default: the latest checkpoint)");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec prove --db FILE --session N (--entry SEQ | --from A [--to B])\n\n"
      "Prints an RFC 9162 proof as JSON: that entry SEQ is in the tree of the latest\n"
      "signed checkpoint (inclusion), or that the tree at size A is a prefix of the tree\n"
      "at size B (consistency). Hashes are hex; leaf index = SEQ - 1. 'flightrec\n"
      "verify-proof PROOF --pubkey KEY' checks it with nothing else.";
  if (!parse_options(args, desc, usage, vm)) return 0;
  bool inclusion = vm.count("entry"), consistency = vm.count("from");
  if (inclusion == consistency) throw UsageError("give either --entry or --from");

  ledger::Store store(db, ledger::Store::Mode::Read);
  std::cout << (inclusion ? ledger::make_inclusion_proof(store, session, entry)
                          : ledger::make_consistency_proof(store, session, from,
                                                           vm.count("to") ? std::optional<int64_t>(to) : std::nullopt))
            << "\n";
  return 0;
}

}  // namespace flightrec::cli
