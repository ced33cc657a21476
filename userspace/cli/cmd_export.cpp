// flightrec export: one session as a bundle an auditor verifies elsewhere.
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "ledger/bundle.h"
#include "ledger/store.h"

namespace flightrec::cli {

int cmd_export(const Args& args) {
  po::options_description desc("options");
  std::string db, out, format = "json";
  int64_t session = 0;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(), "SQLite record")(
      "session", po::value(&session)->required(), "session to export")(
      "out", po::value(&out)->required(), "bundle file to write ('-': standard output)")(
      "format", po::value(&format)->default_value(format),
      "json (one document) or jsonl (JSON Lines, streams for sessions too large for memory)");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec export --db FILE --session N --out BUNDLE [--format json|jsonl]\n\n"
      "Writes the session's entries (canonical bytes), its signed checkpoints and the\n"
      "public key into one file; 'flightrec verify BUNDLE --pubkey KEY' checks it.";
  if (!parse_options(args, desc, usage, vm)) return 0;
  if (format != "json" && format != "jsonl") throw UsageError("--format must be json or jsonl");
  auto fmt = format == "json" ? ledger::BundleFormat::Json : ledger::BundleFormat::Lines;

  ledger::Store store(db, ledger::Store::Mode::Read);
  if (out == "-") {
    ledger::export_bundle(store, session, std::cout, fmt);
    return 0;
  }
  // Write beside the target and rename: a reader never sees half a bundle.
  std::string tmp = out + ".tmp";
  int64_t n;
  {
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    if (!file) throw Error("cannot write " + tmp);
    try {
      n = ledger::export_bundle(store, session, file, fmt);
    } catch (...) {
      std::remove(tmp.c_str());
      throw;
    }
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0) throw Error("cannot rename " + tmp + " to " + out);
  std::cerr << "exported session " << session << ": " << n << " entries to " << out << "\n";
  return 0;
}

}  // namespace flightrec::cli
