// flightrec watch: record the processes of cgroups that already exist,
// without confining them, until a signal, --duration, or every cgroup is gone.
#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/session_common.h"
#include "cli/session_options.h"
#include "session/tls_attach.h"
#include "common/error.h"
#include "common/system.h"
#include "ledger/store.h"
#include "probe/features.h"
#include "recorder/recorder.h"
#include "session/engine.h"
#include "sandbox/cgroup.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::cli {
namespace {

const char* kWatchUsage =
    "usage: flightrec watch --cgroup PATH [--cgroup PATH...] --db FILE [--duration SECONDS]\n\n"
    "Records every syscall, exec, fork and exit of the processes in the given cgroup v2\n"
    "directories and below (e.g. a pod's cgroup) into FILE, without confining them.\n"
    "Stops on SIGINT/SIGTERM, after --duration seconds, or when every cgroup is gone;\n"
    "a cgroup that disappears is noted in the record. Needs root.";

}  // namespace

int cmd_watch(const Args& args) {
  po::options_description desc("options");
  SessionOptions so;
  so.on_loss = "continue";  // production cgroups are not paused unless asked (loss is loud)
  std::vector<std::string> paths;
  double duration = 0;
  desc.add_options()("help,h", "show this help")(
      "cgroup", po::value(&paths)->required(), "cgroup v2 directory to watch (repeatable, up to 8)")(
      "duration", po::value(&duration)->default_value(0),
      "stop after this many seconds (0: until SIGINT/SIGTERM)");
  so.add_to(desc);
  po::variables_map vm;
  if (!parse_options(args, desc, kWatchUsage, vm)) return 0;
  if (paths.size() > FR_MAX_CGROUPS)
    throw UsageError("at most " + std::to_string(FR_MAX_CGROUPS) + " --cgroup paths");
  if (!(duration >= 0) || duration > 1e9) throw UsageError("--duration must be >= 0 seconds");
  so.validate(vm);

  probe::require_recording_features();
  auto key = so.load_key();
  std::vector<sandbox::Cgroup> cgroups;
  for (const auto& p : paths) cgroups.push_back(sandbox::Cgroup::open(p));
  // Before any thread exists, so that every thread inherits the mask and
  // SIGINT/SIGTERM arrive only through the signalfd.
  int sigfd = block_termination_signals();
  ledger::Store store(so.db, ledger::Store::Mode::Write);

  probe::CaptureOptions copts;
  for (const auto& cg : cgroups) copts.cgroup_fds.push_back(cg.fd());
  so.fill(copts);
  session::Engine engine(copts);
  probe::Capture& capture = engine.capture();
  // The tasks already there stay recorded wherever they are moved, even
  // before their first syscall.
  size_t tasks_at_start = capture.track_existing(paths);
  std::vector<std::string> tls_errors;
  if (so.tls_enabled()) {
    tls_errors = session::attach_system_libssl(capture);
    for (auto& err : session::attach_mapped_libssl(capture, paths)) tls_errors.push_back(err);
  }
  recorder::SessionMeta meta;
  meta.mode = "watch";
  meta.cgroups = paths;
  meta.tasks_at_start = tasks_at_start;
  so.fill(meta);
  session::describe_capture(capture, copts, meta);
  meta.key = key.get();
  std::vector<sandbox::Cgroup*> watched;
  for (auto& cg : cgroups) watched.push_back(&cg);
  engine.begin(store, meta, tls_errors, watched, so.on_loss);
  recorder::Recorder& rec = engine.recorder();
  session::TlsFollower tls_follower(capture, false);
  if (so.tls_enabled()) engine.pipeline().add(tls_follower);
  recorder::EventLoop& loop = engine.loop();
  std::string reason = "stopped by signal";

  loop.watch_fd(sigfd, [&] {
    if (int sig = read_signal(sigfd)) {
      reason = std::string("stopped by signal ") + sigabbrev_np(sig);
      loop.stop();
    }
  });
  std::vector<bool> gone(cgroups.size(), false);
  uint64_t end = duration > 0 ? mono_ns() + uint64_t(duration * 1e9) : 0;
  std::cerr << "flightrec: watching " << paths.size() << " cgroup(s), session " << rec.session()
            << (duration > 0 ? "" : "; stop with Ctrl-C") << "\n";
  engine.run([&] {
    size_t alive = 0;
    for (size_t i = 0; i < cgroups.size(); ++i) {
      if (!gone[i] && !cgroups[i].exists()) {
        gone[i] = true;
        rec.note_cgroup_gone(cgroups[i].path());
      }
      alive += !gone[i];
    }
    if (engine.killed_by_loss()) {
      reason = "events were lost and --on-loss kill ended the session";
      loop.stop();
    } else if (alive == 0) {
      reason = "every watched cgroup is gone";
      loop.stop();
    } else if (end && mono_ns() >= end) {
      reason = "duration elapsed";
      loop.stop();
    }
  });
  engine.stop_watchdog();
  engine.end();
  rec.finish(0, reason);
  std::cerr << "flightrec: session " << rec.session() << " recorded " << rec.entries()
            << " entries (" << reason << ")\n";
  close(sigfd);
  return 0;
}

}  // namespace flightrec::cli
