#pragma once
// The policy's judge on a session's kernel entries (policy/judge.h): an
// entry that breaks a rule gets a violation entry right after it (rule,
// level, action, detail, the subject's pid, exe and path), and the first
// of each kind a line on stderr; repeats are counted and told at the end.
// `run` uses it inside its Confinement; `watch` and flightrecd use it on
// a watched cgroup whose rule names a policy (audit: nothing is refused,
// every violation is a would-deny).
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "events/exe_table.h"
#include "policy/judge.h"
#include "policy/policy.h"
#include "recorder/recorder.h"
#include "session/pipeline.h"

namespace flightrec::session {

class PolicyObserver : public Observer {
 public:
  // work_dir: where the session's processes start (relative paths in
  // failed calls are judged from it). log_prefix: "flightrec" or
  // "flightrecd", for the stderr lines. The policy outlives this.
  PolicyObserver(const policy::Policy& policy, std::string work_dir, std::string log_prefix);
  PolicyObserver(const PolicyObserver&) = delete;
  PolicyObserver& operator=(const PolicyObserver&) = delete;

  policy::Judge& judge() { return *judge_; }
  // Called after a violation is recorded (run's on_violation: kill).
  void on_violation(std::function<void(const policy::Violation&, Emitted&)> then) { then_ = std::move(then); }

  void observe(const events::Entry& e, Emitted& out) override;
  // observe() in two steps, for whoever tracks more between them.
  void follow(const events::Entry& e);
  // A process that ran before the record began (process_at_start): what it runs.
  void running(int64_t pid, const std::string& exe) { exe_.exec(pid, exe); }
  void judge_entry(const events::Entry& e, Emitted& out);

  // Recorded, said on stderr once per rule, program and scope, then
  // on_violation's. subject: the kernel entry judged (its process is the
  // violation's pid, comm and exe), or none for the session as a whole.
  void violation(const policy::Violation& v, const events::Entry* subject, Emitted& out);
  // Recorded only.
  void record_violation(const policy::Violation& v, const events::Entry* subject, Emitted& out, uint64_t count = 0);
  // On stderr: how often each alert shown repeated (once, at the session's
  // end); wait: up to 200 ms for the lines to be written (a process about
  // to exit; flightrecd's loop never waits on its stderr).
  void report_repeats(bool wait = true);
  // Where a process is: its cwd as the record followed it, else /proc's.
  std::optional<std::string> cwd_of_process(int64_t pid) const;

  static constexpr uint64_t kMaxPrinted = 100;

 private:
  const policy::Policy& policy_;
  std::string work_dir_;
  std::string prefix_;
  std::unique_ptr<policy::Judge> judge_;
  std::function<void(const policy::Violation&, Emitted&)> then_;
  struct Alert {
    std::string what, comm, scope;  // "ALERT rule action", and what the fingerprint holds
    uint64_t repeats;
  };
  std::map<std::string, Alert> alerted_;  // by fingerprint: level, rule, program, scope
  uint64_t not_shown_ = 0;                // distinct ones past kMaxPrinted
  events::ExeTable exe_;                  // a violation's exe
  std::map<int64_t, std::string> cwd_;    // processes that left the work directory ("": unknown)
  std::vector<int64_t> cwd_gone_;         // exited: forgotten after their last entry
};

// The policy in the genesis entry: its name, its text and its extends:
// chain's (what replay and a verifier read back).
void describe_policy(const policy::Policy& policy, recorder::SessionMeta& meta);

// A policy as a watched cgroup is judged by it: audit (shadow) mode, for
// nothing there is confined. Throws policy::PolicyError.
policy::Policy load_audit_policy(const std::string& name_or_path);
// Its work directory for a watched cgroup: the policy's own if absolute;
// else none (a workload not started by flightrec has no work directory
// of its choosing, so nothing is writable through one).
std::string audit_work_dir(const policy::Policy& policy);

}  // namespace flightrec::session
