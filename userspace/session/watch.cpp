// flightrec watch: record the processes of cgroups that already exist,
// without confining them, until a signal, the duration, or every cgroup is gone.
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <memory>

#include "common/error.h"
#include "common/system.h"
#include "ledger/store.h"
#include "probe/features.h"
#include "recorder/recorder.h"
#include "sandbox/cgroup.h"
#include "session/engine.h"
#include "session/lite_counts.h"
#include "session/run.h"
#include "session/signals.h"
#include "session/llm_calls.h"
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
  std::vector<sandbox::Cgroup> cgroups;
  for (const auto& p : paths) cgroups.push_back(sandbox::Cgroup::open(p));
  // Before any thread exists, so that every thread inherits the mask and
  // SIGINT/SIGTERM arrive only through the signalfd.
  int sigfd = block_termination_signals();
  ledger::Store store(target.db, ledger::Store::Mode::Write);

  probe::CaptureOptions copts = plan.capture;
  for (const auto& cg : cgroups) copts.session_cgroups.push_back(cg.id());
  if (target.lite) {
    if (copts.entry_times) throw PlanError("--mode lite has no entry times (it hooks the syscalls' returns only)");
    copts.session_lite = copts.lite = true;
    copts.raw_syscalls = false;
  }
  Engine engine(copts);
  probe::Capture& capture = *engine.capture();
  // The tasks already there stay recorded wherever they are moved, even
  // before their first syscall.
  size_t tasks_at_start = capture.track_existing(capture.first_session(), paths);
  std::vector<std::string> tls_errors;
  if (copts.tls) {
    tls_errors = attach_system_tls(capture);
    for (auto& err : attach_mapped_tls(capture, paths)) tls_errors.push_back(err);
  }
  recorder::SessionMeta meta = plan.meta;
  meta.mode = "watch";
  meta.cgroups = paths;
  meta.tasks_at_start = tasks_at_start;
  describe_capture(capture, copts, meta, target.lite);
  if (target.lite) meta.counts_interval_ms = target.counts_interval_ms;
  meta.key = key.get();
  std::vector<sandbox::Cgroup*> watched;
  for (auto& cg : cgroups) watched.push_back(&cg);
  engine.begin(store, meta, tls_errors, watched, plan.on_loss);
  recorder::Recorder& rec = engine.recorder();
  TlsFollower tls_follower(capture, false);
  if (copts.tls) engine.pipeline().add(tls_follower);
  LlmCalls llm_calls;  // model calls and tool calls in the TLS plaintext
  if (copts.tls && meta.agent_turns) engine.pipeline().add(llm_calls);
  recorder::EventLoop& loop = engine.loop();
  std::string reason = "stopped by signal";

  loop.watch_fd(sigfd, [&] {
    if (int sig = read_signal(sigfd)) {
      reason = std::string("stopped by signal ") + sigabbrev_np(sig);
      loop.stop();
    }
  });
  std::unique_ptr<LiteCounter> counts;
  if (target.lite) counts = std::make_unique<LiteCounter>(capture.first_session(), paths);
  uint64_t next_counts = mono_ns() + target.counts_interval_ms * 1'000'000ull;
  auto seal_counts = [&] {
    counts->add(capture.take_lite_counts());
    counts->record(rec, capture.lite_uncounted(capture.first_session()));
  };
  std::vector<bool> gone(cgroups.size(), false);
  uint64_t end = duration > 0 ? mono_ns() + uint64_t(duration * 1e9) : 0;
  // The task count can stay above zero with no task of the session left
  // (a count a race added twice): once a second, a look at every task
  // on the host settles it.
  uint64_t next_look = 0;
  auto no_task_left = [&] {
    if (mono_ns() < next_look) return false;
    next_look = mono_ns() + 1'000'000'000ull;
    return !capture.session_has_tasks(capture.first_session());
  };
  std::cerr << "flightrec: watching " << paths.size() << " cgroup(s), session " << rec.session()
            << (duration > 0 ? "" : "; stop with Ctrl-C") << "\n";
  engine.run([&] {
    if (counts && mono_ns() >= next_counts) {
      next_counts = mono_ns() + target.counts_interval_ms * 1'000'000ull;
      seal_counts();
    }
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
    } else if (alive == 0 && (capture.session_tasks(capture.first_session()) <= 0 || no_task_left())) {
      // A task moved out of them keeps the session going until it exits.
      reason = "every watched cgroup is gone";
      loop.stop();
    } else if (end && mono_ns() >= end) {
      reason = "duration elapsed";
      loop.stop();
    }
  });
  engine.stop_watchdog();
  engine.end();
  engine.pipeline().release_held();
  if (copts.tls) {  // hellos of probed programs no plaintext followed
    Emitted tail = engine.pipeline().emitted();
    tls_follower.finish(tail);
    engine.pipeline().write(tail);
  }
  if (copts.tls && meta.agent_turns) {
    Emitted tail = engine.pipeline().emitted();
    llm_calls.finish(tail);
    engine.pipeline().write(tail);
  }
  if (counts) seal_counts();
  rec.finish(0, reason);
  std::cerr << "flightrec: session " << rec.session() << " recorded " << rec.entries()
            << " entries (" << reason << ")\n";
  close(sigfd);
}

}  // namespace flightrec::session
