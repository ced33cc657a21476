#include "sandbox/changes.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>

namespace flightrec::sandbox {
namespace {

std::string kind_of(mode_t m) {
  return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

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

// The lower layer, read as the overlay saw it: below its root only, no
// symlinks followed, no other mounts entered (a host symlink or /proc must
// not stand in for what the sandbox saw).
class Lower {
 public:
  explicit Lower(const std::string& root) : fd_(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)) {}
  ~Lower() {
    if (fd_ >= 0) close(fd_);
  }
  Lower(const Lower&) = delete;
  Lower& operator=(const Lower&) = delete;

  int open_at(const std::string& rel, int flags) const {
    if (fd_ < 0) return -1;
    open_how how{};
    how.flags = uint64_t(flags) | O_CLOEXEC | O_NOFOLLOW;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS;
    std::string r = rel.empty() || rel == "/" ? "." : rel.substr(1);
    return int(syscall(SYS_openat2, fd_, r.c_str(), &how, sizeof(how)));
  }
  bool stat_at(const std::string& rel, struct stat* st) const {
    int fd = open_at(rel, O_PATH);
    if (fd < 0) return false;
    bool ok = fstat(fd, st) == 0;
    close(fd);
    return ok;
  }
  std::string sha256(const std::string& rel) const {
    int fd = open_at(rel, O_RDONLY);
    if (fd < 0) return "";
    std::string h = sha256_fd(fd);
    close(fd);
    return h;
  }
  std::string link(const std::string& rel) const {
    size_t slash = rel.rfind('/');
    int dir = open_at(rel.substr(0, slash), O_PATH | O_DIRECTORY);
    if (dir < 0) return "";
    std::string target = link_at(dir, rel.substr(slash + 1));
    close(dir);
    return target;
  }
  std::vector<std::string> list(const std::string& rel) const {
    int fd = open_at(rel, O_RDONLY | O_DIRECTORY);
    return fd < 0 ? std::vector<std::string>{} : list_fd(fd);
  }

 private:
  int fd_;
};

std::vector<std::string> list_dir(const std::string& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return fd < 0 ? std::vector<std::string>{} : list_fd(fd);
}

// A non-directory in the upper layer against the same path in the lower.
std::optional<FileChange> compare(const std::string& up, const Lower& lower, const std::string& rel,
                                  const std::string& prefix, const struct stat& su) {
  struct stat sl;
  bool in_lower = lower.stat_at(rel, &sl);
  FileChange c{in_lower ? "modified" : "created", prefix + rel, kind_of(su.st_mode), uint64_t(su.st_size),
               su.st_mode & 07777, "", "", ""};
  if (S_ISREG(su.st_mode)) {
    c.sha256_after = sha256_file(up);
    if (in_lower && S_ISREG(sl.st_mode)) {
      c.sha256_before = lower.sha256(rel);
      if (c.sha256_before == c.sha256_after && (sl.st_mode & 07777) == (su.st_mode & 07777)) return std::nullopt;
    }
  } else if (S_ISLNK(su.st_mode)) {
    size_t slash = up.rfind('/');
    int dir = open(up.substr(0, slash).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      c.link_target = link_at(dir, up.substr(slash + 1));
      close(dir);
    }
    if (in_lower && S_ISLNK(sl.st_mode) && lower.link(rel) == c.link_target) return std::nullopt;
  }
  return c;
}

}  // namespace

std::string sha256_fd(int fd) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) EVP_DigestUpdate(ctx, buf, size_t(n));
  unsigned char md[32];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  if (n < 0) return "";
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

std::string sha256_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return "";
  std::string h = sha256_fd(fd);
  close(fd);
  return h;
}

std::optional<FileChange> diff_path(const std::string& upper, const std::string& lower_root,
                                    const std::string& prefix, const std::string& rel) {
  if (rel.empty() || rel[0] != '/' || rel.find("/../") != std::string::npos) return std::nullopt;
  struct stat su;
  std::string up = upper + rel;
  if (lstat(up.c_str(), &su) != 0 || S_ISDIR(su.st_mode) || S_ISCHR(su.st_mode)) return std::nullopt;
  Lower lower(lower_root);
  return compare(up, lower, rel, prefix, su);
}

std::vector<FileChange> diff_layers(const std::string& upper, const std::string& lower_root,
                                    const std::string& prefix, size_t max_changes, size_t* more) {
  Lower lower(lower_root);
  std::vector<FileChange> out;
  size_t left_out = 0;
  auto add = [&](FileChange c) {
    if (out.size() < max_changes) out.push_back(std::move(c));
    else ++left_out;
  };
  // Everything below a deleted or replaced lower directory is gone too.
  auto deleted_tree = [&](const std::string& rel) {
    std::vector<std::string> stack{rel};
    while (!stack.empty()) {
      std::string r = stack.back();
      stack.pop_back();
      struct stat st;
      if (!lower.stat_at(r, &st)) continue;
      FileChange c{"deleted", prefix + r, kind_of(st.st_mode), S_ISDIR(st.st_mode) ? 0 : uint64_t(st.st_size),
                   st.st_mode & 07777, "", "", ""};
      if (S_ISREG(st.st_mode)) c.sha256_before = lower.sha256(r);
      if (S_ISDIR(st.st_mode))
        for (const auto& n : lower.list(r)) stack.push_back(r + "/" + n);
      add(std::move(c));
    }
  };
  // Iterative, so depth costs memory, not stack.
  std::vector<std::string> dirs{""};
  while (!dirs.empty()) {
    std::string rel = dirs.back();
    dirs.pop_back();
    for (const auto& name : list_dir(upper + rel)) {
      std::string r = rel + "/" + name, up = upper + r;
      struct stat su;
      if (lstat(up.c_str(), &su) != 0) {
        ++left_out;  // e.g. a path longer than PATH_MAX
        continue;
      }
      if (S_ISCHR(su.st_mode) && su.st_rdev == makedev(0, 0)) {  // whiteout
        deleted_tree(r);
        continue;
      }
      if (S_ISDIR(su.st_mode)) {
        struct stat sl;
        bool lower_dir = lower.stat_at(r, &sl) && S_ISDIR(sl.st_mode);
        char opaque[2] = {};
        bool is_opaque = getxattr(up.c_str(), "trusted.overlay.opaque", opaque, 1) == 1 && opaque[0] == 'y';
        if (lower_dir && is_opaque)  // replaced by an empty directory
          for (const auto& n : lower.list(r)) deleted_tree(r + "/" + n);
        if (!lower_dir || (sl.st_mode & 07777) != (su.st_mode & 07777))
          add(FileChange{lower_dir ? "modified" : "created", prefix + r, "dir", 0, su.st_mode & 07777, "", "", ""});
        dirs.push_back(r);
        continue;
      }
      if (auto c = compare(up, lower, r, prefix, su)) add(std::move(*c));
    }
  }
  if (more) *more = left_out;
  return out;
}

}  // namespace flightrec::sandbox
