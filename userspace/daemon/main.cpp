// flightrecd: the resident recorder (daemon/daemon.h). Options parsed here;
// everything else is the config file's.
#include <malloc.h>
#include <unistd.h>

#include <csignal>

#include <boost/program_options.hpp>
#include <iostream>

#include "common/error.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "session/plan.h"

namespace po = boost::program_options;
using namespace flightrec;

namespace {

constexpr const char* kUsage = R"(flightrecd: records every cgroup the config's watch rules match, each
cgroup a session with its own sealed record under storage.dir, from the
moment it appears (processes already in it are the record's first
entries) until it is removed. SIGHUP reloads the config; SIGTERM or SIGINT
seals every session and exits. Records are read with `flightrec verify`,
`query`, `summary` and `report`.

Usage: flightrecd [--config FILE] [--check-config]
)";

}  // namespace

int main(int argc, char** argv) {
  // An output's peer that hangs up (a collector closing an idle TLS
  // connection) is an error to retry, never the daemon's death: OpenSSL
  // writes without MSG_NOSIGNAL.
  signal(SIGPIPE, SIG_IGN);
  po::options_description opts("Options");
  opts.add_options()
      ("help,h", "this help")
      ("config,c", po::value<std::string>()->default_value("/etc/flightrec/flightrecd.yaml"), "the config file")
      ("check-config", "check the config file, say what it watches, and exit (0: valid, 2: not)");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "flightrecd: " << e.what() << "\n" << kUsage << opts;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << kUsage << "\n" << opts;
    return 0;
  }
  std::string path = vm["config"].as<std::string>();
  daemon::Config config;
  try {
    config = daemon::load_config(path);
  } catch (const Error& e) {
    std::cerr << "flightrecd: " << e.what() << "\n";
    return 2;
  }
  if (std::string why = daemon::unsupported_setting(config); !why.empty()) {
    std::cerr << "flightrecd: " << why << "\n";
    return 2;
  }
  daemon::RulePolicies policies;
  try {
    policies = daemon::load_rule_policies(config);  // a rule's policy that does not load is the config's error
  } catch (const Error& e) {
    std::cerr << "flightrecd: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("check-config")) {
    std::cout << "OK: " << path << ": " << config.watch.size() << " watch rule(s), records in " << config.storage_dir
              << "\n";
    for (const auto& rule : config.watch)
      std::cout << "  " << rule.name << ": " << rule.cgroup_glob
                << (rule.mode == daemon::WatchRule::Mode::Lite ? " (lite" : " (full") << (rule.tls ? ", TLS" : "")
                << (rule.key_dir.empty() && config.key_dir.empty() ? ", unsigned" : ", signed")
                << (rule.policy.empty() ? ""
                                        : ", judged by policy " + rule.policy +
                                              (rule.mode == daemon::WatchRule::Mode::Lite ? " (audit; lite: reads are not seen)"
                                                                                          : " (audit)"))
                << ")\n";
    for (const auto& o : config.syslog_outputs) {
      std::string types;
      for (const auto& t : o.filter.types) types += (types.empty() ? "" : ",") + t;
      std::cout << "  output " << o.name << ": syslog to " << o.address << (o.tls.on ? " over TLS" : " over TCP")
                << " (" << types << (o.filter.min_level ? ", violations from " + std::string(o.filter.min_level == 1 ? "ALERT" : "CRITICAL") : "")
                << ")\n";
    }
    for (const auto& o : config.jetstream_outputs)
      std::cout << "  output " << o.name << ": JetStream " << o.url << ", stream " << o.stream << ", subject "
                << o.subject_prefix << ".<host> (every entry; spool " << o.spool_dir << ", at most "
                << (o.spool_max >> 20) << " MiB)\n";
    for (const auto& o : config.websocket_outputs)
      std::cout << "  output " << o.name << ": WebSocket stream on " << (o.listen.empty() ? "" : o.listen + " (bearer token)")
                << (o.listen.empty() || o.unix_path.empty() ? "" : " and ") << (o.unix_path.empty() ? "" : o.unix_path + " (root)")
                << ", replay buffer " << (o.buffer_bytes >> 20) << " MiB\n";
    for (const auto& o : config.otlp_outputs)
      std::cout << "  output " << o.name << ": OTLP/HTTP " << (o.json ? "JSON" : "protobuf") << " to " << o.endpoint
                << " (spans of model calls, tool calls and sessions; at most " << o.queue_max << " queued)\n";
    return 0;
  }
  if (geteuid() != 0) {
    std::cerr << "flightrecd: must run as root (it loads BPF programs)\n";
    return 1;
  }
  // One malloc arena: a writer thread per session (hundreds) would spread
  // its few allocations over up to 8 per core, each keeping what was freed
  // in it (-2.4 MB with 100 quiet sessions); the threads allocate per
  // batch, not per entry, so the one lock is not fought over.
  mallopt(M_ARENA_MAX, 1);
  // Buffers of up to a few MiB (a batch of entries, a shipped message)
  // come from the heap, not from mmap: a fresh mapping per buffer faulted
  // every page of every message in again (~10 us each on these VMs; it was
  // most of what JetStream shipping cost). The heap's free pages go back
  // once a second (malloc_trim in the daemon's tick).
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
  try {
    daemon::Daemon d(std::move(config), std::move(policies), path);
    return d.run();
  } catch (const Error& e) {
    std::cerr << "flightrecd: " << e.what() << "\n";
    return 1;
  }
}
