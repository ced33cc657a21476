#include "session/lite_counts.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "common/system.h"
#include "events/syscall_table.h"

namespace flightrec::session {

LiteCounter::LiteCounter(uint32_t session, const std::vector<std::string>& roots)
    : session_(session), last_ns_(mono_ns()) {
  for (const auto& root : roots) {
    struct stat st {};
    if (stat(root.c_str(), &st) == 0) paths_[uint64_t(st.st_ino)] = root;  // cgroup v2: the id
    if (root_fd_ < 0) root_fd_ = open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  }
}

LiteCounter::~LiteCounter() {
  if (root_fd_ >= 0) close(root_fd_);
}

const std::string& LiteCounter::path_of(uint64_t cgroup_id) {
  if (auto it = paths_.find(cgroup_id); it != paths_.end()) return it->second;
  if (paths_.size() >= 65536) paths_.clear();  // a session that makes cgroups without end
  // Kernfs file handles are the cgroup's id: the directory is opened by it
  // (no walk of a tree the session may have made huge) and named by the
  // kernel. A cgroup removed since is gone (ESTALE): no path.
  std::string path;
  alignas(file_handle) unsigned char buf[sizeof(file_handle) + sizeof(uint64_t)] = {};
  auto* handle = reinterpret_cast<file_handle*>(buf);
  handle->handle_bytes = sizeof(uint64_t);
  handle->handle_type = 0xfe;  // FILEID_KERNFS
  std::memcpy(handle->f_handle, &cgroup_id, sizeof(cgroup_id));
  int fd = root_fd_ >= 0 ? open_by_handle_at(root_fd_, handle, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
  if (fd >= 0) {
    char target[4096];
    ssize_t n = readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), target, sizeof(target));
    if (n > 0 && size_t(n) < sizeof(target)) path.assign(target, size_t(n));
    close(fd);
  }
  return paths_[cgroup_id] = path;
}

void LiteCounter::add(const std::vector<probe::Capture::LiteCount>& taken) {
  for (const auto& c : taken)
    if (c.session == session_) pending_[c.cgroup_id][c.nr] += c.calls;
}

void LiteCounter::record(recorder::Recorder& rec, uint64_t uncounted) {
  uint64_t now = mono_ns();
  int64_t interval_ms = int64_t((now - last_ns_) / 1'000'000);
  last_ns_ = now;
  for (const auto& [cgroup, calls] : pending_) {
    std::vector<std::string> names;
    std::vector<int64_t> numbers;
    for (const auto& [nr, n] : calls) {
      const auto* info = events::syscall_info(nr);
      names.push_back(info && info->name ? info->name : "syscall_" + std::to_string(nr));
      numbers.push_back(int64_t(n));
    }
    events::Entry e = rec.own_entry("syscall_counts");
    e.set("cgroup_id", cgroup);
    if (const std::string& path = path_of(cgroup); !path.empty()) e.set_bytes("cgroup", path);
    e.set("interval_ms", interval_ms);
    e.set("syscalls", std::move(names));
    e.set("calls", std::move(numbers));
    rec.record_own(e);
  }
  pending_.clear();
  if (uncounted > uncounted_seen_) {
    // The kernel's table was full: these calls are in no count above.
    events::Entry e = rec.own_entry("syscall_counts_lost");
    e.set("calls", uncounted - uncounted_seen_);
    rec.record_own(e);
    uncounted_seen_ = uncounted;
  }
}

}  // namespace flightrec::session
