#pragma once
// --on-loss: what happens when the kernel cannot hand over events fast
// enough. backpressure (run's default; "freeze" is its old name): pause
// the observed cgroups while the ring buffer is over half full (and after
// any loss) until the collector has drained it to a tenth, so the command
// slows down instead of leaving gaps, as auditd's backlog wait does.
// continue: record the gap. kill: end the session at the first loss. Any
// loss is also a warning on stderr. Decided on the watchdog's thread from
// the kernel's own counters, so a flood that keeps the recording thread
// busy cannot delay it; the kernel wakes that thread when the ring crosses
// kFreezeAbove (CaptureOptions::highwater_bytes), not just every tick.
// Past three quarters full, the kernel itself stops each process that
// makes a record (SessionSpec::brake): the freezer is a thread that must
// be scheduled first, and big records from many threads can fill the
// rest of the ring before it is. Those are continued with the thaw.
#include <atomic>
#include <string>
#include <vector>

#include "recorder/watchdog.h"
#include "probe/source.h"
#include "recorder/recorder.h"
#include "sandbox/cgroup.h"

namespace flightrec::session {

// Backpressure pauses the session while the ring buffer is this full.
constexpr double kFreezeAbove = 0.5;

class LossPolicy {
 public:
  // Adds its check to the watchdog; freeze and thaw entries are posted
  // there for the recording thread.
  LossPolicy(std::string mode, probe::Source& capture, recorder::Recorder& recorder,
             std::vector<sandbox::Cgroup*> cgroups, recorder::Watchdog& watchdog);
  ~LossPolicy();  // never leaves a cgroup frozen
  bool killed() const { return killed_; }
  // Once the watchdog has stopped, before the session ends: resume
  // whatever is frozen, in the record.
  void release();

 private:
  void check();  // on the watchdog's thread
  void set_frozen(bool frozen, std::string why);
  // Continues what the kernel's brake stopped (probe::Source): for the
  // record, what was continued ("; N processes ..."), or "".
  std::string continue_braked();
  std::string mode_;
  probe::Source& capture_;
  recorder::Recorder& recorder_;
  std::vector<sandbox::Cgroup*> cgroups_;
  recorder::Watchdog& watchdog_;
  bool frozen_ = false;                 // the watchdog's thread's, until release()
  std::atomic<bool> killed_ = false;
  uint64_t lost_seen_ = 0;
  uint64_t warned_ns_ = 0, unwarned_ = 0;  // stderr: at most one line a second
};

}  // namespace flightrec::session
