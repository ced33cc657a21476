// flightrec run: the command runs in a fresh cgroup that the BPF programs
// already watch before the command execs, so nothing it does is unseen.
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "cli/commands.h"
#include "cli/loss_policy.h"
#include "cli/options.h"
#include "cli/session_common.h"
#include "cli/session_options.h"
#include "cli/tls_attach.h"
#include "common/error.h"
#include "common/system.h"
#include "ledger/store.h"
#include "probe/capture.h"
#include "probe/features.h"
#include "recorder/event_loop.h"
#include "recorder/recorder.h"
#include "sandbox/cgroup.h"

namespace flightrec::cli {

int block_termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, sig);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) throw Error(errno_message("sigprocmask", errno));
  int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) throw Error(errno_message("signalfd", errno));
  return fd;
}

int read_signal(int sigfd) {
  signalfd_siginfo info{};
  if (read(sigfd, &info, sizeof(info)) != sizeof(info)) return 0;
  return int(info.ssi_signo);
}

namespace {

const char* kRunUsage =
    "usage: flightrec run --db FILE [OPTIONS] -- COMMAND [ARGS...]\n\n"
    "Runs COMMAND in a new cgroup and records every syscall, exec, fork, exit and\n"
    "connect of it and its descendants into FILE (SQLite; created if missing, appended\n"
    "to if it is a flightrec record), sealed by a hash chain and Merkle tree\n"
    "checkpoints (signed with --key). Exits with COMMAND's exit code (128+N if killed\n"
    "by signal N); 125 if flightrec itself failed, 126 if COMMAND cannot be executed,\n"
    "127 if it is not found, 2 for usage errors. Processes COMMAND leaves behind are\n"
    "killed when it exits. Needs root.";

struct Child {
  pid_t pid = -1;
  int go_fd = -1;    // write end: one byte lets the child exec
  int err_fd = -1;   // read end: errno if exec failed, EOF if it worked
};

// The child waits until it is in the session's cgroup, then execs the
// program found on PATH beforehand (so the record does not start with a
// PATH search's failed execs).
Child spawn_waiting(const std::string& program, const std::vector<std::string>& command) {
  int go[2], err[2];
  if (pipe2(go, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
    throw Error(errno_message("pipe", errno));
  std::vector<char*> argv;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  pid_t pid = fork();
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

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 125;
}

}  // namespace

int cmd_run(const Args& all) {
  // Everything after the first "--" is the command, untouched.
  Args args, command;
  bool in_command = false;
  for (const auto& a : all) {
    if (!in_command && a == "--") in_command = true;
    else (in_command ? command : args).push_back(a);
  }

  po::options_description desc("options");
  SessionOptions so;
  desc.add_options()("help,h", "show this help");
  so.add_to(desc);
  po::variables_map vm;
  if (!parse_options(args, desc, kRunUsage, vm)) return 0;
  if (command.empty())
    throw UsageError("missing command: flightrec run --db FILE -- COMMAND [ARGS...]");
  so.validate(vm);

  auto program = find_executable(command[0]);
  if (!program) {
    std::cerr << "flightrec: command not found or not executable: " << command[0] << "\n";
    return 127;
  }
  probe::require_recording_features();
  auto key = so.load_key();
  // Before any thread exists, so that every thread inherits the mask and
  // SIGINT/SIGTERM arrive only through the signalfd.
  int sigfd = block_termination_signals();
  ledger::Store store(so.db, ledger::Store::Mode::Write);
  sandbox::Cgroup cgroup = sandbox::Cgroup::create("run-" + std::to_string(getpid()) + "-" +
                                                   std::to_string(mono_ns()));

  recorder::Recorder* rec_ptr = nullptr;
  probe::CaptureOptions copts;
  copts.cgroup_fds = {cgroup.fd()};
  so.fill(copts);
  std::unique_ptr<probe::Capture> capture;
  try {
    capture = std::make_unique<probe::Capture>(
        copts, [&](const void* d, size_t n) { rec_ptr->on_record(d, n); });
  } catch (...) {
    cgroup.remove_if_owned();
    throw;
  }

  // TLS probes before the command starts: it cannot call SSL_write first.
  std::vector<std::string> tls_errors;
  if (so.tls_enabled()) {
    tls_errors = attach_system_libssl(*capture);
    attach_program_openssl(*capture, *program);
  }
  recorder::SessionMeta meta;
  meta.mode = "run";
  meta.command = command;
  meta.cgroups = {cgroup.path()};
  so.fill(meta);
  meta.capture = capture->attached();
  meta.key = key.get();
  recorder::Recorder rec(store, meta);
  rec_ptr = &rec;
  for (const auto& err : tls_errors) rec.note("error", "TLS capture: " + err);
  if (so.tls_enabled()) attach_libssl_on_open(*capture, rec);
  recorder::EventLoop loop(*capture, rec);
  LossPolicy loss(so.on_loss, *capture, rec, {&cgroup});
  loop.after_consume([&] {
    if (loss.check()) loop.stop();
  });

  Child child = spawn_waiting(*program, command);
  int status = 0;
  std::string reason = "command exited";
  int pidfd = -1;
  try {
    cgroup.add_process(child.pid);
    if (write(child.go_fd, "g", 1) != 1) throw Error(errno_message("starting the command", errno));
    close(child.go_fd);
    pidfd = int(syscall(SYS_pidfd_open, child.pid, 0));
    if (pidfd < 0) throw Error(errno_message("pidfd_open", errno));
    loop.watch_fd(pidfd, [&] {
      if (waitpid(child.pid, &status, WNOHANG) == child.pid) loop.stop();
    });
    loop.watch_fd(sigfd, [&] {
      // Pass termination requests on; the session ends when the command does.
      if (int sig = read_signal(sigfd)) kill(child.pid, sig);
    });
    loop.run([] {});
  } catch (...) {
    // Never leave the command running unrecorded.
    kill(child.pid, SIGKILL);
    cgroup.kill_all();
    waitpid(child.pid, nullptr, 0);
    throw;
  }

  if (loss.killed()) reason = "events were lost and --on-loss kill ended the session";
  // Leftovers (daemons, background jobs) die with the session.
  if (cgroup.populated()) {
    if (!loss.killed()) reason = "command exited; remaining processes killed";
    cgroup.kill_all();
    uint64_t deadline = mono_ns() + 5'000'000'000ull;
    loop.run([&] {
      if (!cgroup.populated() || mono_ns() > deadline) loop.stop();
    });
  }
  if (loss.killed() && waitpid(child.pid, &status, 0) < 0 && errno != ECHILD) status = 0;
  loop.drain();
  capture->detach();
  loop.drain();

  loss.release();
  int exec_errno = 0;
  bool exec_failed = read(child.err_fd, &exec_errno, sizeof(exec_errno)) == sizeof(exec_errno);
  close(child.err_fd);
  if (exec_failed) reason = std::string("command could not be executed: ") + strerror(exec_errno);
  rec.finish(status, reason);
  capture.reset();
  cgroup.remove_if_owned();
  close(pidfd);
  close(sigfd);

  if (exec_failed) {
    std::cerr << "flightrec: cannot execute " << command[0] << ": " << strerror(exec_errno) << "\n";
    return exec_errno == ENOENT ? 127 : 126;
  }
  return exit_code_of(status);
}

}  // namespace flightrec::cli
