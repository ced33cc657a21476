#pragma once
// What every recording session runs, from loaded programs to its sealed
// end: the capture, the recorder and its pipeline, the event loop, the
// watchdog and the loss policy. `run` and `watch` (and a resident service)
// add around it what their sessions need: a sandbox, observers, file
// descriptors to watch, how the session ends.
//
//   Engine e(copts);              programs loaded and attached (or Engine e(handed):
//                                 flightrecd's, see session/handed.h)
//   e.open_session(cgroup);       (run: once its first process waits for go)
//   ... attach TLS probes ...     (the genesis entry lists them)
//   e.begin(store, meta, ...);    genesis entry; pipeline, loop, watchdog ready
//                                 (or e.begin(cgroup_session, ...): watch's record,
//                                 made by session/cgroup_session.h)
//   e.pipeline().add(observer);   e.loop().watch_fd(fd, ...); e.watchdog().add(...)
//   e.run(tick);                  until e.loop().stop()
//   e.end();                      watchdog stopped, programs detached, ring drained
//   e.recorder().finish(...)      session_end, end checkpoint
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ledger/store.h"
#include "probe/capture.h"
#include "recorder/event_loop.h"
#include "recorder/recorder.h"
#include "recorder/watchdog.h"
#include "sandbox/cgroup.h"
#include "session/cgroup_session.h"
#include "session/handed.h"
#include "session/loss_policy.h"
#include "session/pipeline.h"

namespace flightrec::session {

class Engine {
 public:
  // Loads and attaches the programs; records are read only once begin() has run.
  explicit Engine(probe::CaptureOptions copts);
  // Records a session flightrecd's programs feed.
  explicit Engine(std::unique_ptr<HandedSession> handed);
  ~Engine();  // stops the watchdog first: its checks use what goes away after
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The programs loaded here (nullptr for a handed session).
  probe::Capture* capture() { return capture_.get(); }
  HandedSession* handed() { return handed_.get(); }
  // The session on the run's cgroup: opened here on the engine's own
  // capture (from now on what is in the cgroup is recorded), with the
  // processes already there given state as if they had joined (their next
  // return, whose entry was not seen, is not recorded); a handed session's
  // daemon did both already.
  void open_session(const sandbox::Cgroup& cgroup);
  probe::Source& source() { return *source_; }
  probe::TlsProbes& tls_probes() { return *tls_; }

  // Starts the session in the record: its genesis entry says meta (plus
  // what the capture attached), then `notes` as error entries. `paused` are
  // the cgroups --on-loss backpressure freezes.
  void begin(ledger::Store& store, recorder::SessionMeta meta, const std::vector<std::string>& errors,
             std::vector<sandbox::Cgroup*> paused, const std::string& on_loss);
  // The same around a record CgroupSession made (genesis written there);
  // the capture's records go to it. It outlives the engine's use of it.
  void begin(CgroupSession& session, std::vector<sandbox::Cgroup*> paused, const std::string& on_loss);

  recorder::Recorder& recorder() { return *recorder_; }
  Pipeline& pipeline() { return *pipeline_; }
  recorder::EventLoop& loop() { return *loop_; }
  recorder::Watchdog& watchdog() { return *watchdog_; }
  bool killed_by_loss() const { return loss_ && loss_->killed(); }

  // Starts the watchdog and runs the loop until loop().stop(); tick runs
  // about every 50 ms.
  void run(const std::function<void()>& tick);
  // Stops the watchdog (and runs what it posted); the session's checks are over.
  void stop_watchdog();
  // Detaches the programs and puts everything the kernel produced into the
  // record; resumes whatever backpressure froze, in the record.
  void end();

 private:
  std::unique_ptr<probe::Capture> capture_;
  bool brake_ = false;  // its session under backpressure's emergency brake
  std::unique_ptr<HandedSession> handed_;
  probe::Source* source_ = nullptr;
  probe::TlsProbes* tls_ = nullptr;
  void begin_loop(std::vector<sandbox::Cgroup*> paused, const std::string& on_loss);
  std::unique_ptr<recorder::Recorder> own_recorder_;  // begin(store, ...)'s
  std::unique_ptr<Pipeline> own_pipeline_;
  recorder::Recorder* recorder_ = nullptr;
  Pipeline* pipeline_ = nullptr;
  CgroupSession* cgroup_session_ = nullptr;  // begin(session, ...)'s
  std::unique_ptr<recorder::EventLoop> loop_;
  std::unique_ptr<recorder::Watchdog> watchdog_;
  std::unique_ptr<LossPolicy> loss_;
};

// What the capture attached for a session of this kind (lite; full with
// entry times or without), what the kernel refused, and the path rules
// lsm/file_open enforces (if it does), for the genesis entry.
void describe_capture(const probe::Capture& capture, const probe::CaptureOptions& copts, recorder::SessionMeta& meta,
                      bool lite = false, bool entry_times = true);
// The same for a full session, from what the programs are.
void describe_capture(const probe::CaptureTraits& traits, const probe::CaptureOptions& copts,
                      recorder::SessionMeta& meta);

}  // namespace flightrec::session
