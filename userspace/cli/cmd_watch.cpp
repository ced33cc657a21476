// flightrec watch: options, then a session (session/run.h).
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/session_options.h"
#include "policy/policy.h"
#include "session/plan.h"
#include "session/run.h"

namespace flightrec::cli {
namespace {

const char* kWatchUsage =
    "usage: flightrec watch --cgroup PATH [--cgroup PATH...] --db FILE [--duration SECONDS]\n"
    "                       [--mode full|lite] [--policy NAME|FILE]\n\n"
    "Records every syscall, exec, fork and exit of the processes in the given cgroup v2\n"
    "directories and below (e.g. a pod's cgroup) into FILE, without confining them.\n"
    "--mode lite records less at a fraction of the cost, for production hosts: execs,\n"
    "forks, exits, opens for writing, file changes, connect/bind/accept, identity,\n"
    "ptrace, mount, bpf and module calls, with per-cgroup syscall counts; every other\n"
    "syscall runs without a BPF program (docs/LITE.md says what lite does not see).\n"
    "Stops on SIGINT/SIGTERM, after --duration seconds, or when every cgroup is gone;\n"
    "a cgroup that disappears is noted in the record. --policy judges what the\n"
    "processes do by a policy (agent-pod is made for agent workloads), in audit\n"
    "mode: nothing is refused, each act the policy would deny is a violation entry\n"
    "(would-deny) with its rule, and the first of each kind is said on stderr.\n"
    "Needs root.";

}  // namespace

int cmd_watch(const Args& args) {
  po::options_description desc("options");
  SessionOptions so;
  so.on_loss = "continue";  // production cgroups are not paused unless asked (loss is loud)
  so.entry_times = "off";   // every process on the host pays for a sys_enter program
  so.ring = "16M";          // nothing pauses a watched cgroup: the ring is its only headroom
  std::vector<std::string> paths;
  double duration = 0;
  std::string mode = "full", counts_interval = "60s", policy_ref;
  desc.add_options()("help,h", "show this help")(
      "mode", po::value(&mode)->default_value(mode), "full: every syscall; lite: see above")(
      "policy", po::value(&policy_ref)->value_name("NAME|FILE"),
      "judge the processes by this policy (a shipped name, e.g. agent-pod, or a YAML file), in audit mode")(
      "counts-interval", po::value(&counts_interval)->default_value(counts_interval),
      "lite: seal the syscall counts this often (1s to 24h)")(
      "cgroup", po::value(&paths)->required(), "cgroup v2 directory to watch, with everything below it (repeatable)")(
      "duration", po::value(&duration)->default_value(0),
      "stop after this many seconds (0: until SIGINT/SIGTERM)");
  so.add_to(desc);
  po::variables_map vm;
  if (!parse_options(args, desc, kWatchUsage, vm)) return 0;
  if (mode != "full" && mode != "lite") throw UsageError("--mode must be full or lite, not '" + mode + "'");
  auto interval = policy::parse_duration_ms(counts_interval);
  if (!interval || *interval < 1000 || *interval > 24ull * 3600 * 1000)
    throw UsageError("--counts-interval must be a duration from 1s to 24h (e.g. 30s, 5m), not '" + counts_interval + "'");
  try {
    session::watch(session::compile(so.settings()),
                   {so.db, so.key_dir, paths, duration, mode == "lite", *interval, policy_ref});
  } catch (const session::PlanError& e) {
    throw UsageError(e.what());
  }
  return 0;
}

}  // namespace flightrec::cli
