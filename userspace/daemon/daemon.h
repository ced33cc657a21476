#pragma once
// flightrecd: one resident recorder. The BPF programs are loaded once; each
// cgroup a watch rule matches is a session of its own (its own record file,
// chain, tree and checkpoints), opened when the cgroup appears and sealed
// when it goes, when the rules stop matching it, or when the daemon stops.
//
//   ring buffer -> record's session number -> that session's pipeline
//
// Everything runs on one thread (the ring, inotify, signals, ticks); each
// session's sealing runs on its writer's thread.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <string>

#include "daemon/config.h"
#include "control/protocol.h"
#include "control/server.h"
#include "daemon/discovery.h"
#include "daemon/runs.h"
#include "ledger/keys.h"
#include "policy/policy.h"
#include "probe/capture.h"
#include "recorder/recorder.h"
#include "session/tls_attach.h"
#include "ship/hub.h"

namespace flightrec::session {
class CgroupSession;
}

namespace flightrec::daemon {

class RecordedCgroup;

// The policies the config's watch rules name, by rule, each as a watched
// cgroup is judged by it (audit: session/policy_observer.h). Throws Error
// naming the rule and the policy's problem.
using RulePolicies = std::map<std::string, std::shared_ptr<const policy::Policy>>;
RulePolicies load_rule_policies(const Config& config);

class Daemon {
 public:
  // Loads the programs; throws Error. policies: load_rule_policies(config).
  Daemon(Config config, RulePolicies policies, std::string config_path);
  ~Daemon();
  // Records until SIGTERM or SIGINT, then seals every session; SIGHUP
  // reloads the config. Returns the exit code.
  int run();

 private:
  void open(const std::string& rel);
  void close(const std::string& rel, const std::string& reason);
  void close_capture_session(uint32_t number);  // and EarlyTlsAttach stops following it
  void seal(std::unique_ptr<RecordedCgroup> s, const std::string& reason);
  void cgroup_gone(const std::string& rel);  // sealed now, or once its tasks elsewhere have exited
  bool session_ended(RecordedCgroup& s);     // its cgroup gone and no task of it left (session/cgroup_session.h)
  void apply(const Discovery::Changes& changes);
  void retry();  // the cgroups that could not be recorded yet
  // The session's record from here on (a new file; `previous`, the one it
  // continues, or nullptr): genesis, process_at_start entries, pipeline.
  void start_record(RecordedCgroup& s, size_t tasks, const std::vector<uint64_t>& drops, uint64_t misses,
                    session::CgroupSession* previous);
  void rotate(RecordedCgroup& s, const std::string& why);  // storage.rotate
  void rotate_due(uint64_t now);                            // every session whose file reached its size or age
  void seal_all(const std::string& reason);
  // Lite sessions' syscall counts: taken from the kernel for all of them
  // at once, and one session's since its last entry into its record.
  void collect_counts();
  void record_counts(RecordedCgroup& s);
  void retain();                                            // storage.retain, oldest sealed records first
  struct SealedRecord {
    std::string path;
    std::filesystem::file_time_type mtime;
    uint64_t bytes;
  };
  std::vector<SealedRecord> sealed_records(uint64_t& total_bytes) const;  // oldest first; total: of all records
  void remove_record(const SealedRecord& r, const std::string& why);
  // Removes the oldest sealed records until enough(), if all of them
  // together free at least `needed` bytes; returns how many it removed.
  size_t remove_oldest(uint64_t needed, const std::function<bool()>& enough);
  void check_disk();                                          // storage.min_free and disk_full_action
  std::vector<const RecordedCgroup*> all_sessions() const;    // open, and lingering (cgroup gone)
  std::vector<RecordedCgroup*> recording();                   // of those, the ones whose records go on
  void guarded(RecordedCgroup& s, const std::function<void()>& work);  // a failure seals s alone
  void drop_sealed(const std::string& rel);                 // a session whose record could not go on
  void reload();
  void on_record(const void* data, size_t size);
  control::DaemonStatus status() const;
  std::string metrics() const;  // Prometheus's text exposition format
  nlohmann::json answer(const control::Request& request, control::Exchange& ex);
  const ledger::SigningKey* key_for(const std::string& dir);

  Config config_;
  RulePolicies policies_;  // config_'s
  std::string config_path_;
  std::string cgroup_root_;
  int sigfd_ = -1;
  // Where sessions' committed entries also go (outputs in the config);
  // every session's writer holds it, so outputs a reload adds serve them all.
  std::shared_ptr<ship::Hub> hub_ = std::make_shared<ship::Hub>();
  std::unique_ptr<probe::Capture> capture_;
  std::unique_ptr<session::EarlyTlsAttach> early_tls_;  // for the sessions of rules with tls: true
  std::unique_ptr<Discovery> discovery_;
  std::unique_ptr<RunSessions> runs_;        // before control_: its held answers call back into runs_
  std::unique_ptr<control::ControlServer> control_;
  int epoll_ = -1;                           // run()'s
  bool tls_loaded_ = false;                  // the TLS programs are (the config at start asked)
  std::unique_ptr<control::MetricsServer> metrics_;
  int stats_fd_ = -1;  // BPF run-time statistics stay on while it is open
  uint64_t started_real_ns_ = 0;
  std::map<std::string, std::unique_ptr<ledger::SigningKey>> keys_;  // by directory
  std::map<std::string, std::unique_ptr<RecordedCgroup>> by_path_;   // rel -> session
  std::vector<std::unique_ptr<RecordedCgroup>> lingering_;           // cgroup gone, tasks elsewhere alive
  std::map<uint32_t, RecordedCgroup*> by_number_;                    // capture session -> session
  std::map<std::string, uint64_t> pending_;  // rel -> when to try again (mono ns)
  std::vector<std::string> tls_errors_;
  std::vector<uint64_t> tick_drops_;  // the capture's drop counters at the last tick
  uint64_t unrouted_ = 0;         // records of sessions already sealed (their tail after close)
  bool disk_low_ = false;         // below storage.min_free: suspended or stopped
  std::set<std::string> kept_records_;  // records whose writes failed: never removed by retention
};

}  // namespace flightrec::daemon
