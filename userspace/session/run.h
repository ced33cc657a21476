#pragma once
// A whole `run` session: the command started in a fresh cgroup that the
// programs already watch (in the plan's sandbox, if it has one), recorded
// until it and everything it left behind are gone, the record sealed.
// And a whole `watch` session over cgroups that already exist.
#include <memory>
#include <string>
#include <vector>

#include "ledger/keys.h"
#include "session/plan.h"

namespace flightrec::session {

struct RunTarget {
  std::string db;                    // the record (created if missing)
  std::string key_dir;               // signing key directory; "" for unsigned checkpoints
  std::vector<std::string> command;  // argv; [0] found on the (sandbox's) PATH
  std::string grant_socket;          // policy ask: where grants are taken ("": the default)
  // flightrecd's control socket: the session is handed to the daemon there
  // when one answers and it serves what the session needs ("": never).
  std::string daemon_socket;
  bool require_daemon = false;       // ...and if it cannot be, `run` fails rather than load the programs
};

// Runs and records; returns what `flightrec run` exits with: the command's
// code (128+N if killed by signal N), kPolicyKillExit (124) if the policy
// ended the session, 126/127 if the command cannot be executed or is not
// found (said on stderr). Throws Error when flightrec itself fails.
int run(Plan plan, const RunTarget& target);

struct WatchTarget {
  std::string db;
  std::string key_dir;
  std::vector<std::string> cgroups;  // cgroup v2 directories
  double duration_s = 0;             // 0: until SIGINT/SIGTERM or every cgroup is gone
  bool lite = false;                 // lite mode (docs/LITE.md)
  uint64_t counts_interval_ms = 60000;  // lite: syscall counts sealed this often
  std::string policy;                // judged by it, in audit mode ("": none)
};

// Records the cgroups' processes, unconfined, until a signal, the duration,
// or every cgroup is gone. Throws Error.
void watch(Plan plan, const WatchTarget& target);

// The signing key in `dir` (flightrec keygen); nullptr for "". Throws Error.
std::unique_ptr<ledger::SigningKey> load_key(const std::string& dir);

}  // namespace flightrec::session
