#include "sandbox/apply.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <openssl/evp.h>
#include <set>

#include "common/text.h"
#include "policy/judge.h"
#include "sandbox/layer.h"

namespace flightrec::sandbox {
namespace {

struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

std::string temp_name() {
  unsigned char r[8] = {};
  (void)!getrandom(r, sizeof(r), 0);
  return ".flightrec-apply-" + hex_encode(std::string_view(reinterpret_cast<const char*>(r), sizeof(r)));
}

// Set-id bits are never carried to the host.
mode_t host_mode(uint32_t mode) { return mode_t(mode & 01777); }

std::string refusal(const char* what, int err) { return std::string(what) + " (" + std::strerror(err) + ")"; }

// Puts `tmp` in place of `name` (which must not exist when `create`).
std::string put_in_place(int dir, const std::string& tmp, const std::string& name, bool create) {
  if (renameat2(dir, tmp.c_str(), dir, name.c_str(), create ? RENAME_NOREPLACE : 0) == 0) return "";
  int err = errno;
  unlinkat(dir, tmp.c_str(), 0);
  return refusal(err == EEXIST ? "appeared on the host meanwhile" : "cannot put it in place", err);
}

// The session's bytes of `rel` put at `name` in dir (which must not exist
// when `create`), owned as the options say; "" or why not. They are written
// to an unnamed file (O_TMPFILE) that is named only once complete: a
// flightrec killed meanwhile leaves nothing half-written in the work
// directory. The bytes must hash to the record's after-hash: a kept layer
// edited since is refused.
std::string put_copy(const Layer& upper, const std::string& rel, int dir, const std::string& name, bool create,
                     const FileChange& c, const ApplyOptions& o) {
  Fd in(upper.open_at(rel, O_RDONLY));
  struct stat st;
  if (in.fd < 0 || fstat(in.fd, &st) != 0 || !S_ISREG(st.st_mode)) return "the session's file is gone from its layer";
  std::string tmp = temp_name();
  bool unnamed = true;
  Fd out(openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600));
  if (out.fd < 0) {  // a file system without O_TMPFILE: a named one, beside it
    unnamed = false;
    out.fd = openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  }
  if (out.fd < 0) return refusal("cannot create a file beside it", errno);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  char buf[65536];
  uint64_t left = uint64_t(st.st_size);
  std::string why;
  while (left > 0 && why.empty()) {
    ssize_t n = read(in.fd, buf, std::min<uint64_t>(sizeof(buf), left));
    if (n <= 0) {
      why = "the session's file could not be read to its end";
      break;
    }
    EVP_DigestUpdate(ctx, buf, size_t(n));
    for (ssize_t done = 0; done < n && why.empty();) {
      ssize_t w = write(out.fd, buf + done, size_t(n - done));
      if (w <= 0) why = refusal("cannot write the host's copy", w < 0 ? errno : ENOSPC);
      else done += w;
    }
    left -= uint64_t(n);
  }
  unsigned char md[32];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  if (why.empty() && hex_encode(std::string_view(reinterpret_cast<const char*>(md), len)) != c.sha256_after)
    why = "the session's file is not what the record says it wrote (sha256_after differs)";
  if (why.empty() && (fchown(out.fd, o.uid, o.gid) != 0 || fchmod(out.fd, host_mode(c.mode)) != 0 || fsync(out.fd) != 0))
    why = refusal("cannot set the host copy's owner and mode", errno);
  if (!why.empty()) {
    if (!unnamed) unlinkat(dir, tmp.c_str(), 0);
    return why;
  }
  if (unnamed) {
    std::string self = "/proc/self/fd/" + std::to_string(out.fd);
    if (create) {  // named at once where it goes, if nothing is there
      if (linkat(AT_FDCWD, self.c_str(), dir, name.c_str(), AT_SYMLINK_FOLLOW) == 0) return "";
      return refusal(errno == EEXIST ? "appeared on the host meanwhile" : "cannot put it in place", errno);
    }
    if (linkat(AT_FDCWD, self.c_str(), dir, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0)
      return refusal("cannot put it in place", errno);
  }
  return put_in_place(dir, tmp, name, create);
}

class Applier {
 public:
  Applier(const ApplyOptions& o) : o_(o), upper_(o.upper), host_(o.work_dir) {}

  Applied apply(const FileChange& c) {
    Applied a{&c, false, ""};
    a.why = check_and_do(c);
    a.ok = a.why.empty();
    if (a.ok && c.kind == "dir" && c.change != "deleted") planned_dirs_.insert(c.path);
    return a;
  }

 private:
  std::string check_and_do(const FileChange& c) {
    if (!policy::path_under(c.path, o_.work_dir) || c.path == o_.work_dir || policy::normalize_path(c.path) != c.path)
      return "not a plain path below the work directory";
    if (protected_path(c.path, o_.work_dir, o_.protect)) return "a protected path (filesystem.protect)";
    if (!upper_.ok() || !host_.ok()) return "the session's layer or the work directory cannot be opened";
    if (!o_.into_empty && !host_.is(o_.work_dev, o_.work_ino))
      return "the work directory is not the one the session began in (replaced, or a symlink now)";
    const std::string rel = c.path.substr(o_.work_dir.size());
    std::string name;
    if (o_.into_empty && c.change == "deleted") return "";
    if (o_.into_empty) make_parents(rel);
    Fd dir(host_.open_parent(rel, &name));
    if (dir.fd < 0) {
      int err = errno;
      std::string parent = c.path.substr(0, c.path.rfind('/'));
      if (o_.dry_run && err == ENOENT && planned_dirs_.count(parent)) return "";  // made by an earlier step
      return refusal("its directory is not there on the host, or is reached through a symlink", err);
    }
    struct stat hs;
    bool exists = fstatat(dir.fd, name.c_str(), &hs, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists && !o_.into_empty && !(c.kind == "dir" && c.change == "created") &&
        int64_t(hs.st_ctim.tv_sec) * 1'000'000'000 + hs.st_ctim.tv_nsec >= o_.session_start_ns)
      return "changed on the host while the session ran or since";
    if (c.change == "deleted") return remove(c, rel, dir.fd, name, exists ? &hs : nullptr);
    if (c.kind == "dir") return make_dir(c, rel, dir.fd, name, exists ? &hs : nullptr);
    if (c.kind == "file") return put_file(c, rel, dir.fd, name, exists ? &hs : nullptr);
    if (c.kind == "symlink") return put_link(c, dir.fd, name, exists ? &hs : nullptr);
    return "not a file, directory or symlink";
  }

  std::string remove(const FileChange& c, const std::string& rel, int dir, const std::string& name,
                     const struct stat* hs) {
    if (!hs) return "";  // gone from the host already
    if (c.kind == "file" && !(S_ISREG(hs->st_mode) && host_.sha256(rel) == c.sha256_before))
      return "changed on the host since the session began";
    if (c.kind == "symlink" && !S_ISLNK(hs->st_mode)) return "no longer a symlink on the host";
    if (c.kind == "dir" && !S_ISDIR(hs->st_mode)) return "no longer a directory on the host";
    if (c.kind != "file" && c.kind != "symlink" && c.kind != "dir") return "not a file, directory or symlink";
    if (o_.dry_run) return "";
    if (unlinkat(dir, name.c_str(), c.kind == "dir" ? AT_REMOVEDIR : 0) != 0)
      return refusal(errno == ENOTEMPTY || errno == EEXIST ? "not empty on the host" : "cannot remove it", errno);
    return "";
  }

  std::string make_dir(const FileChange& c, const std::string& rel, int dir, const std::string& name,
                       const struct stat* hs) {
    if (hs && !S_ISDIR(hs->st_mode)) return "exists on the host and is not a directory";
    if (o_.dry_run) return "";
    if (!hs && (mkdirat(dir, name.c_str(), 0700) != 0 || fchownat(dir, name.c_str(), o_.uid, o_.gid, AT_SYMLINK_NOFOLLOW) != 0))
      return refusal("cannot make the directory", errno);
    Fd d(host_.open_at(rel, O_RDONLY | O_DIRECTORY));
    if (d.fd < 0 || fchmod(d.fd, host_mode(c.mode)) != 0) return refusal("cannot set the directory's mode", errno);
    return "";
  }

  std::string put_file(const FileChange& c, const std::string& rel, int dir, const std::string& name,
                       const struct stat* hs) {
    if (o_.into_empty) {
      if (hs) return "exists in the copy";
    } else if (c.change == "created" && hs) {
      if (S_ISREG(hs->st_mode) && host_.sha256(rel) == c.sha256_after) return "";  // the same bytes are there
      return "exists on the host";
    }
    if (c.change == "modified" && !o_.into_empty &&
        !(hs && S_ISREG(hs->st_mode) && !c.sha256_before.empty() && host_.sha256(rel) == c.sha256_before))
      return "changed on the host since the session began";
    if (o_.dry_run) return "";
    return put_copy(upper_, rel, dir, name, c.change == "created" || o_.into_empty, c, o_);
  }

  std::string put_link(const FileChange& c, int dir, const std::string& name, const struct stat* hs) {
    if (hs && S_ISDIR(hs->st_mode)) return "a directory on the host";
    if ((c.change == "created" || o_.into_empty) && hs) return "exists on the host";
    if (c.link_target.empty()) return "the symlink's target is not in the record";
    if (o_.dry_run) return "";
    std::string tmp = temp_name();
    if (symlinkat(c.link_target.c_str(), dir, tmp.c_str()) != 0) return refusal("cannot make the symlink", errno);
    if (fchownat(dir, tmp.c_str(), o_.uid, o_.gid, AT_SYMLINK_NOFOLLOW) != 0) {
      int err = errno;
      unlinkat(dir, tmp.c_str(), 0);
      return refusal("cannot set the symlink's owner", err);
    }
    return put_in_place(dir, tmp, name, c.change == "created" || o_.into_empty);
  }

  // into_empty: the directories above rel, below the copy's root.
  void make_parents(const std::string& rel) {
    for (size_t slash = rel.find('/', 1); slash != std::string::npos; slash = rel.find('/', slash + 1)) {
      std::string name;
      Fd dir(host_.open_parent(rel.substr(0, slash), &name));
      if (dir.fd < 0 || (mkdirat(dir.fd, name.c_str(), 0700) != 0 && errno != EEXIST)) return;
    }
  }

  const ApplyOptions& o_;
  Layer upper_, host_;
  std::set<std::string> planned_dirs_;  // dry run: directories an earlier step makes
};

}  // namespace

std::string protected_root(const std::string& path, const std::string& work_dir, const std::vector<std::string>& protect) {
  for (const auto& p : protect)
    if (std::string root = policy::normalize_path(work_dir + "/" + p); policy::path_under(path, root)) return root;
  // Any repository's git directory, or gitfile, at any depth: git takes
  // hooks and config from wherever one points (commondir, modules/,
  // worktrees), so no list of its files inside could be whole.
  if (!policy::path_under(path, work_dir)) return "";
  size_t git = (path + "/").find("/.git/", work_dir.size());
  return git == std::string::npos ? "" : path.substr(0, git + 5);
}

bool protected_path(const std::string& path, const std::string& work_dir, const std::vector<std::string>& protect) {
  return !protected_root(path, work_dir, protect).empty();
}

std::vector<Applied> apply_changes(const std::vector<FileChange>& changes, const ApplyOptions& o) {
  std::vector<const FileChange*> deletions, others;
  for (const auto& c : changes) (c.change == "deleted" ? deletions : others).push_back(&c);
  std::sort(deletions.begin(), deletions.end(), [](auto* a, auto* b) { return a->path > b->path; });
  std::sort(others.begin(), others.end(), [](auto* a, auto* b) { return a->path < b->path; });
  Applier applier(o);
  std::vector<Applied> out;
  out.reserve(changes.size());
  for (auto* list : {&deletions, &others})
    for (const FileChange* c : *list) out.push_back(applier.apply(*c));
  return out;
}

}  // namespace flightrec::sandbox
