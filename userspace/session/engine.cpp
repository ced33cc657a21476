#include "session/engine.h"

namespace flightrec::session {

Engine::Engine(probe::CaptureOptions copts) : brake_(copts.highwater_bytes != 0) {
  copts.session_slots = 2;  // its one session, number 1
  capture_ = std::make_unique<probe::Capture>(copts, [this](const void* data, size_t size) {
    // Only the first session is this engine's; a record of any other
    // (there is none in one-session captures) is not. One too short to
    // say is the pipeline's to report.
    if (size >= sizeof(fr_header) && static_cast<const fr_header*>(data)->session != capture_->first_session()) return;
    if (cgroup_session_)
      cgroup_session_->on_record(data, size);
    else
      pipeline_->on_record(data, size);
  });
  source_ = capture_.get();
  tls_ = &capture_->tls();
}

Engine::Engine(std::unique_ptr<HandedSession> handed) : handed_(std::move(handed)) {
  handed_->set_handler([this](const void* data, size_t size) { pipeline_->on_record(data, size); });
  source_ = handed_.get();
  tls_ = handed_.get();
}

void Engine::open_session(const sandbox::Cgroup& cgroup) {
  if (!capture_) return;
  // The brake goes with the freezer: both are backpressure (highwater_bytes).
  uint32_t session = capture_->open_first_session({cgroup.id()}, {.brake = brake_});
  capture_->track_existing(session, {cgroup.path()});
}

Engine::~Engine() {
  if (watchdog_) watchdog_->stop();
}

void Engine::begin(ledger::Store& store, recorder::SessionMeta meta, const std::vector<std::string>& errors,
                   std::vector<sandbox::Cgroup*> paused, const std::string& on_loss) {
  own_recorder_ = std::make_unique<recorder::Recorder>(store, meta);
  recorder_ = own_recorder_.get();
  for (const auto& err : errors) recorder_->note("error", err);
  own_pipeline_ = std::make_unique<Pipeline>(*recorder_);
  pipeline_ = own_pipeline_.get();
  begin_loop(std::move(paused), on_loss);
}

void Engine::begin(CgroupSession& session, std::vector<sandbox::Cgroup*> paused, const std::string& on_loss) {
  cgroup_session_ = &session;
  recorder_ = &session.recorder();
  pipeline_ = &session.pipeline();
  begin_loop(std::move(paused), on_loss);
}

void Engine::begin_loop(std::vector<sandbox::Cgroup*> paused, const std::string& on_loss) {
  loop_ = std::make_unique<recorder::EventLoop>(*source_, *recorder_);
  // Loss and the circuit breakers act from the watchdog's thread, on time
  // whatever the recording thread is busy with.
  auto* rec = recorder_;
  watchdog_ = std::make_unique<recorder::Watchdog>(std::chrono::milliseconds(10),
                                                   [rec](const std::string& e) { rec->note("error", e); });
  watchdog_->wake_on(source_->ring_fd());  // the high-water mark's wake-up (CaptureOptions::highwater_bytes)
  loss_ = std::make_unique<LossPolicy>(on_loss, *source_, *recorder_, std::move(paused), *watchdog_);
  loop_->watch_fd(watchdog_->fd(), [this] { watchdog_->run_posted(); });
}

void Engine::run(const std::function<void()>& tick) {
  watchdog_->start();
  loop_->run(tick);
}

void Engine::stop_watchdog() {
  watchdog_->stop();
  watchdog_->run_posted();
}

void Engine::end() {
  loop_->drain();
  source_->detach();
  loop_->drain();
  loss_->release();
}

void describe_capture(const probe::CaptureTraits& traits, const probe::CaptureOptions& copts,
                      recorder::SessionMeta& meta) {
  meta.capture = traits.attached;
  meta.lite = false;
  meta.capture_refused = traits.refused;
  if (traits.path_rules) {
    meta.lsm_hidden = copts.hidden.listed;
    meta.lsm_exec = copts.exec.listed;
  }
}

void describe_capture(const probe::Capture& capture, const probe::CaptureOptions& copts, recorder::SessionMeta& meta,
                      bool lite, bool entry_times) {
  if (!lite) return describe_capture(capture.traits(entry_times), copts, meta);
  meta.capture = capture.attached(lite);
  meta.lite = lite;
  if (lite) meta.capture_absent = capture.lite_absent();
  meta.capture_refused = capture.refused();
  if (capture.enforces_path_rules()) {
    meta.lsm_hidden = copts.hidden.listed;
    meta.lsm_exec = copts.exec.listed;
  }
}

}  // namespace flightrec::session
