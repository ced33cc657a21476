#pragma once
// What `run --policy` adds to a session: the sandboxed command, its
// resource limits, the egress allowlist, the judge that turns denials into
// violation entries, circuit breakers (wall clock, CPU time, on_violation:
// kill) and, at the end, limit counters and the file changes.
#include <sys/stat.h>
#include <sys/types.h>

#include <array>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "recorder/watchdog.h"
#include "policy/judge.h"
#include "policy/policy.h"
#include "probe/capture.h"
#include "probe/egress_filter.h"
#include "recorder/recorder.h"
#include "session/grant_log.h"
#include "session/pipeline.h"
#include "session/policy_observer.h"
#include "session/session_resolver.h"
#include "sandbox/cgroup.h"
#include "sandbox/changes.h"
#include "sandbox/launch.h"
#include "sandbox/limits.h"

namespace flightrec::session {

// Exit code of `run` when the policy ended the session (circuit breaker or
// on_violation: kill).
constexpr int kPolicyKillExit = 124;

// Whether the policy runs the command in a sandbox (confining, not shadow).
bool sandboxes(const policy::Policy& p);

// $PATH without the directories the policy hides or does not let the
// sandbox read (a search there would only fail, as a violation).
std::string sandbox_search_path(const policy::Policy& policy);

class Confinement : public Observer {
 public:
  // Starts building the sandbox (when the policy confines and enforces),
  // whose command then waits for go(); await_ready() says when it is built.
  // Call while flightrec has one thread.
  // protect: paths the command must not see however the policy reads
  // (the record and its -wal/-shm, the signing key's directory).
  Confinement(policy::Policy policy, sandbox::Cgroup& cgroup, const std::string& program,
              const std::vector<std::string>& command, const std::vector<std::string>& protect,
              const std::string& grant_socket = "");
  ~Confinement();

  bool sandboxed() const { return sandboxed_; }
  const policy::Policy& policy() const { return policy_; }
  pid_t pid() const { return child_.pid; }
  void fill(probe::CaptureOptions& copts) const;
  void fill(recorder::SessionMeta& meta) const;
  // Under an egress allowlist: its filter, with the plan's rules
  // (copts.egress), on the session's cgroup, before go().
  void filter_egress(const probe::CaptureOptions& copts);
  // From now on, what it writes goes through the pipeline, knowing what
  // this kernel's capture enforces itself.
  void start(Pipeline& pipeline, const probe::CaptureTraits& capture);
  // Judges every kernel entry (violations, on_violation: kill) and tracks
  // the files opened for writing (their changes are diffed at close).
  void observe(const events::Entry& entry, Emitted& out) override;
  // Waits until the sandbox is built (the programs load meanwhile);
  // throws Error saying what could not be set up.
  void await_ready();
  // The command may start (it is in every cgroup by now).
  void go();
  // Readable when file changes diffed at close wait to be recorded
  // (record_changes()); -1 without a sandbox.
  int changes_fd() const { return differ_ ? differ_->fd() : -1; }
  void record_changes();
  // Readable when the grant supervisor reported (policy ask:); -1 without one.
  int grants_fd() const { return grant_log_ ? grant_log_->fd() : -1; }
  void record_grants();
  // Readable when the sandbox's resolver answered queries (record_names()); -1 without one.
  int names_fd() const { return names_ ? names_->fd() : -1; }
  void record_names();
  // The names its answers gave addresses (for the recorder); null without a resolver.
  events::HostNames* host_names() const { return names_ ? names_->host_names() : nullptr; }
  // Packets the egress allowlist's filter dropped since the last call, as violations.
  // Packets the egress programs dropped, connections they cut for their
  // server name (session/egress_notes.h): into the record.
  void note_packet_drops();
  // Readable when a connection was cut (note_packet_drops()); -1 without the programs.
  int cuts_fd() const { return egress_ ? egress_->cuts_fd() : -1; }
  // The circuit breakers (wall clock, CPU time, growth of the record file)
  // check on the watchdog's thread and kill there; their entries are
  // posted to the recording thread.
  void guard(recorder::Watchdog& watchdog, const std::string& record);
  bool killed_by_policy() const;
  std::string kill_rule() const;
  // Records limit hits and file changes, and returns how the sandbox's
  // init saw the command end (exec errors included).
  sandbox::Outcome finish();
  // On stderr: how often each alert shown repeated (once, at the session's end).
  void report_repeats();

 private:
  // Files opened for writing, by (pid, fd): when closed, their change is
  // recorded right away (the end-of-session diff has the final state).
  void track_writes(const events::Entry& e);
  events::Entry& record_change(const sandbox::FileChange& c, const char* when, Emitted& out);
  void note_error(Emitted& entries, const std::string& detail);
  std::optional<sandbox::FileChange> diff_one(const std::string& path) const;
  // The sandbox's /tmp and /dev/shm (empty at the start) and where their contents live.
  std::array<std::pair<std::string, std::string>, 2> private_dirs() const;
  // What a kill found and did, from enforce_kill (any thread) to
  // record_kill (the recording thread).
  struct KillReport {
    std::string rule, why;
    uint64_t taken_mono_ns;
    std::string processes, open_fds, memory_current;
    bool frozen;
  };
  void check_breakers();  // on the watchdog's thread
  bool claim_kill(const std::string& rule);  // true for the first rule only
  KillReport enforce_kill(const std::string& rule, const std::string& why);
  void record_kill(const KillReport& report, Emitted& out);
  void kill_session(const std::string& rule, const std::string& why, Emitted& out);  // on the recording thread

  policy::Policy policy_;
  sandbox::Cgroup& cgroup_;
  bool sandboxed_ = false;
  std::string work_dir_;
  std::string work_lower_;  // the work overlay's lower layer: work_dir_, or an empty directory
  bool work_on_host_ = false;  // the work directory is the host's (not a private, empty one)
  uid_t work_uid_ = 0;         // its owner: the command's ids, and those of what is written to it
  gid_t work_gid_ = 0;
  int64_t work_start_ns_ = 0;  // sandbox::ApplyOptions::session_start_ns
  uint64_t work_dev_ = 0, work_ino_ = 0;  // the work directory itself, seen at the start
  std::vector<std::string> env_passed_, env_set_;
  std::vector<std::string> sandbox_environment(const struct stat& work_owner);
  void share_home(const std::string& home, const struct stat& work_owner);
  std::vector<int> home_fds_;                 // filesystem.home directories, open until the sandbox has them
  std::vector<std::string> home_dir_names_;   // their names, in the same order
  std::vector<std::string> home_dir_paths_;   // and where they are on the host
  std::vector<std::string> home_shared_;      // every entry shared, for the record
  // The work directory's changes at the end: written to the host or kept,
  // as work_dir_mode says; each entry says what became of it.
  void settle_work_changes(std::vector<sandbox::FileChange>& work, Emitted& entries);
  std::unique_ptr<sandbox::SessionDir> dir_;
  std::unique_ptr<sandbox::SeccompFilter> seccomp_;
  std::unique_ptr<sandbox::ResourceLimits> limits_;
  // The judge, its violations and their stderr lines; a violation ends the
  // session under on_violation: kill.
  std::unique_ptr<PolicyObserver> judging_;
  sandbox::LandlockPlan landlock_;
  sandbox::SandboxChild child_;
  Pipeline* pipeline_ = nullptr;  // where entries from outside observe() go
  uint64_t started_ns_ = 0;
  mutable std::mutex kill_mu_;
  std::string kill_rule_;  // the first rule that ended the session (kill_mu_)
  recorder::Watchdog* watchdog_ = nullptr;
  std::string record_;             // the record file, for limits.record_size
  uint64_t record_at_start_ = 0;   // its size (with its WAL) when the session began
  std::map<std::pair<int64_t, int64_t>, std::string> written_;
  std::unique_ptr<sandbox::PathDiffer> differ_;
  std::unique_ptr<probe::EgressFilter> egress_;
  std::unique_ptr<SessionResolver> names_;  // the sandbox's resolver (network none or allowlist)
  // The grant supervisor (policy ask:) and its reports.
  void start_grants(const std::string& socket_path);
  void stop_grants();
  std::string grant_socket_;
  pid_t supervisor_ = -1;
  std::unique_ptr<GrantLog> grant_log_;
  bool stopping_grants_ = false;
  int notify_sock_[2] = {-1, -1};
  int egress_granted_fd_ = -1, egress_tickets_fd_ = -1;  // ask.connect: shared by the supervisor and the programs
  int exec_tickets_fd_ = -1;                              // ask.exec: the same
  int view_gen_fd_ = -1;                                  // any ask: fr_view_gen, the same
  probe::PathRules exec_rules_;  // ask.exec: the policy's exec list as BPF-LSM enforces it (Landlock does not then)
  uint64_t closes_left_to_end_ = 0;
  uint64_t packet_drops_seen_[FR_NET_DROP_KINDS] = {};
};

}  // namespace flightrec::session
