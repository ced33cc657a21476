#include "session/confinement.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <poll.h>
#include <dirent.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>
#include <set>
#include <sstream>

#include "session/egress_notes.h"
#include "session/path_rules.h"
#include "session/stderr_log.h"
#include "common/error.h"
#include "common/system.h"
#include "common/text.h"
#include "sandbox/apply.h"
#include "sandbox/kept.h"
#include "sandbox/changes.h"
#include "grants/supervisor.h"
#include "ledger/hash.h"

extern char** environ;

namespace flightrec::session {
namespace {

std::string readlink_str(const std::string& path) {
  char buf[4096];
  ssize_t n = readlink(path.c_str(), buf, sizeof(buf));
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

std::vector<pid_t> cgroup_pids(const std::string& dir) {
  std::vector<pid_t> out;
  std::istringstream in(try_read_file(dir + "/cgroup.procs").value_or(""));
  pid_t p;
  while (in >> p) out.push_back(p);
  return out;
}

std::string work_dir_of(const policy::Policy& p) {
  char cwd[4096];
  if (!getcwd(cwd, sizeof(cwd))) throw Error(errno_message("getcwd", errno));
  return p.filesystem.work_dir == "." ? cwd : p.filesystem.work_dir;
}

}  // namespace

bool sandboxes(const policy::Policy& p) { return p.confine && p.mode == policy::Mode::Enforce; }

std::string sandbox_search_path(const policy::Policy& policy) {
  const char* env = getenv("PATH");
  std::istringstream in(env ? env : "/usr/local/bin:/usr/bin:/bin");
  policy::Judge judge(policy, work_dir_of(policy));
  std::string dir, out;
  while (std::getline(in, dir, ':'))
    if (!dir.empty() && dir[0] == '/' && judge.readable(dir)) out += (out.empty() ? "" : ":") + dir;
  return out;
}

Confinement::Confinement(policy::Policy policy, sandbox::Cgroup& cgroup, const std::string& program,
                         const std::vector<std::string>& command, const std::vector<std::string>& protect,
                         const std::string& grant_socket)
    : policy_(std::move(policy)), cgroup_(cgroup) {
  if (policy_.confine) {
    work_dir_ = work_dir_of(policy_);
    for (const auto& p : protect) {
      // Hidden however the policy reads; also from the judge's rules.
      char real[PATH_MAX];
      if (realpath(p.c_str(), real)) policy_.filesystem.hidden.push_back(real);
    }
  }
  judging_ = std::make_unique<PolicyObserver>(policy_, work_dir_, "flightrec");
  judging_->on_violation([this](const policy::Violation& v, Emitted& out) {
    if (names_ && v.rule.starts_with("network."))  // network.explain: the agent reads why
      names_->explain("refused: " + v.detail + " (rule " + v.rule + ", policy " + policy_.name + ")");
    if (sandboxed_ && policy_.on_violation == policy::OnViolation::Kill)
      kill_session("on_violation:" + v.rule, "on_violation is kill and " + v.detail, out);
  });
  if (!policy_.confine || !sandboxes(policy_)) return;  // shadow: nothing blocked, everything judged

  sandboxed_ = true;
  std::string name = cgroup.path().substr(cgroup.path().rfind('/') + 1);
  if (policy_.limits.memory_bytes || policy_.limits.pids || policy_.limits.cpu_millicores)
    limits_ = std::make_unique<sandbox::ResourceLimits>(policy_.limits, cgroup.path(), name);
  // The command runs as the work directory's owner (ids 0-65535 map into
  // the sandbox's range), so it may change what that owner may.
  // A work directory the policy puts in the sandbox's private /tmp starts
  // empty, owned by root inside: the host's /tmp is never shown there.
  bool starts_empty = policy_.filesystem.work_dir != "." && policy::path_under(work_dir_, "/tmp");
  struct stat wst {};
  wst.st_mode = S_IFDIR | 01777;
  if (work_dir_ == "/") throw Error("the work directory cannot be /: run flightrec from a project directory");
  if (!starts_empty && (stat(work_dir_.c_str(), &wst) != 0 || !S_ISDIR(wst.st_mode)))
    throw Error(errno_message("the work directory " + work_dir_ + " is not a directory", errno));
  if (wst.st_uid >= sandbox::kSandboxIdCount || wst.st_gid >= sandbox::kSandboxIdCount)
    throw Error("the work directory " + work_dir_ + " is owned by an id above 65535, which the sandbox cannot map");
  dir_ = std::make_unique<sandbox::SessionDir>(name, policy_.filesystem.keep_changes, policy_.limits.disk);
  work_lower_ = starts_empty ? dir_->empty() : work_dir_;
  work_on_host_ = !starts_empty;
  timespec now{};
  clock_gettime(CLOCK_REALTIME_COARSE, &now);  // the clock file times are taken from
  work_start_ns_ = int64_t(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
  work_dev_ = wst.st_dev;
  work_ino_ = wst.st_ino;
  work_uid_ = wst.st_uid;
  work_gid_ = wst.st_gid;
  // The work overlay's root directory takes its owner and mode from the
  // upper directory: make them the work directory's, as seen inside.
  if (chown(dir_->upper_work().c_str(), sandbox::kSandboxIdBase + wst.st_uid, sandbox::kSandboxIdBase + wst.st_gid) != 0 ||
      chmod(dir_->upper_work().c_str(), wst.st_mode & 07777) != 0)
    throw Error(errno_message("cannot prepare " + dir_->upper_work(), errno));
  if (policy_.seccomp.enabled || policy_.ask.any())
    seccomp_ = std::make_unique<sandbox::SeccompFilter>(policy_.seccomp, policy_.ask);
  landlock_ = sandbox::LandlockPlan::from(policy_, work_dir_, program);
  if (policy_.ask.exec &&
      !add_path_rules(exec_rules_, policy::executable_paths(policy_, work_dir_, program), policy_.filesystem.root))
    throw Error("ask.exec: an exec path of " + std::to_string(FR_PATH_RULE_MAX) +
                " bytes or more cannot be enforced by BPF-LSM, which decides every exec under ask.exec");

  // The sandbox's resolver (session/session_resolver.h): in the host's
  // network namespace bound now, in one of its own once that exists.
  if (policy_.network != policy::Network::Host)
    names_ = std::make_unique<SessionResolver>(policy_, dir_->upper(), dir_->tmp());

  sandbox::SandboxSpec spec;
  spec.policy = &policy_;
  spec.program = program;
  spec.argv = command;
  spec.env = sandbox_environment(wst);
  spec.work_dir = work_dir_;
  spec.work_lower = work_lower_;
  spec.session_dir = dir_->path();
  spec.seccomp = seccomp_.get();
  spec.landlock = landlock_;
  spec.id_base = sandbox::kSandboxIdBase;
  spec.uid = wst.st_uid;
  spec.gid = wst.st_gid;
  spec.hidden = policy_.filesystem.hidden;
  for (size_t i = 0; i < home_fds_.size(); ++i) {
    struct stat st {};
    fstat(home_fds_[i], &st);
    spec.home_dirs.push_back({home_dir_paths_[i], home_dir_names_[i], st.st_dev, st.st_ino});
  }
  if (!starts_empty)
    for (const auto& p : policy_.filesystem.protect) spec.protect.push_back(policy::normalize_path(work_dir_ + "/" + p));
  spec.cgroup = &cgroup;
  if (limits_) spec.v1_tasks = limits_->v1_task_files();
  if (seccomp_ && seccomp_->notifies()) {
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, notify_sock_) != 0)
      throw Error(errno_message("socketpair", errno));
    spec.notify_sock = notify_sock_[1];
  }
  child_ = sandbox::spawn_sandboxed(spec);
  for (int fd : home_fds_) close(fd);
  try {
    if (notify_sock_[0] >= 0) {
      close(notify_sock_[1]);
      notify_sock_[1] = -1;
      start_grants(grant_socket.empty() ? "/run/flightrec/grants/" + name + ".sock" : grant_socket);
    }
    // After the sandbox is spawned: its init is a fork of this process and
    // must not inherit a thread's locks.
    differ_ = std::make_unique<sandbox::PathDiffer>([this](const std::string& path) { return diff_one(path); });
    if (names_) names_->start(child_.pid);
  } catch (...) {
    // No destructor runs: the init (in the session's cgroups, which it
    // would keep from being removed) is ended here.
    kill(child_.pid, SIGKILL);
    waitpid(child_.pid, nullptr, 0);
    close(child_.go_fd);
    close(child_.report_fd);
    for (int fd : {notify_sock_[0], notify_sock_[1], egress_granted_fd_, egress_tickets_fd_, exec_tickets_fd_, view_gen_fd_})
      if (fd >= 0) close(fd);
    if (supervisor_ > 0) {
      kill(supervisor_, SIGKILL);
      waitpid(supervisor_, nullptr, 0);
    }
    if (!grant_socket_.empty()) unlink(grant_socket_.c_str());
    throw;
  }
}

// The command's environment, as the policy's env section says. PATH only
// names directories the sandbox can read; HOME, unless the policy sets or
// passes it, is an empty directory of the session's own /tmp (an agent's
// config and caches stay out of the work directory and the host's home).
std::vector<std::string> Confinement::sandbox_environment(const struct stat& work_owner) {
  std::vector<std::string> env = policy::sandbox_env(policy_, environ, &env_passed_);
  bool home = false;
  for (auto it = env.begin(); it != env.end();) {
    if (it->starts_with("PATH=")) {
      it = env.erase(it);
      continue;
    }
    home = home || it->starts_with("HOME=");
    ++it;
  }
  env.push_back("PATH=" + sandbox_search_path(policy_));
  if (names_ && names_->explains()) env.push_back(std::string("FLIGHTREC_REFUSALS=") + SessionResolver::kRefusalsFile);
  for (const auto& [name, value] : policy_.env.set) env_set_.push_back(name);
  if (!home) {
    std::string dir = dir_->tmp() + "/home";
    if (mkdir(dir.c_str(), 0700) != 0 ||
        chown(dir.c_str(), sandbox::kSandboxIdBase + work_owner.st_uid, sandbox::kSandboxIdBase + work_owner.st_gid) != 0)
      throw Error(errno_message("cannot make the sandbox's home directory " + dir, errno));
    env.push_back("HOME=/tmp/home");
    share_home(dir, work_owner);
  }
  return env;
}

// filesystem.home: the invoking user's own entries (through sudo: the
// user who ran sudo), opened here without following a symlink and owned by
// that user, so neither the agent nor a link makes root read another file.
// A directory is shown as an overlay (sandbox_init keeps its fd); a file of
// at most 1 MiB is copied. Absent entries are skipped.
void Confinement::share_home(const std::string& home, const struct stat& work_owner) {
  if (policy_.filesystem.home.empty()) return;
  uid_t uid = getuid();
  if (const char* sudo = getenv("SUDO_UID"); sudo && uid == 0) uid = uid_t(strtoul(sudo, nullptr, 10));
  const passwd* pw = getpwuid(uid);
  if (!pw || !pw->pw_dir || pw->pw_dir[0] != '/') return;
  const uid_t inside_uid = sandbox::kSandboxIdBase + work_owner.st_uid, inside_gid = sandbox::kSandboxIdBase + work_owner.st_gid;
  for (const auto& name : policy_.filesystem.home) {
    std::string src = std::string(pw->pw_dir) + "/" + name;
    int fd = ::open(src.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_uid != uid || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
      if (fd >= 0) close(fd);
      continue;
    }
    std::string at = home + "/" + name;
    if (S_ISDIR(st.st_mode)) {
      std::string n = std::to_string(home_fds_.size());
      for (const char* part : {"/home-lower-", "/home-upper-", "/home-work-"})
        if (mkdir((dir_->path() + part + n).c_str(), 0700) != 0) throw Error(errno_message("cannot share " + src, errno));
      if (mkdir(at.c_str(), 0700) != 0 || chown(at.c_str(), inside_uid, inside_gid) != 0 ||
          chown((dir_->path() + "/home-upper-" + n).c_str(), inside_uid, inside_gid) != 0 ||
          chmod((dir_->path() + "/home-upper-" + n).c_str(), st.st_mode & 0777) != 0)
        throw Error(errno_message("cannot share " + src, errno));
      home_fds_.push_back(fd);
      home_dir_names_.push_back(name);
      home_dir_paths_.push_back(src);
      home_shared_.push_back(name);
      continue;
    }
    std::string data(size_t(std::min<off_t>(st.st_size, 1 << 20)), '\0');
    ssize_t got = st.st_size <= (1 << 20) ? read(fd, data.data(), data.size()) : -1;
    close(fd);
    if (got != ssize_t(data.size())) continue;
    int out = ::open(at.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0 || write(out, data.data(), data.size()) != ssize_t(data.size()) || fchown(out, inside_uid, inside_gid) != 0)
      throw Error(errno_message("cannot share " + src, errno));
    close(out);
    home_shared_.push_back(name);
  }
}

// The grant socket and the supervisor behind it (grants/supervisor.h).
void Confinement::start_grants(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path[0] != '/' || path.size() >= sizeof(addr.sun_path))
    throw Error("--grants " + path + ": the grant socket needs an absolute path of at most " +
                std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty()) std::filesystem::create_directories(dir);
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    // A socket left by a session that died; anything else is not ours to remove.
    if (!S_ISSOCK(st.st_mode)) throw Error("--grants " + path + ": exists and is not a socket");
    unlink(path.c_str());
  }
  int listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd < 0 || bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd, 16) != 0)
    throw Error(errno_message("grant socket " + path, errno));
  // Anyone may connect; only the owner and root are served (peer
  // credentials), and every refusal is in the record.
  chmod(path.c_str(), 0666);
  grant_socket_ = path;
  int events[2];
  if (pipe2(events, O_CLOEXEC) != 0) throw Error(errno_message("pipe", errno));
  grants::SupervisorSpec spec;
  spec.notify_sock = notify_sock_[0];
  spec.listen_fd = listen_fd;
  spec.events_fd = events[1];
  spec.sandbox_init = child_.pid;
  // The session's owner: who ran flightrec (through sudo: the user who ran sudo).
  spec.owner = getuid();
  if (const char* sudo = getenv("SUDO_UID"); sudo && getuid() == 0) spec.owner = uid_t(strtoul(sudo, nullptr, 10));
  spec.writable = landlock_.write;
  spec.writable.insert(spec.writable.end(), landlock_.write_files.begin(), landlock_.write_files.end());
  spec.timeout_ms = policy_.ask.timeout_ms;
  // What the supervisor reads of a thread in /proc holds while this counter
  // does. The programs bump it from the session's first attach, before the
  // command runs; the supervisor decides nothing before then (the listener
  // comes from the command's side of go).
  LIBBPF_OPTS(bpf_map_create_opts, mmapable, .map_flags = BPF_F_MMAPABLE);
  view_gen_fd_ = bpf_map_create(BPF_MAP_TYPE_ARRAY, "fr_view_gen", sizeof(uint32_t), sizeof(uint64_t), 1, &mmapable);
  if (view_gen_fd_ < 0) throw Error(errno_message("cannot make the grant supervisor's BPF map", errno));
  spec.view_gen_map = view_gen_fd_;
  if (policy_.ask.connect) {
    // Made here, before the programs load (they reuse them), so that the
    // supervisor, forked now, holds them too (bpf/lib/common.bpf.h).
    LIBBPF_OPTS(bpf_map_create_opts, lazy, .map_flags = BPF_F_NO_PREALLOC);  // as the programs declare them
    egress_granted_fd_ = bpf_map_create(BPF_MAP_TYPE_HASH, "fr_conn_granted", sizeof(fr_egress_endpoint), 1,
                                        FR_EGRESS_GRANTED_MAX, &lazy);
    egress_tickets_fd_ = bpf_map_create(BPF_MAP_TYPE_HASH, "fr_conn_tickets", sizeof(fr_egress_ticket),
                                        sizeof(uint64_t), FR_EGRESS_TICKETS_MAX, &lazy);
    if (egress_granted_fd_ < 0 || egress_tickets_fd_ < 0)
      throw Error(errno_message("cannot make the connect grants' BPF maps", errno));
    spec.allow = policy_.allow;
    if (auto own = names_ ? names_->endpoint() : std::nullopt) spec.allow.push_back(*own);  // never asked for
    spec.granted_map = egress_granted_fd_;
    spec.tickets_map = egress_tickets_fd_;
    spec.named_map = names_ ? names_->named_map_read_only_fd() : -1;
    spec.name_asks_fd = names_ ? names_->supervisor_asks_fd() : -1;
  }
  if (policy_.ask.exec) {
    LIBBPF_OPTS(bpf_map_create_opts, lazy, .map_flags = BPF_F_NO_PREALLOC);
    exec_tickets_fd_ = bpf_map_create(BPF_MAP_TYPE_HASH, "fr_exec_tickets", sizeof(fr_exec_ticket), sizeof(uint64_t),
                                      FR_EXEC_TICKETS_MAX, &lazy);
    if (exec_tickets_fd_ < 0) throw Error(errno_message("cannot make the exec grants' BPF map", errno));
    for (const auto& [path, number] : exec_rules_.match) spec.exec_rules.push_back(path);
    spec.exec_tickets_map = exec_tickets_fd_;
  }
  supervisor_ = grants::start_supervisor(spec);
  close(events[1]);
  close(listen_fd);
  close(notify_sock_[0]);
  notify_sock_[0] = -1;
  fcntl(events[0], F_SETFL, O_NONBLOCK);
  grant_log_ = std::make_unique<GrantLog>(events[0]);
  grant_log_->on_name_grant([this](const GrantLog::NameGrant& g) {  // the session's resolver answers it now
    if (names_) names_->grant(g.id, g.name, g.port, g.duration_ms, g.ended);
  });
  std::cerr << "flightrec: the policy asks: grants for this session on " << path << " (owner uid " << spec.owner
            << ")\n";
}

void Confinement::record_grants() {
  if (!grant_log_ || grant_log_->fd() < 0) return;
  Emitted out = pipeline_->emitted();
  std::string notes;
  bool open = grant_log_->read(out, &notes);
  if (!open) {
    if (names_) names_->ungrant_all();  // no grant outlives the supervisor that could end it
    // Its end of the pipe closes as it exits, a moment before it can be
    // reaped. One that closed it and lives on is broken: it is killed, so
    // that asked calls fail (closed) rather than get its answers.
    int status = 0;
    pid_t got = -1;
    for (int i = 0; supervisor_ > 0 && i < 100 && (got = waitpid(supervisor_, &status, WNOHANG)) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (got == 0) {
      kill(supervisor_, SIGKILL);
      got = waitpid(supervisor_, &status, 0);
    }
    if (got == supervisor_) supervisor_ = -1;
    if (!stopping_grants_) {
      // Asked calls fail from now on (the kernel answers ENOSYS without a listener).
      std::string why = got > 0 && WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                                       : "exited";
      auto& e = out.add("grants_stopped");
      e.set("why", "the grant supervisor " + why + "; asked calls fail from now on (ENOSYS)");
      notes += "flightrec: ALERT the grant supervisor " + why + ": asked calls fail from now on\n";
    }
    grant_log_->close();
  }
  pipeline_->write(out);
  std::istringstream lines(notes);
  for (std::string line; std::getline(lines, line);) StderrLog::get().line(line);
}

void Confinement::stop_grants() {
  if (!grant_log_) return;
  stopping_grants_ = true;
  if (supervisor_ > 0) kill(supervisor_, SIGTERM);
  // What it wrote is read to the end: it writes what is pending and exits
  // at SIGTERM, or is killed after 5 s stuck in a call (its file calls
  // never block; a stuck file system still could).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool killed = false;
  while (grant_log_->fd() >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{grant_log_->fd(), POLLIN, 0};
    if (poll(&p, 1, killed ? -1 : int(std::max<int64_t>(left.count(), 0))) == 0) {
      if (supervisor_ > 0) kill(supervisor_, SIGKILL);  // its pipe closes now
      killed = true;
      Emitted out = pipeline_->emitted();
      out.add("grants_stopped").set("why", "the grant supervisor did not stop within 5 s of the session's end; "
                                           "killed (the uses of its last millisecond may be missing)");
      pipeline_->write(out);
      continue;
    }
    record_grants();
  }
  if (supervisor_ > 0) waitpid(supervisor_, nullptr, 0);
  supervisor_ = -1;
  if (!grant_socket_.empty()) unlink(grant_socket_.c_str());
}

Confinement::~Confinement() {
  if (supervisor_ > 0) {
    kill(supervisor_, SIGKILL);
    waitpid(supervisor_, nullptr, 0);
  }
  if (!grant_socket_.empty()) unlink(grant_socket_.c_str());
  for (int fd : {notify_sock_[0], notify_sock_[1], egress_granted_fd_, egress_tickets_fd_, exec_tickets_fd_, view_gen_fd_})
    if (fd >= 0) close(fd);
  if (child_.go_fd >= 0) close(child_.go_fd);
  if (child_.report_fd >= 0) close(child_.report_fd);
}

void Confinement::fill(probe::CaptureOptions& copts) const {
  if (!sandboxed_) return;
  // Where BPF-LSM loads, it decides the hidden paths and the exec allowlist
  // too, on the path the kernel resolved: behind the mounts and Landlock,
  // and alone where Landlock is missing or a hidden path appears later.
  // A path too long for the trie: a hidden one is left to the mounts, and
  // the exec allowlist to Landlock as a whole (without it, it would deny).
  add_path_rules(copts.hidden, policy_.filesystem.hidden, policy_.filesystem.root);
  add_path_exception(copts.hidden, work_dir_, policy_.filesystem.root);  // the mounts keep it reachable too
  if (policy_.ask.exec) {
    // Every exec is BPF-LSM's to judge (with the grants' tickets): no run without it.
    copts.exec = exec_rules_;
    copts.require_lsm = true;
    copts.exec_tickets_fd = exec_tickets_fd_;
  } else if (!add_path_rules(copts.exec, landlock_.exec, policy_.filesystem.root)) {
    copts.exec = {};
  }
  // The allowlist's rules are in the plan (session/plan.h); BPF-LSM applies them too where it loads.
  copts.egress_allowlist = policy_.network == policy::Network::Allowlist;
  if (auto rule = names_ ? names_->egress_rule() : std::nullopt; rule && copts.egress_allowlist) copts.egress.push_back(*rule);
  copts.egress_named_fd = names_ ? names_->named_map_fd() : -1;
  copts.egress_granted_fd = egress_granted_fd_;
  copts.egress_tickets_fd = egress_tickets_fd_;
  copts.view_gen_fd = view_gen_fd_;
}

void Confinement::filter_egress(const probe::CaptureOptions& copts) {
  if (!sandboxed_ || policy_.network != policy::Network::Allowlist) return;
  probe::EgressFilter::Options o;
  o.cgroup_fd = cgroup_.fd();
  o.rules = copts.egress;
  o.granted_fd = egress_granted_fd_;
  o.tickets_fd = egress_tickets_fd_;
  o.named_fd = names_ ? names_->named_map_fd() : -1;
  o.server_names_fd = names_ ? names_->server_names_map_fd() : -1;
  o.sni_mode = policy_.dns.server_names == policy::NameService::ServerNames::Required ? FR_SNI_REQUIRED : FR_SNI_OPTIONAL;
  o.verbose = copts.verbose;
  egress_ = std::make_unique<probe::EgressFilter>(o);
}

void Confinement::fill(recorder::SessionMeta& meta) const {
  if (egress_)
    for (const auto& section : egress_->attached())
      if (std::find(meta.capture.begin(), meta.capture.end(), section) == meta.capture.end()) meta.capture.push_back(section);
  describe_policy(policy_, meta);
  if (!policy_.confine) return;
  meta.policy_mode = policy_.mode == policy::Mode::Shadow ? "shadow" : "enforce";
  meta.work_dir = work_dir_;
  meta.env_passed = env_passed_;
  meta.env_set = env_set_;
  auto& s = meta.sandbox;
  s.push_back("policy source: " + policy_.source);
  for (const auto& o : policy_.overrides) s.push_back("override: " + o);
  if (!sandboxed_) {
    s.push_back("shadow mode: nothing is confined; would-deny entries say what enforce mode would deny");
    return;
  }
  s.push_back(std::string("namespaces: user (root inside is host uid ") + std::to_string(sandbox::kSandboxIdBase) +
              "), mount, pid, ipc, uts" + (policy::own_network(policy_) ? ", net" : ""));
  s.push_back("root: overlay of " + policy_.filesystem.root + ", writes in " + dir_->path() +
              (policy_.filesystem.keep_changes ? " (kept)" : " (memory, discarded)"));
  s.push_back("work_dir: " + work_dir_ +
              (!work_on_host_ ? " (private, discarded)"
               : policy_.filesystem.work_dir_mode == policy::WorkDirMode::Write
                   ? " (changes written to it at the end, where the host still has what the session started from)"
                   : " (changes kept for flightrec changes / flightrec apply)"));
  if (!home_shared_.empty()) {
    std::string list;
    for (const auto& h : home_shared_) list += (list.empty() ? "" : ", ") + h;
    s.push_back("home: /tmp/home, private; from the invoking user's home, read there and written here: " + list);
  }
  if (!policy_.filesystem.protect.empty() && work_on_host_) {
    std::string list;
    for (const auto& p : policy_.filesystem.protect) list += (list.empty() ? "" : ", ") + p;
    s.push_back("protected in the work directory (read-only, never written to the host): " + list);
  }
  s.push_back("landlock: " + landlock_.describe());
  if (seccomp_)
    s.push_back("seccomp: " + std::to_string(policy_.seccomp.rules.size()) + " rules, default " +
                (policy_.seccomp.default_action == policy::Action::Allow ? "allow" : "deny") +
                ", other ABIs killed" + (policy_.seccomp.profile.empty() ? "" : ", profile " + policy_.seccomp.profile));
  std::string net = policy_.network == policy::Network::None ? "none (own loopback only)"
                    : policy_.network == policy::Network::Host ? "host"
                    : policy::own_network(policy_) ? "allowlist, empty (own loopback only)"
                    : std::string("allowlist (cgroup connect/sendmsg programs)") +
                          (policy_.ask.connect ? ", connects granted at run time (ask.connect)" : "") + ":";
  if (policy_.network == policy::Network::Allowlist)
    for (const auto& ep : policy_.allow) {
      char text[INET6_ADDRSTRLEN] = {};
      inet_ntop(ep.family, ep.addr, text, sizeof(text));
      net += " " + std::string(text) + "/" + std::to_string(ep.prefix) + ":" +
             (ep.port ? std::to_string(ep.port) : "*");
    }
  s.push_back("network: " + net);
  if (names_) s.push_back(names_->describe());
  // Shadow mode never gets here: there every entry may be a would-deny.
  meta.record_rate = policy_.limits.record_rate;
  if (meta.record_rate)
    s.push_back("record rate: " + std::to_string(meta.record_rate) +
                " plain syscall entries per second, the rest counted in summary entries");
  if (limits_)
    for (const auto& c : limits_->describe()) s.push_back("limit: " + c);
  s.push_back("capabilities kept: " + std::to_string(policy_.keep_capabilities.size()) + ", no_new_privs");
  if (policy_.nested_sandboxes)
    s.push_back(std::string("nested sandboxes: user, mount, pid, net, ipc and uts namespaces may be made inside; "
                            "the root read-only and unreadable trees masked instead of Landlock's file rules") +
                (work_uid_ == 0 ? "; CAP_SETFCAP kept (a nested user namespace may map root)" : ""));
}

void Confinement::start(Pipeline& pipeline, const probe::CaptureTraits& capture) {
  pipeline_ = &pipeline;
  started_ns_ = mono_ns();
  judging_->judge().set_unix_inbound_refused(sandboxed_ && capture.unix_inbound);
}

void Confinement::observe(const events::Entry& e, Emitted& out) {
  if (!policy_.confine) return;
  judging_->follow(e);
  if (sandboxed_) track_writes(e);
  judging_->judge_entry(e, out);
}

void Confinement::track_writes(const events::Entry& e) {
  int64_t pid = e.int_or("pid", INT64_MIN), ret = e.int_or("ret", INT64_MIN);
  if (e.type() == "exit") {  // fds close with the process, without close()
    if (e.int_or("process_exit") == 1)
      for (auto it = written_.lower_bound({pid, INT64_MIN}); it != written_.end() && it->first.first == pid;)
        it = written_.erase(it);
    return;
  }
  const std::string name = e.string_or("name");
  if (name == "close") {
    const auto* args = std::get_if<std::vector<int64_t>>(e.get("args"));
    if (ret != 0 || !args || args->empty()) return;
    auto it = written_.find({pid, (*args)[0]});
    if (it == written_.end()) return;
    if (!differ_->submit(std::move(it->second))) ++closes_left_to_end_;
    written_.erase(it);
    return;
  }
  if ((name != "open" && name != "openat" && name != "creat") || ret < 0) return;
  if (!policy::opens_for_writing(e.int_or("flags"))) return;
  // The file the kernel opened, as the sandbox sees it; else the path
  // argument, which another thread may have rewritten meanwhile.
  std::string abs = e.int_or("kernel_path_truncated") ? "" : e.string_or("kernel_path");
  if (abs.empty()) abs = e.string_or("path");
  if (abs.empty()) return;
  if (abs[0] != '/') {
    // Relative to the process's directory (openat with a directory fd
    // other than AT_FDCWD is left to the end-of-session diff).
    const auto* args = std::get_if<std::vector<int64_t>>(e.get("args"));
    if (name == "openat" && (!args || int32_t((*args)[0]) != AT_FDCWD)) return;
    abs = cwd_of(int(pid)).value_or(work_dir_) + "/" + abs;
  }
  if (written_.size() < 65536) written_[{pid, ret}] = policy::normalize_path(abs);
}

std::array<std::pair<std::string, std::string>, 2> Confinement::private_dirs() const {
  return {{{"/tmp", dir_->tmp()}, {"/dev/shm", dir_->shm()}}};
}

std::optional<sandbox::FileChange> Confinement::diff_one(const std::string& path) const {
  if (policy::path_under(path, work_dir_))
    return sandbox::diff_path(dir_->upper_work(), work_lower_, work_dir_, path.substr(work_dir_.size()));
  // /tmp and /dev/shm start empty: all they hold was made in the session.
  for (const auto& [at, dir] : private_dirs())
    if (policy::path_under(path, at))
      return sandbox::diff_path(dir, dir_->empty(), at, path.substr(at.size()));
  return sandbox::diff_path(dir_->upper(), policy_.filesystem.root, "", path);
}

void Confinement::record_changes() {
  Emitted out = pipeline_->emitted();
  for (const auto& c : differ_->take()) {
    record_change(c, "close", out);
    pipeline_->write(out);
  }
}

void Confinement::record_names() {
  Emitted out = pipeline_->emitted();
  names_->record(out);
  pipeline_->write(out);
}

events::Entry& Confinement::record_change(const sandbox::FileChange& c, const char* when, Emitted& out) {
  events::Entry& e = out.add("file_change");
  e.set("change", c.change);
  e.set("when", when);
  e.set_bytes("path", c.path);
  e.set("kind", c.kind);
  e.set("size", c.size);
  e.set("mode", c.mode);
  if (!c.sha256_before.empty()) e.set("sha256_before", c.sha256_before);
  if (!c.sha256_after.empty()) e.set("sha256_after", c.sha256_after);
  if (!c.link_target.empty()) e.set_bytes("link_target", c.link_target);
  return e;
}

void Confinement::settle_work_changes(std::vector<sandbox::FileChange>& work, Emitted& entries) {
  bool write = policy_.filesystem.work_dir_mode == policy::WorkDirMode::Write;
  if (!work_on_host_ || work.empty()) {
    for (const auto& c : work) {
      record_change(c, "end", entries);
      pipeline_->write(entries);
    }
    return;
  }
  sandbox::ApplyOptions o;
  o.upper = dir_->upper_work();
  o.uid = work_uid_;
  o.gid = work_gid_;
  o.protect = policy_.filesystem.protect;
  o.session_start_ns = work_start_ns_;
  o.work_dev = dev_t(work_dev_);
  o.work_ino = ino_t(work_ino_);
  std::string kept;  // overlay: where the changes are kept
  if (write) {
    o.work_dir = work_dir_;
  } else {
    // Kept aside in a directory of flightrec's, on disk: the session's
    // tmpfs goes away now, and `flightrec apply` reads the copy later.
    // Beside the copy, what it belongs to, in a file only root can have
    // written: `flightrec apply` takes the work directory and owner from
    // it, never from the record alone (sandbox/kept.h).
    kept = sandbox::kKeptChangesDir + "/" + dir_->path().substr(dir_->path().rfind('/') + 1);
    o.work_dir = kept + "/files";
    o.into_empty = true;
    o.uid = o.gid = 0;
    std::filesystem::create_directories(sandbox::kKeptChangesDir);
    chmod(sandbox::kKeptChangesDir.c_str(), 0700);
    if (mkdir(kept.c_str(), 0700) != 0 || mkdir(o.work_dir.c_str(), 0700) != 0 ||
        !sandbox::write_kept_meta(kept, {work_dir_, work_uid_, work_gid_, work_start_ns_, work_dev_, work_ino_})) {
      note_error(entries, errno_message("cannot keep the work directory's changes in " + o.work_dir, errno));
      for (const auto& c : work) {
        record_change(c, "end", entries);
        pipeline_->write(entries);
      }
      return;
    }
  }
  // Copies of the changes' paths: a kept copy's paths are below its own root.
  std::vector<sandbox::FileChange> targets = work;
  if (!write)
    for (auto& c : targets) c.path = o.work_dir + c.path.substr(work_dir_.size());
  size_t applied = 0;
  std::vector<std::string> refused;
  std::set<std::string> protected_seen;
  for (const auto& a : sandbox::apply_changes(targets, o)) {
    const sandbox::FileChange& c = work[size_t(a.change - targets.data())];
    events::Entry& e = record_change(c, "end", entries);
    if (write) {
      e.set("applied", a.ok ? 1 : 0);
      if (!a.ok) e.set_bytes("refused", a.why);
    } else if (!a.ok && c.change != "deleted") {
      e.set_bytes("not_kept", a.why);
    }
    // One violation per protected tree (a new repository's .git holds
    // hundreds of files); each path's entry says it was refused.
    if (std::string root = !a.ok && write ? sandbox::protected_root(c.path, work_dir_, o.protect) : "";
        !root.empty() && protected_seen.insert(root).second)
      judging_->record_violation({"filesystem.protect", "ALERT", "denied",
                        c.change + " " + c.path + " not written to the work directory: " + root + " is protected"},
                       nullptr, entries);
    pipeline_->write(entries);
    if (a.ok) ++applied;
    else if (write) refused.push_back(c.path + ": " + a.why);
  }
  if (write) {
    StderrLog::get().line("flightrec: " + std::to_string(applied) + " change(s) written to " + work_dir_ +
                          (refused.empty() ? "" : "; " + std::to_string(refused.size()) + " refused (in the record):"));
    for (size_t i = 0; i < refused.size() && i < 20; ++i) StderrLog::get().line("flightrec:   " + refused[i]);
  } else {
    auto& e = entries.add("changes_kept");
    e.set_bytes("detail", kept);
    e.set_bytes("work_dir_changes", kept);
    pipeline_->write(entries);
    StderrLog::get().line("flightrec: the work directory's " + std::to_string(work.size()) +
                          " change(s) are kept; review them with flightrec changes, write them with flightrec apply");
  }
}

void Confinement::note_error(Emitted& entries, const std::string& detail) {
  entries.add("error").set_bytes("detail", detail);
  pipeline_->write(entries);
  StderrLog::get().line("flightrec: " + detail);
}

void Confinement::note_packet_drops() {
  if (!pipeline_ || !policy_.confine || !egress_) return;
  std::vector<probe::NetDrops> drops = egress_->net_drops();
  Emitted out = pipeline_->emitted();
  for (uint32_t kind = 0; kind < drops.size() && kind < FR_NET_DROP_KINDS; ++kind) {
    uint64_t fresh = drops[kind].count - std::exchange(packet_drops_seen_[kind], drops[kind].count);
    if (fresh) judging_->violation(packet_drop_violation(kind, fresh, drops[kind].last), nullptr, out);
  }
  for (const fr_sni_cut& cut : egress_->take_cuts()) {
    CutNote note = record_cut(cut, host_names(), out);
    judging_->violation(note.violation, note.entry, out);
    if (names_) names_->explain(note.explained);
  }
  pipeline_->write(out);
}

void Confinement::await_ready() {
  if (sandboxed_) sandbox::await_ready(child_);
}

void Confinement::go() {
  if (!sandboxed_) return;
  if (write(child_.go_fd, "g", 1) != 1) throw Error(errno_message("starting the sandbox", errno));
  close(child_.go_fd);
  child_.go_fd = -1;
}

namespace {

// The record file and its write-ahead log, in bytes.
uint64_t record_size(const std::string& db) {
  uint64_t total = 0;
  struct stat st;
  for (const auto& f : {db, db + "-wal"})
    if (stat(f.c_str(), &st) == 0) total += uint64_t(st.st_size);
  return total;
}

}  // namespace

void Confinement::guard(recorder::Watchdog& watchdog, const std::string& record) {
  watchdog_ = &watchdog;
  record_ = record;
  record_at_start_ = record_size(record);
  const auto& l = policy_.limits;
  if (sandboxed_ && (l.wall_ms || l.cpu_ms || l.record_bytes)) watchdog.add([this] { check_breakers(); });
}

bool Confinement::killed_by_policy() const {
  std::lock_guard lock(kill_mu_);
  return !kill_rule_.empty();
}

std::string Confinement::kill_rule() const {
  std::lock_guard lock(kill_mu_);
  return kill_rule_;
}

bool Confinement::claim_kill(const std::string& rule) {
  std::lock_guard lock(kill_mu_);
  if (!kill_rule_.empty()) return false;
  kill_rule_ = rule;
  return true;
}

void Confinement::check_breakers() {
  if (killed_by_policy()) return;
  const auto& l = policy_.limits;
  uint64_t elapsed_ms = (mono_ns() - started_ns_) / 1'000'000;
  std::string rule, why;
  if (l.wall_ms && elapsed_ms > l.wall_ms) {
    rule = "limits.wall_time";
    why = "the session ran " + std::to_string(elapsed_ms) + " ms (limit " + std::to_string(l.wall_ms) + " ms)";
  } else if (uint64_t cpu_ms = l.cpu_ms ? cgroup_.cpu_usec() / 1000 : 0; l.cpu_ms && cpu_ms > l.cpu_ms) {
    rule = "limits.cpu_time";
    why = "the session used " + std::to_string(cpu_ms) + " ms of CPU (limit " + std::to_string(l.cpu_ms) + " ms)";
  } else if (uint64_t grown = l.record_bytes ? record_size(record_) - std::min(record_size(record_), record_at_start_) : 0;
             l.record_bytes && grown > l.record_bytes) {
    rule = "limits.record_size";
    why = "the session added " + std::to_string(grown) + " bytes to the record (limit " +
          std::to_string(l.record_bytes) + ")";
  }
  if (rule.empty() || !claim_kill(rule)) return;
  watchdog_->post([this, report = enforce_kill(rule, why)] {
    Emitted out = pipeline_->emitted();
    record_kill(report, out);
    pipeline_->write(out);
  });
}

void Confinement::kill_session(const std::string& rule, const std::string& why, Emitted& out) {
  if (claim_kill(rule)) record_kill(enforce_kill(rule, why), out);
}

// Freeze, take a snapshot of what the session is doing, kill everything.
// No recorder here: this runs on the watchdog's thread too.
Confinement::KillReport Confinement::enforce_kill(const std::string& rule, const std::string& why) {
  KillReport r{rule, why, mono_ns(), "", "", "", false};
  try {
    cgroup_.freeze(true);
    r.frozen = true;
  } catch (const Error&) {
    // not frozen: the snapshot says so (frozen: 0)
  }
  for (pid_t p : cgroup_pids(cgroup_.path())) {
    std::string base = "/proc/" + std::to_string(p);
    std::string cmdline = try_read_file(base + "/cmdline").value_or("");
    for (char& c : cmdline)
      if (c == 0) c = ' ';
    auto fields = proc_stat_fields(p);
    std::string ppid = fields && fields->size() > 1 ? (*fields)[1] : "?";
    std::string rss;
    std::istringstream status(try_read_file(base + "/status").value_or(""));
    std::string line;
    while (std::getline(status, line))
      if (line.starts_with("VmRSS:")) rss = line.substr(6);
    r.processes += "pid " + std::to_string(p) + " ppid " + ppid + " cwd " + readlink_str(base + "/cwd") + " rss" +
                   rss + " cmd " + cmdline + "\n";
    if (DIR* d = opendir((base + "/fd").c_str())) {
      while (dirent* de = readdir(d)) {
        if (de->d_name[0] == '.') continue;
        r.open_fds += std::to_string(p) + ":" + de->d_name + " " + readlink_str(base + "/fd/" + de->d_name) + "\n";
      }
      closedir(d);
    }
  }
  r.memory_current = try_read_file(cgroup_.path() + "/memory.current").value_or("");
  cgroup_.kill_all();
  if (r.frozen) {
    try {
      cgroup_.freeze(false);  // SIGKILL is delivered on thaw
    } catch (const Error&) {
      // cgroup.kill works on a frozen cgroup too
    }
  }
  return r;
}

// The snapshot and a CRITICAL violation saying why, in the record and on stderr.
void Confinement::record_kill(const KillReport& r, Emitted& out) {
  events::Entry& snap = out.add("snapshot");
  snap.set("rule_id", r.rule);
  snap.set("taken_mono_ns", r.taken_mono_ns);
  snap.set_bytes("processes", r.processes);
  snap.set_bytes("open_fds", r.open_fds);
  if (!r.memory_current.empty()) snap.set_bytes("memory_current", r.memory_current);
  snap.set("frozen", r.frozen ? 1 : 0);
  judging_->record_violation({r.rule, "CRITICAL", "killed", "session killed: " + r.why}, nullptr, out);
  StderrLog::get().line("flightrec: CRITICAL " + r.rule + ": session killed: " + r.why);
}

void Confinement::report_repeats() { judging_->report_repeats(); }

sandbox::Outcome Confinement::finish() {
  StderrLog::get().flush(200);
  sandbox::Outcome out;
  if (!sandboxed_) return out;
  out = sandbox::read_reports(child_.report_fd);
  stop_grants();
  if (names_) {
    names_->stop();  // every lookup taken answered, then all of them recorded
    record_names();
  }
  Emitted entries = pipeline_->emitted();
  auto note = [&](const char* type, const std::string& detail) {
    entries.add(type).set_bytes("detail", detail);
    pipeline_->write(entries);
  };
  if (limits_) {
    auto c = limits_->read();
    if (c.oom_kills)
      judging_->record_violation({"limits.memory", "CRITICAL", "killed",
                        std::to_string(c.oom_kills) + " process(es) killed by the OOM killer at the memory limit"},
                       nullptr, entries, c.oom_kills);
    if (c.pids_refused)
      judging_->record_violation({"limits.pids", "ALERT", "denied",
                        std::to_string(c.pids_refused) + " fork(s) refused at the pids limit"},
                       nullptr, entries, c.pids_refused);
    pipeline_->write(entries);
    limits_->remove();
  }
  differ_->wait_idle();
  record_changes();
  if (closes_left_to_end_)
    note("file_changes_at_close_skipped",
         std::to_string(closes_left_to_end_) + " closed files were left to the end-of-session diff");
  size_t more = 0, more_work = 0;
  std::vector<sandbox::FileChange> changes, work;
  auto home_mount = [&](const std::string& path) {  // where a shared home directory is mounted
    for (const auto& n : home_dir_names_)
      if (path == "/tmp/home/" + n) return true;
    return false;
  };
  try {
    changes = sandbox::diff_layers(dir_->upper(), policy_.filesystem.root, "", 100000, &more);
    // flightrec wrote /etc/resolv.conf (its resolver's); as it left it, it is no change of the session's.
    std::erase_if(changes, [&](const sandbox::FileChange& c) { return names_ && names_->wrote(c); });
    // What the command wrote in the home entries shared with it (filesystem.home).
    for (size_t i = 0; i < home_dir_names_.size(); ++i) {
      size_t more_here = 0;
      for (auto& c : sandbox::diff_layers(dir_->path() + "/home-upper-" + std::to_string(i), home_dir_paths_[i],
                                          "/tmp/home/" + home_dir_names_[i], 100000, &more_here))
        changes.push_back(std::move(c));
      more += more_here;
    }
    // The work directory's list is what is written to the host or kept: it must be whole.
    work = sandbox::diff_layers(dir_->upper_work(), work_lower_, work_dir_, 1000000, &more_work);
    for (const auto& [at, dir] : private_dirs()) {
      size_t more_here = 0;
      for (auto& c : sandbox::diff_layers(dir, dir_->empty(), at, 100000, &more_here))
        // flightrec made the directories a work directory under /tmp is
        // mounted on, and the private home.
        if (!(c.kind == "dir" && (policy::path_under(work_dir_, c.path) || c.path == "/tmp/home" || home_mount(c.path))) &&
            !(names_ && names_->wrote(c)))
          changes.push_back(std::move(c));
      more += more_here;
    }
  } catch (const std::exception& e) {
    note("error", std::string("file changes could not be diffed: ") + e.what());
  }
  for (const auto& c : changes) {
    record_change(c, "end", entries);
    pipeline_->write(entries);
  }
  // Writing part of the work would be worse than writing none; so would
  // filling the host's disk (a sparse file costs the tmpfs nothing and
  // the host its whole size): past either bound, none of it is written.
  uint64_t work_bytes = 0;
  for (const auto& c : work)
    if (c.change != "deleted") work_bytes += c.size;
  std::string too_much = more_work ? "more than " + std::to_string(work.size()) + " changes"
                         : work_bytes > policy_.limits.disk
                             ? std::to_string(work_bytes) + " bytes of files, past limits.disk (" + std::to_string(policy_.limits.disk) + ")"
                             : "";
  if (!too_much.empty() && work_on_host_) {
    note("error", "the work directory's changes were not written to the host nor kept: " + too_much);
    judging_->record_violation({"limits.disk", "ALERT", "denied", "the work directory's changes were not written to the host: " + too_much},
                     nullptr, entries);
    pipeline_->write(entries);
    StderrLog::get().line("flightrec: ALERT the work directory's changes were not written to it: " + too_much);
    work_on_host_ = false;
  }
  settle_work_changes(work, entries);
  more += more_work;
  if (more) note("file_changes_truncated", std::to_string(more) + " more file changes not listed");
  if (policy_.filesystem.keep_changes) {
    auto& e = entries.add("changes_kept");
    e.set_bytes("detail", dir_->path());
    e.set_bytes("root_changes", dir_->upper());
    e.set_bytes("work_dir_changes", dir_->upper_work());
    pipeline_->write(entries);
  }
  dir_->discard();
  return out;
}

}  // namespace flightrec::session
