#include "common/system.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

namespace flightrec {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

std::string errno_message(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

std::optional<std::string> try_read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return out.str();
}

std::optional<std::vector<std::string>> proc_stat_fields(int pid) {
  std::optional<std::string> stat = try_read_file("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat ? stat->rfind(')') : std::string::npos;
  if (paren == std::string::npos || paren + 2 >= stat->size()) return std::nullopt;
  std::istringstream in(stat->substr(paren + 2));
  std::vector<std::string> fields;
  for (std::string f; in >> f;) fields.push_back(std::move(f));
  return fields;
}

std::optional<std::string> cwd_of(int pid) {
  char cwd[4096];
  ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/cwd").c_str(), cwd, sizeof(cwd));
  if (n <= 0 || n == ssize_t(sizeof(cwd)) || cwd[0] != '/') return std::nullopt;
  return std::string(cwd, size_t(n));
}

bool write_full(int fd, const void* buf, size_t len) {
  const auto* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= size_t(n);
  }
  return true;
}

bool pread_full(int fd, void* buf, size_t len, uint64_t off) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = pread(fd, p, len, off_t(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= size_t(n);
    off += uint64_t(n);
  }
  return true;
}

int open_as_seen_by(int pid, const std::string& path) {
  std::string proc = "/proc/" + std::to_string(pid), abs = path;
  if (!path.empty() && path[0] != '/') {
    auto cwd = cwd_of(pid);
    if (!cwd) {
      errno = ENOENT;
      return -1;
    }
    abs = *cwd + "/" + path;
  }
  if (abs.empty()) {
    errno = ENOENT;
    return -1;
  }
  int root = open((proc + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return -1;
  open_how how{};
  how.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  int fd = int(syscall(SYS_openat2, root, abs.c_str(), &how, sizeof(how)));
  int err = errno;
  close(root);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    close(fd);
    fd = -1;
    err = EINVAL;
  }
  errno = err;
  return fd;
}

std::string read_file(const std::string& path) {
  auto data = try_read_file(path);
  if (!data) throw Error(errno_message("cannot read " + path, errno));
  return *data;
}

void write_file(const std::string& path, const std::string& data) {
  FILE* f = std::fopen(path.c_str(), "we");
  if (!f) throw Error(errno_message("cannot open " + path, errno));
  size_t n = std::fwrite(data.data(), 1, data.size(), f);
  int err = errno;
  if (std::fclose(f) != 0 || n != data.size()) {
    if (n == data.size()) err = errno;
    throw Error(errno_message("cannot write " + path, err));
  }
}

void make_private_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/')
      if (mkdir(path.substr(0, i).c_str(), 0700) != 0 && errno != EEXIST)
        throw Error(errno_message("cannot create " + path.substr(0, i), errno));
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw Error(path + " is not a directory");
}

static std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string host_name() {
  char buf[256] = {};
  // An empty name (sethostname("") in a UTS namespace) would make an origin
  // with no host part, which the format refuses (docs/FORMAT.md 3.1).
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "unknown";
  return buf;
}

std::string kernel_release() {
  struct utsname u {};
  if (uname(&u) != 0) return "unknown";
  return u.release;
}

std::string boot_id() {
  auto id = try_read_file("/proc/sys/kernel/random/boot_id");
  return id ? trimmed(*id) : "unknown";
}

static uint64_t clock_ns(clockid_t clock) {
  struct timespec ts {};
  clock_gettime(clock, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
int send_fd(int sock, int fd) {
  char byte = 'n';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : errno;
}

long send_with_fds(int sock, const std::string& bytes, const std::vector<int>& fds, int flags) {
  if (fds.size() > kMaxPassedFds || bytes.empty()) {
    errno = EINVAL;
    return -1;
  }
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  return sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
}

long receive_with_fds(int sock, char* buf, size_t max, std::vector<int>& fds, int flags) {
  iovec iov{buf, max};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  // Descriptors beyond the room above were closed by the kernel (MSG_CTRUNC).
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.push_back(fd);
    }
  }
  return n;
}

int receive_fd(int sock) {
  char byte;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  int fd = -1;
  cmsghdr* c = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) == 1 ? CMSG_FIRSTHDR(&msg) : nullptr;
  if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
    std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

std::jthread beside(std::function<void()> fn) {
  try {
    return std::jthread(fn);
  } catch (const std::system_error&) {
    fn();  // one after the other
    return {};
  }
}

uint64_t mono_ns() { return clock_ns(CLOCK_MONOTONIC); }
uint64_t real_ns() { return clock_ns(CLOCK_REALTIME); }

std::optional<std::string> find_mount(const std::string& fstype) {
  // mountinfo: id parent major:minor root mountpoint opts [optional...] - fstype source superopts
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string type;
    tail >> type;
    if (type != fstype) continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, dev, root, mountpoint;
    head >> id >> parent >> dev >> root >> mountpoint;
    return mountpoint;
  }
  return std::nullopt;
}

namespace {

const char* search_path() {
  const char* path = getenv("PATH");
  return path ? path : "/usr/local/bin:/usr/bin:/bin";
}

// The first file `name` names (as execvp searches) that access(mode) allows.
std::optional<std::string> find_on_path(const std::string& name, const std::string& dirs, int mode) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos)
    return access(name.c_str(), mode) == 0 ? std::optional(name) : std::nullopt;
  std::istringstream in(dirs);
  std::string dir;
  while (std::getline(in, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), mode) == 0) return candidate;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> find_executable(const std::string& name) {
  return find_on_path(name, search_path(), X_OK);
}

std::optional<std::string> find_executable(const std::string& name, const std::string& dirs) {
  return find_on_path(name, dirs, X_OK);
}

std::optional<std::string> find_file(const std::string& name, const std::string& dirs) {
  return find_on_path(name, dirs, F_OK);
}

std::optional<std::string> find_file(const std::string& name) { return find_on_path(name, search_path(), F_OK); }

}  // namespace flightrec
