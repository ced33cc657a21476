#include "sandbox/layer.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>

#include "common/text.h"

namespace flightrec::sandbox {
namespace {

std::string link_at(int dirfd, const std::string& rel) {
  char buf[4096];
  ssize_t n = readlinkat(dirfd, rel.c_str(), buf, sizeof(buf));
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

// Sorted names in a directory (takes the fd).
std::vector<std::string> list_fd(int fd) {
  std::vector<std::string> names;
  DIR* d = fdopendir(fd);
  if (!d) {
    close(fd);
    return names;
  }
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::string sha256_fd(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return "";
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  char buf[65536];
  uint64_t left = uint64_t(st.st_size);
  ssize_t n = 0;
  while (left > 0 && (n = read(fd, buf, std::min<uint64_t>(sizeof(buf), left))) > 0) {
    EVP_DigestUpdate(ctx, buf, size_t(n));
    left -= uint64_t(n);
  }
  unsigned char md[32];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  if (left > 0) return "";  // an error, or cut short while read: no hash is better than a wrong one
  return hex_encode(std::string_view(reinterpret_cast<const char*>(md), len));
}

// O_NOFOLLOW: a tree whose last component was replaced by a symlink is not that tree.
Layer::Layer(const std::string& root) : fd_(open(root.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) {}

bool Layer::is(dev_t dev, ino_t ino) const {
  struct stat st;
  return fd_ >= 0 && fstat(fd_, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

Layer::~Layer() {
  if (fd_ >= 0) close(fd_);
}

int Layer::open_at(const std::string& rel, int flags) const {
  if (fd_ < 0) return -1;
  open_how how{};
  // openat2 refuses O_PATH with other flags than these.
  how.flags = uint64_t(flags) | O_CLOEXEC | O_NOFOLLOW | ((flags & O_PATH) ? 0 : O_NONBLOCK | O_NOCTTY);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS;
  std::string r = rel.empty() || rel == "/" ? "." : rel.substr(1);
  return int(syscall(SYS_openat2, fd_, r.c_str(), &how, sizeof(how)));
}

int Layer::open_parent(const std::string& rel, std::string* name) const {
  size_t slash = rel.rfind('/');
  if (slash == std::string::npos || slash + 1 == rel.size()) {
    errno = EINVAL;
    return -1;
  }
  *name = rel.substr(slash + 1);
  if (*name == "." || *name == "..") {
    errno = EINVAL;
    return -1;
  }
  return open_at(rel.substr(0, slash), O_PATH | O_DIRECTORY);
}

bool Layer::stat_at(const std::string& rel, struct stat* st) const {
  int fd = open_at(rel, O_PATH);
  if (fd < 0) return false;
  bool ok = fstat(fd, st) == 0;
  close(fd);
  return ok;
}

std::string Layer::sha256(const std::string& rel) const {
  int fd = open_at(rel, O_RDONLY);
  if (fd < 0) return "";
  std::string h = sha256_fd(fd);
  close(fd);
  return h;
}

std::string Layer::link(const std::string& rel) const {
  std::string name;
  int dir = open_parent(rel, &name);
  if (dir < 0) return "";
  std::string target = link_at(dir, name);
  close(dir);
  return target;
}

std::vector<std::string> Layer::list(const std::string& rel) const {
  int fd = open_at(rel, O_RDONLY | O_DIRECTORY);
  return fd < 0 ? std::vector<std::string>{} : list_fd(fd);
}

bool Layer::opaque_dir(const std::string& rel) const {
  int fd = open_at(rel, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return false;
  char value[2] = {};
  bool opaque = fgetxattr(fd, "trusted.overlay.opaque", value, 1) == 1 && value[0] == 'y';
  close(fd);
  return opaque;
}

}  // namespace flightrec::sandbox
