// flightrec watch: record the processes of cgroups that already exist,
// without confining them, until a signal, the duration, or every cgroup is gone.
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <memory>

#include "common/error.h"
#include "common/system.h"
#include "probe/features.h"
#include "sandbox/cgroup.h"
#include "session/cgroup_session.h"
#include "session/engine.h"
#include "session/policy_observer.h"
#include "session/run.h"
#include "session/signals.h"
#include "session/tls_attach.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::session {

void watch(Plan plan, const WatchTarget& target) {
  const auto& paths = target.cgroups;
  if (paths.empty() || paths.size() > FR_SESSION_CGROUPS)
    throw PlanError("watch takes 1 to " + std::to_string(FR_SESSION_CGROUPS) + " --cgroup paths");
  if (!(target.duration_s >= 0) || target.duration_s > 1e9) throw PlanError("--duration must be >= 0 seconds");
  double duration = target.duration_s;
  probe::require_recording_features();
  auto key = load_key(target.key_dir);
  std::shared_ptr<const policy::Policy> judged_by;
  if (!target.policy.empty()) {
    try {
      judged_by = std::make_shared<const policy::Policy>(load_audit_policy(target.policy));
    } catch (const policy::PolicyError& e) {
      throw PlanError(std::string("--policy: ") + e.what());
    }
  }
  std::vector<sandbox::Cgroup> cgroups;
  for (const auto& p : paths) cgroups.push_back(sandbox::Cgroup::open(p));
  // Before any thread exists, so that every thread inherits the mask and
  // SIGINT/SIGTERM arrive only through the signalfd.
  int sigfd = block_termination_signals();

  probe::CaptureOptions copts = plan.capture;
  for (const auto& cg : cgroups) copts.session_cgroups.push_back(cg.id());
  if (target.lite) {
    if (copts.entry_times) throw PlanError("--mode lite has no entry times (it hooks the syscalls' returns only)");
    copts.session_lite = copts.lite = true;
    copts.raw_syscalls = false;
  }
  // Before the engine: its watchdog, which notes into the session's
  // record, stops before the record goes, however watch ends.
  std::unique_ptr<CgroupSession> session;
  Engine engine(copts);
  probe::Capture& capture = *engine.capture();
  // The tasks already there stay recorded wherever they are moved, even
  // before their first syscall.
  size_t tasks_at_start = capture.track_existing(capture.first_session(), paths);
  std::vector<std::string> tls_errors;
  std::unique_ptr<EarlyTlsAttach> early_tls;
  if (copts.tls) {
    early_tls = std::make_unique<EarlyTlsAttach>(capture, true, true);
    tls_errors = attach_system_tls(capture.tls());
    for (auto& err : attach_mapped_tls(capture.tls(), paths)) tls_errors.push_back(err);
  }
  recorder::SessionMeta meta = plan.meta;
  meta.mode = "watch";
  meta.cgroups = paths;
  meta.tasks_at_start = tasks_at_start;
  describe_capture(capture, copts, meta, target.lite);
  if (target.lite) meta.counts_interval_ms = target.counts_interval_ms;
  meta.key = key.get();
  std::vector<const sandbox::Cgroup*> recorded;
  std::vector<sandbox::Cgroup*> paused;
  for (auto& cg : cgroups) {
    recorded.push_back(&cg);
    paused.push_back(&cg);
  }
  CgroupSessionSpec spec;
  spec.db = target.db;
  spec.meta = meta;
  spec.notes = tls_errors;
  spec.exclude_pid = getpid();
  spec.policy = judged_by;
  if (copts.tls) {
    spec.tls_follower = std::make_shared<TlsFollower>(capture.tls(), false);  // the host's view: no sandbox here
    spec.tls_follower->say_holds_of(early_tls.get());
  }
  session = std::make_unique<CgroupSession>(capture, capture.first_session(), recorded, std::move(spec));
  engine.begin(*session, paused, plan.on_loss);
  recorder::Recorder& rec = session->recorder();
  recorder::EventLoop& loop = engine.loop();
  std::string reason = "stopped by signal";

  loop.watch_fd(sigfd, [&] {
    if (int sig = read_signal(sigfd)) {
      reason = std::string("stopped by signal ") + sigabbrev_np(sig);
      loop.stop();
    }
  });
  uint64_t next_counts = mono_ns() + target.counts_interval_ms * 1'000'000ull;
  uint64_t end = duration > 0 ? mono_ns() + uint64_t(duration * 1e9) : 0;
  std::cerr << "flightrec: watching " << paths.size() << " cgroup(s), session " << rec.session()
            << (duration > 0 ? "" : "; stop with Ctrl-C") << "\n";
  engine.run([&] {
    if (target.lite && mono_ns() >= next_counts) {
      next_counts = mono_ns() + target.counts_interval_ms * 1'000'000ull;
      session->add_counts(capture.take_lite_counts());
      session->record_counts();
    }
    if (engine.killed_by_loss()) {
      reason = "events were lost and --on-loss kill ended the session";
      loop.stop();
    } else if (session->ended()) {
      reason = "every watched cgroup is gone";
      loop.stop();
    } else if (end && mono_ns() >= end) {
      reason = "duration elapsed";
      loop.stop();
    }
  });
  engine.stop_watchdog();
  engine.end();
  if (target.lite) session->add_counts(capture.take_lite_counts());
  session->finish(reason);
  std::cerr << "flightrec: session " << rec.session() << " recorded " << rec.entries()
            << " entries (" << reason << ")\n";
  close(sigfd);
}

}  // namespace flightrec::session
