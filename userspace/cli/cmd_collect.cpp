// flightrec collect: pull every host's shipped log from NATS JetStream into
// per-host bundles, verified against each host's pinned key (ship/collect.h).
#include <signal.h>

#include <atomic>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "common/text.h"
#include "policy/policy.h"
#include "ship/collect.h"

namespace flightrec::cli {
namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

}  // namespace

int cmd_collect(const Args& args) {
  po::options_description desc("options");
  std::string config, out, idle = "2s";
  bool json = false, follow = false;
  desc.add_options()("help,h", "show this help")("config", po::value(&config)->required(),
                                                   "the collector's config: server, stream, each host's pinned key")(
      "out", po::value(&out)->required(), "directory of the logs: OUT/HOST/<log id>.jsonl (made if missing)")(
      "follow", po::bool_switch(&follow), "keep pulling until SIGINT or SIGTERM")(
      "idle", po::value(&idle), "without --follow, stop after this long without a message (default 2s)")(
      "json", po::bool_switch(&json), "print the report as JSON");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec collect --config FILE --out DIR [--follow] [--idle 2s] [--json]\n\n"
      "Pulls the entries and checkpoints flightrecd's JetStream outputs ship (subjects\n"
      "PREFIX.HOST) with a durable consumer, and keeps each session's log as a JSON Lines\n"
      "bundle under DIR/HOST/, verified as it grows: hash chain, Merkle tree, and every\n"
      "checkpoint signed by the key the config pins for that host. A host without a\n"
      "pinned key is refused (no trust on first use). Messages are acknowledged once\n"
      "written: a collect run again resumes where the last one stopped. Each bundle\n"
      "verifies offline too: flightrec verify DIR/HOST/ID.jsonl --pubkey HOST.pub.\n\n"
      "The config (YAML):\n"
      "  url: nats://HOST:PORT\n"
      "  stream: FLIGHTREC              # defaults: FLIGHTREC, flightrec, flightrec-collect\n"
      "  subject_prefix: flightrec\n"
      "  durable: flightrec-collect\n"
      "  tls: {ca: /path/ca.pem}        # for tls:// servers\n"
      "  hosts:\n"
      "    node-17: /etc/flightrec/fleet/node-17.pub\n\n"
      "Memory is bounded whatever publishers send: nothing of a log is held or written\n"
      "before a signed checkpoint proves its key; entries that come ahead of a gap are\n"
      "held up to 32 MiB per host and 128 MiB in all (past that, that log fails); 256\n"
      "logs are followed in memory, others read back from their files when they grow;\n"
      "one collect takes at most 50000 logs per host, 100000 in all (run it again: it\n"
      "resumes).\n\n"
      "Prints, per host, each log's entries, checkpoints, gaps, whether it ended, and\n"
      "its verification. Exit 0 when every log verifies (unterminated ones are named),\n"
      "1 when one fails or messages were refused, 2 on bad usage.";
  if (!parse_options(args, desc, usage, vm)) return 0;
  auto idle_ms = policy::parse_duration_ms(idle);
  if (!idle_ms) throw UsageError("--idle: '" + idle + "' is not a duration like 500ms or 2s");
  ship::CollectSettings settings = ship::load_collect_config(config);
  settings.out_dir = out;
  settings.idle_ms = *idle_ms;
  settings.follow = follow;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  ship::Collector collector(settings);
  collector.run(g_stop);
  bool ok = true;
  nlohmann::json report = nlohmann::json::array();
  for (const auto& h : collector.report()) {
    ok = ok && h.ok();
    nlohmann::json logs = nlohmann::json::array();
    size_t entries = 0;
    for (const auto& l : h.logs) {
      entries += size_t(l.entries);
      logs.push_back({{"origin", l.origin}, {"file", l.file}, {"ok", l.ok}, {"reason", l.reason},
                      {"entries", l.entries}, {"checkpoints", l.checkpoints}, {"gaps", l.gaps}, {"lost", l.lost},
                      {"terminated", l.terminated}, {"entries_after_last_checkpoint", l.entries_after_checkpoint},
                      {"duplicates", l.duplicates}, {"missing_from", l.missing_from}});
    }
    report.push_back({{"host", h.host}, {"ok", h.ok()}, {"logs", logs}, {"rejected", h.rejected},
                      {"rejected_reason", h.rejected_reason}});
    if (json) continue;
    std::cout << "host " << printable(h.host) << ": " << (h.ok() ? "OK" : "FAIL") << ", " << h.logs.size() << " log(s), " << entries
              << " entries";
    if (h.rejected) std::cout << "; " << h.rejected << " message(s) refused: " << printable(h.rejected_reason);
    std::cout << "\n";
    for (const auto& l : h.logs) {
      std::cout << "  " << printable(l.origin) << ": ";
      if (!l.ok) {
        std::cout << "FAIL: " << printable(l.reason) << " (" << l.entries << " entries verified before)\n";
        continue;
      }
      std::cout << "OK, " << l.entries << " entries, " << l.checkpoints << " checkpoints; "
                << (l.terminated ? "ended" : "unterminated (" + std::to_string(l.entries_after_checkpoint) +
                                                 " entries after the last checkpoint)")
                << "; " << (l.gaps ? std::to_string(l.gaps) + " gaps (" + std::to_string(l.lost) + " events lost)" : "no gaps");
      if (l.missing_from) std::cout << "; entries from " << l.missing_from << " have not come yet";
      if (l.duplicates) std::cout << "; " << l.duplicates << " came twice (the same)";
      std::cout << "\n";
    }
  }
  // Hosts' subjects and origins are the publishers' text: never raw bytes,
  // never an exception after the messages were acknowledged.
  if (json) std::cout << report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return ok ? 0 : 1;
}

}  // namespace flightrec::cli
