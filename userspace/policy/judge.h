#pragma once
// Which rule of the policy a recorded event broke. Run on every kernel
// entry of a confined session: in enforce mode it names the rule behind a
// denial the kernel already made (seccomp, Landlock, egress), in shadow mode
// it says what enforce mode would have denied.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "events/entry.h"
#include "policy/policy.h"

namespace flightrec::policy {

struct Violation {
  std::string rule;       // e.g. "seccomp.deny.ptrace", "filesystem.read_only"
  const char* level;      // "CRITICAL", "ALERT" or "INFO"
  const char* action;     // "denied", "would-deny", "killed", or "allowed" (could not be refused)
  std::string detail;     // one line for people
  // What it was about, at the rule's grain (the hidden tree, the endpoint,
  // the directory): repeats of one rule by one program on one scope are
  // one alert on stderr with a count (the record keeps every one).
  std::string scope = {};
  // The path or address it names was read from the process's memory at
  // the call's return (a failed call leaves the kernel no copy to read):
  // another thread of the process could have rewritten it meanwhile.
  bool from_user_memory = false;
};

// Harmless probing that runtimes and tools do on every run is INFO, not
// ALERT: a call of a few new syscalls that an explicit seccomp rule answers
// with ENOSYS (libc falls back, e.g. clone3 to clone), a failed look at a
// hidden path that does not exist on the host and does not look like a
// credential (a PATH search, a missing ~/.curlrc), and reading the few
// /sys files and the cgroup files runtimes size themselves by, or a
// refused open of the ftrace marker (runtimes' built-in profilers).
bool harmless_probe_read(const std::string& path);
bool harmless_probe_write(const std::string& path);
// Inside a coding agent's config directory (~/.claude, ~/.codex, ...).
bool in_agent_config(const std::string& path);
bool looks_like_credentials(const std::string& path);

class Judge {
 public:
  // work_dir: the absolute path of the session's work directory.
  Judge(const Policy& policy, std::string work_dir);
  std::optional<Violation> judge(const events::Entry& e) const;

  // The seccomp rule that decides this call (nullptr: the default action).
  const SyscallRule* seccomp_rule(int nr, const std::vector<int64_t>& args) const;
  bool allowed_endpoint(int family, const std::string& addr, int port) const;
  // Whether the sandbox can read this absolute path at all.
  bool readable(const std::string& path) const;
  // BPF-LSM keeps tasks outside the session out of its UNIX sockets (the
  // kernel loaded lsm/unix_*): an abstract name bound in a shared network
  // namespace is then no inbound channel.
  void set_unix_inbound_refused(bool refused) { unix_inbound_refused_ = refused; }
  // Where a process is (its cwd, as the sandbox sees it): a failed call on
  // a relative path is judged by the path it named.
  void set_cwd_resolver(std::function<std::optional<std::string>(int64_t pid)> cwd) { cwd_ = std::move(cwd); }
  // What a process runs, as the record followed it (nullptr: not known);
  // processes.expected_parents is judged by it.
  void set_exe_resolver(std::function<const std::string*(int64_t pid)> exe) { exe_ = std::move(exe); }
  // Whether a path's absence on this host may lower a level to INFO: on
  // in a live session, off when replaying (the host is not the session's).
  void set_host_checks(bool on) { host_checks_ = on; }

 private:
  std::optional<Violation> judge_syscall(const events::Entry& e) const;
  std::optional<Violation> judge_path(const events::Entry& e, const std::string& name, int64_t ret) const;
  std::optional<Violation> judge_connect(const events::Entry& e, int64_t ret) const;
  bool writable(const std::string& path) const;
  const char* verdict(bool kernel_denied) const;

  const Policy& policy_;
  bool shadow_;
  std::string work_dir_;
  std::vector<std::string> writable_;
  std::vector<std::string> protected_;  // filesystem.protect, absolute
  std::function<std::optional<std::string>(int64_t)> cwd_;
  std::function<const std::string*(int64_t)> exe_;
  std::optional<Violation> judge_exec(const events::Entry& e) const;
  bool unix_inbound_refused_ = false;
  bool host_checks_ = true;
};

// "/a/./b//c/../d" -> "/a/b/d"; "/proc/self/root/x" and "/proc/N/root/x"
// -> "/x" (the same file, seen through procfs). Relative paths unchanged.
std::string normalize_path(const std::string& path);
bool path_under(const std::string& path, const std::string& prefix);
// open(2) flags that write, create or truncate.
bool opens_for_writing(int64_t flags);

}  // namespace flightrec::policy
