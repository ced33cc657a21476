#pragma once
// The per-session record rate limit (a policy's limits.record_rate): past
// N plain syscall entries in one second of kernel time, further ones are
// counted instead of stored, and a summary entry says, per process and
// syscall, how many were left out. Plain: a successful call from a fixed
// list of noise (read, write, futex, mmap, getppid, clock_gettime...) that
// names no path and no address. Every other call, failures, blocked calls,
// process and file changes, TLS and violations are always recorded in
// full, so a flood of noise cannot hide an act; limits.record_size stays
// the hard cap.
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "events/entry.h"

namespace flightrec::recorder {

class RateLimiter {
 public:
  static constexpr uint64_t kWindowNs = 1'000'000'000ull;
  static constexpr size_t kMaxKeys = 1024;  // (pid, syscall) pairs per summary; the rest count as "other"

  explicit RateLimiter(uint64_t per_second) : per_second_(per_second) {}

  // Whether e may be left out when over the limit.
  static bool plain(const events::Entry& e);
  // Starts a new window when ts_mono_ns is past the current one. True when
  // entries were left out so far: write their summary (add_summary) first.
  bool roll(uint64_t ts_mono_ns);
  // True: store e. False: e was counted, to be summarised.
  bool admit(const events::Entry& e);
  // Adds what was left out since the last summary to e (an entry of
  // flightrec's own, type "summary") and starts counting afresh; false
  // when nothing was left out.
  bool add_summary(events::Entry& e);

 private:
  uint64_t per_second_;
  uint64_t window_start_ = 0, kept_ = 0, left_out_ = 0, other_ = 0;
  uint64_t first_ns_ = 0, last_ns_ = 0;  // of the entries left out
  std::map<std::pair<int64_t, std::string>, int64_t> counts_;
};

}  // namespace flightrec::recorder
