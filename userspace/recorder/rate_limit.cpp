#include "recorder/rate_limit.h"

#include "events/syscall_table.h"

#include <set>
#include <string>
#include <vector>

namespace flightrec::recorder {

namespace {

// The calls a busy process makes by the million that change nothing the
// policy cares about: data moved on descriptors whose opening is recorded,
// memory, time, waiting, signals masks, identity reads. Anything that
// changes privileges, processes, files or the network is never summarised.
const std::set<std::string, std::less<>> kNoise = {
    "read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2", "lseek",
    "fstat", "mmap", "munmap", "mprotect", "mremap", "madvise", "brk", "futex", "futex_waitv", "futex_wait",
    "futex_wake", "sched_yield", "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid",
    "getpgrp", "getpgid", "getsid", "getgroups", "getresuid", "getresgid", "getcpu", "getrandom",
    "clock_gettime", "clock_getres", "gettimeofday", "time", "nanosleep", "clock_nanosleep", "poll", "ppoll",
    "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2", "rt_sigprocmask", "rt_sigreturn",
    "sigaltstack", "close", "dup", "dup2", "dup3", "fcntl", "getdents64", "getrusage", "times", "sysinfo",
    "sched_getaffinity", "set_robust_list", "rseq", "restart_syscall", "pipe", "pipe2", "eventfd2",
    "fsync", "fdatasync", "getcwd", "uname", "wait4", "waitid", "recvmsg", "splice", "tee", "sendfile",
    "copy_file_range", "membarrier"};

}  // namespace

bool RateLimiter::plain(const events::Entry& e) {
  if (e.type() != "syscall" || e.int_or("ret", -1) < 0 || e.get("blocked") || e.get("noreturn")) return false;
  // A call of the noise list with nothing read beyond its registers (no
  // string, no socket address: the table says so).
  const events::SyscallInfo* info = events::syscall_info(uint32_t(e.int_or("nr", -1)));
  return info && info->name && kNoise.count(std::string_view(info->name)) &&
         info->spec.str_arg[0] == FR_ARG_NONE && info->spec.str_arg[1] == FR_ARG_NONE &&
         info->spec.sockaddr_mode == FR_SA_NONE;
}

bool RateLimiter::roll(uint64_t ts) {
  if (window_start_ && ts >= window_start_ && ts - window_start_ < kWindowNs) return false;
  window_start_ = ts;
  kept_ = 0;
  return left_out_ > 0;
}

bool RateLimiter::admit(const events::Entry& e) {
  if (!plain(e)) return true;
  if (kept_ < per_second_) {
    ++kept_;
    return true;
  }
  uint64_t ts = uint64_t(e.int_or("ts_mono_ns"));
  if (!left_out_) first_ns_ = ts;
  last_ns_ = ts;
  ++left_out_;
  auto key = std::make_pair(e.int_or("pid"), e.string_or("name"));
  auto it = counts_.find(key);
  if (it != counts_.end()) ++it->second;
  else if (counts_.size() < kMaxKeys) counts_.emplace(std::move(key), 1);
  else ++other_;
  return false;
}

bool RateLimiter::add_summary(events::Entry& e) {
  if (!left_out_) return false;
  e.set("rule_id", "limits.record_rate");
  e.set("limit_per_second", per_second_);
  e.set("summarised", left_out_);
  e.set("first_mono_ns", first_ns_);
  e.set("last_mono_ns", last_ns_);
  std::vector<int64_t> pids, counts;
  std::vector<std::string> names;
  for (const auto& [key, n] : counts_) {
    pids.push_back(key.first);
    names.push_back(key.second);
    counts.push_back(n);
  }
  e.set("pids", std::move(pids));
  e.set("names", std::move(names));
  e.set("counts", std::move(counts));
  if (other_) e.set("other", other_);
  left_out_ = other_ = 0;
  counts_.clear();
  return true;
}

}  // namespace flightrec::recorder
