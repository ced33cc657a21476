#pragma once
// A lite session's syscall counts (docs/LITE.md): the kernel keeps them
// per (cgroup, syscall); what Capture::take_lite_counts() hands out for
// this session is added here, and each interval record() turns it into
// syscall_counts entries, one per cgroup that made calls, so a record says
// how often as well as what.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "probe/capture.h"
#include "recorder/recorder.h"

namespace flightrec::session {

class LiteCounter {
 public:
  // roots: the session's cgroup directories (ids are resolved to paths on
  // the file system they are on).
  LiteCounter(uint32_t session, const std::vector<std::string>& roots);
  ~LiteCounter();
  LiteCounter(const LiteCounter&) = delete;
  LiteCounter& operator=(const LiteCounter&) = delete;
  // Adds the counts of this session among `taken` (others are ignored).
  void add(const std::vector<probe::Capture::LiteCount>& taken);
  // Records what was added since the last record() and, when the kernel's
  // table overflowed, how many calls it could not count (uncounted: the
  // session's Capture::lite_uncounted()).
  void record(recorder::Recorder& rec, uint64_t uncounted);

 private:
  const std::string& path_of(uint64_t cgroup_id);  // "" when gone
  uint32_t session_;
  int root_fd_ = -1;  // on the cgroup v2 file system
  std::map<uint64_t, std::map<uint32_t, uint64_t>> pending_;  // cgroup -> nr -> calls
  std::map<uint64_t, std::string> paths_;                     // cgroup id -> path (or "")
  uint64_t uncounted_seen_ = 0;
  uint64_t last_ns_;
};

}  // namespace flightrec::session
