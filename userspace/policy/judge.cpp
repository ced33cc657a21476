#include "policy/judge.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <set>

#include "policy/network.h"
#include "policy/processes.h"

namespace flightrec::policy {
namespace {

bool arg_matches(const ArgCheck& c, uint64_t arg) {
  switch (c.op) {
    case ArgCheck::Op::Eq: return arg == c.value;
    case ArgCheck::Op::Ne: return arg != c.value;
    case ArgCheck::Op::Lt: return arg < c.value;
    case ArgCheck::Op::Le: return arg <= c.value;
    case ArgCheck::Op::Gt: return arg > c.value;
    case ArgCheck::Op::Ge: return arg >= c.value;
    case ArgCheck::Op::MaskedEq: return (arg & c.value) == c.value_two;
  }
  return false;
}

// Syscalls that change the file system at their path argument(s).
const std::set<std::string> kWriteCalls = {
    "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
    "link", "linkat", "symlink", "symlinkat", "truncate", "mknod", "mknodat", "chmod",
    "fchmodat", "fchmodat2", "chown", "lchown", "fchownat", "utime", "utimes", "futimesat", "utimensat",
    "creat", "setxattr", "lsetxattr", "removexattr", "lremovexattr", "setxattrat", "removexattrat",
    "file_setattr"};

bool write_intent(const std::string& name, const events::Entry& e) {
  if (kWriteCalls.count(name)) return true;
  if (name == "open" || name == "openat" || name == "openat2") return opens_for_writing(e.int_or("flags"));
  return false;
}

// /proc/N/cwd, /proc/N/fd/M, /proc/N/root: links to other files, which a
// lexical normalisation cannot follow; such a path is judged as a file path.
bool through_proc_link(const std::string& raw) {
  return raw.starts_with("/proc/") && (raw.find("/cwd") != std::string::npos || raw.find("/fd/") != std::string::npos ||
                                       raw.find("/root") != std::string::npos || raw.find("/exe") != std::string::npos);
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? "/" : path.substr(0, slash);
}

bool exists_on_host(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 || errno != ENOENT;  // unknown counts as there
}

}  // namespace

bool harmless_probe_read(const std::string& path) {
  // What runtimes read to size themselves: CPUs, NUMA nodes (Bun and
  // JavaScriptCore list /sys/devices/system/node), huge pages, cgroups.
  // (Not the rest of /sys/devices/system/cpu: its vulnerabilities say
  // which side channels this host leaves open.)
  static const std::set<std::string> files = {
      "/sys/devices/system/cpu/online", "/sys/devices/system/cpu/possible", "/sys/devices/system/cpu/present",
      "/sys/devices/system/cpu/kernel_max", "/sys/kernel/mm/transparent_hugepage/enabled",
      "/sys/kernel/mm/transparent_hugepage/defrag", "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"};
  return files.count(path) || path_under(path, "/sys/fs/cgroup") || path_under(path, "/sys/devices/system/node");
}

bool in_agent_config(const std::string& path) {
  for (const char* dir : {"/.claude/", "/.codex/", "/.gemini/", "/.config/claude/", "/.config/codex/"})
    if (path.find(dir) != std::string::npos) return true;
  return path.ends_with("/.claude.json") || path.ends_with("/.claude.json.backup");
}

bool harmless_probe_write(const std::string& path) {
  // Profilers built into runtimes (JavaScriptCore's signposts) open the
  // ftrace marker for writing at start when it is there.
  // mount(8) keeps its utab under /run/mount (a nested sandbox's mounts).
  return path == "/sys/kernel/debug/tracing/trace_marker" || path == "/sys/kernel/tracing/trace_marker" ||
         path_under(path, "/run/mount");
}

bool looks_like_credentials(const std::string& path) {
  static const std::set<std::string> names = {".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".netrc",
                                              ".pgpass", ".git-credentials", ".npmrc", ".pypirc", ".vault-token",
                                              "shadow", "gshadow", "sudoers", "sudoers.d", "private"};
  std::string lower;
  for (char c : path) lower += char(tolower(static_cast<unsigned char>(c)));
  for (const char* part : {"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "credential", "secret", "token", "passw", ".pem", ".key"})
    if (lower.find(part) != std::string::npos) return true;
  size_t start = 0;
  while (start < lower.size()) {
    size_t end = lower.find('/', start);
    if (end == std::string::npos) end = lower.size();
    if (names.count(lower.substr(start, end - start))) return true;
    start = end + 1;
  }
  return false;
}

bool opens_for_writing(int64_t flags) { return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)); }

std::string normalize_path(const std::string& path) {
  if (path.empty() || path[0] != '/') return path;
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string part = path.substr(i, j - i);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = j + 1;
  }
  // /proc/<pid|self|thread-self>/root/... names the same file as /...
  while (parts.size() >= 3 && parts[0] == "proc" && parts[2] == "root" &&
         (parts[1] == "self" || parts[1] == "thread-self" ||
          parts[1].find_first_not_of("0123456789") == std::string::npos))
    parts.erase(parts.begin(), parts.begin() + 3);
  std::string out;
  for (const auto& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

bool path_under(const std::string& path, const std::string& prefix) {
  if (prefix == "/") return !path.empty() && path[0] == '/';
  return path == prefix || (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
                            path[prefix.size()] == '/');
}

Judge::Judge(const Policy& policy, std::string work_dir)
    : policy_(policy), shadow_(policy.mode == Mode::Shadow), work_dir_(std::move(work_dir)) {
  writable_ = policy.filesystem.read_write;
  writable_.push_back(work_dir_);
  for (const auto& p : policy.filesystem.protect) protected_.push_back(normalize_path(work_dir_ + "/" + p));
  for (const char* dev : {"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts", "/dev/shm", "/dev/ptmx"})
    writable_.push_back(dev);
}

const char* Judge::verdict(bool kernel_denied) const {
  return shadow_ ? "would-deny" : kernel_denied ? "denied" : nullptr;
}

bool Judge::readable(const std::string& path) const {
  std::string p = normalize_path(path);
  for (const auto& h : policy_.filesystem.hidden)
    if (path_under(p, h)) return false;
  if (writable(p)) return true;
  for (const auto& r : policy_.filesystem.read_only)
    if (path_under(p, r)) return true;
  return false;
}

bool Judge::writable(const std::string& path) const {
  for (const auto& w : writable_)
    if (path_under(path, w)) return true;
  return false;
}

const SyscallRule* Judge::seccomp_rule(int nr, const std::vector<int64_t>& args) const {
  for (const auto& rule : policy_.seccomp.rules) {
    bool named = false;
    for (int n : rule.numbers) named = named || n == nr;
    if (!named) continue;
    bool all = true;
    for (const auto& c : rule.args)
      all = all && c.index < args.size() && arg_matches(c, uint64_t(args[c.index]));
    if (all) return &rule;
  }
  return nullptr;
}

bool Judge::allowed_endpoint(int family, const std::string& addr, int port) const {
  uint8_t bytes[16] = {};
  return inet_pton(family, addr.c_str(), bytes) == 1 && endpoint_allowed(policy_.allow, family, bytes, uint16_t(port));
}

std::optional<Violation> Judge::judge(const events::Entry& e) const {
  if (!policy_.confine) return std::nullopt;
  std::string type = e.type();
  if (type == "exit") {
    // SECCOMP_RET_KILL_PROCESS ends the process with SIGSYS (other ABIs,
    // rules with action kill).
    int sig = int(e.int_or("signal"));
    if (sig == 31 && policy_.seccomp.enabled && !shadow_)
      return Violation{"seccomp.kill", "CRITICAL", "killed", "killed by seccomp (SIGSYS)"};
    if (sig == 25 && policy_.limits.file_size && !shadow_)
      return Violation{"limits.file_size", "ALERT", "killed", "killed for writing past the file size limit (SIGXFSZ)"};
    return std::nullopt;
  }
  if (type == "syscall" || type == "file_open" || type == "connect") return judge_syscall(e);
  if (type == "exec") return judge_exec(e);
  // BPF-LSM refused an open (hidden path, exec allowlist) on the kernel's
  // resolved path; the syscall itself only says EPERM, so this is the one
  // entry to judge. Refused connects are judged on the syscall.
  std::string hook = e.string_or("hook");
  if (type == "lsm" && hook == "file_open" && e.string_or("decision") == "deny") {
    std::string rule = e.string_or("rule_id"), path = e.string_or("path");
    bool exec = rule == "filesystem.exec";
    return Violation{rule, "ALERT", "denied",
                     (exec ? "exec of " : "open of ") + path + " refused by BPF-LSM" +
                         (exec ? " (not on the exec allowlist)" : " (hidden)")};
  }
  if (type == "lsm" && hook == "unix_inbound")
    return Violation{"network.inbound", "ALERT", "denied",
                     "process " + std::to_string(e.int_or("pid")) + " (" + e.string_or("comm") +
                         ") outside the session tried to reach the session's UNIX socket " +
                         e.string_or("addr", "(unnamed)") + ": refused by BPF-LSM"};
  if (type == "lsm" && e.string_or("rule_id") == "filesystem.view")
    return Violation{"filesystem.view", "ALERT", "denied", hook + " refused by BPF-LSM (path rules are enforced)"};
  return std::nullopt;
}

std::optional<Violation> Judge::judge_exec(const events::Entry& e) const {
  const auto& rule = policy_.processes;
  std::string file = e.string_or("filename");
  if (rule.watched.empty() || !exe_ || !program_named(rule.watched, file)) return std::nullopt;
  int64_t ppid = e.int_or("ppid", -1);
  const std::string* parent = exe_(ppid);
  if (!parent || program_named(rule.expected_parents, *parent)) return std::nullopt;
  auto base = [](const std::string& path) { return path.substr(path.rfind('/') + 1); };
  // Nothing refuses it: the exec was done when its entry was made.
  return Violation{"processes.unexpected_parent", "ALERT", shadow_ ? "would-deny" : "allowed",
                   file + " started by " + *parent + " (pid " + std::to_string(ppid) +
                       "), which is not among processes.expected_parents",
                   base(*parent) + " > " + base(file)};
}

std::optional<Violation> Judge::judge_syscall(const events::Entry& e) const {
  std::string name = e.string_or("name");
  int64_t ret = e.int_or("ret");
  // The return trampolines of flightrec's own TLS probes: the kernel runs
  // them past seccomp, and a process that calls them itself gets SIGILL.
  // They are not the session's acts.
  if (name == "uretprobe" || name == "uprobe") return std::nullopt;
  // Seccomp: a blocked call names its rule; in shadow mode the same rules
  // are evaluated here.
  const Seccomp& sc = policy_.seccomp;
  if (sc.enabled && (e.get("blocked") || shadow_)) {
    const events::Value* argv = e.get("args");
    std::vector<int64_t> args;
    if (argv)
      if (auto* v = std::get_if<std::vector<int64_t>>(argv)) args = *v;
    const SyscallRule* rule = seccomp_rule(int(e.int_or("nr")), args);
    Action action = rule ? rule->action : sc.default_action;
    if (action != Action::Allow) {
      std::string id = rule ? rule->id : "seccomp.default";
      // ENOSYS from an explicit rule for a call libc has a fallback for is
      // a probe; from the default action, or for anything else, it is not.
      static const std::set<std::string> fallbacks = {"clone3", "rseq", "close_range", "faccessat2", "statx",
                                                      "openat2", "epoll_pwait2", "futex_waitv"};
      bool probe = rule && action == Action::Errno && rule->errno_value == ENOSYS && fallbacks.count(name);
      const char* level = action == Action::Kill ? "CRITICAL" : probe ? "INFO" : "ALERT";
      return Violation{id, level, shadow_ ? "would-deny" : "denied",
                       name + " " + (shadow_ ? "would be stopped" : "stopped") + " by seccomp" +
                           (level[0] == 'I' ? " (answered ENOSYS: callers fall back)" : ""),
                       name};
    }
  }
  if (!shadow_ && ret == -EFBIG && policy_.limits.file_size)
    return Violation{"limits.file_size", "ALERT", "denied", name + " past the file size limit"};
  if (auto v = judge_connect(e, ret)) {
    v->from_user_memory = e.get("addr") && !e.int_or("addr_from_kernel");
    return v;
  }
  // kernel_path: the file a successful open really opened, judged in place
  // of the path argument, which is user memory another thread can rewrite
  // meanwhile (unless the kernel's walk was cut short: then both are).
  // A symlink's target is text stored in the link, not a path the call
  // touches (the kernel resolves it only when the link is followed).
  bool symlink = name == "symlink" || name == "symlinkat";
  bool kernel_path = e.get("kernel_path") && !e.int_or("kernel_path_truncated");
  // A successful exec's path is the kernel's copy of the file name.
  bool exec_path = (name == "execve" || name == "execveat") && ret == 0;
  for (const char* key : {"kernel_path", "path", "oldpath", "newpath", "linkpath", "target"}) {
    std::string_view k = key;
    if (!e.get(key) || (symlink && k == "target") || (kernel_path && k == "path")) continue;
    if (auto v = judge_path(e, key, ret)) {
      v->from_user_memory = k != "kernel_path" && !(exec_path && k == "path");
      return v;
    }
  }
  return std::nullopt;
}

std::optional<Violation> Judge::judge_path(const events::Entry& e, const std::string& key, int64_t ret) const {
  std::string name = e.string_or("name");
  std::string raw = e.string_or(key);
  std::string path = normalize_path(raw);
  // A failed call's relative path, relative to the process's directory (not
  // to another directory fd: the first argument is the dirfd of `path` and
  // `oldpath` alone). The directory is followed from the record's chdir
  // calls, which another thread could dodge: such a path never lowers an
  // alert to INFO.
  bool from_cwd = false;
  if (ret < 0 && cwd_ && !raw.empty() && raw[0] != '/' && (key == "path" || key == "oldpath")) {
    const auto* args = std::get_if<std::vector<int64_t>>(e.get("args"));
    bool at_call = name.ends_with("at") || name.ends_with("at2");
    if (!at_call || (args && !args->empty() && int32_t((*args)[0]) == AT_FDCWD))
      if (auto cwd = cwd_(e.int_or("pid"))) {
        path = normalize_path(*cwd + "/" + raw);
        from_cwd = true;
      }
  }
  bool eacces = ret == -EACCES;
  bool absolute = !path.empty() && path[0] == '/';
  // Looking a path up (stat, access, a PATH search) only learns whether
  // it exists; opening, executing and changing are what the rules deny.
  bool exec = name == "execve" || name == "execveat";
  bool opens = name == "open" || name == "openat" || name == "openat2" || name == "creat" || exec;
  bool write = write_intent(name, e) || (key == "newpath" || key == "linkpath");
  if (!opens && !write) return std::nullopt;
  for (const auto& hidden : policy_.filesystem.hidden)
    if (absolute && path_under(path, hidden) && !(path_under(path, work_dir_) && path_under(work_dir_, hidden) &&
                                                  work_dir_ != hidden))  // the work directory stays reachable
      if (const char* v = verdict(eacces || ret == -ENOENT)) {
        // Probes are failed reads only: what succeeded, or wrote, or looks
        // like a credential is an alert whether or not it exists.
        bool failed_read = !write && ret < 0 && !looks_like_credentials(path) && !from_cwd;
        // A coding agent looking for its own files (tokens included) in
        // its config directory, where the host has none: nothing to take.
        if (!write && ret < 0 && !from_cwd && host_checks_ && in_agent_config(path) && !exists_on_host(path))
          return Violation{"filesystem.hidden", "INFO", v, name + " of hidden " + raw + " (an agent's own config, absent on the host)", path};
        if (failed_read && host_checks_ && !exists_on_host(path))
          return Violation{"filesystem.hidden", "INFO", v, name + " of hidden " + raw + " (no such file on the host)", path};
        if (failed_read && harmless_probe_read(path))
          return Violation{"filesystem.hidden", "INFO", v, name + " of hidden " + raw + " (a runtime's probe)", path};
        if (ret < 0 && !from_cwd && harmless_probe_write(path))
          return Violation{"filesystem.hidden", "INFO", v, name + " of hidden " + raw + " (a runtime's trace marker)", path};
        return Violation{"filesystem.hidden", "ALERT", v, name + " of hidden " + raw, path};
      }
  bool nested_git = !protected_.empty() && absolute && path_under(path, work_dir_) &&
                    (path.find("/.git/") != std::string::npos || path.ends_with("/.git"));
  if (write && nested_git && ret == -EROFS)
    if (const char* v = verdict(true))
      return Violation{"filesystem.protect", "ALERT", v, name + " of protected " + raw + " (a git directory)", path};
  for (const auto& p : protected_)
    if (write && absolute && path_under(path, p))
      if (const char* v = verdict(ret == -EROFS || eacces))
        return Violation{"filesystem.protect", "ALERT", v, name + " of protected " + raw + " (it would run at the user's next command)", p};
  // EACCES from Landlock; EROFS from the read-only root of a sandbox that
  // may nest others (nested_sandboxes: no Landlock file rules).
  if (write && (absolute ? !writable(path) : eacces))
    if (const char* v = verdict(eacces || ret == -EROFS))
      return Violation{"filesystem.read_only", "ALERT", v, name + " writes outside the writable paths: " + raw, dir_of(path)};
  // Landlock refuses links and renames across its rules with EXDEV.
  if (!shadow_ && ret == -EXDEV && (name.starts_with("link") || name.starts_with("rename")))
    return Violation{"filesystem.refer", "ALERT", "denied", name + " of " + raw + " across the filesystem rules", dir_of(path)};
  // EACCES under /proc is the kernel's ptrace-access check: the sandbox's
  // init cannot be inspected (a tool like ps meets it too: INFO).
  if (!shadow_ && eacces && path_under(path, "/proc") && !through_proc_link(raw))
    return Violation{"proc.access", "INFO", "denied", name + " of " + raw + " refused by the kernel's ptrace check", dir_of(path)};
  if (!shadow_ && eacces) {
    return Violation{exec ? "filesystem.exec" : "filesystem.read", "ALERT", "denied",
                     name + " of " + raw + " denied by the filesystem rules", dir_of(path)};
  }
  return std::nullopt;
}

std::optional<Violation> Judge::judge_connect(const events::Entry& e, int64_t ret) const {
  std::string name = e.string_or("name");
  std::string family = e.string_or("family"), addr = e.string_or("addr");
  if (name == "socket" && policy_.network == Network::Allowlist) {
    // Only TCP and UDP sockets, the ones the allowlist's hooks see.
    const auto* args = std::get_if<std::vector<int64_t>>(e.get("args"));
    if (!args || args->size() < 3) return std::nullopt;
    int64_t af = (*args)[0], type = (*args)[1] & 0xf, proto = (*args)[2];
    bool inet = af == AF_INET || af == AF_INET6;
    bool tcp_or_udp = (type == SOCK_STREAM && (proto == 0 || proto == IPPROTO_TCP)) ||
                      (type == SOCK_DGRAM && (proto == 0 || proto == IPPROTO_UDP));
    if (inet && !tcp_or_udp)
      if (const char* v = verdict(ret == -EPERM))
        return Violation{"network.socket", "ALERT", v,
                         "socket(" + std::string(af == AF_INET ? "AF_INET" : "AF_INET6") + ", type " +
                             std::to_string(type) + ", protocol " + std::to_string(proto) +
                             "): only TCP and UDP sockets under an egress allowlist"};
    return std::nullopt;
  }
  if (name == "bind") {
    if (family == "AF_UNIX" && addr.starts_with("@") && ret == 0 && !shadow_ &&
        policy_.network == Network::Allowlist && !own_network(policy_) && !unix_inbound_refused_)
      // A non-empty allowlist shares the host's network namespace, and with
      // it the abstract names; without BPF-LSM nothing keeps the host out.
      return Violation{"network.inbound", "ALERT", "allowed",
                       "bind to abstract socket " + addr +
                           ": processes outside the sandbox can connect to it (the allowlist shares the host's "
                           "network namespace and this kernel has no BPF-LSM to refuse them)"};
    // A listening address other than loopback (allowlist mode shares the
    // host's stack); the unspecified address with port 0 is a client's.
    bool inet = family == "AF_INET" || family == "AF_INET6";
    bool loopback = addr.starts_with("127.") || addr == "::1" || addr.starts_with("::ffff:127.");
    bool client = (addr == "0.0.0.0" || addr == "::") && e.int_or("port") == 0;
    if (inet && policy_.network == Network::Allowlist && !loopback && !client)
      if (const char* v = verdict(ret == -EPERM || ret == -EACCES))
        return Violation{"network.bind", "ALERT", v, name + " to " + addr + " port " + std::to_string(e.int_or("port"))};
    return std::nullopt;
  }
  if (name == "kill" || name == "tkill" || name == "tgkill") {
    // Landlock's signal scope: processes outside the sandbox (its init).
    if (!shadow_ && ret == -EPERM)
      return Violation{"landlock.scope", "ALERT", "denied", name + " of a process outside the sandbox"};
    return std::nullopt;
  }
  if (name != "connect" && name != "sendto" && name != "sendmsg" && name != "sendmmsg") return std::nullopt;
  if (family == "AF_UNIX" && !shadow_) {
    // Abstract sockets outside the sandbox are scoped away by Landlock;
    // socket files under hidden paths cannot be reached.
    if (addr.starts_with("@") && ret == -EPERM)
      return Violation{"landlock.scope", "ALERT", "denied", name + " to abstract socket " + addr + " outside the sandbox"};
    // In a network namespace of its own the host's abstract names do not exist.
    if (addr.starts_with("@") && ret == -ECONNREFUSED && own_network(policy_))
      return Violation{"network.unix_abstract", "ALERT", "denied",
                       name + " to abstract socket " + addr +
                           ": not bound in the sandbox's own network namespace (the host's are out of reach)"};
    // glibc asks nscd on every name lookup: not an attempt worth an alert.
    if (addr == "/var/run/nscd/socket" || addr == "/run/nscd/socket") return std::nullopt;
    for (const auto& hidden : policy_.filesystem.hidden)
      if (path_under(normalize_path(addr), hidden) && (ret == -EACCES || ret == -ENOENT))
        return Violation{"filesystem.hidden", "ALERT", "denied", name + " to hidden socket " + addr};
    return std::nullopt;
  }
  if (family != "AF_INET" && family != "AF_INET6") return std::nullopt;
  int port = int(e.int_or("port"));
  std::string where = addr + " port " + std::to_string(port);
  // The name the session's resolver answered with this address, when it did.
  std::string named = e.string_or("host").empty() ? "" : " (" + e.string_or("host") + ")";
  if (policy_.network == Network::None) {
    // The sandbox's own loopback is its own business.
    if (addr.starts_with("127.") || addr == "::1") return std::nullopt;
    if (const char* v = verdict(ret == -ENETUNREACH || ret == -EPERM || ret == -ECONNREFUSED))
      return Violation{"network.none", "ALERT", v, name + " to " + where + " (no network)", where};
  } else if (policy_.network == Network::Allowlist &&
             !allowed_endpoint(family == "AF_INET" ? AF_INET : AF_INET6, addr, port)) {
    // EPERM from the egress program, EACCES from Landlock's port rules.
    std::string why = named.empty() ? " is not on the allowlist"
                      : policy_.dns.server_names == NameService::ServerNames::Off
                          ? " is not on the allowlist (or its answer's TTL ran out)"
                          : " is not on the allowlist (or its answer's TTL ran out, or it is UDP: network.sni refuses UDP "
                            "to addresses admitted by name)";
    if (const char* v = verdict(ret == -EPERM || ret == -EACCES))
      return Violation{"network.allow", "ALERT", v, name + " to " + where + named + why, where};
  }
  return std::nullopt;
}

}  // namespace flightrec::policy
