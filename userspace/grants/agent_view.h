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
// (changed only when it differs), keeps the ids of the last thread it acted
// for (switched only when the next one's differ), reads memory with
// process_vm_readv, opens the working directory only for relative paths,
// and walks up to the trees with fstatat("..").
//
// What it read of a thread in /proc (its root's mount and inode; its ids,
// groups and umask) is read again only when the thread differs or the
// kernel's counter fr_view_gen moved: the BPF programs bump it at the
// entry and the return of every call of a session's task that can change
// those (set*id, setgroups, capset, umask, chroot, pivot_root, unshare,
// setns, exec), and at every fork and exit in a session, so a thread id
// cannot be reused unseen. Without the counter, each decision reads /proc
// again.
// Single-threaded: the supervisor process is.
#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <unordered_map>
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
  // Holds the host's /proc; view_gen: the mapped fr_view_gen, or null.
  explicit AgentView(const volatile uint64_t* view_gen = nullptr);
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
  // for it; 0 or an errno; *switched: they were not the ids held. They
  // stay taken after the decision (the next thread nearly always has the
  // same ones), until become_root() or a become() that finds other ids.
  int become(bool* switched);
  // Whether a thread's ids are held (not root's).
  bool acting() const { return held_.has_value(); }
  // Back to root's ids, for what the session's threads may not open;
  // whoever needs root's calls it first (nothing when root's are held).
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
  const volatile uint64_t* view_gen_ = nullptr;
  int root_ = -1;                 // the root the supervisor is chrooted in (-1: the host's)
  struct statx root_id_ {};       // its mount and inode
  int cwd_ = -1;                  // the entered thread's working directory, once asked for
  pid_t tid_ = 0;
  mode_t saved_umask_ = 022;
  // The ids taken (none: root's). Switched only when a thread's differ.
  struct Ids {
    unsigned long fsuid = 0, fsgid = 0;
    std::vector<gid_t> groups;
    mode_t umask = 022;
    bool operator==(const Ids&) const = default;
  };
  std::optional<Ids> held_;
  bool held_unsure_ = false;      // a switch failed half way
  // What was read of thread `tid` while fr_view_gen was `gen`.
  struct Known {
    pid_t tid = 0;
    uint64_t gen = 0;
  };
  std::optional<Known> root_known_;     // root_ is that thread's root
  std::optional<Known> ids_known_;      // ids_read_ are its ids
  Ids ids_read_;
  std::optional<uint64_t> gen() const;  // fr_view_gen now, if mapped
  bool still(const std::optional<Known>& k, const std::optional<uint64_t>& gen) const {
    return k && gen && k->tid == tid_ && k->gen == *gen;
  }
  // /proc/TID/status of recent threads, open: a descriptor stays bound to
  // its thread, so a read fails once that thread is gone, even if another
  // reuses its number. Read again whenever the ids read are not known to hold.
  std::unordered_map<pid_t, int> status_fds_;

  // The entered thread's ids, groups and umask, from /proc; 0 or an errno.
  int read_ids(Ids* out);
  // The thread's descriptor n, reopened (O_PATH | flags); -1 with errno set.
  int thread_fd(int n, int flags) const;
  // Where a lookup relative to dirfd (AT_FDCWD or the thread's) starts:
  // the root entered unless from_dir, else its cwd or that descriptor
  // (returned in *opened too, for the caller to close); -1 with errno set.
  int start_of(int dirfd, bool from_dir, int* opened);
};

void close_place(Place& p);

}  // namespace flightrec::grants
