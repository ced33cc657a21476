// flightrec verify: recompute a record and say whether it is intact.
#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "ledger/store.h"
#include "ledger/verify.h"

namespace flightrec::cli {

int cmd_verify(const Args& args) {
  po::options_description desc("options");
  std::string db;
  int64_t session = 0;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(),
                                                 "SQLite record to verify")(
      "session", po::value(&session), "verify only this session");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec verify --db FILE [--session N]\n\n"
      "Recomputes every entry's canonical form, leaf hash and chain hash, checks that\n"
      "sequence numbers are complete and that each ended session's closing chain head\n"
      "and entry count match. Exit 0: intact; 1: the first bad entry is named; 2: usage.";
  if (!parse_options(args, desc, usage, vm)) return 0;

  ledger::Store store(db, ledger::Store::Mode::Read);
  auto only = vm.count("session") ? std::optional<int64_t>(session) : std::nullopt;
  ledger::VerifyResult r = ledger::verify_store(store, only);
  if (!r.ok) {
    std::cout << "FAIL: session " << r.bad_session << " entry " << r.bad_seq << ": " << r.reason
              << "\n";
    return 1;
  }
  if (only && r.sessions == 0) {
    std::cout << "FAIL: no session " << *only << " in " << db << "\n";
    return 1;
  }
  std::cout << "OK: " << r.sessions << (r.sessions == 1 ? " session, " : " sessions, ")
            << r.entries << " entries";
  if (r.unterminated)
    std::cout << " (" << r.unterminated << " unterminated: no session end recorded)";
  std::cout << "\n";
  return 0;
}

}  // namespace flightrec::cli
