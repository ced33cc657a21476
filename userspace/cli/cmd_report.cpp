// flightrec report: one session as a self-contained HTML page for people.
#include <fcntl.h>
#include <unistd.h>

#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "common/progress.h"
#include "common/system.h"
#include "inspect/report.h"
#include "inspect/turns.h"
#include "ledger/store.h"
#include "ledger/verify.h"

namespace flightrec::cli {

int cmd_report(const Args& args) {
  po::options_description desc("options");
  std::string db, out, pubkey_file;
  int64_t session = 0;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(), "SQLite record to read")(
      "session", po::value(&session)->required(), "the session")("out", po::value(&out)->required(),
                                                                   "the HTML file to write")(
      "pubkey", po::value(&pubkey_file), "verifier key file (flightrec.pub) the checkpoints must be signed with");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec report --db FILE --session N --out report.html [--pubkey KEY]\n\n"
      "Writes one HTML file that needs nothing else (no network, no script, no other\n"
      "files): whether the session verifies (signed by which key, gaps, unterminated)\n"
      "at the top, then what changed (the files changed at its end by directory,\n"
      "SHA-256 before and after, with generated trees such as a venv, node_modules,\n"
      "caches and .git folded into one row each; and the diffs, when the session kept\n"
      "its changes aside), the conversation with the model,\n"
      "its violations, loss, process tree with command lines, connections and TLS\n"
      "requests, and a timeline of what mattered; a watched session names its\n"
      "workload (pod, container, cgroups). Tables are capped at 2000 rows and the tree at 3000\n"
      "processes, so a page stays under 8 MiB whatever the session's size; the page\n"
      "says where it cut. Exit 0 also when the record fails verification (the page\n"
      "says so first); 1 if it cannot be read.";
  if (!parse_options(args, desc, usage, vm)) return 0;
  std::optional<ledger::VerifierKey> pinned;
  if (!pubkey_file.empty()) pinned = read_verifier_key(pubkey_file);
  ledger::Store store(db, ledger::Store::Mode::Read);
  int64_t total = store.stored_entries(session);
  ledger::SessionVerdict verdict;
  {
    Progress progress("verifying session " + std::to_string(session), total);
    auto r = ledger::verify_store(store, session, pinned ? &*pinned : nullptr, std::nullopt, &progress);
    if (r.sessions.empty()) throw Error("no session " + std::to_string(session) + " in " + db);
    verdict = r.sessions.front().second;
  }
  inspect::Report report(session);
  {
    Progress progress("reading session " + std::to_string(session), total);
    ledger::EntryFilter f;
    f.session = session;
    ledger::TopLevel top;
    int64_t done = 0;
    store.for_each_entry(f, [&](const ledger::EntryRow& e) {
      if (ledger::check_canonical(e.body, &top).empty()) {
        if (inspect::Report::shows(top.string("type").value_or(""))) {
          auto entry = nlohmann::json::parse(e.body, nullptr, false);
          report.add(top, &entry);
        } else {
          report.add(top, nullptr);
        }
      }
      progress.update(++done);
      return true;
    });
  }
  report.conversation(inspect::agent_turns(store, session));
  std::string page = report.html(verdict, db);
  // Beside the target, then renamed: a reader never sees half a page.
  std::string tmp = out + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);  // the session's plaintext: its owner's alone
  if (fd < 0) throw Error(errno_message("cannot create " + tmp, errno));
  if (!write_full(fd, page.data(), page.size())) {
    int err = errno;
    close(fd);
    unlink(tmp.c_str());
    throw Error(errno_message("cannot write " + tmp, err));
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    unlink(tmp.c_str());
    throw Error(errno_message("cannot write " + tmp, errno));
  }
  if (rename(tmp.c_str(), out.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    throw Error(errno_message("cannot rename " + tmp + " to " + out, err));
  }
  std::cerr << "report of session " << session << " (" << (verdict.ok ? "intact" : "FAILED verification") << ", "
            << page.size() << " bytes) written to " << out << "\n";
  return 0;
}

}  // namespace flightrec::cli
