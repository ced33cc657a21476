// flightrec summary: each session at a glance (aureport's role).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "common/progress.h"
#include "inspect/summary.h"
#include "ledger/store.h"

namespace flightrec::cli {

int cmd_summary(const Args& args) {
  po::options_description desc("options");
  std::string db;
  int64_t session = 0;
  size_t top = 20;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(), "SQLite record to read")(
      "session", po::value(&session), "only this session")("json", po::bool_switch(),
                                                            "one JSON object per session, one per line")(
      "top", po::value(&top)->default_value(top), "rows shown per table (programs, files, hosts, rules)");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec summary --db FILE [--session N] [--json] [--top N]\n\n"
      "Per session: when it ran and how it ended, entries by type, events lost, the\n"
      "violations by level, rule and action, the programs it ran, the files it opened\n"
      "for writing and those changed at its end, the hosts and ports it connected to\n"
      "(and the connects that failed), and the hosts of its TLS requests; the most\n"
      "frequent first. It reads the entries as they are: 'flightrec verify' says\n"
      "whether the record is intact.";
  if (!parse_options(args, desc, usage, vm)) return 0;
  if (top == 0) throw UsageError("--top must be at least 1");
  auto only = vm.count("session") ? std::optional<int64_t>(session) : std::nullopt;
  bool json = vm["json"].as<bool>();

  ledger::Store store(db, ledger::Store::Mode::Read);
  std::unique_ptr<inspect::SessionSummary> current;
  int64_t current_id = 0, shown = 0;
  Progress progress("summarising " + db, store.stored_entries(only));
  auto flush = [&] {
    if (!current) return;
    progress.clear();  // the summary and the progress line share a terminal
    if (json) std::cout << current->to_json(top).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else std::cout << (shown ? "\n" : "") << current->to_text(top);
    ++shown;
    current.reset();
  };
  ledger::EntryFilter f;
  f.session = only;
  ledger::TopLevel top_level;
  {
    int64_t done = 0;
    store.for_each_entry(f, [&](const ledger::EntryRow& e) {
      if (!current || e.session != current_id) {
        flush();
        current = std::make_unique<inspect::SessionSummary>(e.session);
        current_id = e.session;
      }
      if (ledger::check_canonical(e.body, &top_level).empty()) current->add(top_level);
      progress.update(++done);
      return true;
    });
  }
  flush();
  if (!shown) {
    std::cerr << "flightrec: " << (only ? "no session " + std::to_string(*only) : std::string("no sessions")) << " in "
              << db << "\n";
    return 1;
  }
  return 0;
}

}  // namespace flightrec::cli
