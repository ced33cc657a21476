#pragma once
// One recorded cgroup, as `flightrec watch` and flightrecd both record it:
// its record (store, recorder, pipeline), the processes already there at
// the start (process_at_start entries), the observers its capture asks for
// (TLS follower, model calls), the policy its rule names (judged in audit
// mode: violations recorded, nothing refused), a lite session's counts,
// and the end rule.
// Whoever owns the capture routes the session's records here and decides
// when to end; what goes into the record, in which order, is decided here.
//
//   CgroupSession s(capture, number, {&cgroup}, spec);  genesis, notes, process_at_start
//   s.on_record(data, size);                           each of its ring records
//   s.add_counts(taken); s.record_counts();            lite, each interval
//   s.ended();                                         every cgroup gone, no task left
//   s.finish(reason);                                  the tail, session_end
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ledger/store.h"
#include "probe/capture.h"
#include "recorder/recorder.h"
#include "sandbox/cgroup.h"
#include "session/lite_counts.h"
#include "session/llm_calls.h"
#include "session/pipeline.h"
#include "session/policy_observer.h"
#include "session/snapshot.h"
#include "session/tls_attach.h"

namespace flightrec::session {

struct CgroupSessionSpec {
  std::string db;                  // the record file (created)
  int cache_kib = 0;               // SQLite's page cache bound (0: its default)
  recorder::SessionMeta meta;      // the genesis entry: meta.tls, meta.agent_turns, meta.lite are obeyed
  std::vector<std::string> notes;  // error entries right after it
  // The processes in the cgroups now (but exclude_pid), each a
  // process_at_start entry: who was there before any probe saw them exec.
  bool list_processes = true;
  int exclude_pid = 0;
  size_t argv_budget = kSnapshotArgvBudget;  // their command lines, together (the rest left out, said)
  bool cgroups_gone = false;                 // said in the record this one continues
  // Kept across the record files of one kernel session (flightrecd's
  // rotation): the processes followed for TLS. nullptr: one of its own.
  std::shared_ptr<TlsFollower> tls_follower;
  std::shared_ptr<LiteCounter> lite_counter;  // its counts and what it has said of the kernel's losses
  // The policy the session is judged by (load_audit_policy), or none.
  // The genesis entry names it and holds its text.
  std::shared_ptr<const policy::Policy> policy;
  std::string log_prefix = "flightrec";  // its violations' stderr lines
  bool resident = false;                 // flightrecd's: its end never waits for stderr
};

class CgroupSession {
 public:
  // Creates the record (throws Error; nothing is left open then). The
  // kernel session `number` of `capture` is open on `cgroups` already;
  // they outlive this.
  CgroupSession(probe::Capture& capture, uint32_t number, std::vector<const sandbox::Cgroup*> cgroups,
                CgroupSessionSpec spec);
  CgroupSession(const CgroupSession&) = delete;
  CgroupSession& operator=(const CgroupSession&) = delete;

  uint32_t number() const { return number_; }
  const std::string& db() const { return db_; }
  recorder::Recorder& recorder() { return *rec_; }
  const recorder::Recorder& recorder() const { return *rec_; }
  Pipeline& pipeline() { return *pipeline_; }
  const std::shared_ptr<TlsFollower>& tls_follower() const { return tls_; }
  const std::shared_ptr<LiteCounter>& lite_counter() const { return counts_; }

  // One of its ring records (TLS plaintext is left out unless meta.tls).
  void on_record(const void* data, size_t size);

  // Lite: the counts taken from the kernel (every session's at once; this
  // one's are kept), and written as syscall_counts entries.
  void add_counts(const std::vector<probe::Capture::LiteCount>& taken);
  void record_counts();

  // Notes, once each, the cgroups removed since; true if all of them are.
  bool cgroups_gone();
  // The end rule: every cgroup is gone and no task of the session is left
  // anywhere (a task moved out of its cgroup keeps the session going, or
  // an agent could move out, remove its cgroup and go on unrecorded). A
  // count above zero is checked against the host's tasks (one walk a
  // second, shared by every session: Capture::session_has_tasks), so a
  // count a race added twice does not keep it open.
  bool ended();

  // The session's tail (held TLS records, hellos no plaintext followed,
  // exchanges still open, the last counts), then session_end with `reason`.
  void finish(const std::string& reason);
  // Its record file ends here (rotation): the last counts and session_end;
  // the TLS follower goes on in the next file (spec.tls_follower).
  void finish_part(const std::string& reason);

 private:
  probe::Capture& capture_;
  uint32_t number_;
  std::vector<const sandbox::Cgroup*> cgroups_;
  std::vector<bool> gone_;
  std::string db_;
  bool tls_kept_ = false;
  bool resident_ = false;
  std::unique_ptr<ledger::Store> store_;
  std::unique_ptr<recorder::Recorder> rec_;
  std::unique_ptr<Pipeline> pipeline_;
  std::shared_ptr<TlsFollower> tls_;
  std::unique_ptr<LlmCalls> llm_;
  std::shared_ptr<LiteCounter> counts_;
  std::shared_ptr<const policy::Policy> policy_;
  std::unique_ptr<PolicyObserver> judging_;
};

}  // namespace flightrec::session
