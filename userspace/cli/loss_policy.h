#pragma once
// --on-loss: what happens when the kernel cannot hand over events fast
// enough. continue: record the gap. freeze: pause the observed cgroups
// while the ring buffer is over half full (and after any loss) until the
// collector has drained it. kill: end the session at the first loss.
#include <string>
#include <vector>

#include "probe/capture.h"
#include "recorder/recorder.h"
#include "sandbox/cgroup.h"

namespace flightrec::cli {

class LossPolicy {
 public:
  LossPolicy(std::string mode, probe::Capture& capture, recorder::Recorder& recorder,
             std::vector<sandbox::Cgroup*> cgroups);
  ~LossPolicy();  // never leaves a cgroup frozen
  // After each read of the ring buffer. Returns true when the session must end.
  bool check();
  bool killed() const { return killed_; }
  // Before the session ends: resume whatever is frozen, in the record.
  void release();

 private:
  void set_frozen(bool frozen, const std::string& why);
  std::string mode_;
  probe::Capture& capture_;
  recorder::Recorder& recorder_;
  std::vector<sandbox::Cgroup*> cgroups_;
  bool frozen_ = false;
  bool killed_ = false;
  uint64_t lost_seen_ = 0;
};

}  // namespace flightrec::cli
