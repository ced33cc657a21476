#include "sandbox/launch.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/openat2.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "common/system.h"
#include "policy/judge.h"

namespace flightrec::sandbox {
namespace {

// ---- in the children: no exceptions, no allocation that can be avoided ----

int g_report_fd = -1;

void report(Report::Kind kind, int value, const char* stage) {
  Report r;
  r.kind = kind;
  r.value = value;
  strncpy(r.stage, stage, sizeof(r.stage) - 1);
  (void)!write(g_report_fd, &r, sizeof(r));
}

[[noreturn]] void fail(const char* stage, int err = errno) {
  report(Report::SetupFailed, err, stage);
  _exit(125);
}

// A stage name with a path in it, for the report.
const char* stage_with(const char* what, const std::string& path) {
  static char buf[120];
  snprintf(buf, sizeof(buf), "%s %s", what, path.c_str());
  return buf;
}

void mount_or_fail(const char* src, const std::string& dst, const char* type, unsigned long flags,
                   const char* data) {
  if (mount(src, dst.c_str(), type, flags, data) != 0) fail(stage_with("mount", dst));
}

void bind_readonly(const std::string& src, const std::string& dst, bool recursive) {
  mount_or_fail(src.c_str(), dst, nullptr, MS_BIND | (recursive ? MS_REC : 0), nullptr);
  mount_or_fail(nullptr, dst, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr);
}

void lo_up() {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) fail("socket for lo");
  ifreq ifr{};
  strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) fail("SIOCGIFFLAGS lo");
  ifr.ifr_flags |= IFF_UP;
  if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) fail("SIOCSIFFLAGS lo");
  close(s);
}

// A read-only, detached copy of a host directory's mount, placed at `at`.
// With a user namespace fd, it is idmapped through it: files appear owned
// by the ids they map to inside (the work directory: its owner is the
// command's uid). Without, host ids stay unmapped inside (the root file
// system: what host root owns is nobody's to the command).
void clone_readonly(const std::string& from, const std::string& at, int userns_fd, int from_fd = -1) {
  int tree = from_fd >= 0 ? int(syscall(SYS_open_tree, from_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH))
                          : int(syscall(SYS_open_tree, AT_FDCWD, from.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
  if (tree < 0) fail(stage_with("open_tree", from));
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID;
  if (userns_fd >= 0) {
    attr.attr_set |= MOUNT_ATTR_IDMAP;
    attr.userns_fd = uint64_t(userns_fd);
  }
  if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) != 0)
    fail(stage_with(userns_fd >= 0 ? "idmapped mount of" : "read-only mount of", from));
  if (syscall(SYS_move_mount, tree, "", AT_FDCWD, at.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
    fail(stage_with("move_mount to", at));
  close(tree);
}

}  // namespace

std::string in_root(const std::string& root, const std::string& path) {
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT;
  int rootfd = open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0) return "";
  int fd = int(syscall(SYS_openat2, rootfd, path.c_str(), &how, sizeof(how)));
  close(rootfd);
  if (fd < 0) return "";
  char buf[4096];
  ssize_t n = readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf, sizeof(buf) - 1);
  close(fd);
  return n > 0 ? std::string(buf, size_t(n)) : "";
}

namespace {

// mkdir -p of `rel` below `base` (a tmpfs of ours), traversable only.
void make_path(const std::string& base, const std::string& rel) {
  std::string at = base;
  size_t i = 1;
  while (i <= rel.size()) {
    size_t j = rel.find('/', i);
    if (j == std::string::npos) j = rel.size();
    at += "/" + rel.substr(i, j - i);
    if (mkdir(at.c_str(), 0711) != 0 && errno != EEXIST) fail(stage_with("mkdir", at));
    i = j + 1;
  }
}

void minimal_dev(const std::string& root, const policy::Policy& p, const std::string& shm) {
  std::string dev = root + "/dev";
  mount_or_fail("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=1m");
  for (const char* name : {"null", "zero", "full", "random", "urandom", "tty"}) {
    std::string host = std::string("/dev/") + name, inside = dev + "/" + name;
    int fd = open(inside.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0) fail(stage_with("create", inside));
    close(fd);
    mount_or_fail(host.c_str(), inside, nullptr, MS_BIND, nullptr);
    // Read-only mounts: the devices still read and write, but the host's
    // inodes cannot be touched (utimensat, futimens fail with EROFS).
    mount_or_fail(nullptr, inside, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, nullptr);
  }
  for (const char* d : {"/pts", "/shm"})
    if (mkdir((dev + d).c_str(), 0755) != 0) fail(stage_with("mkdir", dev + d));
  if (p.filesystem.dev_pts) {
    mount_or_fail("devpts", dev + "/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620");
    if (symlink("pts/ptmx", (dev + "/ptmx").c_str()) != 0) fail("symlink /dev/ptmx");
  }
  mount_or_fail(shm.c_str(), dev + "/shm", nullptr, MS_BIND, nullptr);
  const char* links[][2] = {{"/proc/self/fd", "/fd"}, {"/proc/self/fd/0", "/stdin"},
                            {"/proc/self/fd/1", "/stdout"}, {"/proc/self/fd/2", "/stderr"}};
  for (const auto& l : links)
    if (symlink(l[0], (dev + l[1]).c_str()) != 0) fail("symlink in /dev");
}

// Hidden paths: an empty, unreadable directory or file in their place, so
// an attempt fails with EACCES (and the record names the rule). A hidden
// tree that holds the work directory stays traversable to it only.
void hide(const std::string& root, const std::string& path, const std::string& mask_file, const std::string& work_dir) {
  std::string at = in_root(root, path);
  if (at.empty()) {
    // Devices nobody may have (/dev/mem, /dev/kmsg): a placeholder in our /dev.
    if (path.starts_with("/dev/")) {
      int fd = open((root + path).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0);
      if (fd >= 0) close(fd);
    }
    return;
  }
  struct stat st;
  if (lstat(at.c_str(), &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    mount_or_fail(mask_file.c_str(), at, nullptr, MS_BIND | MS_RDONLY, nullptr);
    return;
  }
  bool holds_work = work_dir.starts_with(path + "/");
  mount_or_fail("tmpfs", at, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, holds_work ? "mode=711,size=64k" : "mode=000,size=4k");
  if (holds_work) make_path(at, work_dir.substr(path.size()));
  mount_or_fail(nullptr, at, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
}

// nested_sandboxes: every entry below `dir` (an ancestor of a readable
// tree, not readable itself) that is neither readable nor on the way to a
// readable tree is masked as a hidden path is. Symlinks are left alone:
// what they point to is judged by its own path.
void mask_unreadable(const std::string& root, const std::string& dir, const std::vector<std::string>& readable,
                     const std::string& mask, const std::string& work_dir) {
  auto covered = [&](const std::string& path) {
    for (const auto& r : readable)
      if (policy::path_under(path, r)) return true;
    return false;
  };
  auto leads_to = [&](const std::string& path) {
    for (const auto& r : readable)
      if (policy::path_under(r, path)) return true;
    return false;
  };
  std::string at = in_root(root, dir);
  DIR* d = at.empty() ? nullptr : opendir(at.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(d))
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  closedir(d);
  for (const auto& name : names) {
    std::string child = (dir == "/" ? "" : dir) + "/" + name;
    struct stat st;
    if (covered(child) || lstat((at + "/" + name).c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
    if (S_ISDIR(st.st_mode) && leads_to(child)) mask_unreadable(root, child, readable, mask, work_dir);
    else hide(root, child, mask, work_dir);
  }
}

// nested_sandboxes: the mount view does what Landlock's file rules would
// (they forbid mounts, so a nested sandbox could not be built under them):
// the root read-only but for the policy's writable trees, and what the
// policy does not let the command read masked.
void bound_by_mounts(const SandboxSpec& s, const std::string& root) {
  const policy::Policy& p = *s.policy;
  std::vector<std::string> readable = p.filesystem.read_only;
  readable.insert(readable.end(), p.filesystem.read_write.begin(), p.filesystem.read_write.end());
  for (const char* own : {"/proc", "/dev", "/tmp", "/sys"}) readable.push_back(own);
  readable.push_back(s.work_dir);
  if (std::find(readable.begin(), readable.end(), "/") == readable.end())
    mask_unreadable(root, "/", readable, s.session_dir + "/mask", s.work_dir);
  // Writable trees keep their own (read-write) mount; a bind copies the
  // flags of its source, so they are made before the root turns read-only.
  for (const auto& w : p.filesystem.read_write)
    if (std::string at = in_root(root, w); !at.empty()) mount_or_fail(at.c_str(), at, nullptr, MS_BIND | MS_REC, nullptr);
  mount_or_fail(nullptr, root, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr);
}

void build_root(const SandboxSpec& s, int userns_fd) {
  const policy::Policy& p = *s.policy;
  const std::string& d = s.session_dir;
  const std::string root = d + "/root";
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail("making mounts private");
  // The root: the policy's root file system read-only below, the session's
  // writes above.
  clone_readonly(p.filesystem.root, d + "/lower", -1);
  // index=on: a hard link to a lower file keeps one inode number for both
  // names after the copy-up (git's local clone checks that and fails
  // without it); overlayfs falls back by itself where a layer cannot.
  std::string opts = "lowerdir=" + d + "/lower,upperdir=" + d + "/upper,workdir=" + d + "/work,index=on";
  mount_or_fail("overlay", root, "overlay", MS_NOSUID | MS_NODEV, opts.c_str());
  if (p.filesystem.proc) mount_or_fail("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  // /tmp and /dev/shm: directories of the session's (bounded) directory,
  // where flightrec can diff them at the end like the overlays' layers.
  minimal_dev(root, p, d + "/shm");
  mount_or_fail((d + "/tmp").c_str(), root + "/tmp", nullptr, MS_BIND, nullptr);
  // The agent's config from the invoking user's home: the host's read,
  // the session's writes above it.
  for (size_t i = 0; i < s.home_dirs.size(); ++i) {
    std::string n = std::to_string(i);
    // The directory flightrec checked (its owner, no symlink), found again
    // in this mount namespace: the same inode, or nothing.
    const SandboxSpec::HomeDir& h = s.home_dirs[i];
    int fd = open(h.path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_dev != h.dev || st.st_ino != h.ino) fail(stage_with("sharing", h.path), EXDEV);
    clone_readonly(h.path, d + "/home-lower-" + n, userns_fd, fd);
    close(fd);
    std::string o = "lowerdir=" + d + "/home-lower-" + n + ",upperdir=" + d + "/home-upper-" + n + ",workdir=" + d +
                    "/home-work-" + n;
    mount_or_fail("overlay", root + "/tmp/home/" + h.name, "overlay", MS_NOSUID | MS_NODEV, o.c_str());
  }
  if (p.filesystem.sys) bind_readonly("/sys", root + "/sys", true);
  // Readable trees that are file systems of their own (the overlay shows
  // only the root file system's directories).
  struct stat root_st, st;
  if (stat(p.filesystem.root.c_str(), &root_st) != 0) fail(stage_with("stat", p.filesystem.root));
  for (const auto& r : p.filesystem.read_only)
    if (r != "/" && stat(r.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev != root_st.st_dev) {
      std::string at = in_root(root, r);
      if (!at.empty()) bind_readonly(r, at, true);
    }
  // Hidden paths outside the work directory now, those inside it once it
  // is mounted (else its overlay would cover their masks).
  auto inside_work = [&](const std::string& h) { return h == s.work_dir || h.starts_with(s.work_dir + "/"); };
  // A nested sandbox mounts a /proc of its own, which the kernel allows
  // only where no locked mount covers part of ours: nothing is hidden
  // there then (sysrq-trigger and kcore stay out of reach: their owner,
  // host root, is nobody inside).
  for (const auto& h : s.hidden)
    if (!inside_work(h) && !(p.nested_sandboxes && policy::path_under(h, "/proc"))) hide(root, h, d + "/mask", s.work_dir);
  // The work directory: an overlay of its own, its files owned inside by
  // whom owns them outside (the command runs as the directory's owner).
  if (s.work_dir.starts_with("/tmp/")) make_path(root + "/tmp", s.work_dir.substr(4));
  std::string work_at = in_root(root, s.work_dir);
  if (work_at.empty()) fail(stage_with("finding the work directory inside", s.work_dir), ENOENT);
  clone_readonly(s.work_lower, d + "/lower-work", userns_fd);
  opts = "lowerdir=" + d + "/lower-work,upperdir=" + d + "/upper-work,workdir=" + d + "/work-work,index=on";
  mount_or_fail("overlay", work_at, "overlay", MS_NOSUID | MS_NODEV, opts.c_str());
  for (const auto& h : s.hidden)
    if (inside_work(h) && h != s.work_dir) hide(root, h, d + "/mask", s.work_dir);
  // Protected paths that exist: read-only where they are (those made in
  // the session are never written to the host: sandbox/apply.h).
  for (const auto& p : s.protect)
    if (std::string at = in_root(root, p); !at.empty()) bind_readonly(at, at, false);
  if (p.nested_sandboxes) bound_by_mounts(s, root);
  if (chdir(root.c_str()) != 0) fail("chdir to the new root");
  if (syscall(SYS_pivot_root, ".", ".") != 0) fail("pivot_root");
  if (umount2(".", MNT_DETACH) != 0) fail("detaching the host root");
  if (chdir(s.work_dir.c_str()) != 0) fail(stage_with("chdir to the work directory", s.work_dir));
}

// Bounding set and securebits first (they need CAP_SETPCAP), then the
// command's ids (CAP_SETUID/SETGID), then nothing but the kept capabilities.
void drop_privileges(const policy::Policy& p, uid_t uid, gid_t gid) {
  uint64_t keep = 0;
  for (const auto& name : p.keep_capabilities)
    if (int cap = policy::capability_number(name); cap >= 0 && cap <= CAP_LAST_CAP) keep |= 1ull << cap;
  // A nested user namespace may map its creator's uid 0 only with
  // CAP_SETFCAP (Linux 5.12): a command that runs as root inside keeps it
  // to build its own sandbox. It reaches no further than ours: file
  // capabilities set with it are our namespace's, and no_new_privs
  // ignores them at exec.
  if (p.nested_sandboxes && uid == 0) keep |= 1ull << CAP_SETFCAP;
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap)
    if (!(keep & (1ull << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
      fail("dropping the capability bounding set");
  // Root inside gains nothing from exec or setuid: fixed, for good.
  int bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
             SECBIT_KEEP_CAPS_LOCKED | (keep ? 0 : SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED);
  if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0) fail("setting securebits");
  if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0)
    fail("taking the work directory owner's ids");
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  for (int i = 0; i < 2; ++i) {
    uint32_t word = uint32_t(keep >> (32 * i));
    data[i].effective = data[i].permitted = data[i].inheritable = word;
  }
  if (syscall(SYS_capset, &hdr, data) != 0) fail("dropping capabilities");
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap)
    if (keep & (1ull << cap)) prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0);
}

void set_rlimits(const policy::Limits& l) {
  rlimit none{0, 0};
  setrlimit(RLIMIT_CORE, &none);
  if (l.file_size) {
    rlimit r{l.file_size, l.file_size};
    if (setrlimit(RLIMIT_FSIZE, &r) != 0) fail("RLIMIT_FSIZE");
  }
  if (l.open_files) {
    rlimit r{l.open_files, l.open_files};
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) fail("RLIMIT_NOFILE");
  }
}

[[noreturn]] void exec_command(const SandboxSpec& s, char* const* argv, char* const* envp) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  set_rlimits(s.policy->limits);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("no_new_privs");
  if (int err = s.landlock.apply()) fail("Landlock", err);
  drop_privileges(*s.policy, s.uid, s.gid);
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // cleared by the id change
  if (getppid() != 1) _exit(125);  // the sandbox's init (pid 1 inside) is gone
  // A session of its own: no controlling terminal to push input into
  // (TIOCSTI) or to stop.
  if (setsid() < 0) fail("setsid");
  if (s.seccomp)
    if (int err = s.seccomp->load()) fail("loading the seccomp filter", err);
  if (s.notify_sock >= 0) {
    // The listener goes to the grant supervisor; the command keeps no copy.
    int fd = s.seccomp ? s.seccomp->notify_fd() : -1;
    if (fd < 0) fail("getting the seccomp listener", EINVAL);
    if (int err = send_fd(s.notify_sock, fd)) fail("passing the seccomp listener to the supervisor", err);
    close(fd);
    close(s.notify_sock);
  }
  execve(s.program.c_str(), argv, envp);
  int err = errno;
  report(Report::ExecFailed, err, "exec");
  _exit(err == ENOENT ? 127 : 126);
}

// pid 1 of the sandbox: starts the command, passes termination signals on,
// reaps orphans, and reports the command's status when it ends.
[[noreturn]] void init_loop(pid_t command) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, sig);
  for (;;) {
    siginfo_t info;
    int sig = sigwaitinfo(&set, &info);
    if (sig < 0) continue;
    if (sig != SIGCHLD) {
      kill(command, sig);
      continue;
    }
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
      if (pid == command) {
        report(Report::Exited, status, "exited");
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
      }
  }
}

[[noreturn]] void sandbox_init(const SandboxSpec& s, int go_fd, int userns_fd, char* const* argv,
                               char* const* envp) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // Into the limits' v1 cgroups, before anything it makes could escape
  // them (ResourceLimits::v1_task_files).
  for (const auto& tasks : s.v1_tasks) {
    int fd = open(tasks.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) fail("joining the limits' v1 cgroups");
    close(fd);
  }
  // Keep only what the sandbox needs: the record, keys and BPF objects of
  // flightrec must not be reachable from inside.
  for (int fd = 3; fd < 1024; ++fd)
    if (fd != go_fd && fd != userns_fd && fd != g_report_fd && fd != s.notify_sock) close(fd);
  syscall(SYS_close_range, 1024, ~0u, 0);
  const policy::Policy& p = *s.policy;
  if (sethostname(p.hostname.data(), p.hostname.size()) != 0) fail("sethostname");
  if (policy::own_network(p)) lo_up();
  build_root(s, userns_fd);
  report(Report::Ready, 0, "ready");

  char byte;
  if (read(go_fd, &byte, 1) != 1) _exit(125);  // flightrec went away
  close(go_fd);
  if (setns(userns_fd, CLONE_NEWUSER) != 0) fail("entering the user namespace");
  close(userns_fd);
  if (setgroups(0, nullptr) != 0 || setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0)
    fail("becoming root of the user namespace");
  // Changing ids cleared the parent-death signal: set it again, and make
  // sure flightrec did not die in between (its end of the report pipe is
  // then closed; getppid() says nothing to a pid namespace's init).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  pollfd pfd{g_report_fd, POLLOUT, 0};
  if (poll(&pfd, 1, 0) < 0 || (pfd.revents & (POLLERR | POLLHUP))) _exit(125);
  prctl(PR_SET_DUMPABLE, 0);

  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, sig);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  pid_t command = fork();
  if (command < 0) fail("fork");
  if (command == 0) exec_command(s, argv, envp);
  if (s.notify_sock >= 0) close(s.notify_sock);
  init_loop(command);
}

// A user namespace mapping 0..65535 inside to id_base.. outside, held by fd.
int make_userns(uid_t base) {
  int sync[2];
  if (pipe2(sync, O_CLOEXEC) != 0) throw Error(errno_message("pipe", errno));
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) throw Error(errno_message("fork", errno));
  if (pid == 0) {
    close(sync[0]);
    char ok = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
    // It waits to be killed once its namespace is open; a SIGKILLed
    // flightrec never does that, so it dies with flightrec instead (set
    // after the unshare, whose new credentials clear it, then checked: the
    // parent may be gone already). Otherwise it would pause for good,
    // holding flightrec's stdout, stderr and record.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);
    (void)!write(sync[1], &ok, 1);
    pause();
    _exit(0);
  }
  close(sync[1]);
  char ok = 0;
  bool created = read(sync[0], &ok, 1) == 1 && ok == 'y';
  close(sync[0]);
  int fd = -1;
  std::string err;
  if (created) {
    std::string map = "0 " + std::to_string(base) + " " + std::to_string(kSandboxIdCount) + "\n";
    try {
      write_file("/proc/" + std::to_string(pid) + "/uid_map", map);
      write_file("/proc/" + std::to_string(pid) + "/gid_map", map);
      fd = ::open(("/proc/" + std::to_string(pid) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) err = errno_message("opening the user namespace", errno);
    } catch (const Error& e) {
      err = e.what();
    }
  } else {
    err = "user namespaces are not available (unshare(CLONE_NEWUSER) failed)";
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  if (fd < 0) throw Error("cannot create the sandbox's user namespace: " + err);
  return fd;
}

}  // namespace

SessionDir::SessionDir(const std::string& name, bool keep, uint64_t size_bytes) : keep_(keep) {
  std::string base = "/var/lib/flightrec/sessions";
  std::filesystem::create_directories(base);
  chmod("/var/lib/flightrec", 0700);
  path_ = base + "/" + name;
  if (mkdir(path_.c_str(), 0700) != 0) throw Error(errno_message("cannot create " + path_, errno));
  if (!keep) {
    // In memory and bounded: what the command writes cannot fill the disk.
    std::string opts = "mode=0700,size=" + std::to_string(size_bytes);
    if (mount("flightrec-session", path_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
      throw Error(errno_message("cannot mount a tmpfs at " + path_, errno));
    mounted_ = true;
  }
  // Overlay directories: created by us, written by the overlay with our
  // credentials (files the command creates are owned by its ids).
  for (const char* d : {"/upper", "/work", "/lower", "/root", "/upper-work", "/work-work", "/lower-work", "/empty"})
    if (mkdir((path_ + d).c_str(), 0755) != 0) throw Error(errno_message("cannot create " + path_ + d, errno));
  for (const char* d : {"/tmp", "/shm"})  // the sandbox's /tmp and /dev/shm
    if (mkdir((path_ + d).c_str(), 0755) != 0 || chmod((path_ + d).c_str(), 01777) != 0)
      throw Error(errno_message("cannot create " + path_ + d, errno));
  int fd = ::open((path_ + "/mask").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0);
  if (fd < 0) throw Error(errno_message("cannot create " + path_ + "/mask", errno));
  close(fd);
}

SessionDir::~SessionDir() { discard(); }

void SessionDir::discard() {
  if (path_.empty() || keep_) return;
  if (mounted_) umount2(path_.c_str(), MNT_DETACH);
  mounted_ = false;
  rmdir(path_.c_str());
  path_.clear();
}

SandboxChild spawn_sandboxed(const SandboxSpec& s) {
  int userns_fd = make_userns(s.id_base);
  int go[2], rep[2];
  if (pipe2(go, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0) throw Error(errno_message("pipe", errno));
  std::vector<char*> argv, envp;
  for (const auto& a : s.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : s.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  unsigned long flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
  if (policy::own_network(*s.policy)) flags |= CLONE_NEWNET;
  pid_t pid = -1;
  try {
    pid = s.cgroup ? s.cgroup->fork_into(flags) : pid_t(syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
  } catch (...) {
    close(userns_fd);
    throw;
  }
  if (pid < 0) {
    int err = errno;
    close(userns_fd);
    throw Error(errno_message("cannot create the sandbox's namespaces", err));
  }
  if (pid == 0) {
    close(go[1]);
    close(rep[0]);
    g_report_fd = rep[1];
    sandbox_init(s, go[0], userns_fd, argv.data(), envp.data());
  }
  close(go[0]);
  close(rep[1]);
  close(userns_fd);
  return SandboxChild{pid, go[1], rep[0]};
}

void await_ready(SandboxChild& child) {
  Report r;
  ssize_t n;
  do n = read(child.report_fd, &r, sizeof(r));
  while (n < 0 && errno == EINTR);
  if (n == ssize_t(sizeof(r)) && r.kind == Report::Ready) {
    await_asleep(child.pid);  // between its report and its read of go, it may still run
    return;
  }
  r.stage[sizeof(r.stage) - 1] = 0;
  std::string why = n == ssize_t(sizeof(r)) && r.kind == Report::SetupFailed
                        ? std::string(r.stage) + ": " + strerror(r.value)
                        : "it ended without saying why";
  close(child.go_fd);
  close(child.report_fd);
  waitpid(child.pid, nullptr, 0);
  child = SandboxChild{};
  throw Error("cannot build the sandbox: " + why);
}

void await_asleep(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  uint64_t deadline = mono_ns() + 1'000'000'000ull;
  for (unsigned spins = 0; mono_ns() < deadline; ++spins) {
    std::optional<std::string> stat = try_read_file(path);
    size_t paren = stat ? stat->rfind(')') : std::string::npos;
    if (paren == std::string::npos || paren + 2 >= stat->size()) return;  // gone
    char state = (*stat)[paren + 2];
    if (state != 'R' && state != 'D') return;  // asleep (S), or stopped, or dead
    if (spins < 100) sched_yield();
    else usleep(100);
  }
}

Outcome read_reports(int fd) {
  Outcome out;
  Report r;
  while (read(fd, &r, sizeof(r)) == sizeof(r)) {
    r.stage[sizeof(r.stage) - 1] = 0;
    if (r.kind == Report::SetupFailed && out.setup_error.empty())
      out.setup_error = std::string(r.stage) + ": " + strerror(r.value);
    else if (r.kind == Report::ExecFailed)
      out.exec_errno = r.value;
    else if (r.kind == Report::Exited)
      out.status = r.value;
  }
  return out;
}

}  // namespace flightrec::sandbox
