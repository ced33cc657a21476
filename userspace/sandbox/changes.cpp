#include "sandbox/changes.h"

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <utility>

#include "common/error.h"
#include "sandbox/layer.h"

namespace flightrec::sandbox {
namespace {

std::string kind_of(mode_t m) {
  return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

// A non-directory in the upper layer against the same path in the lower.
std::optional<FileChange> compare(const Layer& upper, const Layer& lower, const std::string& rel,
                                  const std::string& prefix, const struct stat& su) {
  struct stat sl;
  bool in_lower = lower.stat_at(rel, &sl);
  FileChange c{in_lower ? "modified" : "created", prefix + rel, kind_of(su.st_mode), uint64_t(su.st_size),
               su.st_mode & 07777, "", "", ""};
  if (S_ISREG(su.st_mode)) {
    c.sha256_after = upper.sha256(rel);
    if (in_lower && S_ISREG(sl.st_mode)) {
      c.sha256_before = lower.sha256(rel);
      if (c.sha256_before == c.sha256_after && (sl.st_mode & 07777) == (su.st_mode & 07777)) return std::nullopt;
    }
  } else if (S_ISLNK(su.st_mode)) {
    c.link_target = upper.link(rel);
    if (in_lower && S_ISLNK(sl.st_mode) && lower.link(rel) == c.link_target) return std::nullopt;
  }
  return c;
}

}  // namespace

PathDiffer::PathDiffer(Diff diff) : diff_(std::move(diff)) {
  event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0) throw Error(errno_message("eventfd", errno));
  thread_ = std::thread([this] { run(); });
}

PathDiffer::~PathDiffer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  close(event_fd_);
}

bool PathDiffer::submit(std::string path) {
  std::lock_guard lock(mu_);
  if (queue_.size() >= kMaxQueued) return false;
  queue_.push_back(std::move(path));
  cv_.notify_all();
  return true;
}

std::vector<FileChange> PathDiffer::take() {
  uint64_t count;
  (void)!read(event_fd_, &count, sizeof(count));
  std::lock_guard lock(mu_);
  return std::exchange(done_, {});
}

void PathDiffer::wait_idle() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void PathDiffer::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, with nothing left
    std::string path = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::optional<FileChange> change = diff_(path);
    lock.lock();
    busy_ = false;
    if (change) {
      done_.push_back(std::move(*change));
      uint64_t one = 1;
      (void)!write(event_fd_, &one, sizeof(one));
    }
    cv_.notify_all();
  }
}

std::optional<FileChange> diff_path(const std::string& upper_root, const std::string& lower_root,
                                    const std::string& prefix, const std::string& rel) {
  if (rel.empty() || rel[0] != '/') return std::nullopt;
  Layer upper(upper_root);
  struct stat su;
  if (!upper.stat_at(rel, &su) || S_ISDIR(su.st_mode) || S_ISCHR(su.st_mode)) return std::nullopt;
  Layer lower(lower_root);
  return compare(upper, lower, rel, prefix, su);
}

std::vector<FileChange> diff_layers(const std::string& upper_root, const std::string& lower_root,
                                    const std::string& prefix, size_t max_changes, size_t* more) {
  Layer upper(upper_root), lower(lower_root);
  std::vector<FileChange> out;
  size_t left_out = 0;
  auto add = [&](FileChange c) {
    if (out.size() < max_changes) out.push_back(std::move(c));
    else ++left_out;
  };
  // Everything below a deleted or replaced lower directory is gone too.
  auto deleted_tree = [&](const std::string& rel) {
    std::vector<std::string> stack{rel};
    while (!stack.empty()) {
      std::string r = stack.back();
      stack.pop_back();
      struct stat st;
      if (!lower.stat_at(r, &st)) continue;
      FileChange c{"deleted", prefix + r, kind_of(st.st_mode), S_ISDIR(st.st_mode) ? 0 : uint64_t(st.st_size),
                   st.st_mode & 07777, "", "", ""};
      if (S_ISREG(st.st_mode)) c.sha256_before = lower.sha256(r);
      if (S_ISDIR(st.st_mode))
        for (const auto& n : lower.list(r)) stack.push_back(r + "/" + n);
      add(std::move(c));
    }
  };
  // Iterative, so depth costs memory, not stack.
  std::vector<std::string> dirs{""};
  while (!dirs.empty()) {
    std::string rel = dirs.back();
    dirs.pop_back();
    for (const auto& name : upper.list(rel)) {
      std::string r = rel + "/" + name;
      struct stat su;
      if (!upper.stat_at(r, &su)) {
        ++left_out;  // e.g. a path longer than PATH_MAX
        continue;
      }
      if (S_ISCHR(su.st_mode) && su.st_rdev == makedev(0, 0)) {  // whiteout
        deleted_tree(r);
        continue;
      }
      if (S_ISDIR(su.st_mode)) {
        struct stat sl;
        bool lower_dir = lower.stat_at(r, &sl) && S_ISDIR(sl.st_mode);
        if (lower_dir && upper.opaque_dir(r))  // replaced by an empty directory
          for (const auto& n : lower.list(r)) deleted_tree(r + "/" + n);
        if (!lower_dir || (sl.st_mode & 07777) != (su.st_mode & 07777))
          add(FileChange{lower_dir ? "modified" : "created", prefix + r, "dir", 0, su.st_mode & 07777, "", "", ""});
        dirs.push_back(r);
        continue;
      }
      if (auto c = compare(upper, lower, r, prefix, su)) add(std::move(*c));
    }
  }
  if (more) *more = left_out;
  return out;
}

}  // namespace flightrec::sandbox
