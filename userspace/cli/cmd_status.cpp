// flightrec status: asks a running flightrecd what it records.
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/text.h"
#include "daemon/control.h"

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
  nlohmann::json s = daemon::control_request(socket, {{"request", "status"}});
  if (vm.count("json")) {
    std::cout << s.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  auto text = [](const nlohmann::json& v) { return printable(v.is_string() ? v.get<std::string>() : v.dump()); };
  const auto& sessions = s.value("sessions", nlohmann::json::array());
  std::cout << "flightrecd " << text(s["flightrecd_version"]) << ", pid " << s.value("pid", 0) << ", config "
            << text(s["config"]) << "\n"
            << "  " << sessions.size() << " session(s); ring " << std::fixed << std::setprecision(1)
            << 100 * s.value("ring_fill", 0.0) << "% full of " << bytes_text(s.value("ring_bytes", uint64_t(0)))
            << "; " << s.value("lost_total", uint64_t(0)) << " events lost since start\n"
            << "  records in " << text(s["storage_dir"]) << ": " << bytes_text(s.value("storage_bytes", uint64_t(0)))
            << (s.value("storage_full", false) ? "; STORAGE FULL (below storage.min_free)" : "") << "\n";
  for (const auto& e : sessions) {
    std::cout << "  " << text(e["rule"]) << " (" << (e.value("mode", "") == "lite" ? "lite" : "full") << ")  "
              << text(e["cgroup"]) << "\n"
              << "      " << e.value("entries", int64_t(0)) << " entries, " << std::setprecision(0)
              << e.value("entries_per_second", 0.0) << "/s, " << e.value("lost", uint64_t(0)) << " lost, "
              << bytes_text(e.value("record_bytes", uint64_t(0))) << " in " << text(e["record"])
              << (e.value("suspended", false) ? " (SUSPENDED: events left out)" : "")
              << (e.value("cgroup_gone", false) ? " (cgroup gone; its tasks live on elsewhere)" : "") << "\n";
  }
  return 0;
}

}  // namespace flightrec::cli
