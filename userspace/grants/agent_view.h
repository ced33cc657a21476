#pragma once
// File calls done on an agent thread's behalf, as the kernel would resolve
// them for it: in its root (chroot to /proc/TID/root), from its working
// directory or directory descriptor, with its file-system ids and umask.
// The supervisor decides on the directory a path resolves to (an open
// descriptor, never a string again) and then acts on that descriptor, so
// a thread that changes the path's memory or swaps a symlink afterwards
// changes nothing. Single-threaded: the supervisor process is.
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace flightrec::grants {

// A path's last component and the directory it is in, resolved.
struct Place {
  int dir_fd = -1;      // O_PATH directory
  std::string leaf;     // "." when the path names the directory itself
};

class AgentView {
 public:
  AgentView();  // holds the host root and /proc
  ~AgentView();
  AgentView(const AgentView&) = delete;
  AgentView& operator=(const AgentView&) = delete;

  // Takes thread tid's root, cwd, ids and umask; 0 or an errno. The caller
  // checks afterwards that the notification is still valid (the tid was
  // not reused meanwhile).
  int enter(pid_t tid);
  void leave();  // back to the host's root and flightrec's ids

  // Reads a NUL-terminated path from the thread's memory (at most 4096 bytes).
  std::optional<std::string> read_path(uint64_t addr, int* err) const;
  // Reads `size` bytes of the thread's memory.
  bool read_memory(uint64_t addr, void* out, size_t size) const;
  // Resolves dirfd (AT_FDCWD or one of the thread's) + path to a Place; 0 or an errno.
  int place(int dirfd, const std::string& path, uint64_t resolve, Place* out);
  // An O_PATH descriptor of an absolute directory in the thread's root, or -1 (errno set).
  int open_dir(const std::string& path);
  // Whether `dir` is one of `trees` or below one: the index of the first
  // match, or -1. Compared by inode, as they are now.
  int beneath(int dir, const std::vector<int>& trees) const;

 private:
  int host_root_ = -1, proc_ = -1;
  int root_ = -1, cwd_ = -1, mem_ = -1;
  bool entered_ = false;
  pid_t tid_ = 0;
  mode_t saved_umask_ = 022;
};

void close_place(Place& p);

}  // namespace flightrec::grants
