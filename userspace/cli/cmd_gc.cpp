// flightrec gc: removes what killed sessions left on this host
// (sandbox/leftovers.h); `flightrec run` and flightrecd do the same on
// their own, this is for an operator who wants it now, or to see it.
#include <unistd.h>

#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/text.h"
#include "sandbox/leftovers.h"

namespace flightrec::cli {

int cmd_gc(const Args& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("dry-run,n", "say what would be removed; remove nothing");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec gc [--dry-run]\n\n"
      "Removes what flightrec sessions killed without their end (SIGKILL, the OOM killer,\n"
      "a power cut of the process) left on this host: their remaining processes, their\n"
      "cgroups (v2 and v1), session directories and tmpfs mounts (what the command wrote),\n"
      "and grant sockets. A session is left alone while its flightrec holds its claim\n"
      "(/var/lib/flightrec/sessions/NAME.lock). What keep_changes or work_dir_mode: overlay\n"
      "kept is never removed: it is listed, with where it is.\n"
      "`flightrec run` does this at each start and flightrecd every minute; say so on stderr.\n"
      "Root only. Exit 0, or 1 when something could not be removed.";
  if (!parse_options(args, desc, usage, vm)) return 0;
  if (geteuid() != 0) {
    std::cerr << "flightrec gc: needs root (sessions' cgroups and directories are root's)\n";
    return 1;
  }
  bool dry_run = vm.count("dry-run") != 0;
  auto found = sandbox::reap_leftovers(dry_run, true);
  bool failed = false;
  size_t reaped = 0;
  for (const auto& l : found) {
    for (const auto& r : l.reaped) std::cout << printable(l.name) << (dry_run ? ": would remove " : ": removed ") << printable(r) << "\n";
    for (const auto& k : l.kept) std::cout << printable(l.name) << ": kept " << printable(k) << "\n";
    for (const auto& f : l.failed) std::cout << printable(l.name) << ": FAILED " << printable(f) << "\n";
    failed = failed || !l.failed.empty();
    reaped += l.reaped.empty() ? 0 : 1;
  }
  std::cout << reaped << " killed session(s) " << (dry_run ? "would be " : "") << "reaped\n";
  return failed ? 1 : 0;
}

}  // namespace flightrec::cli
