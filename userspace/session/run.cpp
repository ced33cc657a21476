// flightrec run: the command runs in a fresh cgroup that the BPF programs
// already watch before the command execs, so nothing it does is unseen.
#include "session/run.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <climits>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>

#include "common/error.h"
#include "common/system.h"
#include "ledger/keys.h"
#include "ledger/store.h"
#include "probe/features.h"
#include "recorder/event_loop.h"
#include "recorder/recorder.h"
#include "sandbox/cgroup.h"
#include "sandbox/leftovers.h"
#include "sandbox/launch.h"
#include "session/confinement.h"
#include "session/engine.h"
#include "session/handed.h"
#include "session/signals.h"
#include "session/llm_calls.h"
#include "session/tls_attach.h"

namespace flightrec::session {
namespace {

struct Child {
  pid_t pid = -1;
  int go_fd = -1;    // write end: one byte lets the child exec
  int err_fd = -1;   // read end: errno if exec failed, EOF if it worked
};

// The child is born in the session's cgroup and waits for go, then execs
// the program found on PATH beforehand (so the record does not start with
// a PATH search's failed execs). Between the clone and exec it makes only
// calls that are safe in the child of a multithreaded process.
Child spawn_waiting(const std::string& program, const std::vector<std::string>& command, sandbox::Cgroup& cgroup) {
  int go[2], err[2];
  if (pipe2(go, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
    throw Error(errno_message("pipe", errno));
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  pid_t pid = cgroup.fork_into(0);
  if (pid < 0) throw Error(errno_message("fork", errno));
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    close(go[1]);
    close(err[0]);
    char byte;
    // If flightrec dies (even by SIGKILL), the command dies with it rather
    // than run on unrecorded.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (read(go[0], &byte, 1) != 1) _exit(125);  // flightrec went away
    execv(program.c_str(), argv.data());
    int e = errno;
    (void)!write(err[1], &e, sizeof(e));
    _exit(e == ENOENT ? 127 : 126);
  }
  close(go[0]);
  close(err[1]);
  return Child{pid, go[1], err[0]};
}

// The terminal's settings as the command found them: it shares flightrec's
// terminal and may leave it raw, without echo, or worse (stty); they are
// put back when the session ends.
class TerminalSettings {
 public:
  TerminalSettings() {
    for (int fd : {0, 1, 2})
      if (isatty(fd) && tcgetattr(fd, &saved_) == 0) {
        fd_ = fd;
        break;
      }
  }
  ~TerminalSettings() {
    // Not from the background of our terminal: tcsetattr would stop
    // flightrec there (SIGTTOU). A terminal that is not ours is fine.
    if (fd_ < 0) return;
    pid_t fg = tcgetpgrp(fd_);
    bool may = fg == getpgrp() || (fg < 0 && errno == ENOTTY);
    termios now{};
    if (may && tcgetattr(fd_, &now) == 0 && std::memcmp(&now, &saved_, sizeof(now)) != 0)
      tcsetattr(fd_, TCSANOW, &saved_);
  }
  TerminalSettings(const TerminalSettings&) = delete;
  TerminalSettings& operator=(const TerminalSettings&) = delete;

 private:
  int fd_ = -1;
  termios saved_{};
};

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 125;
}

// The command's file, found where it will run: in the sandbox, only on its
// $PATH. nullopt after saying why not on stderr, with the exit code a
// shell would give (126: not executable, 127: not found).
std::optional<std::string> locate_command(const policy::Policy& policy, bool sandboxed, const std::string& name,
                                          int* exit_code) {
  std::string search = sandboxed ? sandbox_search_path(policy) : "";
  auto program = sandboxed ? find_executable(name, search) : find_executable(name);
  if (sandboxed) {
    // A command from the host's /tmp: the sandbox has its own, empty one.
    char cwd[4096];
    std::string work = policy.filesystem.work_dir == "." && getcwd(cwd, sizeof(cwd)) ? cwd : policy.filesystem.work_dir;
    auto host_file = program ? program : find_file(name);
    char real[PATH_MAX];
    if (host_file && realpath(host_file->c_str(), real)) host_file = real;
    for (const char* priv : {"/tmp/", "/dev/shm/"})
      if (host_file && host_file->starts_with(priv) && !host_file->starts_with(work + "/")) {
        std::cerr << "flightrec: " << *host_file << " is in the host's " << std::string(priv, strlen(priv) - 1)
                  << ", which the sandbox does not see (its own is private and empty); run flightrec from the "
                     "directory that holds it (it becomes the work directory), or put it under a readable path\n";
        *exit_code = 127;
        return std::nullopt;
      }
  }
  if (!program) {
    auto file = sandboxed ? find_file(name, search) : find_file(name);
    std::cerr << "flightrec: " << (file ? "not executable (no execute permission)" : "command not found")
              << (sandboxed ? " in the sandbox" : "") << ": " << (file ? *file : name) << "\n";
    *exit_code = file ? 126 : 127;
  }
  return program;
}

// Why this session cannot be handed to flightrecd, as far as can be told
// without asking it; empty if it may be.
std::string why_not_handed(const RunTarget& target, const probe::CaptureOptions& copts) {
  if (target.daemon_socket.empty()) return "--daemon off";
  // What only programs of the session's own do: filters on its cgroup,
  // maps shared with its grant supervisor.
  if (copts.egress_granted_fd >= 0 || copts.egress_tickets_fd >= 0 || copts.exec_tickets_fd >= 0 || copts.view_gen_fd >= 0)
    return "runtime grants (ask:) need programs of the session's own";
  struct stat st {};
  if (lstat(target.daemon_socket.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode))
    return "no flightrecd socket at " + target.daemon_socket;
  return "";
}

// The session handed to flightrecd, which opens it on the cgroup at once,
// when its loaded programs serve everything this session needs of the
// kernel; else nullptr, and why not in *why_not.
std::unique_ptr<HandedSession> hand_to_daemon(const RunTarget& target, const probe::CaptureOptions& copts,
                                              const sandbox::Cgroup& cgroup, std::string* why_not) {
  auto no = [&](const std::string& why) {
    *why_not = why;
    return nullptr;
  };
  std::unique_ptr<HandedSession> handed;
  try {
    handed = std::make_unique<HandedSession>(target.daemon_socket, cgroup.path(), copts.ring_bytes, copts.tls,
                                             copts.entry_times);
  } catch (const Error& e) {
    return no(e.what());
  }
  probe::CaptureTraits t = handed->traits();
  // Refused past here, the session closes with its connection.
  if (copts.entry_times && !t.entry_times) return no("flightrecd reads calls at their return alone (runs.entry_times: false)");
  // Where BPF-LSM loads, it enforces the session's path rules and
  // allowlist (and keeps the host out of its UNIX sockets): with rules the
  // daemon's programs lack.
  bool lsm = std::any_of(t.attached.begin(), t.attached.end(), [](const std::string& s) { return s.rfind("lsm/", 0) == 0; });
  if ((!copts.hidden.empty() || !copts.exec.empty()) && (lsm || copts.require_lsm))
    return no("path rules enforced by BPF-LSM need programs of the session's own");
  if (copts.egress_allowlist && lsm) return no("BPF-LSM enforces the egress allowlist here, with rules of the session's own");
  if (copts.tls && (copts.tls_chunk != handed->tls_chunk() || copts.tls_cap != handed->tls_cap()))
    return no("flightrecd keeps TLS data in other sizes (--tls-chunk, --tls-cap)");
  return handed;
}

}  // namespace

std::unique_ptr<ledger::SigningKey> load_key(const std::string& dir) {
  if (dir.empty()) return nullptr;
  return std::make_unique<ledger::SigningKey>(ledger::SigningKey::load_dir(dir));
}

int run(Plan plan, const RunTarget& target) {
  const auto& command = target.command;
  if (command.empty() || !plan.policy) throw Error("run: no command, or no policy in the plan");
  policy::Policy& policy = *plan.policy;
  if (policy.confine && policy.mode == policy::Mode::Shadow)
    std::cerr << "flightrec: WARNING: shadow mode confines nothing: the command runs unconfined as "
              << (getuid() == 0 ? "root" : "this user")
              << ", with full access to this host; the record says what policy " << policy.name
              << " would deny\n";

  int not_found = 0;
  auto program = locate_command(policy, plan.sandboxed, command[0], &not_found);
  if (!program) return not_found;
  probe::require_recording_features();
  // Before any thread exists (each inherits it): the sandbox's tmpfs is
  // then mounted where only flightrec and the sandbox see it, and goes
  // with them however flightrec ends. An unconfined command shares the
  // host's mounts, as it would without flightrec.
  if (plan.sandboxed && !sandbox::own_mount_namespace())
    std::cerr << "flightrec: note: no mount namespace of its own: a SIGKILL of flightrec would leave the session's "
                 "tmpfs mounted until `flightrec gc` or the next run\n";
  // What killed sessions left (their owner gone): said, then removed.
  for (const auto& l : sandbox::reap_leftovers(false)) std::cerr << "flightrec: reaped a killed session: " << describe(l) << "\n";
  TerminalSettings terminal;
  // Before any thread exists, so that every thread inherits the mask and
  // SIGINT/SIGTERM arrive only through the signalfd.
  int sigfd = block_termination_signals();
  // Made first and released last: while it is held no reaper touches the
  // session's cgroups, directory or sockets.
  sandbox::SessionClaim claim("run-" + std::to_string(getpid()) + "-" + std::to_string(mono_ns()));
  sandbox::Cgroup cgroup = sandbox::Cgroup::create(claim.name());

  // The sandbox is started while flightrec has a single thread, after the
  // record exists (it is hidden from the command) and before the signing
  // key is loaded (the sandbox's init, a copy of this process, never holds
  // it). The command's first process (the sandbox's init, or a child that
  // only waits) is born in the session's cgroup: a move would wait for an
  // RCU grace period. The sandbox builds itself on the other core while
  // the programs load; the session opens once that process sleeps until
  // go, so nothing of its set-up is in the record.
  std::unique_ptr<Confinement> confinement;
  std::unique_ptr<ledger::SigningKey> key;
  std::unique_ptr<ledger::Store> store;
  probe::CaptureOptions copts = plan.capture;
  std::unique_ptr<Engine> engine;
  Child child;
  try {
    store = std::make_unique<ledger::Store>(target.db, ledger::Store::Mode::Write);
    std::vector<std::string> protect = {target.db, target.db + "-wal", target.db + "-shm"};
    if (!target.key_dir.empty()) protect.push_back(target.key_dir);
    confinement = std::make_unique<Confinement>(std::move(policy), cgroup, *program, command, protect,
                                                 target.grant_socket);
    if (!confinement->sandboxed()) child = spawn_waiting(*program, command, cgroup);
    key = load_key(target.key_dir);
    confinement->fill(copts);
    std::string why_not;
    {
      // The egress allowlist's programs (~7 ms) load on a thread of their
      // own while the capture's load here: the two do not depend on each
      // other, and both are on every confined session's start-up path.
      std::exception_ptr egress_failed;
      std::jthread egress = beside([&] {
        try {
          confinement->filter_egress(copts);
        } catch (...) {
          egress_failed = std::current_exception();
        }
      });
      why_not = why_not_handed(target, copts);
      if (!why_not.empty()) {
        if (target.require_daemon) throw Error("--daemon require: the session cannot be handed to flightrecd: " + why_not);
        engine = std::make_unique<Engine>(copts);  // loads the programs while the sandbox is built
      }
      if (egress.joinable()) egress.join();
      if (egress_failed) std::rethrow_exception(egress_failed);
    }
    confinement->await_ready();
    if (!confinement->sandboxed()) sandbox::await_asleep(child.pid);
    if (!engine) {
      if (auto handed = hand_to_daemon(target, copts, cgroup, &why_not)) {
        engine = std::make_unique<Engine>(std::move(handed));
      } else {
        if (target.require_daemon) throw Error("--daemon require: the session cannot be handed to flightrecd: " + why_not);
        engine = std::make_unique<Engine>(copts);
      }
    }
    engine->open_session(cgroup);
  } catch (...) {
    // (A sandbox that failed to build is reaped already: its pid is -1.)
    pid_t first = confinement && confinement->sandboxed() ? confinement->pid() : child.pid;
    if (first > 0) {
      kill(first, SIGKILL);
      waitpid(first, nullptr, 0);
    }
    if (child.go_fd >= 0) close(child.go_fd);
    if (child.err_fd >= 0) close(child.err_fd);
    confinement.reset();
    cgroup.remove_if_owned();
    throw;
  }
  probe::Source& source = engine->source();
  probe::TlsProbes& tls_probes = engine->tls_probes();
  HandedSession* handed = engine->handed();
  if (confinement->sandboxed()) child.pid = confinement->pid();
  // Should anything below fail, the command's first process is killed.
  struct KillOnUnwind {
    pid_t pid;
    sandbox::Cgroup& cgroup;
    bool armed = true;
    ~KillOnUnwind() {
      if (!armed) return;
      kill(pid, SIGKILL);
      cgroup.kill_all();
      waitpid(pid, nullptr, 0);
    }
  } kill_on_unwind{child.pid, cgroup};

  // TLS probes before the command starts: it cannot call SSL_write first.
  // (flightrecd keeps the system's libraries probed.)
  std::vector<std::string> tls_errors;
  std::unique_ptr<EarlyTlsAttach> early_tls;  // flightrecd probes at execs as its rings are read
  if (copts.tls) {
    if (!handed) early_tls = std::make_unique<EarlyTlsAttach>(*engine->capture(), true, true);
    tls_errors = handed ? handed->tls_errors() : attach_system_tls(tls_probes);
    if (std::string err = attach_program_tls(tls_probes, *program); !err.empty()) tls_errors.push_back(err);
  }
  recorder::SessionMeta meta = plan.meta;
  meta.mode = "run";
  meta.command = command;
  meta.cgroups = {cgroup.path()};
  describe_capture(source.traits(), copts, meta);
  confinement->fill(meta);
  meta.key = key.get();
  if (handed) meta.sink = handed->forwarding();
  engine->begin(*store, meta, tls_errors, {&cgroup}, plan.on_loss);
  recorder::Recorder& rec = engine->recorder();
  rec.set_host_names(confinement->host_names());
  // Each kernel entry, once recorded: TLS probes follow libssl opens and
  // execs, then the policy judges it and tracks written files.
  TlsFollower tls_follower(tls_probes, !confinement->sandboxed());
  tls_follower.say_holds_of(early_tls.get());
  if (copts.tls) engine->pipeline().add(tls_follower);
  // The model calls and tool calls in the TLS plaintext (llm_call, tool_call).
  LlmCalls llm_calls;
  if (plan.meta.agent_turns) engine->pipeline().add(llm_calls);
  engine->pipeline().add(*confinement);
  confinement->start(engine->pipeline(), source.traits());
  confinement->guard(engine->watchdog(), target.db);
  recorder::EventLoop& loop = engine->loop();

  int status = 0;
  std::string reason = "command exited";
  bool daemon_lost = false;
  int pidfd = -1;
  try {
    if (confinement->sandboxed()) {
      confinement->go();
    } else {
      if (write(child.go_fd, "g", 1) != 1) throw Error(errno_message("starting the command", errno));
      close(child.go_fd);
    }
    pidfd = int(syscall(SYS_pidfd_open, child.pid, 0));
    if (pidfd < 0) throw Error(errno_message("pidfd_open", errno));
    loop.watch_fd(pidfd, [&] {
      if (waitpid(child.pid, &status, WNOHANG) == child.pid) loop.stop();
    });
    if (confinement->changes_fd() >= 0)
      loop.watch_fd(confinement->changes_fd(), [&] { confinement->record_changes(); });
    if (confinement->grants_fd() >= 0)
      loop.watch_fd(confinement->grants_fd(), [&] { confinement->record_grants(); });
    if (confinement->cuts_fd() >= 0) loop.watch_fd(confinement->cuts_fd(), [&] { confinement->note_packet_drops(); });
    if (confinement->names_fd() >= 0)
      loop.watch_fd(confinement->names_fd(), [&] { confinement->record_names(); });
    loop.watch_fd(sigfd, [&] {
      // Pass termination requests on; the session ends when the command does.
      if (int sig = read_signal(sigfd)) kill(child.pid, sig);
    });
    if (handed)
      loop.watch_fd(handed->connection_fd(), [&] {
        // Only an end of the connection comes unasked: flightrecd is gone,
        // and its programs with it. Nothing the command did from here on
        // would be recorded, so it does not go on.
        if (!handed->connection_lost()) return;
        loop.forget_fd(handed->connection_fd());
        reason = "flightrecd went away; the session was ended";
        rec.note("error", "flightrecd, whose programs recorded this session, went away: the session was ended");
        std::cerr << "flightrec: flightrecd went away; the command was killed (nothing after this point would be recorded)\n";
        daemon_lost = true;
        kill(child.pid, SIGKILL);
        cgroup.kill_all();
      });
    engine->run([&] { confinement->note_packet_drops(); });
    // The command has ended: nothing more for the breakers or --on-loss to do.
    engine->stop_watchdog();
  } catch (...) {
    // Never leave the command running unrecorded.
    kill(child.pid, SIGKILL);
    cgroup.kill_all();
    waitpid(child.pid, nullptr, 0);
    kill_on_unwind.armed = false;  // reaped: its pid may be another's now
    throw;
  }
  kill_on_unwind.armed = false;

  bool loss_killed = engine->killed_by_loss();
  if (loss_killed) reason = "events were lost and --on-loss kill ended the session";
  if (confinement->killed_by_policy()) reason = "the policy ended the session: " + confinement->kill_rule();
  // Leftovers (daemons, background jobs) die with the session.
  if (cgroup.populated()) {
    if (!loss_killed && !confinement->killed_by_policy() && !daemon_lost) reason = "command exited; remaining processes killed";
    cgroup.kill_all();
    uint64_t deadline = mono_ns() + 5'000'000'000ull;
    loop.run([&] {
      if (!cgroup.populated() || mono_ns() > deadline) loop.stop();
    });
  }
  if (loss_killed && waitpid(child.pid, &status, 0) < 0 && errno != ECHILD) status = 0;
  engine->end();
  engine->pipeline().release_held();
  if (copts.tls) {  // hellos of probed programs no plaintext followed, holds not said yet
    Emitted tail = engine->pipeline().emitted();
    tls_follower.finish(tail);
    engine->pipeline().write(tail);
  }
  tls_follower.say_holds_of(nullptr);
  early_tls.reset();  // its thread uses the capture, which goes with the engine below
  if (plan.meta.agent_turns) {  // exchanges still open, tool calls never answered
    Emitted tail = engine->pipeline().emitted();
    llm_calls.finish(tail);
    engine->pipeline().write(tail);
  }
  if (handed && handed->connection_lost() && !daemon_lost) {
    // Gone at the very end: what it recorded up to then is in the ring.
    rec.note("error", "flightrecd, whose programs recorded this session, went away before the session ended");
    std::cerr << "flightrec: flightrecd went away before the session ended\n";
  }
  confinement->note_packet_drops();
  confinement->report_repeats();
  int exec_errno = 0;
  bool exec_failed = false;
  if (confinement->sandboxed()) {
    sandbox::Outcome out = confinement->finish();
    exec_failed = out.exec_errno != 0;
    exec_errno = out.exec_errno;
    if (out.status) status = *out.status;  // the command's own status, as the sandbox's init saw it
    if (!out.setup_error.empty()) {
      reason = "the sandbox failed: " + out.setup_error;
      std::cerr << "flightrec: the sandbox failed: " << out.setup_error << "\n";
    }
  } else {
    exec_failed = read(child.err_fd, &exec_errno, sizeof(exec_errno)) == sizeof(exec_errno);
    close(child.err_fd);
  }
  if (exec_failed) reason = std::string("command could not be executed: ") + strerror(exec_errno);
  rec.finish(status, reason);
  bool policy_kill = confinement->killed_by_policy();
  rec.set_host_names(nullptr);  // the confinement's, about to go
  confinement.reset();
  engine.reset();
  cgroup.remove_if_owned();
  close(pidfd);
  close(sigfd);

  if (exec_failed) {
    std::cerr << "flightrec: cannot execute " << command[0] << ": " << strerror(exec_errno) << "\n";
    return exec_errno == ENOENT ? 127 : 126;
  }
  if (policy_kill) return kPolicyKillExit;
  return exit_code_of(status);
}

}  // namespace flightrec::session
