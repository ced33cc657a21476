#pragma once
// Starts a command confined as a policy says: new user (root inside is an
// unprivileged id range outside), mount, pid, ipc, uts and (network: none)
// net namespaces; an overlay root whose writes land in the session's upper
// layer; fresh /proc, minimal /dev, tmpfs /tmp; hidden paths masked; then
// no_new_privs, Landlock, capabilities dropped, rlimits and seccomp last
// before exec.
//
// Processes: flightrec forks the sandbox's init (pid 1 inside), which
// builds the mounts as real root, waits for "go" (it is in the session's
// cgroups by then), enters the user namespace, forks the command and reaps
// orphans until the command exits. Everything the children must tell the
// parent goes through the report pipe as fixed-size Reports.
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "policy/policy.h"
#include "sandbox/cgroup.h"
#include "sandbox/landlock.h"
#include "sandbox/seccomp_filter.h"

namespace flightrec::sandbox {

struct SandboxSpec {
  const policy::Policy* policy = nullptr;
  std::string program;                 // absolute path, the same inside
  std::vector<std::string> argv, env;
  std::string work_dir;                // absolute; the same path inside
  std::string work_lower;              // what the work directory shows: work_dir, or an empty directory
  std::string session_dir;             // holds upper/, work/, lower/, root/
  const SeccompFilter* seccomp = nullptr;
  int notify_sock = -1;                // the filter notifies: its listener is sent here (SCM_RIGHTS)
  LandlockPlan landlock;
  uid_t id_base = 0;                   // host id that uid/gid 0 inside maps to
  uid_t uid = 0;                       // the command's ids inside: the work directory's owner
  gid_t gid = 0;
  std::vector<std::string> hidden;     // the policy's, plus the record and the key
  std::vector<std::string> protect;    // read-only inside the work directory (absolute), where they exist
  // Directories of the invoking user's home, each shown at /tmp/home/NAME
  // as an overlay; the session directory holds
  // home-lower-N, home-upper-N (made by the caller) and home-work-N.
  struct HomeDir {
    std::string path, name;  // on the host; at /tmp/home/NAME inside
    dev_t dev;               // what flightrec checked: found again by these
    ino_t ino;
  };
  std::vector<HomeDir> home_dirs;
  Cgroup* cgroup = nullptr;            // the session's: the sandbox's init is born in it
  std::vector<std::string> v1_tasks;   // v1 cgroups' "tasks" files its init moves itself into first
};

// The session's private directory: a tmpfs (unless changes are kept) with
// the overlay's upper and work directories owned by the sandbox's root.
class SessionDir {
 public:
  SessionDir(const std::string& name, bool keep, uint64_t size_bytes);
  SessionDir(const SessionDir&) = delete;
  SessionDir& operator=(const SessionDir&) = delete;
  ~SessionDir();
  const std::string& path() const { return path_; }
  std::string upper() const { return path_ + "/upper"; }            // the root's changes
  std::string upper_work() const { return path_ + "/upper-work"; }  // the work directory's
  std::string empty() const { return path_ + "/empty"; }            // an empty directory
  std::string tmp() const { return path_ + "/tmp"; }                // the sandbox's /tmp
  std::string shm() const { return path_ + "/shm"; }                // the sandbox's /dev/shm
  void discard();  // unmounts the tmpfs / removes the directory (unless kept)
 private:
  std::string path_;
  bool keep_, mounted_ = false;
};

struct Report {
  enum Kind : int32_t { SetupFailed = 1, ExecFailed = 2, Exited = 3, Ready = 4 };
  int32_t kind = 0;
  int32_t value = 0;        // errno, or the command's wait status
  char stage[120] = {};     // what the sandbox was doing
};

struct SandboxChild {
  pid_t pid = -1;      // the sandbox's init
  int go_fd = -1;      // write one byte: the command may start
  int report_fd = -1;  // Reports; EOF when the sandbox is gone
};

// Starts building the sandbox and returns at once, so the caller can load
// its programs meanwhile. Call it while the process has one thread (the
// sandbox's init is made with a raw clone). Throws Error.
SandboxChild spawn_sandboxed(const SandboxSpec& spec);
// Returns once the sandbox is built and its init sleeps until go (see
// await_asleep); otherwise reaps it and throws Error saying what could not
// be set up.
void await_ready(SandboxChild& child);
// Returns once the process sleeps (state S in /proc/PID/stat), is gone, or
// a second has passed. For a child that does nothing but block until go
// once it has said so (or at once): after this, a session opened on its
// cgroup records nothing of its set-up.
void await_asleep(pid_t pid);

struct Outcome {
  std::string setup_error;     // non-empty: the sandbox could not be built
  int exec_errno = 0;          // non-zero: the command could not be executed
  std::optional<int> status;   // the command's wait status, as init saw it
};
Outcome read_reports(int report_fd);

// `path` inside `root`, symlinks resolved inside it (an absolute link
// leads to root's file, not the host's): the host-side path, or "" if it
// does not exist.
std::string in_root(const std::string& root, const std::string& path);

constexpr uid_t kSandboxIdBase = 1'000'000'000;  // documented in docs/POLICIES.md
constexpr uid_t kSandboxIdCount = 65536;

}  // namespace flightrec::sandbox
