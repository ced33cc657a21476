#pragma once
// What the session changed in the file system: the overlay's upper layer
// compared with the lower one. Whiteouts (0/0 character devices) are
// deletions; a file in both is a modification when its bytes or mode
// differ (a copy-up alone, e.g. open for writing without writing, is not).
#include <sys/types.h>

#include <cstdint>
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
// host, read without following symlinks or crossing into other mounts (as
// the overlay saw it); prefix: where the overlay is mounted in the sandbox
// ("" for its root). At most max_changes are returned; *more is set to how
// many were left out (and to those that could not be read).
std::vector<FileChange> diff_layers(const std::string& upper, const std::string& lower_root,
                                    const std::string& prefix, size_t max_changes, size_t* more);

// One path ("/a/b", relative to the overlay's mount point), e.g. when a
// file written to is closed: its change, or nothing when it is not in the
// upper layer or unchanged.
std::optional<FileChange> diff_path(const std::string& upper, const std::string& lower_root,
                                    const std::string& prefix, const std::string& rel);

std::string sha256_file(const std::string& path);  // "" if unreadable
std::string sha256_fd(int fd);                     // reads to the end; "" on error

}  // namespace flightrec::sandbox
