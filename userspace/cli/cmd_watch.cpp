// flightrec watch: options, then a session (session/run.h).
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/session_options.h"
#include "session/plan.h"
#include "session/run.h"

namespace flightrec::cli {
namespace {

const char* kWatchUsage =
    "usage: flightrec watch --cgroup PATH [--cgroup PATH...] --db FILE [--duration SECONDS]\n\n"
    "Records every syscall, exec, fork and exit of the processes in the given cgroup v2\n"
    "directories and below (e.g. a pod's cgroup) into FILE, without confining them.\n"
    "Stops on SIGINT/SIGTERM, after --duration seconds, or when every cgroup is gone;\n"
    "a cgroup that disappears is noted in the record. Needs root.";

}  // namespace

int cmd_watch(const Args& args) {
  po::options_description desc("options");
  SessionOptions so;
  so.on_loss = "continue";  // production cgroups are not paused unless asked (loss is loud)
  so.entry_times = "off";   // every process on the host pays for a sys_enter program
  so.ring = "16M";          // nothing pauses a watched cgroup: the ring is its only headroom
  std::vector<std::string> paths;
  double duration = 0;
  desc.add_options()("help,h", "show this help")(
      "cgroup", po::value(&paths)->required(), "cgroup v2 directory to watch, with everything below it (repeatable)")(
      "duration", po::value(&duration)->default_value(0),
      "stop after this many seconds (0: until SIGINT/SIGTERM)");
  so.add_to(desc);
  po::variables_map vm;
  if (!parse_options(args, desc, kWatchUsage, vm)) return 0;
  try {
    session::watch(session::compile(so.settings()), {so.db, so.key_dir, paths, duration});
  } catch (const session::PlanError& e) {
    throw UsageError(e.what());
  }
  return 0;
}

}  // namespace flightrec::cli
