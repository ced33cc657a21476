#include "sandbox/landlock.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace flightrec::sandbox {
namespace {

// Debian 12's kernel headers stop at ABI 3; newer parts of the ABI by value.
struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4
  uint64_t scoped;              // ABI 6
};
struct NetPortAttr {
  uint64_t allowed_access;
  uint64_t port;
};
constexpr uint64_t kFsTruncate = 1ull << 14;   // ABI 3
constexpr uint64_t kFsIoctlDev = 1ull << 15;   // ABI 5
constexpr uint64_t kNetConnectTcp = 1ull << 1; // ABI 4
constexpr uint64_t kScopeAbstractUnix = 1ull << 0, kScopeSignal = 1ull << 1;  // ABI 6
constexpr int kRuleNetPort = 2;

constexpr uint64_t kRead = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
constexpr uint64_t kWriteV1 = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                              LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
                              LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                              LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |
                              LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;

uint64_t fs_rights(int abi) {
  uint64_t all = LANDLOCK_ACCESS_FS_EXECUTE | kRead | kWriteV1;
  if (abi >= 2) all |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) all |= kFsTruncate;
  if (abi >= 5) all |= kFsIoctlDev;
  return all;
}

int add_path(int ruleset, const std::string& path, uint64_t access) {
  int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? 0 : errno;  // a listed path that does not exist here
  struct stat st;
  // Directory-only rights cannot be granted on a file.
  if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
    access &= LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
              kFsTruncate | kFsIoctlDev;
  landlock_path_beneath_attr attr{};
  attr.allowed_access = access;
  attr.parent_fd = fd;
  int rc = int(syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0));
  int err = rc == 0 ? 0 : errno;
  close(fd);
  return err;
}

}  // namespace

int landlock_abi() {
  long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi < 0 ? 0 : int(abi);
}

LandlockPlan LandlockPlan::from(const policy::Policy& p, const std::string& work_dir,
                                const std::string& command) {
  LandlockPlan plan;
  plan.abi = landlock_abi();
  plan.filesystem = !p.nested_sandboxes;
  const auto& fs = p.filesystem;
  plan.read = fs.read_only;
  plan.read.push_back("/proc");
  plan.write = fs.read_write;
  plan.write.push_back(work_dir);
  plan.write.push_back("/tmp");
  plan.write.push_back("/dev/shm");
  plan.write.push_back("/dev/pts");
  plan.write_files = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx"};
  plan.exec = policy::executable_paths(p, work_dir, command);
  // Exec grants widen the exec list at run time, which a ruleset cannot:
  // under ask.exec BPF-LSM judges every exec (the run refuses to start
  // without it) and Landlock lets anything readable run (besides /proc).
  if (p.ask.exec) {
    for (const auto* trees : {&fs.read_only, &fs.read_write})
      plan.exec.insert(plan.exec.end(), trees->begin(), trees->end());
    for (const char* t : {"/tmp", "/dev/shm"}) plan.exec.push_back(t);
    plan.exec.push_back(work_dir);
  }
  // A ruleset cannot widen once applied: with runtime connect grants the
  // cgroup programs alone judge connects (they read the grants' tickets).
  if (p.network == policy::Network::Allowlist && !p.ask.connect) {
    plan.restrict_connect = true;
    for (const auto& e : p.allow) {
      if (e.port == 0) plan.restrict_connect = false;  // any port: leave it to the egress filter
      plan.connect_ports.push_back(e.port);
    }
    for (const auto& h : p.allow_hosts) {
      if (h.port == 0) plan.restrict_connect = false;
      plan.connect_ports.push_back(h.port);
    }
    plan.connect_ports.push_back(53);  // the session's resolver, over TCP (the egress filter keeps it to its address)
  }
  return plan;
}

int LandlockPlan::apply() const {
  if (abi <= 0) return 0;
  if (!filesystem && !(abi >= 4 && restrict_connect) && abi < 6) return 0;  // nothing it could handle
  RulesetAttr attr{};
  attr.handled_access_fs = filesystem ? fs_rights(abi) : 0;
  size_t size = sizeof(uint64_t);
  if (abi >= 4) {
    size = 2 * sizeof(uint64_t);
    if (restrict_connect) attr.handled_access_net = kNetConnectTcp;
  }
  if (abi >= 6) {
    size = sizeof(RulesetAttr);
    attr.scoped = kScopeAbstractUnix | kScopeSignal;
  }
  int ruleset = int(syscall(SYS_landlock_create_ruleset, &attr, size, 0));
  if (ruleset < 0) return errno;
  const uint64_t all = fs_rights(abi);
  const uint64_t read_rights = kRead;
  const uint64_t write_rights = all & ~LANDLOCK_ACCESS_FS_EXECUTE;
  int err = 0;
  if (filesystem) {
    for (const auto& p : read) err = err ? err : add_path(ruleset, p, read_rights);
    for (const auto& p : write) err = err ? err : add_path(ruleset, p, write_rights);
    for (const auto& p : write_files) err = err ? err : add_path(ruleset, p, write_rights);
    for (const auto& p : exec) err = err ? err : add_path(ruleset, p, LANDLOCK_ACCESS_FS_EXECUTE | read_rights);
  }
  if (abi >= 4 && restrict_connect)
    for (uint16_t port : connect_ports) {
      NetPortAttr np{kNetConnectTcp, port};
      if (!err && syscall(SYS_landlock_add_rule, ruleset, kRuleNetPort, &np, 0) != 0) err = errno;
    }
  if (!err && syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) err = errno;
  close(ruleset);
  return err;
}

std::string LandlockPlan::describe() const {
  if (abi <= 0) return "unavailable";
  std::string s = "abi " + std::to_string(abi) + (filesystem ? ": filesystem" : ": no filesystem rules (nested sandboxes: the mount view bounds files)");
  if (abi >= 4 && restrict_connect) s += ", tcp connect ports";
  if (abi >= 6) s += ", abstract unix sockets and signals scoped";
  return s;
}

}  // namespace flightrec::sandbox
