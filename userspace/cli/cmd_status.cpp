// flightrec status: asks a running flightrecd what it records.
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/text.h"
#include "control/client.h"

namespace flightrec::cli {
namespace {

std::string bytes_text(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(n);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  std::ostringstream out;
  out << std::fixed << std::setprecision(u ? 1 : 0) << v << " " << units[u];
  return out.str();
}

}  // namespace

int cmd_status(const Args& args) {
  po::options_description desc("options");
  std::string socket = "/run/flightrec/flightrecd.sock";
  desc.add_options()("help,h", "show this help")("socket", po::value(&socket), "flightrecd's control socket")(
      "json", "the daemon's answer as one JSON object");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec status [--socket PATH] [--json]\n\n"
      "Asks the running flightrecd (root, or its socket.group) what it records: each\n"
      "session's cgroup, rule, record file, entries, entries per second and loss; the\n"
      "ring buffer's fill, events lost per CPU, and the disk its records use.\n"
      "Exit 1 when no daemon answers.";
  if (!parse_options(args, desc, usage, vm)) return 0;
  if (vm.count("json")) {  // the daemon's answer as it sent it
    nlohmann::json answer = control::request(socket, control::StatusRequest{});
    std::cout << answer.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  control::DaemonStatus s = control::request_status(socket);
  std::cout << "flightrecd " << printable(s.flightrecd_version) << ", pid " << s.pid << ", config "
            << printable(s.config) << "\n"
            << "  " << s.sessions.size() << " session(s); ring " << std::fixed << std::setprecision(1)
            << 100 * s.ring_fill << "% full of " << bytes_text(s.ring_bytes) << "; " << s.lost_total
            << " events lost since start\n"
            << "  records in " << printable(s.storage_dir) << ": " << bytes_text(s.storage_bytes)
            << (s.storage_full ? "; STORAGE FULL (below storage.min_free)" : "") << "\n";
  for (const auto& e : s.sessions) {
    std::cout << "  " << printable(e.rule) << " (" << (e.mode == "lite" ? "lite" : "full") << ")  "
              << printable(e.cgroup) << "\n"
              << "      " << e.entries << " entries, " << std::setprecision(0) << e.entries_per_second << "/s, "
              << e.lost << " lost, " << bytes_text(e.record_bytes) << " in " << printable(e.record)
              << (e.suspended ? " (SUSPENDED: events left out)" : "")
              << (e.cgroup_gone ? " (cgroup gone; its tasks live on elsewhere)" : "") << "\n";
  }
  return 0;
}

}  // namespace flightrec::cli
