#include "sandbox/changes.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>

namespace flightrec::sandbox {
namespace {

std::string kind_of(mode_t m) {
  return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

std::string link_of(const std::string& path) {
  char buf[4096];
  ssize_t n = readlink(path.c_str(), buf, sizeof(buf));
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

// A non-directory in the upper layer against the same path in the lower.
std::optional<FileChange> compare(const std::string& up, const std::string& lp, const std::string& path,
                                  const struct stat& su, const struct stat* sl) {
  FileChange c{sl ? "modified" : "created", path, kind_of(su.st_mode), uint64_t(su.st_size), su.st_mode & 07777,
               "", "", ""};
  if (S_ISREG(su.st_mode)) {
    c.sha256_after = sha256_file(up);
    if (sl && S_ISREG(sl->st_mode)) {
      c.sha256_before = sha256_file(lp);
      if (c.sha256_before == c.sha256_after && (sl->st_mode & 07777) == (su.st_mode & 07777)) return std::nullopt;
    }
  } else if (S_ISLNK(su.st_mode)) {
    c.link_target = link_of(up);
    if (sl && S_ISLNK(sl->st_mode) && link_of(lp) == c.link_target) return std::nullopt;
  }
  return c;
}

struct Walker {
  std::string upper, lower;
  size_t max;
  size_t more = 0;
  std::vector<FileChange> out;

  void add(FileChange c) {
    if (out.size() < max) out.push_back(std::move(c));
    else ++more;
  }

  // Everything below a deleted lower directory is deleted too.
  void deleted_tree(const std::string& rel) {
    struct stat st;
    std::string lp = lower + rel;
    if (lstat(lp.c_str(), &st) != 0) return;
    FileChange c{"deleted", rel, kind_of(st.st_mode), uint64_t(st.st_size), st.st_mode & 07777, "", "", ""};
    if (S_ISREG(st.st_mode)) c.sha256_before = sha256_file(lp);
    if (S_ISDIR(st.st_mode)) {
      c.size = 0;
      for (const auto& name : list(lp)) deleted_tree(rel + "/" + name);
    }
    add(std::move(c));
  }

  static std::vector<std::string> list(const std::string& dir) {
    std::vector<std::string> names;
    DIR* d = opendir(dir.c_str());
    if (!d) return names;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  void walk(const std::string& rel) {
    for (const auto& name : list(upper + rel)) {
      std::string r = rel + "/" + name, up = upper + r, lp = lower + r;
      struct stat su, sl;
      if (lstat(up.c_str(), &su) != 0) continue;
      bool in_lower = lstat(lp.c_str(), &sl) == 0;
      if (S_ISCHR(su.st_mode) && su.st_rdev == makedev(0, 0)) {  // whiteout
        deleted_tree(r);
        continue;
      }
      if (S_ISDIR(su.st_mode)) {
        FileChange c{in_lower ? "modified" : "created", r, "dir", 0, su.st_mode & 07777, "", "", ""};
        char opaque[2] = {};
        bool is_opaque = getxattr(up.c_str(), "trusted.overlay.opaque", opaque, 1) == 1 && opaque[0] == 'y';
        if (in_lower && S_ISDIR(sl.st_mode)) {
          // Replaced by an empty directory: the lower content is gone.
          if (is_opaque)
            for (const auto& n : list(lp)) deleted_tree(r + "/" + n);
          if ((sl.st_mode & 07777) != (su.st_mode & 07777)) add(c);
        } else {
          add(c);
        }
        walk(r);
        continue;
      }
      if (auto c = compare(up, lp, r, su, in_lower ? &sl : nullptr)) add(std::move(*c));
    }
  }
};

}  // namespace

std::optional<FileChange> diff_path(const std::string& upper, const std::string& lower_root, const std::string& path) {
  if (path.empty() || path[0] != '/' || path.find("/../") != std::string::npos) return std::nullopt;
  std::string up = upper + path, lp = (lower_root == "/" ? "" : lower_root) + path;
  struct stat su, sl;
  if (lstat(up.c_str(), &su) != 0 || S_ISDIR(su.st_mode) || S_ISCHR(su.st_mode)) return std::nullopt;
  return compare(up, lp, path, su, lstat(lp.c_str(), &sl) == 0 ? &sl : nullptr);
}

std::string sha256_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return "";
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) EVP_DigestUpdate(ctx, buf, size_t(n));
  close(fd);
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

std::vector<FileChange> diff_layers(const std::string& upper, const std::string& lower_root, size_t max_changes,
                                    size_t* more) {
  Walker w{upper, lower_root == "/" ? "" : lower_root, max_changes, 0, {}};
  w.walk("");
  if (more) *more = w.more;
  return std::move(w.out);
}

}  // namespace flightrec::sandbox
