#include "grants/agent_view.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

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

}  // namespace

AgentView::AgentView() {
  host_root_ = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  proc_ = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (host_root_ < 0 || proc_ < 0) throw Error(errno_message("opening / and /proc", errno));
  saved_umask_ = umask(022);
  umask(saved_umask_);
}

AgentView::~AgentView() {
  leave();
  close(host_root_);
  close(proc_);
}

int AgentView::enter(pid_t tid) {
  leave();
  std::string t = std::to_string(tid);
  root_ = openat(proc_, (t + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  cwd_ = openat(proc_, (t + "/cwd").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  mem_ = openat(proc_, (t + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  if (root_ < 0 || cwd_ < 0 || mem_ < 0) return errno ? errno : ESRCH;
  tid_ = tid;
  int fd = openat(proc_, (t + "/status").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[8192];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return ESRCH;
  std::string status(buf, size_t(n));
  unsigned long fsuid = 0, fsgid = 0;
  if (!status_ids(status, "Uid:", &fsuid) || !status_ids(status, "Gid:", &fsgid)) return ESRCH;
  // Host ids 0 are never a sandboxed thread's (they map from 1000000000).
  if (fsuid == 0 || fsgid == 0) return EPERM;
  std::vector<gid_t> groups;
  if (auto at = status.find("\nGroups:"); at != std::string::npos) {
    std::istringstream in(status.substr(at + 8, status.find('\n', at + 1) - at - 8));
    unsigned long g;
    while (in >> g) groups.push_back(gid_t(g));
  }
  mode_t mask = 022;
  if (auto at = status.find("\nUmask:"); at != std::string::npos) mask = mode_t(strtoul(status.c_str() + at + 7, nullptr, 8));
  // Its root for every lookup (absolute paths, "..", absolute symlinks),
  // its ids for every permission check; changing the fs ids from 0 also
  // drops CAP_DAC_OVERRIDE and the other file capabilities.
  if (fchdir(root_) != 0 || chroot(".") != 0) return errno;
  entered_ = true;
  if (setgroups(groups.size(), groups.data()) != 0) return errno;
  syscall(SYS_setfsgid, gid_t(fsgid));
  syscall(SYS_setfsuid, uid_t(fsuid));
  if (syscall(SYS_setfsuid, -1) != long(fsuid) || syscall(SYS_setfsgid, -1) != long(fsgid)) return EPERM;
  umask(mask & 0777);
  return 0;
}

void AgentView::leave() {
  if (entered_) {
    umask(saved_umask_);
    syscall(SYS_setfsuid, 0);
    syscall(SYS_setfsgid, 0);
    setgroups(0, nullptr);
    // Failing to get back out would leave the supervisor in the agent's
    // root: it cannot go on safely.
    if (fchdir(host_root_) != 0 || chroot(".") != 0) _exit(125);
    entered_ = false;
  }
  for (int* fd : {&root_, &cwd_, &mem_})
    if (*fd >= 0) {
      close(*fd);
      *fd = -1;
    }
  tid_ = 0;
}

bool AgentView::read_memory(uint64_t addr, void* out, size_t size) const {
  return mem_ >= 0 && pread(mem_, out, size, off_t(addr)) == ssize_t(size);
}

std::optional<std::string> AgentView::read_path(uint64_t addr, int* err) const {
  // Page by page: a string near the end of a mapping is still read.
  std::string out;
  char page[4096];
  while (out.size() < 4096) {
    size_t chunk = 4096 - (addr % 4096);
    ssize_t n = mem_ >= 0 ? pread(mem_, page, chunk, off_t(addr)) : -1;
    if (n <= 0) {
      *err = EFAULT;
      return std::nullopt;
    }
    const char* nul = static_cast<const char*>(memchr(page, 0, size_t(n)));
    if (nul) return out.append(page, size_t(nul - page));
    out.append(page, size_t(n));
    addr += uint64_t(n);
  }
  *err = ENAMETOOLONG;
  return std::nullopt;
}

int AgentView::place(int dirfd, const std::string& raw, uint64_t resolve, Place* out) {
  if (raw.empty()) return ENOENT;
  std::string path = raw;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  int base = cwd_, opened = -1;
  if (path[0] != '/' && dirfd != AT_FDCWD) {
    if (dirfd < 0) return EBADF;
    // The thread's own descriptor, reopened through /proc (the same directory).
    opened = openat(proc_, (std::to_string(tid_) + "/fd/" + std::to_string(dirfd)).c_str(),
                    O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (opened < 0) return errno == ENOENT ? EBADF : errno;
    base = opened;
  }
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

int AgentView::open_dir(const std::string& path) {
  if (root_ < 0) {
    errno = ESRCH;
    return -1;
  }
  return openat2_fd(root_, path, O_PATH | O_DIRECTORY | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
}

int AgentView::beneath(int dir, const std::vector<int>& trees) const {
  std::vector<struct stat> at(trees.size());
  std::vector<bool> ok(trees.size());
  for (size_t i = 0; i < trees.size(); ++i) ok[i] = trees[i] >= 0 && fstat(trees[i], &at[i]) == 0;
  int cur = fcntl(dir, F_DUPFD_CLOEXEC, 0);
  int found = -1;
  // Up through "..": inside the thread's root, so it ends there.
  for (int depth = 0; cur >= 0 && depth < 4096 && found < 0; ++depth) {
    struct stat st;
    if (fstat(cur, &st) != 0) break;
    for (size_t i = 0; i < trees.size() && found < 0; ++i)
      if (ok[i] && at[i].st_dev == st.st_dev && at[i].st_ino == st.st_ino) found = int(i);
    if (found >= 0) break;
    int parent = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat pst;
    bool top = parent < 0 || fstat(parent, &pst) != 0 || (pst.st_dev == st.st_dev && pst.st_ino == st.st_ino);
    close(cur);
    cur = parent;
    if (top) break;
  }
  if (cur >= 0) close(cur);
  return found;
}

void close_place(Place& p) {
  if (p.dir_fd >= 0) close(p.dir_fd);
  p.dir_fd = -1;
}

}  // namespace flightrec::grants
