#pragma once
// File calls done on an agent thread's behalf, as the kernel would resolve
// them for it: in its root, from its working directory or directory
// descriptor, with its file-system ids and umask. The supervisor decides
// on the directory a path resolves to (an open descriptor, never a string
// again) and then acts on that descriptor, so a thread that changes the
// path's memory or swaps a symlink afterwards changes nothing.
//
// Every asked write stops here, so the common case is kept to a dozen
// system calls: the supervisor stays chrooted in the last thread's root
// (checked by mount and inode each time, changed only when it differs),
// reads memory with process_vm_readv, opens the working directory only for
// relative paths, and walks up to the trees with fstatat(".."). It takes a
// thread's ids only to act for it (become()); deciding needs none, since a
// call it lets go on is checked by the kernel with the thread's own ids.
// Single-threaded: the supervisor process is.
#include <sys/stat.h>
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

// A directory or file by what it is now: device and inode.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const FileId&) const = default;
};
std::optional<FileId> file_id(int fd);

class AgentView {
 public:
  AgentView();  // holds the host's /proc
  ~AgentView();
  AgentView(const AgentView&) = delete;
  AgentView& operator=(const AgentView&) = delete;

  // /proc of the host, for openat() wherever the supervisor's root is.
  int proc() const { return proc_; }

  // Takes thread tid's root (and, lazily, its working directory); 0 or an
  // errno. The caller checks afterwards that the notification is still
  // valid (the tid was not reused meanwhile).
  int enter(pid_t tid);
  // Takes the entered thread's file-system ids, groups and umask, to act
  // for it; 0 or an errno. They stay until become_root() or the next become().
  int become();
  // Back to root's ids (to open what the session's threads may not).
  void become_root();

  // Reads a NUL-terminated path from the thread's memory (at most 4096 bytes).
  std::optional<std::string> read_path(uint64_t addr, int* err) const;
  // Reads `size` bytes of the thread's memory.
  bool read_memory(uint64_t addr, void* out, size_t size) const;
  // Resolves dirfd (AT_FDCWD or one of the thread's) + path to a Place; 0 or an errno.
  int place(int dirfd, const std::string& path, uint64_t resolve, Place* out);
  // Opens (O_PATH) the file an exec of dirfd + path with execveat's flags
  // (AT_EMPTY_PATH, AT_SYMLINK_NOFOLLOW) would run; -1 with errno set.
  int open_file(int dirfd, const std::string& path, uint64_t at_flags);
  // An open descriptor's path as the root entered shows it ("" if none):
  // what bpf_d_path says of the same file in the thread.
  std::string name_of(int fd) const;
  // Whether `dir` is one of `trees` or below one, and the same for
  // `others`, in one walk up: the index of the nearest match in each, or -1.
  // Compared by inode, as they are now; the walk stops at a match in `trees`.
  struct Beneath {
    int tree = -1, other = -1;
  };
  Beneath beneath(int dir, const std::vector<FileId>& trees, const std::vector<FileId>& others) const;

 private:
  int proc_ = -1;
  int root_ = -1;                 // the root the supervisor is chrooted in (-1: the host's)
  struct statx root_id_ {};       // its mount and inode
  int cwd_ = -1;                  // the entered thread's working directory, once asked for
  pid_t tid_ = 0;
  bool as_thread_ = false;        // ids are a thread's, not root's
  mode_t saved_umask_ = 022;

  // The thread's descriptor n, reopened (O_PATH | flags); -1 with errno set.
  int thread_fd(int n, int flags) const;
  // Where a lookup relative to dirfd (AT_FDCWD or the thread's) starts:
  // the root entered unless from_dir, else its cwd or that descriptor
  // (returned in *opened too, for the caller to close); -1 with errno set.
  int start_of(int dirfd, bool from_dir, int* opened);
};

void close_place(Place& p);

}  // namespace flightrec::grants
