#pragma once
// What a session leaves on the host while it runs, and the reaping of what
// a killed one left behind. A session named NAME (run-PID-N, probe-PID,
// probe-lite-PID) owns:
//   <cgroup2>/flightrec/NAME and <each v1 hierarchy>/flightrec/NAME
//   /var/lib/flightrec/sessions/NAME   (its overlay layers; a tmpfs mounted
//                                       there only in flightrec's own mount
//                                       namespace, or on the host's where
//                                       that namespace could not be made)
//   /run/flightrec/grants/NAME.sock    (its grant socket, by default)
// and a claim on all of them: /var/lib/flightrec/sessions/NAME.lock, held
// with flock for the session's life and linked into place already locked.
// Everything else a session makes (BPF programs and links, uprobes, the
// egress programs) is held by flightrec's file descriptors and goes with
// the process however it ends.
#include <string>
#include <vector>

namespace flightrec::sandbox {

// Made before any of the session's resources, released after them: a claim
// nobody holds means its owner is gone.
class SessionClaim {
 public:
  explicit SessionClaim(const std::string& name);  // throws Error
  ~SessionClaim();  // removes what is left of NAME that is not kept, then the claim
  SessionClaim(const SessionClaim&) = delete;
  SessionClaim& operator=(const SessionClaim&) = delete;
  const std::string& name() const { return name_; }

 private:
  std::string name_, path_;
  int fd_ = -1;
};

// A session whose owner is gone, and what was done about it.
struct Leftover {
  std::string name;
  std::vector<std::string> reaped;  // e.g. "cgroup /sys/fs/cgroup/flightrec/run-1-2 (2 processes killed)"
  std::vector<std::string> kept;    // what keep_changes asked to keep, never deleted
  std::vector<std::string> failed;  // what could not be removed, and why
};

// Every session on this host whose claim nobody holds (or, for sessions of
// flightrec versions before claims, whose flightrec process is gone), with
// what it left reaped: its processes killed, its cgroups, session tmpfs and
// grant socket removed. A live session is never touched. Sessions that left
// only what they were asked to keep are listed when with_kept. wait_ms: how
// long killed processes are awaited (a cgroup still busy after it is
// reported as failed, and reaped at the next call).
std::vector<Leftover> reap_leftovers(bool dry_run, bool with_kept = false, unsigned wait_ms = 5000);

// One line for stderr: "run-1-2: reaped cgroup ..., ...; kept ...".
std::string describe(const Leftover& l);

// Gives the calling thread (and every thread and child made after) a mount
// namespace of its own whose mounts do not reach the host's: a session's
// tmpfs then dies with flightrec, even by SIGKILL. The host's mounts and
// unmounts still reach it. false (nothing changed) where it cannot be made.
bool own_mount_namespace();

}  // namespace flightrec::sandbox
