#include "sandbox/cgroup.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>

#include "common/error.h"
#include "common/system.h"

namespace flightrec::sandbox {

std::string cgroup2_root() {
  auto root = find_mount("cgroup2");
  if (!root)
    throw Error("no cgroup v2 hierarchy is mounted (flightrec needs one, e.g. at /sys/fs/cgroup "
                "or /sys/fs/cgroup/unified)");
  return *root;
}

Cgroup::Cgroup(std::string path, int fd, uint64_t id, bool owned)
    : path_(std::move(path)), fd_(fd), id_(id), owned_(owned) {}

Cgroup::Cgroup(Cgroup&& o) noexcept
    : path_(std::move(o.path_)), fd_(o.fd_), id_(o.id_), owned_(o.owned_) {
  o.fd_ = -1;
  o.owned_ = false;
}

Cgroup::~Cgroup() {
  if (fd_ >= 0) close(fd_);
}

Cgroup Cgroup::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error(errno_message("cannot open cgroup " + path, errno));
  struct statfs fs {};
  struct stat st {};
  if (fstatfs(fd, &fs) != 0 || fs.f_type != CGROUP2_SUPER_MAGIC || fstat(fd, &st) != 0) {
    close(fd);
    throw Error(path + " is not a cgroup v2 directory");
  }
  // On cgroup v2 the directory's inode number is the cgroup id the kernel
  // reports (bpf_get_current_cgroup_id).
  return Cgroup(path, fd, st.st_ino, false);
}

Cgroup Cgroup::create(const std::string& name) {
  std::string parent = cgroup2_root() + "/flightrec";
  if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST)
    throw Error(errno_message("cannot create cgroup " + parent, errno));
  std::string path = parent + "/" + name;
  if (mkdir(path.c_str(), 0755) != 0)
    throw Error(errno_message("cannot create cgroup " + path, errno));
  try {
    Cgroup cg = open(path);
    cg.owned_ = true;
    return cg;
  } catch (...) {
    rmdir(path.c_str());
    throw;
  }
}

void Cgroup::add_process(pid_t pid) {
  int fd = openat(fd_, "cgroup.procs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw Error(errno_message("cannot open " + path_ + "/cgroup.procs", errno));
  std::string text = std::to_string(pid);
  ssize_t n = write(fd, text.data(), text.size());
  int err = errno;
  close(fd);
  if (n != ssize_t(text.size()))
    throw Error(errno_message("cannot move process " + text + " into " + path_, err));
}

pid_t Cgroup::fork_into(unsigned long namespace_flags) {
  clone_args args{};
  args.flags = namespace_flags | CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = uint64_t(fd_);
  long pid = syscall(SYS_clone3, &args, sizeof(args));
  if (pid >= 0 || (errno != ENOSYS && errno != E2BIG && errno != EINVAL && errno != EPERM)) return pid_t(pid);
  // Before 5.7 (ENOSYS, E2BIG), without CLONE_INTO_CGROUP (EINVAL), or
  // clone3 refused by a seccomp profile (EPERM; a real refusal is clone's too).
  pid = syscall(SYS_clone, namespace_flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (pid <= 0) return pid_t(pid);
  try {
    add_process(pid_t(pid));
  } catch (...) {
    kill(pid_t(pid), SIGKILL);
    waitpid(pid_t(pid), nullptr, 0);
    throw;
  }
  return pid_t(pid);
}

bool Cgroup::exists() const {
  struct stat st {};
  return fstatat(fd_, "cgroup.procs", &st, 0) == 0;
}

static std::string read_at(int dirfd, const char* name) {
  int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, size_t(n));
  close(fd);
  return out;
}

bool Cgroup::populated() const {
  std::istringstream in(read_at(fd_, "cgroup.events"));
  std::string key;
  int value;
  while (in >> key >> value)
    if (key == "populated") return value != 0;
  return false;
}

uint64_t Cgroup::cpu_usec() const {
  std::istringstream in(read_at(fd_, "cpu.stat"));
  std::string key;
  uint64_t value;
  while (in >> key >> value)
    if (key == "usage_usec") return value;
  return 0;
}

void Cgroup::kill_all() {
  int fd = openat(fd_, "cgroup.kill", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    bool ok = write(fd, "1", 1) == 1;
    close(fd);
    if (ok) return;
  }
  // No cgroup.kill (kernel < 5.14): kill members until none is left; new
  // forks land in the cgroup too, so repeat a bounded number of times.
  for (int round = 0; round < 100 && populated(); ++round) {
    std::istringstream procs(read_at(fd_, "cgroup.procs"));
    pid_t pid;
    while (procs >> pid) kill(pid, SIGKILL);
    usleep(1000);
  }
}

void Cgroup::freeze(bool frozen) {
  int fd = openat(fd_, "cgroup.freeze", O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw Error(errno_message("cannot open " + path_ + "/cgroup.freeze", errno));
  bool ok = write(fd, frozen ? "1" : "0", 1) == 1;
  int err = errno;
  close(fd);
  if (!ok) throw Error(errno_message(std::string("cannot ") + (frozen ? "freeze " : "thaw ") + path_, err));
}

void Cgroup::remove_if_owned() {
  if (!owned_) return;
  for (int i = 0; i < 200 && rmdir(path_.c_str()) != 0 && errno == EBUSY; ++i) usleep(5000);
  owned_ = false;
}

}  // namespace flightrec::sandbox
