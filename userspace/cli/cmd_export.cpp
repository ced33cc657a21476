// flightrec export: one session as a bundle an auditor verifies elsewhere.
#include <ext/stdio_filebuf.h>
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "common/progress.h"
#include "common/system.h"
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
    Progress progress("exporting session " + std::to_string(session), store.stored_entries(session));
    if (isatty(STDOUT_FILENO)) progress.disable();  // the bundle itself is on the terminal
    ledger::export_bundle(store, session, std::cout, fmt, &progress);
    return 0;
  }
  // Write beside the target and rename: a reader never sees half a bundle.
  // The temporary file is new (O_EXCL) and no symlink is followed.
  std::string tmp = out + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);  // the session's plaintext: its owner's alone
  if (fd < 0) throw Error(errno_message("cannot create " + tmp, errno));
  int64_t n;
  {
    Progress progress("exporting session " + std::to_string(session), store.stored_entries(session));
    __gnu_cxx::stdio_filebuf<char> buf(fd, std::ios::out | std::ios::binary);
    std::ostream file(&buf);
    try {
      n = ledger::export_bundle(store, session, file, fmt, &progress);
      if (fsync(fd) != 0) throw Error(errno_message("cannot write " + tmp, errno));
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
