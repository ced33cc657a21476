#include "grants/agent_view.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "common/error.h"
#include "common/system.h"

namespace flightrec::grants {
namespace {

int openat2_fd(int dirfd, const std::string& path, uint64_t flags, uint64_t mode, uint64_t resolve) {
  open_how how{};
  how.flags = flags;
  how.mode = mode;
  how.resolve = resolve;
  return int(syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof(how)));
}

// "Uid:\tr\te\ts\tfs" -> fs; the 4th number of a /proc/TID/status line.
bool status_ids(const std::string& status, const char* key, unsigned long* fs) {
  auto at = status.find(std::string("\n") + key);
  if (at == std::string::npos) return false;
  std::istringstream in(status.substr(at + 1 + strlen(key), 80));
  unsigned long r, e, s;
  return bool(in >> r >> e >> s >> *fs);
}

constexpr size_t kStatusFds = 64;

}  // namespace

std::optional<FileId> file_id(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

AgentView::AgentView(const volatile uint64_t* view_gen) : view_gen_(view_gen) {
  proc_ = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (proc_ < 0) throw Error(errno_message("opening /proc", errno));
  saved_umask_ = umask(022);
  umask(saved_umask_);
}

AgentView::~AgentView() {
  become_root();
  for (auto& [tid, fd] : status_fds_) close(fd);
  for (int fd : {cwd_, root_, proc_})
    if (fd >= 0) close(fd);
}

std::optional<uint64_t> AgentView::gen() const {
  if (!view_gen_) return std::nullopt;
  return __atomic_load_n(view_gen_, __ATOMIC_ACQUIRE);
}

int AgentView::enter(pid_t tid) {
  if (cwd_ >= 0) close(cwd_);
  cwd_ = -1;
  tid_ = tid;
  // Read before /proc is: a change after this moves it for the next decision.
  auto now_gen = gen();
  if (root_ >= 0 && still(root_known_, now_gen)) return 0;
  root_known_.reset();
  // Its root, by mount and inode: the same as the last thread's, nearly always.
  std::string root = std::to_string(tid) + "/root";
  struct statx now {};
  if (statx(proc_, root.c_str(), 0, STATX_INO | STATX_MNT_ID, &now) != 0) return errno;
  auto same = [](const struct statx& a, const struct statx& b) {
    return a.stx_ino == b.stx_ino && a.stx_dev_major == b.stx_dev_major && a.stx_dev_minor == b.stx_dev_minor &&
           (a.stx_mask & b.stx_mask & STATX_MNT_ID ? a.stx_mnt_id == b.stx_mnt_id : true);
  };
  if (root_ >= 0 && same(now, root_id_)) {
    if (now_gen) root_known_ = Known{tid, *now_gen};
    return 0;
  }
  int fd = openat(proc_, root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  // Its root for every lookup: absolute paths, "..", absolute symlinks.
  if (statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_MNT_ID, &root_id_) != 0 || fchdir(fd) != 0 || chroot(".") != 0) {
    int e = errno;
    close(fd);
    // Half way (a new cwd, the old root) is no state to decide in.
    if (root_ >= 0) _exit(125);
    return e;
  }
  if (root_ >= 0) close(root_);
  root_ = fd;
  if (now_gen) root_known_ = Known{tid, *now_gen};
  return 0;
}

int AgentView::become(bool* switched) {
  *switched = false;
  auto now_gen = gen();
  Ids ids;
  if (still(ids_known_, now_gen)) {
    ids = ids_read_;
  } else {
    ids_known_.reset();
    if (int e = read_ids(&ids)) return e;
    ids_read_ = ids;
    if (now_gen) ids_known_ = Known{tid_, *now_gen};
  }
  if (held_ && !held_unsure_ && *held_ == ids) return 0;
  // Its ids for every permission check; changing the fs ids from 0 also
  // drops CAP_DAC_OVERRIDE and the other file capabilities.
  *switched = true;
  held_ = ids;
  held_unsure_ = true;
  if (setgroups(ids.groups.size(), ids.groups.data()) != 0) return errno;
  syscall(SYS_setfsgid, gid_t(ids.fsgid));
  syscall(SYS_setfsuid, uid_t(ids.fsuid));
  if (syscall(SYS_setfsuid, -1) != long(ids.fsuid) || syscall(SYS_setfsgid, -1) != long(ids.fsgid)) return EPERM;
  umask(ids.umask);
  held_unsure_ = false;
  return 0;
}

int AgentView::read_ids(Ids* out) {
  char buf[8192];
  ssize_t n = -1;
  for (int tries = 0; tries < 2 && n < 0; ++tries) {
    auto it = status_fds_.find(tid_);
    if (it == status_fds_.end()) {
      if (status_fds_.size() >= kStatusFds) {
        for (auto& [tid, fd] : status_fds_) close(fd);
        status_fds_.clear();
      }
      int fd = openat(proc_, (std::to_string(tid_) + "/status").c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return errno;
      it = status_fds_.emplace(tid_, fd).first;
    }
    n = pread(it->second, buf, sizeof(buf) - 1, 0);
    if (n < 0) {  // that thread is gone: the number may be another's now
      close(it->second);
      status_fds_.erase(it);
    }
  }
  if (n <= 0) return ESRCH;
  std::string status(buf, size_t(n));
  Ids& ids = *out;
  if (!status_ids(status, "Uid:", &ids.fsuid) || !status_ids(status, "Gid:", &ids.fsgid)) return ESRCH;
  // Host ids 0 are never a sandboxed thread's (they map from 1000000000).
  if (ids.fsuid == 0 || ids.fsgid == 0) return EPERM;
  if (auto at = status.find("\nGroups:"); at != std::string::npos) {
    std::istringstream in(status.substr(at + 8, status.find('\n', at + 1) - at - 8));
    unsigned long g;
    while (in >> g) ids.groups.push_back(gid_t(g));
  }
  if (auto at = status.find("\nUmask:"); at != std::string::npos)
    ids.umask = mode_t(strtoul(status.c_str() + at + 7, nullptr, 8)) & 0777;
  return 0;
}

void AgentView::become_root() {
  if (!held_) return;
  umask(saved_umask_);
  syscall(SYS_setfsuid, 0);
  syscall(SYS_setfsgid, 0);
  setgroups(0, nullptr);
  // Not root again: deciding with a thread's ids could refuse what it may do.
  if (syscall(SYS_setfsuid, -1) != 0 || syscall(SYS_setfsgid, -1) != 0) _exit(125);
  held_.reset();
  held_unsure_ = false;
}

bool AgentView::read_memory(uint64_t addr, void* out, size_t size) const {
  iovec local{out, size}, remote{reinterpret_cast<void*>(addr), size};
  return process_vm_readv(tid_, &local, 1, &remote, 1, 0) == ssize_t(size);
}

std::optional<std::string> AgentView::read_path(uint64_t addr, int* err) const {
  // Page by page (one iovec each: a read stops at the first page that is
  // not mapped), so a string near the end of a mapping is still read.
  constexpr size_t kPage = 4096, kMax = 4096;
  char buf[kMax + kPage];
  iovec local[2], remote[2];
  size_t first = kPage - (addr % kPage);
  local[0] = {buf, first};
  remote[0] = {reinterpret_cast<void*>(addr), first};
  local[1] = {buf + first, kMax - first + 1};
  remote[1] = {reinterpret_cast<void*>(addr + first), kMax - first + 1};
  ssize_t n = process_vm_readv(tid_, local, 2, remote, 2, 0);
  if (n <= 0) {
    *err = EFAULT;
    return std::nullopt;
  }
  const char* nul = static_cast<const char*>(memchr(buf, 0, size_t(n)));
  if (nul) return std::string(buf, size_t(nul - buf));
  *err = size_t(n) > kMax ? ENAMETOOLONG : EFAULT;
  return std::nullopt;
}

int AgentView::thread_fd(int n, int flags) const {
  if (n < 0) {
    errno = EBADF;
    return -1;
  }
  // The thread's own descriptor, reopened through /proc (the same file).
  int fd = openat(proc_, (std::to_string(tid_) + "/fd/" + std::to_string(n)).c_str(), flags | O_PATH | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) errno = EBADF;
  return fd;
}

int AgentView::start_of(int dirfd, bool from_dir, int* opened) {
  *opened = -1;
  if (!from_dir) return AT_FDCWD;  // the root entered
  if (dirfd != AT_FDCWD) return *opened = thread_fd(dirfd, O_DIRECTORY);
  if (cwd_ < 0) cwd_ = openat(proc_, (std::to_string(tid_) + "/cwd").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  return cwd_;
}

int AgentView::place(int dirfd, const std::string& raw, uint64_t resolve, Place* out) {
  if (raw.empty()) return ENOENT;
  std::string path = raw;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  // An absolute path starts at the root entered, unless openat2's
  // RESOLVE_IN_ROOT or RESOLVE_BENEATH anchor it at the directory given.
  int opened;
  int base = start_of(dirfd, path[0] != '/' || (resolve & (RESOLVE_IN_ROOT | RESOLVE_BENEATH)), &opened);
  if (base == -1) return errno;
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  std::string leaf = slash == std::string::npos ? path : path.substr(slash + 1);
  if (leaf == "." || leaf == ".." || path == "/") {
    dir = path;  // the path names a directory itself
    leaf = ".";
  }
  int fd = openat2_fd(base, dir, O_PATH | O_DIRECTORY | O_CLOEXEC, 0, resolve | RESOLVE_NO_MAGICLINKS);
  int e = errno;
  if (opened >= 0) close(opened);
  if (fd < 0) return e;
  out->dir_fd = fd;
  out->leaf = leaf;
  return 0;
}

int AgentView::open_file(int dirfd, const std::string& path, uint64_t at_flags) {
  if (path.empty()) {
    if (!(at_flags & AT_EMPTY_PATH)) {
      errno = ENOENT;
      return -1;
    }
    return thread_fd(dirfd, 0);  // the file the thread's descriptor is open on
  }
  int opened;
  int base = start_of(dirfd, path[0] != '/', &opened);
  if (base == -1) return -1;
  uint64_t flags = O_PATH | O_CLOEXEC | ((at_flags & AT_SYMLINK_NOFOLLOW) ? O_NOFOLLOW : 0);
  int fd = openat2_fd(base, path, flags, 0, RESOLVE_NO_MAGICLINKS);
  int e = errno;
  if (opened >= 0) close(opened);
  errno = e;
  return fd;
}

std::string AgentView::name_of(int fd) const {
  char buf[4097];
  ssize_t n = readlinkat(proc_, ("self/fd/" + std::to_string(fd)).c_str(), buf, sizeof(buf) - 1);
  return n > 0 && size_t(n) < sizeof(buf) - 1 ? std::string(buf, size_t(n)) : "";
}

AgentView::Beneath AgentView::beneath(int dir, const std::vector<FileId>& trees,
                                      const std::vector<FileId>& others) const {
  // Up through "..", "../.." and so on (one call a level, no descriptor):
  // inside the root entered, so the walk ends there, where ".." is the
  // directory itself. Every 256 levels the walk goes on from a descriptor
  // of where it is, so the strings stay short.
  Beneath out;
  int base = dir, held = -1;
  std::string up = ".";
  int steps = 0;  // ".." in up
  std::optional<FileId> last, root;
  if (root_ >= 0) root = FileId{makedev(root_id_.stx_dev_major, root_id_.stx_dev_minor), ino_t(root_id_.stx_ino)};
  for (int depth = 0; depth < 100'000; ++depth) {
    struct stat st;
    if (fstatat(base, up.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) break;
    FileId here{st.st_dev, st.st_ino};
    if (last && *last == here) break;
    if (auto t = std::find(trees.begin(), trees.end(), here); t != trees.end()) {
      out.tree = int(t - trees.begin());
      break;
    }
    if (auto o = std::find(others.begin(), others.end(), here); o != others.end() && out.other < 0)
      out.other = int(o - others.begin());
    if (root && *root == here) break;  // where ".." leads nowhere higher
    last = here;
    if (steps == 256) {
      int next = openat(base, up.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (next < 0) break;
      if (held >= 0) close(held);
      base = held = next;
      up = "..";
      steps = 1;
    } else {
      up = steps == 0 ? ".." : up + "/..";
      ++steps;
    }
  }
  if (held >= 0) close(held);
  return out;
}

void close_place(Place& p) {
  if (p.dir_fd >= 0) close(p.dir_fd);
  p.dir_fd = -1;
}

}  // namespace flightrec::grants
