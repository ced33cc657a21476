// flightrec checkpoint: print a session's latest signed checkpoint, to keep
// it somewhere the recording host cannot rewrite (see verify --checkpoint).
#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "ledger/store.h"

namespace flightrec::cli {

int cmd_checkpoint(const Args& args) {
  po::options_description desc("options");
  std::string db;
  int64_t session = 0, size = 0;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(), "SQLite record")(
      "session", po::value(&session)->required(), "session")(
      "size", po::value(&size), "the checkpoint of this tree size (default: the latest)");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec checkpoint --db FILE --session N [--size S]\n\n"
      "Prints the session's latest checkpoint (a signed note) exactly as stored. Kept off\n"
      "the host (e.g. flightrec checkpoint ... | ssh auditor 'cat >> saved.txt'), it lets\n"
      "'flightrec verify --checkpoint' prove later that the record was not cut back or\n"
      "rewritten. Notes appended to one file are each checked (docs/FORMAT.md 5.6).";
  if (!parse_options(args, desc, usage, vm)) return 0;
  ledger::Store store(db, ledger::Store::Mode::Read);
  auto checkpoints = store.checkpoints(session);
  if (checkpoints.empty()) throw Error("session " + std::to_string(session) + " has no checkpoints in " + db);
  if (!vm.count("size")) {
    std::cout << checkpoints.back().note;
    return 0;
  }
  for (const auto& c : checkpoints)
    if (c.tree_size == size) {
      std::cout << c.note;
      return 0;
    }
  throw Error("session " + std::to_string(session) + " has no checkpoint of size " + std::to_string(size));
}

}  // namespace flightrec::cli
