#pragma once
// What the session changed in the file system: the overlay's upper layer
// compared with the lower one. Whiteouts (0/0 character devices) are
// deletions; a file in both is a modification when its bytes or mode
// differ (a copy-up alone, e.g. open for writing without writing, is not).
#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <optional>
#include <string>
#include <vector>

namespace flightrec::sandbox {

struct FileChange {
  std::string change;    // created | modified | deleted
  std::string path;      // as the sandbox saw it
  std::string kind;      // file | dir | symlink | other
  uint64_t size = 0;     // after (deleted: before)
  uint32_t mode = 0;     // after (deleted: before)
  std::string sha256_before, sha256_after;  // regular files only
  std::string link_target;
};

// upper: an overlay's upper directory; lower_root: its lower layer on the
// host. Both are read below their roots only, following no symlink on any
// component and crossing into no other mount (the sandbox made or named
// what is in them: flightrec must not act on it as host root); prefix: where the overlay is mounted in the sandbox
// ("" for its root). At most max_changes are returned; *more is set to how
// many were left out (and to those that could not be read).
std::vector<FileChange> diff_layers(const std::string& upper, const std::string& lower_root,
                                    const std::string& prefix, size_t max_changes, size_t* more);

// One path ("/a/b", relative to the overlay's mount point), e.g. when a
// file written to is closed: its change, or nothing when it is not in the
// upper layer or unchanged.
std::optional<FileChange> diff_path(const std::string& upper, const std::string& lower_root,
                                    const std::string& prefix, const std::string& rel);

// Diffs of single paths (files written to and then closed), made on a
// thread of their own: hashing a large file must never hold up the thread
// that drains the ring buffer. Results are taken on the caller's thread
// when fd() is readable.
class PathDiffer {
 public:
  using Diff = std::function<std::optional<FileChange>(const std::string&)>;
  static constexpr size_t kMaxQueued = 4096;

  explicit PathDiffer(Diff diff);
  ~PathDiffer();  // after the paths already queued
  PathDiffer(const PathDiffer&) = delete;
  PathDiffer& operator=(const PathDiffer&) = delete;

  // False when kMaxQueued paths wait (the end-of-session diff has them).
  bool submit(std::string path);
  int fd() const { return event_fd_; }
  std::vector<FileChange> take();
  void wait_idle();  // every submitted path diffed

 private:
  void run();
  Diff diff_;
  int event_fd_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::vector<FileChange> done_;
  bool busy_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace flightrec::sandbox
