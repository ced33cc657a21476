#include "daemon/daemon.h"

#include <grp.h>
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <regex>
#include <set>

#include <bpf/bpf.h>

#include "common/error.h"
#include "common/system.h"
#include "common/text.h"
#include "daemon/kubelet.h"
#include "daemon/prometheus_text.h"
#include "ledger/store.h"
#include "probe/features.h"
#include "recorder/recorder.h"
#include "sandbox/cgroup.h"
#include "sandbox/leftovers.h"
#include "session/cgroup_session.h"
#include "session/engine.h"
#include "session/policy_observer.h"
#include "session/signals.h"
#include "session/tls_attach.h"

namespace flightrec::daemon {

// One recorded cgroup: its record and what feeds it.
class RecordedCgroup {
 public:
  RecordedCgroup(std::string rel_path, WatchRule watch_rule, sandbox::Cgroup cg)
      : rel(std::move(rel_path)), rule(std::move(watch_rule)), cgroup(std::move(cg)) {}
  std::string rel;
  WatchRule rule;
  std::shared_ptr<const policy::Policy> policy;  // its rule's, as loaded when the session began
  sandbox::Cgroup cgroup;
  std::string db;
  uint32_t number = 0;
  // Its share of the TLS probes (files it probed, released when it ends):
  // declared before the session, whose TlsFollower uses it, to outlive it.
  std::unique_ptr<probe::TenantTlsProbes> tls;
  std::unique_ptr<session::CgroupSession> session;  // its record file now
  recorder::Recorder& rec() { return session->recorder(); }
  const recorder::Recorder& rec() const { return session->recorder(); }
  uint64_t started_real_ns = 0;
  uint64_t opened_ns = 0;    // this record file's start (rotation by age)
  int part = 0;              // record files before this one (rotations)
  std::string previous_db;   // the one it continues
  std::vector<std::string> chain;  // its record files so far (kept from retention while it records)
  uint64_t lost_before = 0;   // events lost in its record files before this one (status, metrics)
  bool gone = false;  // its cgroup is removed; tasks that left it live on
  bool sealed = false;  // its record cannot go on (a rotation or a write failed): to be closed
  bool suspended = false;   // storage is full: events are left out, counted
  uint64_t left_out = 0;
  std::vector<uint64_t> drops;  // its drop counters per CPU, as last read (Daemon::run's tick)
  // entries per second over the last second, for status
  int64_t rate_entries = 0;
  uint64_t rate_ns = 0;
  double rate = 0;
};

namespace {

constexpr int kTickMs = 50;
// The raw syscall programs stay attached this long after the last session
// that needed them: a run that follows at once does not wait for the
// kernel to detach and attach them again (Capture::release_idle_programs).
constexpr uint64_t kProgramLingerNs = 1'000'000'000;
constexpr int kCacheKib = 256;  // SQLite's page cache per record: a busy session's RSS grows by this at most (a quiet one keeps none)
constexpr uint64_t kRescanNs = 10'000'000'000;  // the whole tree walked again this often
constexpr uint64_t kReapNs = 60'000'000'000;     // killed `flightrec run`s' leftovers looked for this often

// What killed `flightrec run`s left on this host (sandbox/leftovers.h),
// removed and said in the log: on a host that runs agents all day, a
// killed run's cgroups and sockets do not wait for the next run.
void reap_leftovers() {
  try {
    // Killed processes awaited briefly: the ring is read on this thread.
    for (const auto& l : sandbox::reap_leftovers(false, false, 100))
      std::cerr << "flightrecd: reaped a killed session: " << sandbox::describe(l) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "flightrecd: looking for killed sessions' leftovers failed: " << e.what() << "\n";
  }
}
constexpr uint64_t kRetryNs = 2'000'000'000;  // a cgroup that could not be recorded is tried again this often

// A file name from a cgroup's last component: what is not plain ASCII
// becomes '_' (the genesis entry keeps the exact path).
std::string file_stem(const std::string& rel) {
  std::string leaf = rel.substr(rel.rfind('/') + 1);
  if (leaf.size() > 96) leaf.resize(96);
  for (char& c : leaf)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  char stamp[32];
  time_t now = time(nullptr);
  tm utc{};
  gmtime_r(&now, &utc);
  strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &utc);
  return std::string(stamp) + "-" + (leaf.empty() ? "root" : leaf);
}

// Free bytes in dir's file system as root sees them (the daemon writes as
// root, so the blocks reserved for root count: a user filling the disk
// does not suspend the records).
uint64_t free_bytes(const std::string& dir) {
  struct statvfs v {};
  return statvfs(dir.c_str(), &v) == 0 ? uint64_t(v.f_bfree) * v.f_frsize : UINT64_MAX;
}

// A record file and its write-ahead log, as they stand on disk.
uint64_t record_bytes(const std::string& db) {
  uint64_t bytes = 0;
  for (const std::string& file : {db, db + "-wal"}) {
    struct stat st {};
    if (stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) bytes += uint64_t(st.st_size);
  }
  return bytes;
}

// Only files flightrecd names records: STAMP-NAME-SESSION[.PART].db in a
// rule's directory, never anything else a storage.dir may hold.
bool record_name(const std::string& name) {
  static const std::regex pattern(R"(^[0-9]{8}T[0-9]{6}Z-[A-Za-z0-9._-]+-[0-9]+(\.[0-9]+)?\.db$)");
  return std::regex_match(name, pattern);
}

Discovery::Rules rules_of(const Config& config) {
  return {[&config](const std::string& rel) { return config.match(rel) != nullptr; },
          [&config](const std::string& rel) {
            for (const auto& rule : config.watch)
              if (cgroup_glob_may_match_below(rule.cgroup_glob, rel)) return true;
            return false;
          }};
}

bool wants_tls(const Config& config) {
  if (config.runs_accept && config.runs_tls) return true;
  for (const auto& rule : config.watch)
    if (rule.tls) return true;
  return false;
}

constexpr std::chrono::milliseconds kOutputGrace{5000};  // at SIGTERM, after every session is sealed
constexpr std::chrono::milliseconds kReloadGrace{1000};  // at SIGHUP, while sessions record

std::vector<std::unique_ptr<ship::Output>> make_outputs(const Config& c) {
  std::vector<std::unique_ptr<ship::Output>> outputs;
  for (const auto& s : c.syslog_outputs) outputs.push_back(std::make_unique<ship::SyslogOutput>(s));
  for (const auto& s : c.otlp_outputs) outputs.push_back(std::make_unique<ship::OtlpOutput>(s));
  for (const auto& s : c.jetstream_outputs) {
    make_private_dirs(s.spool_dir.substr(0, s.spool_dir.rfind('/')));
    outputs.push_back(std::make_unique<ship::JetStreamOutput>(s));
  }
  for (auto s : c.websocket_outputs) {
    if (!s.token_file.empty()) {
      // The token lets a client read every session: root's file, read by no one else.
      struct stat st {};
      if (stat(s.token_file.c_str(), &st) != 0) throw Error(errno_message("websocket " + s.name + ": token_file " + s.token_file, errno));
      if (st.st_mode & 077) throw Error("websocket " + s.name + ": token_file " + s.token_file + " is readable by others (chmod 600 it)");
      s.token = read_file(s.token_file);
      while (!s.token.empty() && (s.token.back() == '\n' || s.token.back() == '\r' || s.token.back() == ' ')) s.token.pop_back();
      if (s.token.size() < 16) throw Error("websocket " + s.name + ": the token in " + s.token_file + " is shorter than 16 characters");
    }
    if (!s.unix_path.empty()) make_private_dirs(s.unix_path.substr(0, s.unix_path.rfind('/')));
    outputs.push_back(std::make_unique<ship::WebSocketOutput>(s));
  }
  return outputs;
}

}  // namespace

RulePolicies load_rule_policies(const Config& config) {
  RulePolicies out;
  for (const auto& rule : config.watch) {
    if (rule.policy.empty()) continue;
    try {
      out[rule.name] = std::make_shared<const policy::Policy>(session::load_audit_policy(rule.policy));
    } catch (const std::exception& e) {
      throw Error(config.source + ":" + std::to_string(rule.line) + ": watch rule " + rule.name + ": policy " +
                  rule.policy + ": " + e.what());
    }
  }
  return out;
}

Daemon::Daemon(Config config, RulePolicies policies, std::string config_path)
    : config_(std::move(config)), policies_(std::move(policies)), config_path_(std::move(config_path)) {
  probe::require_recording_features();
  // Each session holds a few files (its cgroup, its record and journal):
  // as many as the hard limit allows, not the soft 1024.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  cgroup_root_ = sandbox::cgroup2_root();
  // Before any thread exists (the writers'), so that every thread inherits
  // the mask and the signals arrive only through the signalfd.
  sigfd_ = session::block_termination_signals();
  make_private_dirs(config_.storage_dir);
  // First: it is also what keeps a second flightrecd from starting.
  make_private_dirs(config_.socket_path.substr(0, config_.socket_path.rfind('/')));
  int group_id = -1;
  if (!config_.socket_group.empty()) {
    std::vector<char> buf(16384);
    struct group g {};
    struct group* found = nullptr;
    if (getgrnam_r(config_.socket_group.c_str(), &g, buf.data(), buf.size(), &found) != 0 || !found)
      throw Error("socket.group: no group named " + config_.socket_group);
    group_id = int(found->gr_gid);
  }
  control_ = std::make_unique<control::ControlServer>(
      config_.socket_path, [this](const control::Request& r, control::Exchange& ex) { return answer(r, ex); }, group_id);
  for (const auto& rule : config_.watch) key_for(rule.key_dir.empty() ? config_.key_dir : rule.key_dir);
  probe::CaptureOptions copts;
  copts.ring_bytes = config_.ring_bytes;
  // sys_enter, for runs (which have it by default): attached only while
  // one is recorded, as every task on the host meets it.
  copts.entry_times = config_.runs_accept && config_.runs_entry_times;
  // Runs' backpressure freezes at half of their ring (session::kFreezeAbove).
  if (config_.runs_accept) copts.highwater_bytes = config_.ring_bytes / 2;
  // Both kinds of session loaded (a reload may add either); each kind's
  // syscall hooks are attached by its first session.
  copts.raw_syscalls = true;
  copts.lite = true;
  copts.tls = wants_tls(config_);
  capture_ = std::make_unique<probe::Capture>(copts, [this](const void* data, size_t size) { on_record(data, size); });
  if (copts.tls) {
    early_tls_ = std::make_unique<session::EarlyTlsAttach>(*capture_, false, false);
    tls_errors_ = session::attach_system_tls(capture_->tls());
  }
  tls_loaded_ = copts.tls;
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_ < 0) throw Error(errno_message("epoll_create1", errno));
  runs_ = std::make_unique<RunSessions>(*capture_, cgroup_root_, copts.tls_chunk, copts.tls_cap, hub_, [this](int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) throw Error(errno_message("epoll_ctl", errno));
  });
  discovery_ = std::make_unique<Discovery>(cgroup_root_, rules_of(config_));
  if (!config_.metrics_listen.empty()) {
    metrics_ = std::make_unique<control::MetricsServer>(config_.metrics_listen, [this] { return metrics(); });
    // The kernel times BPF programs only while asked to (~20 ns a run).
    stats_fd_ = bpf_enable_stats(BPF_STATS_RUN_TIME);
    if (stats_fd_ < 0) std::cerr << "flightrecd: BPF run time is not counted: " << errno_message("bpf_enable_stats", errno) << "\n";
  }
  hub_->replace(make_outputs(config_), std::chrono::milliseconds(0));
  started_real_ns_ = real_ns();
}

void Daemon::close_capture_session(uint32_t number) {
  if (early_tls_) early_tls_->unfollow(number);
  capture_->close_session(number);
}

Daemon::~Daemon() {
  control_.reset();  // its held answers call back into runs_
  runs_.reset();
  by_number_.clear();
  by_path_.clear();
  lingering_.clear();
  if (stats_fd_ >= 0) ::close(stats_fd_);
  if (sigfd_ >= 0) ::close(sigfd_);
  if (epoll_ >= 0) ::close(epoll_);
}

const ledger::SigningKey* Daemon::key_for(const std::string& dir) {
  if (dir.empty()) return nullptr;
  auto it = keys_.find(dir);
  if (it == keys_.end())
    it = keys_.emplace(dir, std::make_unique<ledger::SigningKey>(ledger::SigningKey::load_dir(dir))).first;
  return it->second.get();
}

void Daemon::on_record(const void* data, size_t size) {
  if (size < sizeof(fr_header)) {
    ++unrouted_;  // the kernel writes none: nothing says whose it would be
    return;
  }
  const auto* h = static_cast<const fr_header*>(data);
  auto it = by_number_.find(h->session);
  if (it == by_number_.end()) {
    ++unrouted_;
    return;
  }
  RecordedCgroup& s = *it->second;
  if (h->type == FR_REC_TLS && !s.rule.tls) return;  // its rule did not ask for plaintext: no gap to count
  if (!s.session || s.sealed) {
    ++unrouted_;  // its record is sealed; the session is closed at the next tick
    return;
  }
  if (s.suspended) {
    ++s.left_out;  // said in its record when recording resumes
    return;
  }
  guarded(s, [&] { s.session->on_record(data, size); });
}

void Daemon::start_record(RecordedCgroup& s, size_t tasks, const std::vector<uint64_t>& drops, uint64_t misses,
                          session::CgroupSession* previous) {
  const WatchRule& rule = s.rule;
  const std::string& path = s.cgroup.path();
  std::string dir = config_.storage_dir + "/" + rule.name;
  make_private_dirs(dir);
  std::string db = dir + "/" + file_stem(s.rel) + "-" + std::to_string(s.number) + (s.part ? "." + std::to_string(s.part) : "") + ".db";
  recorder::SessionMeta meta;
  meta.mode = "watch";
  meta.cgroups = {path};
  meta.tasks_at_start = tasks;
  meta.ring_bytes = config_.ring_bytes;
  probe::CaptureOptions described;
  bool lite = rule.mode == WatchRule::Mode::Lite;
  session::describe_capture(*capture_, described, meta, lite, false);
  if (lite) meta.counts_interval_ms = config_.lite_counts_ms;
  meta.on_loss = rule.on_loss.empty() ? config_.on_loss : rule.on_loss;
  meta.key = key_for(rule.key_dir.empty() ? config_.key_dir : rule.key_dir);
  meta.tls = rule.tls;
  meta.agent_turns = rule.tls;
  meta.watch_rule = rule.name;
  meta.sink = hub_;
  if (auto pod = parse_kubelet_cgroup(s.rel)) {
    meta.pod_uid = pod->pod_uid;
    meta.container_id = pod->container_id;
    meta.qos_class = pod->qos;
    meta.container_runtime = pod->runtime;
  }
  if (previous) {
    meta.previous_record = s.previous_db;
    meta.previous_origin = previous->recorder().origin();
    meta.previous_head = previous->recorder().head_hex();
  }
  session::CgroupSessionSpec spec;
  spec.db = db;
  spec.cache_kib = kCacheKib;
  spec.meta = std::move(meta);
  spec.notes = tls_errors_;
  // A session whose cgroup is gone (its tasks moved out live on) has no
  // processes to list there.
  spec.list_processes = !s.gone;
  spec.exclude_pid = getpid();
  spec.cgroups_gone = s.gone;
  spec.policy = s.policy;
  spec.log_prefix = "flightrecd";
  spec.resident = true;
  if (previous) {
    // What follows the kernel session goes on; the processes there are
    // listed again without their command lines (their execs are in the
    // files before), so a rotation's first entries stay small.
    spec.tls_follower = previous->tls_follower();
    spec.lite_counter = previous->lite_counter();
    spec.argv_budget = 0;
  } else {
    if (!s.tls) s.tls = std::make_unique<probe::TenantTlsProbes>(capture_->tls());
    spec.tls_follower = std::make_shared<session::TlsFollower>(*s.tls, false);  // the host's view
  }
  auto next = std::make_unique<session::CgroupSession>(*capture_, s.number, std::vector<const sandbox::Cgroup*>{&s.cgroup},
                                                       std::move(spec));
  next->recorder().count_drops_from(drops, misses);
  if (rule.tls && !previous)
    for (const auto& err : session::attach_mapped_tls(*s.tls, {path}))
      next->recorder().note("error", "TLS capture: " + err);
  // Only now, with everything made: a failure above leaves s as it was.
  s.session = std::move(next);
  s.db = db;
  s.opened_ns = mono_ns();
  s.chain.push_back(s.db);
}

void Daemon::open(const std::string& rel) {
  const WatchRule* rule = config_.match(rel);
  if (!rule || by_path_.count(rel)) return;
  std::string path = rel.empty() ? cgroup_root_ : cgroup_root_ + "/" + rel;
  if (runs_->holds(path)) return;  // a run's, recorded by its own client
  // Whatever fails here fails this cgroup alone, not the daemon: it is
  // tried again (retry()), and said once.
  auto failed = [&](const std::string& why) {
    if (pending_.insert_or_assign(rel, mono_ns() + kRetryNs).second)
      std::cerr << "flightrecd: not recording " << printable(path) << " (will retry): " << why << "\n";
  };
  if (disk_low_) return failed("storage has less than storage.min_free free");
  std::unique_ptr<RecordedCgroup> s;
  try {
    s = std::make_unique<RecordedCgroup>(rel, *rule, sandbox::Cgroup::open(path));
  } catch (const std::exception& e) {
    return failed(e.what());
  }
  if (auto p = policies_.find(rule->name); p != policies_.end()) s->policy = p->second;
  // Read before the session opens: a program run skipped from here on may
  // be this session's. (Its drops are its own, counted from zero.)
  uint64_t misses = capture_->program_misses();
  std::vector<uint64_t> drops(capture_->drops_per_cpu().size(), 0);
  try {
    // Watched calls are read at their return: sys_enter, which every task
    // on the host would meet, serves runs alone.
    s->number = capture_->open_session({s->cgroup.id()},
                                       {.lite = rule->mode == WatchRule::Mode::Lite, .entry_times = false});
  } catch (const std::exception& e) {
    return failed(e.what());
  }
  // The session started there: what the cgroup's tasks do from now on is
  // queued in the ring for this session (read once its record exists);
  // the tasks already there are listed after, so none falls in between.
  s->tls = std::make_unique<probe::TenantTlsProbes>(capture_->tls());
  if (early_tls_ && rule->tls) early_tls_->follow(s->number, s->tls->tenant());
  try {
    size_t tasks = capture_->track_existing(s->number, {path});
    start_record(*s, tasks, drops, misses, nullptr);
  } catch (const std::exception& e) {
    close_capture_session(s->number);
    return failed(e.what());
  }
  if (pending_.erase(rel)) std::cerr << "flightrecd: retried " << printable(path) << "\n";
  std::cerr << "flightrecd: recording " << printable(path) << " (rule " << rule->name << ") into " << printable(s->db)
            << "\n";
  s->started_real_ns = real_ns();
  s->rate_ns = mono_ns();
  by_number_[s->number] = s.get();
  by_path_[rel] = std::move(s);
}

void Daemon::collect_counts() {
  std::vector<probe::Capture::LiteCount> taken;
  try {
    taken = capture_->take_lite_counts();
  } catch (const Error& e) {
    std::cerr << "flightrecd: lite sessions' syscall counts not read this time: " << e.what() << "\n";
    return;
  }
  if (taken.empty()) return;
  for (auto& [number, s] : by_number_)
    if (s->session) s->session->add_counts(taken);
}

void Daemon::record_counts(RecordedCgroup& s) {
  if (s.session) s.session->record_counts();
}

void Daemon::seal(std::unique_ptr<RecordedCgroup> s, const std::string& reason) {
  close_capture_session(s->number);
  // What its tasks did before is in the ring still: into the record first.
  capture_->drain_to_now();
  collect_counts();  // every session's: taking them empties the kernel's table
  by_number_.erase(s->number);
  if (s->sealed) return;  // finished already (a rotation that could not go on, a write that failed)
  guarded(*s, [&] {
    s->session->cgroups_gone();  // said in the record, if it was not yet
    if (s->suspended) {  // the gap it declared is closed here, with its count
      events::Entry e = s->rec().own_entry("recording_resumed");
      e.set("records_left_out", s->left_out);
      e.set("free_bytes", free_bytes(config_.storage_dir));
      s->rec().record_own(e);
    }
    s->rec().note_drops(capture_->session_drops(s->number), capture_->program_misses());
    s->session->finish(reason);
  });
  if (s->sealed) return;
  std::cerr << "flightrecd: sealed " << printable(s->db) << " (" << s->rec().entries() << " entries; " << reason << ")\n";
}

void Daemon::seal_all(const std::string& reason) {
  while (!by_path_.empty()) close(by_path_.begin()->first, reason);
  while (!lingering_.empty()) {
    std::unique_ptr<RecordedCgroup> s = std::move(lingering_.back());
    lingering_.pop_back();
    seal(std::move(s), reason);
  }
}

void Daemon::drop_sealed(const std::string& rel) {
  auto it = by_path_.find(rel);
  if (it == by_path_.end()) return;
  close_capture_session(it->second->number);
  by_number_.erase(it->second->number);
  by_path_.erase(it);
  pending_[rel] = mono_ns() + kRetryNs;  // recorded anew, in a session of its own
}

void Daemon::close(const std::string& rel, const std::string& reason) {
  auto it = by_path_.find(rel);
  if (it == by_path_.end()) return;
  std::unique_ptr<RecordedCgroup> s = std::move(it->second);
  by_path_.erase(it);
  seal(std::move(s), reason);
}

bool Daemon::session_ended(RecordedCgroup& s) {
  try {
    return s.session->ended();
  } catch (const std::exception& e) {  // the task count could not be read: it goes on, said
    std::cerr << "flightrecd: cannot tell whether " << printable(s.cgroup.path()) << "'s session has tasks left: "
              << e.what() << "\n";
    return false;
  }
}

void Daemon::cgroup_gone(const std::string& rel) {
  auto it = by_path_.find(rel);
  if (it == by_path_.end()) return;
  RecordedCgroup& s = *it->second;
  // A task moved out of the cgroup keeps its session: the session lasts
  // as long as one does, or an agent could move out, remove its cgroup
  // and go on unrecorded.
  capture_->drain_to_now();
  guarded(s, [&] { s.session->cgroups_gone(); });  // said in the record
  if (s.sealed || session_ended(s)) return close(rel, "the cgroup is gone");
  s.gone = true;
  int64_t tasks = capture_->session_tasks(s.number);
  std::cerr << "flightrecd: " << printable(s.cgroup.path()) << " is gone; " << tasks
            << " task(s) of its session live on elsewhere and stay recorded\n";
  lingering_.push_back(std::move(it->second));  // the path is free for a new cgroup of that name
  by_path_.erase(it);
}

void Daemon::rotate(RecordedCgroup& s, const std::string& why) {
  // The kernel session goes on; only its record file changes, between two
  // records on this thread, so every entry is in this file or the next, and
  // the next one's genesis names this one and its last chain value.
  auto drops = capture_->session_drops(s.number);
  uint64_t misses = capture_->program_misses();
  collect_counts();
  guarded(s, [&] {
    s.rec().note_drops(drops, misses);
    s.session->finish_part("rotated (" + why + ")");
  });
  if (s.sealed) return;
  std::unique_ptr<session::CgroupSession> old = std::move(s.session);
  uint64_t lost_in_old = old->recorder().lost_total();
  std::string old_db = s.db;
  s.previous_db = old_db.substr(old_db.rfind('/') + 1);
  ++s.part;
  try {
    start_record(s, size_t(std::max<int64_t>(0, capture_->session_tasks(s.number))), drops, misses, old.get());
  } catch (const std::exception& e) {
    // Sealed, and no next file: the cgroup is recorded anew once it can be.
    std::cerr << "flightrecd: cannot continue " << printable(old_db) << " in a new file: " << e.what() << "\n";
    s.session = std::move(old);
    s.sealed = true;
    return;
  }
  s.lost_before += lost_in_old;
  std::cerr << "flightrecd: rotated " << printable(old_db) << " (" << why << "), continued in " << printable(s.db) << "\n";
}

void Daemon::rotate_due(uint64_t now) {
  if (!config_.rotate_bytes && !config_.rotate_age_ms) return;
  bool rotated = false;
  for (RecordedCgroup* s : recording()) {
    std::string why;
    if (config_.rotate_bytes && record_bytes(s->db) >= config_.rotate_bytes)
      why = "size";
    else if (config_.rotate_age_ms && now - s->opened_ns >= config_.rotate_age_ms * 1'000'000ull)
      why = "age";
    if (why.empty()) continue;
    rotate(*s, why);
    rotated = true;
  }
  if (rotated) retain();
}

std::vector<Daemon::SealedRecord> Daemon::sealed_records(uint64_t& total) const {
  namespace fs = std::filesystem;
  // Kept whatever the bounds: every file of a chain still recorded into
  // (an agent that rotates fast must not age out its own first acts, its
  // policy and the command lines it started with; outputs may not have
  // them all), and a record whose writes failed (evidence of that failure).
  std::set<std::string> keep = kept_records_;
  for (const RecordedCgroup* s : all_sessions()) keep.insert(s->chain.begin(), s->chain.end());
  std::vector<SealedRecord> sealed;
  total = 0;
  std::error_code ec;
  // STORAGE/RULE/RECORD only; symlinks are neither followed nor removed.
  for (auto it = fs::recursive_directory_iterator(config_.storage_dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it.depth() > 1) it.disable_recursion_pending();
    if (it.depth() != 1 || it->symlink_status(ec).type() != fs::file_type::regular ||
        !record_name(it->path().filename().string()))
      continue;
    std::string path = it->path();
    uint64_t bytes = 0;
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::error_code size_ec;
      uint64_t n = fs::file_size(path + suffix, size_ec);
      if (!size_ec) bytes += n;
    }
    total += bytes;
    if (!keep.count(path)) sealed.push_back({path, it->last_write_time(ec), bytes});
  }
  std::sort(sealed.begin(), sealed.end(), [](const auto& a, const auto& b) { return a.mtime < b.mtime; });
  return sealed;
}

void Daemon::remove_record(const SealedRecord& r, const std::string& why) {
  for (const char* suffix : {"", "-wal", "-shm"}) unlink((r.path + suffix).c_str());
  std::cerr << "flightrecd: removed " << printable(r.path) << " (" << why << ")\n";
}

void Daemon::retain() {
  if (!config_.retain_bytes && !config_.retain_age_ms && !config_.retain_count) return;
  uint64_t unused = 0;
  // Per rule (its directory): one rule's sessions, however busy, never
  // push another rule's records out.
  std::map<std::string, std::vector<SealedRecord>> by_rule;
  for (auto& r : sealed_records(unused)) by_rule[r.path.substr(0, r.path.rfind('/'))].push_back(std::move(r));
  auto now = std::filesystem::file_time_type::clock::now();
  for (auto& [rule_dir, sealed] : by_rule) {
    uint64_t total = 0;
    for (const auto& r : sealed) total += r.bytes;
    size_t count = sealed.size();
    for (const auto& r : sealed) {  // oldest first
      std::string why;
      if (config_.retain_count && count > config_.retain_count)
        why = "retention: more than " + std::to_string(config_.retain_count) + " sealed records";
      else if (config_.retain_bytes && total > config_.retain_bytes)
        why = "retention: sealed records over " + std::to_string(config_.retain_bytes) + " bytes";
      else if (config_.retain_age_ms && now - r.mtime > std::chrono::milliseconds(config_.retain_age_ms))
        why = "retention: older than storage.retain.age";
      else
        break;  // the rest are newer: kept too
      remove_record(r, why);
      total -= std::min(total, r.bytes);
      --count;
    }
  }
}

size_t Daemon::remove_oldest(uint64_t needed, const std::function<bool()>& enough) {
  uint64_t total = 0, removable = 0;
  std::vector<SealedRecord> sealed = sealed_records(total);
  for (const auto& r : sealed) removable += r.bytes;
  // Removing what cannot make room would lose the records and suspend anyway.
  if (removable < needed) return 0;
  size_t removed = 0;
  for (const auto& r : sealed) {
    if (enough()) break;
    remove_record(r, "storage below storage.min_free, disk_full_action: rotate");
    ++removed;
  }
  return removed;
}


std::vector<const RecordedCgroup*> Daemon::all_sessions() const {
  std::vector<const RecordedCgroup*> all;
  for (const auto& [rel, s] : by_path_) all.push_back(s.get());
  for (const auto& s : lingering_) all.push_back(s.get());
  return all;
}

std::vector<RecordedCgroup*> Daemon::recording() {
  std::vector<RecordedCgroup*> out;
  for (auto& [rel, s] : by_path_)
    if (!s->sealed) out.push_back(s.get());
  for (auto& s : lingering_)
    if (!s->sealed) out.push_back(s.get());
  return out;
}

void Daemon::check_disk() {
  uint64_t free = free_bytes(config_.storage_dir), min = config_.min_free_bytes;
  if (!disk_low_ && free < min) {
    if (config_.disk_full == Config::DiskFull::Rotate) {
      // The oldest sealed records make room, as many as it takes.
      size_t removed = remove_oldest(min - free, [&] { return free_bytes(config_.storage_dir) >= min; });
      free = free_bytes(config_.storage_dir);
      std::cerr << "flightrecd: storage below storage.min_free: removed the " << removed
                << " oldest sealed record(s) (disk_full_action: rotate)" << (free < min ? "; not enough, suspending" : "")
                << "\n";
      if (free >= min) return;
    }
    disk_low_ = true;
    if (config_.disk_full == Config::DiskFull::Stop) {
      std::cerr << "flightrecd: STORAGE FULL: " << free << " bytes free in " << printable(config_.storage_dir)
                << "; sealing every session, recording nothing until there is room (disk_full_action: stop)\n";
      for (const auto& [rel, s] : by_path_) pending_[rel] = mono_ns();  // recorded anew once there is room
      seal_all("storage below storage.min_free (disk_full_action: stop)");
      return;
    }
    std::cerr << "flightrecd: STORAGE FULL: " << free << " bytes free in " << printable(config_.storage_dir)
              << "; every session leaves its events out, counted, until there is room (disk_full_action: suspend)\n";
    for (RecordedCgroup* s : recording()) {
      events::Entry e = s->rec().own_entry("recording_suspended");
      e.set("reason", "storage below storage.min_free");
      e.set("free_bytes", free);
      e.set("min_free_bytes", min);
      guarded(*s, [&] {
        s->rec().record_own(e);
        s->rec().flush();
      });
      s->suspended = true;
    }
    return;
  }
  // A quarter above the mark before it counts as room again: no flapping.
  if (disk_low_ && free >= min + min / 4) {
    disk_low_ = false;
    std::cerr << "flightrecd: storage has room again (" << free << " bytes free): recording resumes\n";
    for (RecordedCgroup* s : recording()) {
      if (!s->suspended) continue;
      events::Entry e = s->rec().own_entry("recording_resumed");
      e.set("records_left_out", s->left_out);
      e.set("free_bytes", free);
      guarded(*s, [&] { s->rec().record_own(e); });
      s->suspended = false;
      s->left_out = 0;
    }
    for (auto& [rel, at] : pending_) at = mono_ns();  // stopped sessions start again now
  }
}

void Daemon::guarded(RecordedCgroup& s, const std::function<void()>& work) {
  try {
    work();
  } catch (const std::exception& e) {
    // This record cannot go on (its file cannot be written): it stays
    // unterminated, the cgroup is recorded anew in a session of its own.
    std::cerr << "flightrecd: RECORD FAILED: " << printable(s.db) << ": " << e.what()
              << "; it is left unterminated and the cgroup is recorded anew\n";
    s.sealed = true;
    kept_records_.insert(s.db);
  }
}

void Daemon::retry() {
  uint64_t now = mono_ns();
  std::vector<std::string> due;
  for (const auto& [rel, at] : pending_)
    if (now >= at) due.push_back(rel);
  for (const auto& rel : due) {
    struct stat st {};
    if (!config_.match(rel) || stat((cgroup_root_ + "/" + rel).c_str(), &st) != 0) {
      pending_.erase(rel);  // gone, or no rule wants it any more
      continue;
    }
    open(rel);
  }
}

void Daemon::apply(const Discovery::Changes& changes) {
  for (const auto& rel : changes.vanished) {
    pending_.erase(rel);
    if (config_.match(rel))
      cgroup_gone(rel);
    else
      close(rel, "no watch rule matches the cgroup any more");
  }
  // Deepest first: a task in a nested cgroup is the inner session's from
  // its first event, never the enclosing one's for a moment.
  std::vector<std::string> appeared = changes.appeared;
  std::stable_sort(appeared.begin(), appeared.end(), [](const std::string& a, const std::string& b) {
    return std::count(a.begin(), a.end(), '/') > std::count(b.begin(), b.end(), '/');
  });
  for (const auto& rel : appeared) open(rel);
}

void Daemon::reload() {
  Config next;
  RulePolicies next_policies;
  try {
    next = load_config(config_path_);
    if (std::string why = unsupported_setting(next); !why.empty()) throw Error(why);
    next_policies = load_rule_policies(next);
    for (const auto& rule : next.watch) key_for(rule.key_dir.empty() ? next.key_dir : rule.key_dir);
  } catch (const Error& e) {
    std::cerr << "flightrecd: config not reloaded, the old one stays: " << e.what() << "\n";
    return;
  }
  if (wants_tls(next) && !wants_tls(config_))
    std::cerr << "flightrecd: TLS capture was off at start; it needs a restart to load\n";
  if (next.storage_dir != config_.storage_dir || next.ring_bytes != config_.ring_bytes)
    std::cerr << "flightrecd: storage.dir and ring take effect at the next start\n";
  std::string storage = config_.storage_dir;
  size_t ring = config_.ring_bytes;
  if (next.syslog_outputs != config_.syslog_outputs || next.jetstream_outputs != config_.jetstream_outputs ||
      next.websocket_outputs != config_.websocket_outputs || next.otlp_outputs != config_.otlp_outputs) {
    // The old outputs go first, as a new one may take the same port or
    // spool. They get a second to send what they hold (a spool keeps the
    // rest; the recording waits meanwhile, its ring buffer filling).
    hub_->close(kReloadGrace);
    try {
      hub_->replace(make_outputs(next), std::chrono::milliseconds(0));
    } catch (const Error& e) {
      std::cerr << "flightrecd: the new outputs could not start, the old ones do again: " << e.what() << "\n";
      next.syslog_outputs = config_.syslog_outputs;
      next.jetstream_outputs = config_.jetstream_outputs;
      next.websocket_outputs = config_.websocket_outputs;
      next.otlp_outputs = config_.otlp_outputs;
      try {
        hub_->replace(make_outputs(config_), std::chrono::milliseconds(0));
      } catch (const Error& again) {
        std::cerr << "flightrecd: nor could the old ones (" << again.what() << "): no outputs until the next reload\n";
      }
    }
  }
  config_ = std::move(next);
  policies_ = std::move(next_policies);  // sessions open already keep the policy they began with
  config_.storage_dir = storage;
  config_.ring_bytes = ring;
  apply(discovery_->rescan(rules_of(config_)));
  std::cerr << "flightrecd: config reloaded; recording " << by_path_.size() << " cgroup(s)\n";
}

nlohmann::json Daemon::answer(const control::Request& request, control::Exchange& ex) {
  if (std::holds_alternative<control::StatusRequest>(request)) return control::to_json(status());
  if (const auto* forward = std::get_if<control::ForwardRequest>(&request)) return runs_->open_forward(*forward, ex);
  const auto& session = std::get<control::SessionRequest>(request);
  if (!config_.runs_accept) return control::refusal("this flightrecd takes no runs (runs.accept: false)");
  // A run's cgroup that a watch rule records already stays that rule's.
  const std::string& path = session.cgroup;
  std::string rel = path.starts_with(cgroup_root_ + "/") ? path.substr(cgroup_root_.size() + 1) : "";
  auto it = rel.empty() ? by_path_.end() : by_path_.find(rel);
  return runs_->open(session, ex, tls_loaded_, tls_errors_, it == by_path_.end() ? "" : it->second->rule.name);
}

control::DaemonStatus Daemon::status() const {
  control::DaemonStatus st;
  for (const RecordedCgroup* s : all_sessions())
    st.sessions.push_back({s->cgroup.path(), s->rule.name, s->rule.mode == WatchRule::Mode::Lite ? "lite" : "full",
                           s->db, s->gone, s->suspended, s->started_real_ns, s->rec().entries(), s->rate,
                           s->lost_before + s->rec().lost_total(), record_bytes(s->db)});
  st.lost_per_cpu = capture_->drops_per_cpu();
  uint64_t dropped = 0;
  for (uint64_t n : st.lost_per_cpu) dropped += n;
  sealed_records(st.storage_bytes);  // what every record takes, open ones too
  for (const auto& o : hub_->stats())
    st.outputs.push_back({o.kind, o.name, o.last_error, o.sent, o.dropped, o.queued, o.spool_bytes, o.connected});
  st.flightrecd_version = FLIGHTREC_VERSION;
  st.pid = getpid();
  st.started_real_ns = started_real_ns_;
  st.config = config_path_;
  st.watch_rules = config_.watch.size();
  st.ring_bytes = config_.ring_bytes;
  st.ring_fill = capture_->ring_fill();
  st.lost_total = dropped + capture_->program_misses();
  st.records_after_seal = unrouted_;
  st.not_recorded = pending_.size();
  st.storage_full = disk_low_;
  st.storage_dir = config_.storage_dir;
  st.runs = runs_->status();
  return st;
}

std::string Daemon::metrics() const {
  PrometheusText text;
  auto family = [&](const char* name, const char* type, const char* help) { text.family(name, type, help); };
  auto sample = [&](const std::string& name, const std::string& labels, double v) { text.sample(name, labels, v); };
  constexpr auto label = &PrometheusText::label;
  std::vector<const RecordedCgroup*> all = all_sessions();
  auto labels_of = [](const RecordedCgroup& s) {
    return "rule=\"" + label(s.rule.name) + "\",cgroup=\"" + label(s.cgroup.path()) + "\"";
  };
  uint64_t now = mono_ns();
  family("flightrecd_sessions", "gauge", "Sessions being recorded (removed cgroups whose tasks live on included).");
  sample("flightrecd_sessions", "", double(all.size()));
  family("flightrecd_tls_files_probed", "gauge",
         "Files carrying TLS plaintext probes (each pins at most 256 uprobes of kernel memory; 16 per session at most).");
  sample("flightrecd_tls_files_probed", "", double(capture_->tls().files_probed()));
  family("flightrecd_session_entries_total", "counter", "Entries sealed into the session's record.");
  for (const auto* s : all) sample("flightrecd_session_entries_total", labels_of(*s), double(s->rec().entries()));
  family("flightrecd_session_lost_events_total", "counter", "Events the kernel could not deliver while the session was open.");
  for (const auto* s : all) sample("flightrecd_session_lost_events_total", labels_of(*s), double(s->lost_before + s->rec().lost_total()));
  family("flightrecd_session_record_bytes", "gauge", "Bytes of the session's record file and its journal.");
  for (const auto* s : all) sample("flightrecd_session_record_bytes", labels_of(*s), double(record_bytes(s->db)));
  family("flightrecd_build_info", "gauge", "1, labelled with flightrecd's version.");
  sample("flightrecd_build_info", "version=\"" + label(FLIGHTREC_VERSION) + "\"", 1);
  family("flightrecd_start_time_seconds", "gauge", "When this flightrecd started (Unix time): a change is a restart.");
  sample("flightrecd_start_time_seconds", "", double(started_real_ns_) / 1e9);
  family("flightrecd_checkpoint_interval_seconds", "gauge",
         "How often a session with new entries is checkpointed (and every 1000 entries).");
  sample("flightrecd_checkpoint_interval_seconds", "", double(recorder::SessionMeta{}.checkpoint_ms) / 1e3);  // the daemon keeps the default
  family("flightrecd_session_entries_after_checkpoint", "gauge",
         "Entries of the session not under a checkpoint yet (with the age, a checkpointing that stopped).");
  for (const auto* s : all)
    sample("flightrecd_session_entries_after_checkpoint", labels_of(*s), double(s->rec().entries_after_checkpoint()));
  family("flightrecd_session_checkpoint_age_seconds", "gauge", "Seconds since the session's last checkpoint.");
  for (const auto* s : all)
    sample("flightrecd_session_checkpoint_age_seconds", labels_of(*s), double(now - s->rec().last_checkpoint_mono_ns()) / 1e9);
  family("flightrecd_lost_events_total", "counter", "Events the kernel could not put in the ring buffer, per CPU.");
  auto drops = capture_->drops_per_cpu();
  for (size_t cpu = 0; cpu < drops.size(); ++cpu) sample("flightrecd_lost_events_total", "cpu=\"" + std::to_string(cpu) + "\"", double(drops[cpu]));
  family("flightrecd_program_misses_total", "counter", "Runs of the programs the kernel skipped to avoid nesting.");
  sample("flightrecd_program_misses_total", "", double(capture_->program_misses()));
  family("flightrecd_ring_fill_ratio", "gauge", "Unread bytes in the ring buffer over its size.");
  sample("flightrecd_ring_fill_ratio", "", capture_->ring_fill());
  family("flightrecd_runs", "gauge", "`flightrec run` sessions handed to this daemon, open now.");
  sample("flightrecd_runs", "", double(runs_->size()));
  family("flightrecd_records_after_seal_total", "counter", "Kernel records of sessions already sealed (left out).");
  sample("flightrecd_records_after_seal_total", "", double(unrouted_));
  family("flightrecd_storage_full", "gauge", "1 while storage.dir has less than storage.min_free free (disk_full_action acts).");
  sample("flightrecd_storage_full", "", disk_low_ ? 1 : 0);
  family("flightrecd_session_suspended", "gauge", "1 while the session leaves its events out (storage full).");
  for (const auto* s : all) sample("flightrecd_session_suspended", labels_of(*s), s->suspended ? 1 : 0);
  family("flightrecd_cgroups_not_recorded", "gauge", "Matching cgroups that could not be recorded yet (retried).");
  sample("flightrecd_cgroups_not_recorded", "", double(pending_.size()));
  family("flightrecd_cgroup_not_recorded", "gauge",
         "1 for each matching cgroup not recorded yet (the first 100, for alerts that name it).");
  size_t named = 0;
  for (const auto& [rel, when] : pending_)
    if (named++ < 100) sample("flightrecd_cgroup_not_recorded", "cgroup=\"" + label(cgroup_root_ + "/" + rel) + "\"", 1);
  family("flightrecd_bpf_program_runs_total", "counter", "Runs of each BPF program (bpf_stats).");
  auto programs = capture_->program_stats();
  for (const auto& p : programs) sample("flightrecd_bpf_program_runs_total", "program=\"" + label(p.name) + "\"", double(p.runs));
  family("flightrecd_bpf_program_run_seconds_total", "counter", "Time spent in each BPF program (bpf_stats).");
  for (const auto& p : programs)
    sample("flightrecd_bpf_program_run_seconds_total", "program=\"" + label(p.name) + "\"", double(p.run_ns) / 1e9);
  auto outputs = hub_->stats();
  auto output_labels = [](const ship::OutputStats& o) {
    return "kind=\"" + label(o.kind) + "\",output=\"" + label(o.name) + "\"";
  };
  family("flightrecd_output_sent_total", "counter", "Messages an output handed to its remote (or had acknowledged).");
  for (const auto& o : outputs) sample("flightrecd_output_sent_total", output_labels(o), double(o.sent));
  family("flightrecd_output_dropped_total", "counter", "Messages an output left out: its queue was full.");
  for (const auto& o : outputs) sample("flightrecd_output_dropped_total", output_labels(o), double(o.dropped));
  family("flightrecd_output_queued", "gauge", "Messages waiting in an output's queue (its lag).");
  for (const auto& o : outputs) sample("flightrecd_output_queued", output_labels(o), double(o.queued));
  family("flightrecd_output_connected", "gauge", "1 while the output has a connection to its remote.");
  for (const auto& o : outputs) sample("flightrecd_output_connected", output_labels(o), o.connected ? 1 : 0);
  family("flightrecd_output_connects_total", "counter", "Connections an output made (the first and every reconnect).");
  for (const auto& o : outputs) sample("flightrecd_output_connects_total", output_labels(o), double(o.connects));
  family("flightrecd_output_spool_bytes", "gauge", "Bytes of an output's spool on disk (not acknowledged yet).");
  for (const auto& o : outputs)
    if (o.kind == "jetstream") sample("flightrecd_output_spool_bytes", output_labels(o), double(o.spool_bytes));
  family("flightrecd_output_spool_limit_bytes", "gauge", "An output spool's bound: past it, entries are not shipped.");
  for (const auto& o : outputs)
    if (o.kind == "jetstream") sample("flightrecd_output_spool_limit_bytes", output_labels(o), double(o.spool_max));
  return text.text();
}

int Daemon::run() {
  int ep = epoll_;
  std::vector<int> fds = {capture_->poll_fd(), discovery_->fd(), sigfd_, control_->fd()};
  if (metrics_) fds.push_back(metrics_->fd());
  for (int fd : fds) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) throw Error(errno_message("epoll_ctl", errno));
  }
  apply(discovery_->rescan());
  retain();  // what an earlier run left beyond the bounds
  reap_leftovers();
  std::cerr << "flightrecd: running, " << config_.watch.size() << " watch rule(s), recording " << by_path_.size()
            << " cgroup(s)\n";
  std::string reason;
  uint64_t next_tick = mono_ns(), next_rescan = next_tick + kRescanNs, next_rotation_check = next_tick, next_disk_check = next_tick;
  uint64_t next_counts = next_tick + config_.lite_counts_ms * 1'000'000ull;
  uint64_t next_reap = next_tick + kReapNs;
  bool more = false;  // the last read stopped at its budget: the ring has more now
  while (reason.empty()) {
    epoll_event events[8];
    int n = epoll_wait(ep, events, 8, more ? 0 : kTickMs);
    if (n < 0 && errno != EINTR) throw Error(errno_message("epoll_wait", errno));
    // A bounded read: signals, new cgroups and the control socket are
    // served between reads however busy the ring is.
    more = capture_->consume() >= probe::Capture::kConsumeBudget;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == discovery_->fd()) apply(discovery_->read());
      if (events[i].data.fd == control_->fd()) control_->poll();
      if (metrics_ && events[i].data.fd == metrics_->fd()) metrics_->poll();
      if (runs_->owns(events[i].data.fd)) runs_->serve(events[i].data.fd);
      if (events[i].data.fd != sigfd_) continue;
      while (int sig = session::read_signal(sigfd_)) {
        if (sig == SIGHUP)
          reload();
        else
          reason = std::string("flightrecd stopped by signal ") + sigabbrev_np(sig);
      }
    }
    uint64_t now = mono_ns();
    if (now >= next_reap) {
      next_reap = now + kReapNs;
      reap_leftovers();
    }
    if (now >= next_tick) {
      next_tick = now + kTickMs * 1'000'000ull;
      uint64_t misses = capture_->program_misses();
      // Every drop of a session is in the capture's counters too: only
      // when those moved are the sessions' own worth a read each.
      auto drops = capture_->drops_per_cpu();
      bool dropped = drops != tick_drops_;
      tick_drops_ = std::move(drops);
      std::vector<std::string> gone;
      control_->poll();  // drops clients that took too long
      if (metrics_) metrics_->poll();
      auto tick = [&](RecordedCgroup& s) {
        if (s.sealed || s.suspended) return;
        guarded(s, [&] {
          if (dropped || s.drops.empty()) s.drops = capture_->session_drops(s.number);
          s.rec().note_drops(s.drops, misses);
          s.rec().checkpoint_if_due();
        });
        if (now - s.rate_ns >= 1'000'000'000ull) {
          s.rate = double(s.rec().entries() - s.rate_entries) * 1e9 / double(now - s.rate_ns);
          s.rate_entries = s.rec().entries();
          s.rate_ns = now;
        }
      };
      for (auto& [rel, s] : by_path_) {
        tick(*s);
        if (!s->cgroup.exists()) gone.push_back(rel);  // in case its event was missed
      }
      for (const auto& rel : gone) cgroup_gone(rel);
      // Off the runs' path: the kernel waits ~10 ms at each (Capture::prepare_ring).
      if (config_.runs_accept) capture_->prepare_ring(runs_->likely_ring_bytes());  // may reuse a closed one
      capture_->release_closed_rings(4);
      capture_->release_idle_programs(kProgramLingerNs);
      if (now >= next_rescan) {  // what inotify could not tell (no watch left, a lost event)
        next_rescan = now + kRescanNs;
        apply(discovery_->rescan());
        retain();
      }
      if (now >= next_disk_check) {
        next_disk_check = now + 1'000'000'000ull;
        // What the sessions freed inside the heap goes back to the system:
        // free() returns only its top, and 100 quiet sessions left ~4 MB
        // of freed batches and blocks resident between live ones. One
        // walk of the free lists, ~40 us with 100 sessions.
        malloc_trim(0);
        check_disk();
      }
      if (now >= next_counts) {
        next_counts = now + config_.lite_counts_ms * 1'000'000ull;
        collect_counts();
        // A suspended session keeps its counts until storage has room.
        for (RecordedCgroup* s : recording())
          if (!s->suspended) guarded(*s, [&] { record_counts(*s); });
      }
      if (now >= next_rotation_check) {
        next_rotation_check = now + 1'000'000'000ull;
        rotate_due(now);
      }
      // What an output says of itself (its spool filled, or has room again)
      // is in every record it ships from here.
      for (const auto& notice : hub_->take_notices())
        for (RecordedCgroup* s : recording()) guarded(*s, [&] { s->rec().note("error", notice); });
      std::vector<std::string> broken;
      for (auto& [rel, s] : by_path_)
        if (s->sealed) broken.push_back(rel);
      for (const auto& rel : broken) drop_sealed(rel);
      for (auto it = lingering_.begin(); it != lingering_.end();) {
        tick(**it);
        if (!(*it)->sealed && !session_ended(**it)) {
          ++it;
          continue;
        }
        std::unique_ptr<RecordedCgroup> s = std::move(*it);
        it = lingering_.erase(it);
        seal(std::move(s), "the cgroup is gone and so is every task of its session");
      }
      retry();
    }
    for (RecordedCgroup* s : recording()) guarded(*s, [&] { s->rec().flush_if_due(); });
  }
  capture_->drain_to_now();
  seal_all(reason);
  hub_->close(kOutputGrace);  // the session_end entries too, if the remotes take them in time
  std::cerr << "flightrecd: stopped (" << reason << ")\n";
  return 0;
}

}  // namespace flightrec::daemon
