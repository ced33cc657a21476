#include "sandbox/leftovers.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/system.h"
#include "sandbox/cgroup.h"

namespace flightrec::sandbox {
namespace {

const std::string kSessions = "/var/lib/flightrec/sessions";
const std::string kChanges = "/var/lib/flightrec/changes";
const std::string kGrants = "/run/flightrec/grants";

// Only names flightrec makes: nothing read from a directory listing can
// name a path outside these trees.
bool session_name(const std::string& name) {
  static const std::regex re("(run-[0-9]{1,10}-[0-9]{1,20}|probe-[0-9]{1,10}|probe-lite-[0-9]{1,10})");
  return std::regex_match(name, re);
}

std::vector<std::string> list(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

bool is_dir(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Mount points in this mount namespace (mountinfo's fifth field).
std::vector<std::string> mount_points() {
  std::vector<std::string> out;
  std::istringstream in(try_read_file("/proc/self/mountinfo").value_or(""));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    f >> id >> parent >> dev >> root >> point;
    out.push_back(point);
  }
  return out;
}

bool is_mount_point(const std::string& path) {
  for (const auto& p : mount_points())
    if (p == path) return true;
  return false;
}

// Where each cgroup v1 hierarchy is mounted (limits: memory, pids, cpu).
std::vector<std::string> v1_hierarchies() {
  std::vector<std::string> out;
  std::istringstream in(try_read_file("/proc/self/mountinfo").value_or(""));
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(" - cgroup ") == std::string::npos) continue;
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    f >> id >> parent >> dev >> root >> point;
    out.push_back(point);
  }
  return out;
}

std::string v2_root() {
  try {
    return cgroup2_root();
  } catch (const Error&) {
    return "";
  }
}

// The pids in a cgroup and below (v2: cgroup.procs; v1: tasks).
std::vector<pid_t> members(const std::string& dir, const char* file) {
  std::vector<pid_t> out;
  std::istringstream in(try_read_file(dir + "/" + file).value_or(""));
  for (pid_t p; in >> p;) out.push_back(p);
  for (const auto& sub : list(dir))
    if (is_dir(dir + "/" + sub))
      for (pid_t p : members(dir + "/" + sub, file)) out.push_back(p);
  return out;
}

// Kills every process in the cgroup and below; how many there were.
size_t kill_members(const std::string& dir, const char* file, bool v2, uint64_t wait_ns) {
  size_t count = members(dir, file).size();
  if (count == 0) return 0;
  if (v2) {
    try {
      write_file(dir + "/cgroup.freeze", "0");  // a frozen session (a policy kill under way)
    } catch (const Error&) {  // not frozen, or gone: the kill below works either way
    }
  }
  bool killed = false;
  if (v2) {
    try {
      write_file(dir + "/cgroup.kill", "1");
      killed = true;
    } catch (const Error&) {  // before Linux 5.14
    }
  }
  uint64_t deadline = mono_ns() + wait_ns;
  while (mono_ns() < deadline) {
    std::vector<pid_t> left = members(dir, file);
    if (left.empty()) break;
    if (!killed)
      for (pid_t p : left) kill(p, SIGKILL);
    usleep(10'000);
  }
  return count;
}

// Removes a cgroup directory and those below it, deepest first.
bool remove_cgroup_tree(const std::string& dir, std::string* why) {
  for (const auto& sub : list(dir))
    if (is_dir(dir + "/" + sub) && !remove_cgroup_tree(dir + "/" + sub, why)) return false;
  if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
  *why = errno_message("cannot remove " + dir, errno);
  return false;
}

std::string mib(uint64_t bytes) { return std::to_string((bytes + (1 << 19)) >> 20) + " MiB"; }

// Removes what is left of `name`. kill_wait_ns: its processes are killed
// (a dead owner's) and awaited this long; at 0 a cgroup with processes is
// left (rmdir refuses it).
void remove_resources(const std::string& name, uint64_t kill_wait_ns, bool dry_run, Leftover& out) {
  auto did = [&](const std::string& what) { out.reaped.push_back(what); };
  auto cgroup = [&](const std::string& dir, const char* file, bool v2) {
    if (!is_dir(dir)) return;
    size_t n = dry_run ? members(dir, file).size() : kill_wait_ns ? kill_members(dir, file, v2, kill_wait_ns) : 0;
    std::string what = "cgroup " + dir + (n ? " (" + std::to_string(n) + " processes killed)" : "");
    std::string why;
    if (dry_run) did(what);
    else if (remove_cgroup_tree(dir, &why)) did(what);
    else out.failed.push_back(why);
  };
  if (std::string root = v2_root(); !root.empty()) cgroup(root + "/flightrec/" + name, "cgroup.procs", true);
  for (const auto& h : v1_hierarchies()) cgroup(h + "/flightrec/" + name, "tasks", false);

  std::string dir = kSessions + "/" + name;
  bool mounted = false;
  for (int i = 0; i < 8 && is_mount_point(dir); ++i) {
    mounted = true;
    // A session tmpfs on this namespace's mount table (flightrec before
    // its own mount namespace, or where one could not be made).
    struct statfs fs {};
    uint64_t used = statfs(dir.c_str(), &fs) == 0 ? uint64_t(fs.f_blocks - fs.f_bfree) * uint64_t(fs.f_bsize) : 0;
    if (dry_run) {
      did("tmpfs at " + dir + " (" + mib(used) + ")");
      break;
    }
    if (umount2(dir.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) {
      out.failed.push_back(errno_message("cannot unmount " + dir, errno));
      break;
    }
    did("tmpfs at " + dir + " (" + mib(used) + " given back)");
  }
  if (is_dir(dir)) {
    if (dry_run && mounted)  // what is beneath the mount is not visible yet
      did("session directory " + dir);
    else if (!list(dir).empty())
      out.kept.push_back(dir + " (keep_changes: the session's layers)");
    else if (dry_run || rmdir(dir.c_str()) == 0)
      did("session directory " + dir);
    else
      out.failed.push_back(errno_message("cannot remove " + dir, errno));
  }
  std::string kept = kChanges + "/" + name;
  if (is_dir(kept))
    out.kept.push_back(access((kept + "/meta.json").c_str(), F_OK) == 0
                           ? kept + " (changes kept for `flightrec apply`)"
                           : kept + " (incomplete: its session ended while copying them; `rm -r` it once read)");

  std::string sock = kGrants + "/" + name + ".sock";
  struct stat st;
  if (lstat(sock.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    if (dry_run || unlink(sock.c_str()) == 0) did("grant socket " + sock);
    else out.failed.push_back(errno_message("cannot remove " + sock, errno));
  }
}

// Sessions of flightrec before claims: alive while the flightrec process
// their name carries is (a pid reused by another flightrec only delays).
bool legacy_owner_alive(const std::string& name) {
  size_t digits = name.find_first_of("0123456789");
  pid_t pid = pid_t(std::stol(name.substr(digits)));
  std::string comm = try_read_file("/proc/" + std::to_string(pid) + "/comm").value_or("");
  return comm == "flightrec\n";
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace

SessionClaim::SessionClaim(const std::string& name) : name_(name), path_(kSessions + "/" + name + ".lock") {
  if (!session_name(name)) throw Error("not a session name: " + name);
  std::filesystem::create_directories(kSessions);
  chmod("/var/lib/flightrec", 0700);
  // A reaper may take a claim between its creation and our lock, find its
  // owner gone and unlink it: then it is made again.
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) throw Error(errno_message("cannot create " + path_, errno));
    struct stat st;
    if (flock(fd, LOCK_EX) == 0 && fstat(fd, &st) == 0 && st.st_nlink > 0) {
      std::string pid = std::to_string(getpid()) + "\n";
      (void)!ftruncate(fd, 0);
      (void)!pwrite(fd, pid.data(), pid.size(), 0);  // for people; the lock is what counts
      fd_ = fd;
      return;
    }
    close(fd);
  }
  throw Error("cannot claim " + path_ + ": it is removed as soon as it is made");
}

SessionClaim::~SessionClaim() {
  if (fd_ < 0) return;
  Leftover ignored;
  remove_resources(name_, 0, false, ignored);
  unlink(path_.c_str());
  close(fd_);
}

std::vector<Leftover> reap_leftovers(bool dry_run, bool with_kept, unsigned wait_ms) {
  std::set<std::string> names;
  auto add = [&](std::string entry, const std::string& suffix) {
    if (!suffix.empty()) {
      if (entry.size() <= suffix.size() || entry.compare(entry.size() - suffix.size(), suffix.size(), suffix) != 0) return;
      entry.resize(entry.size() - suffix.size());
    }
    if (session_name(entry)) names.insert(entry);
  };
  for (const auto& e : list(kSessions)) {
    add(e, "");
    add(e, ".lock");
  }
  if (std::string root = v2_root(); !root.empty())
    for (const auto& e : list(root + "/flightrec")) add(e, "");
  for (const auto& h : v1_hierarchies())
    for (const auto& e : list(h + "/flightrec")) add(e, "");
  for (const auto& e : list(kGrants)) add(e, ".sock");
  for (const auto& e : list(kChanges))
    if (with_kept) add(e, "");

  std::vector<Leftover> out;
  for (const auto& name : names) {
    std::string lock = kSessions + "/" + name + ".lock";
    int fd = ::open(lock.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      struct stat st;
      if (flock(fd, LOCK_EX | LOCK_NB) != 0 || fstat(fd, &st) != 0 || st.st_nlink == 0) {
        close(fd);  // alive (or reaped meanwhile by another)
        continue;
      }
    } else if (legacy_owner_alive(name)) {
      continue;
    }
    Leftover l{name, {}, {}, {}};
    remove_resources(name, uint64_t(std::max(1u, wait_ms)) * 1'000'000ull, dry_run, l);
    if (fd >= 0) {
      if (!dry_run) unlink(lock.c_str());
      close(fd);
    }
    if (!l.reaped.empty() || !l.failed.empty() || (with_kept && !l.kept.empty())) out.push_back(std::move(l));
  }
  return out;
}

std::string describe(const Leftover& l) {
  std::string out = l.name + ":";
  if (!l.reaped.empty()) out += " reaped " + join(l.reaped) + ";";
  if (!l.kept.empty()) out += " kept " + join(l.kept) + ";";
  if (!l.failed.empty()) out += " FAILED: " + join(l.failed) + ";";
  out.pop_back();
  return out;
}

bool own_mount_namespace() {
  if (unshare(CLONE_NEWNS) != 0) return false;
  // Slave: the host's mounts and unmounts still arrive here; ours do not
  // leave. (If this fails the new namespace still shares with the host.)
  return mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) == 0;
}

}  // namespace flightrec::sandbox
