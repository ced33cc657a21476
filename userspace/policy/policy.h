#pragma once
// A confinement policy: what `flightrec run` lets the command see and do.
// Loaded from YAML (policies/*.yaml; the schema is policies/README.md) and
// checked strictly: an unknown key, a wrong type or a bad value is an error
// naming the file, line and key. Nothing here touches the system.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace flightrec::policy {

struct PolicyError : Error {
  using Error::Error;
};

enum class Mode { Enforce, Shadow };
enum class OnViolation { DenyAndContinue, Kill };
enum class Network { None, Allowlist, Host };
enum class Action { Allow, Errno, Kill };
// What becomes of the work directory's changes: written to the host's work
// directory at the session's end (each where the host file still has its
// before-hash), or kept aside for `flightrec changes` and `flightrec apply`.
enum class WorkDirMode { Write, Overlay };

// One seccomp argument comparison, as libseccomp and OCI profiles have them.
struct ArgCheck {
  enum class Op { Eq, Ne, Lt, Le, Gt, Ge, MaskedEq } op = Op::Eq;
  unsigned index = 0;
  uint64_t value = 0;      // MaskedEq: the mask
  uint64_t value_two = 0;  // MaskedEq: the expected (arg & mask)
};

struct SyscallRule {
  std::string id;          // recorded with every denial it causes
  std::vector<int> numbers;        // x86-64 syscall numbers
  std::vector<std::string> names;  // as written (for messages)
  Action action = Action::Errno;
  int errno_value = 1;     // EPERM
  std::vector<ArgCheck> args;      // all must hold
};

struct Seccomp {
  bool enabled = false;
  Action default_action = Action::Allow;
  int default_errno = 1;
  std::vector<SyscallRule> rules;
  std::string profile;     // OCI profile path the rules came from, if any
};

// An egress allowlist entry: an address range and a port (0: any port).
struct Endpoint {
  std::string text;        // as written, for rule ids and messages
  int family = 0;          // AF_INET or AF_INET6
  uint8_t addr[16] = {};
  unsigned prefix = 0;     // bits
  uint16_t port = 0;
};

// An allowlist entry by name: "api.example.com:443", or "*.example.com:443"
// for any name under example.com (at any depth; not example.com itself).
// Admitted through the session's resolver: the addresses an answer for the
// name gives, for the answer's TTL (policy/network.h).
struct HostRule {
  std::string text;   // as written, for rule ids and messages
  std::string name;   // lower case, no trailing dot; a wildcard keeps its "*."
  uint16_t port = 0;  // 0: any port
};

// How the session's resolver answers (network.dns_*).
struct NameService {
  bool refuse_nxdomain = true;     // a name not allowed: NXDOMAIN, or REFUSED
  uint32_t ttl_min_s = 5;          // an answer admits its addresses at least this long
  uint32_t ttl_max_s = 3600;       // and at most this long
  std::vector<std::string> upstream;  // the resolvers it asks; empty: /etc/resolv.conf's
  // Admit addresses an answer gives that are loopback, private, link-local
  // or the like (DNS rebinding: a name someone else answers for pointing
  // the agent at the host's or the network's own services).
  bool admit_private = false;
  // Write each refused name and network violation to /tmp/flightrec-refusals.txt
  // in the sandbox (FLIGHTREC_REFUSALS names it), for the agent to read.
  bool explain = false;
  // A TCP connection admitted by name alone must name its server (TLS
  // server_name, HTTP/1 Host) as one whose answer admitted the address, or
  // it is cut before its first payload leaves. Optional: a connection that
  // names none goes on; required: it is cut too (and UDP there refused).
  enum class ServerNames { Off, Optional, Required } server_names = ServerNames::Optional;
};

// processes: who may start a shell or an interpreter (policy/processes.h).
struct Processes {
  std::vector<std::string> watched;           // base names; a trailing * matches any rest
  std::vector<std::string> expected_parents;  // the programs that may start them
};

// Calls that wait for a runtime grant (flightrec run's grant socket; see
// userspace/grants/) instead of failing at once.
struct Ask {
  bool write = false;              // file writes outside the writable trees
  bool connect = false;            // connect() to an address:port not on the allowlist (network: allowlist)
  bool exec = false;               // execve() of a file off filesystem.exec (BPF-LSM decides)
  std::vector<int> syscalls;       // these system calls, by number
  std::vector<std::string> syscall_names;
  uint64_t timeout_ms = 10'000;    // then the call fails (EACCES, or EPERM for syscalls)
  bool any() const { return write || connect || exec || !syscalls.empty(); }
};

// The calls the supervisor answers when ask.write is on: file opens that
// may write, directories made or removed, files removed or renamed.
const std::vector<int>& write_ask_syscalls();

// The calls the supervisor answers when ask.exec is on.
const std::vector<int>& exec_ask_syscalls();

struct Limits {
  uint64_t memory_bytes = 0;   // 0: no limit
  uint64_t pids = 0;
  uint64_t cpu_millicores = 0; // cpu.max bandwidth: 1000 = one core
  uint64_t wall_ms = 0;        // circuit breaker
  uint64_t cpu_ms = 0;         // circuit breaker (CPU time of the whole session)
  uint64_t record_bytes = 0;   // circuit breaker: growth of the record file during the session
  uint64_t record_rate = 0;    // plain syscall entries stored per second; the rest summarised (0: all)
  uint64_t file_size = 0;      // RLIMIT_FSIZE
  uint64_t open_files = 0;     // RLIMIT_NOFILE
  uint64_t disk = 1ull << 30;  // size of the writable layer (tmpfs)
};

// A policy that another lays itself over (`extends:`): where it was found
// and its exact bytes.
struct PolicyBase {
  std::string source;  // "builtin:agent" or an absolute file path
  std::string text;
};

struct Policy {
  std::string name;        // policy name (from the file)
  std::string source;      // file path or "builtin:agent"
  std::string text;        // the exact bytes loaded (hashed into the record)
  std::vector<PolicyBase> bases;  // the `extends:` chain, nearest first (recorded with the text)
  bool confine = true;     // false: observe only (no namespaces, no rules)
  Mode mode = Mode::Enforce;
  OnViolation on_violation = OnViolation::DenyAndContinue;

  struct Filesystem {
    std::string root = "/";        // lower layer of the overlay root
    std::string work_dir = ".";    // ".": where flightrec was started
    std::vector<std::string> read_only = {"/"};  // readable trees (Landlock)
    std::vector<std::string> read_write;  // besides the work dir
    std::vector<std::string> hidden;      // replaced by empty, read-only ones
    std::vector<std::string> exec;        // executable paths (empty: any readable)
    bool exec_only_command = false;       // exec: [command]
    bool keep_changes = false;     // keep the overlay's upper layer after the session
    WorkDirMode work_dir_mode = WorkDirMode::Overlay;
    // Paths relative to the work directory that stay read-only and are never
    // written to the host (an agent must not plant what runs at the user's
    // next command: .git/hooks, .vscode, ...).
    std::vector<std::string> protect;
    // Entries of the invoking user's home (an agent's config: .codex,
    // .claude, .claude.json) shown in the sandbox's private home: read from
    // the host, what the command writes there kept in the session.
    std::vector<std::string> home;
    bool proc = true, sys = false, dev_pts = true;
  } filesystem;

  Network network = Network::None;
  std::vector<Endpoint> allow;        // addresses and ranges
  std::vector<HostRule> allow_hosts;  // names, admitted by the session's resolver
  bool allow_dns = false;             // every name answered, not only allowed ones
  NameService dns;

  // The environment the command gets: host variables passed by name or
  // glob (a name that looks like a secret only when named exactly), then
  // values set. HOME is a private, empty directory unless set or passed.
  struct Env {
    std::vector<std::string> pass = {"PATH", "LANG", "LANGUAGE", "LC_*", "TERM", "COLORTERM", "NO_COLOR", "TZ",
                                     "USER", "LOGNAME", "SHELL", "PWD", "TMPDIR", "EDITOR", "PAGER"};
    std::vector<std::pair<std::string, std::string>> set;
  } env;
  // Prefixes of credentials of the policy's own (besides the built-in
  // patterns): what follows one, up to the end of the token, is redacted
  // from argv before it is sealed.
  std::vector<std::string> redact;

  // The command may build sandboxes of its own (bubblewrap, as Claude Code
  // and Codex do): unprivileged user, mount, pid, net, ipc and uts
  // namespaces inside ours, with mount and pivot_root there. The seccomp
  // rules against those calls are lifted; Landlock, which forbids any
  // mount to the processes it restricts, keeps its network and scope rules
  // but not its file system rules, whose work the mount view then does
  // (the root read-only, unreadable trees masked, every mask locked).
  bool nested_sandboxes = false;

  Seccomp seccomp;
  Ask ask;
  Processes processes;
  Limits limits;
  std::vector<std::string> keep_capabilities;  // inside the sandbox's user namespace
  std::string hostname = "flightrec";
  int log_stderr = 2;  // violations printed as they happen: 0 none, 1 critical, 2 alert, 3 info
  std::vector<std::string> overrides;  // changes made on the command line, recorded with the policy
};

// The trees and files the sandbox may execute: filesystem.exec, or the
// readable trees and the work directory; exec: [command] is the command and
// the ELF interpreter. Landlock and BPF-LSM enforce the same list.
std::vector<std::string> executable_paths(const Policy& p, const std::string& work_dir, const std::string& command);

// The seccomp rules nested_sandboxes lifts: those naming mount, umount2,
// pivot_root, unshare or setns, and clone rules on CLONE_NEW* flags.
bool nested_sandbox_rule(const SyscallRule& rule);

// Whether the sandbox gets a network namespace of its own (only its own
// loopback): with no network, and with an allowlist that lists nothing,
// answers no name (dns) and grants nothing at run time (ask.connect), which
// then means the same. Only a non-empty allowlist shares the host's stack;
// then the sandbox's abstract UNIX names are the host's too.
bool own_network(const Policy& p);

// Whether a variable's name looks like it holds a credential (*_KEY,
// *_TOKEN, *SECRET*, *PASSWORD*, ...): passed only when named exactly.
bool secret_env_name(const std::string& name);
// The host environment filtered and set as p.env says ("NAME=value" each);
// *passed gets the names passed (for the record).
std::vector<std::string> sandbox_env(const Policy& p, char** host_env, std::vector<std::string>* passed);

// CAP_CHOWN -> 0 ... CAP_CHECKPOINT_RESTORE -> 40; -1 if not a capability.
int capability_number(const std::string& name);

// Overrides one limit: "memory=512M", "cpu_time=30s" (flightrec run --limit).
void override_limit(Policy& p, const std::string& key_value);

// "NAME" passes the host's NAME (named exactly: even a secret's name);
// "NAME=VALUE" sets it (flightrec run --env). Throws PolicyError.
void override_env(Policy& p, const std::string& item);

// Adds "HOST:PORT" / "CIDR:PORT" / "*.DOMAIN:PORT" to the allowlist
// (flightrec run --allow).
// Throws PolicyError.
void add_allowed(Policy& p, const std::string& endpoint);

// Applies one override as a session recorded it (Policy::overrides:
// "network.allow+=E", "limits.K=V", "env.pass+=N", "env.set+=N", whose
// value is not recorded). Throws PolicyError for anything else.
void reapply_override(Policy& p, const std::string& recorded);

// Loads a policy: a shipped name (agent, strict, observe) or a file path.
// Throws PolicyError "FILE:LINE: KEY: problem".
Policy load(const std::string& name_or_path);
// Finds the base an `extends:` names: (the name as written, the extending
// policy's source) -> the base. Throws PolicyError.
using BaseResolver = std::function<PolicyBase(const std::string& name, const std::string& from)>;
// Shipped names anywhere; files, relative to the extending file's directory,
// from files only (a shipped policy extends shipped ones).
PolicyBase find_base(const std::string& name, const std::string& from);
Policy parse(const std::string& text, const std::string& source, const BaseResolver& resolve = find_base);
// The effective policy as YAML: the chain's mappings merged, `extends` gone
// (flightrec policy show).
std::string effective_yaml(const Policy& p);

// The shipped policies, built into the binary from policies/*.yaml.
const std::vector<std::pair<std::string, std::string>>& shipped();

// Parses an OCI / Docker seccomp JSON profile into rules for x86-64 with
// the given capabilities kept. Throws PolicyError.
Seccomp parse_oci_profile(const std::string& json, const std::string& source,
                          const std::vector<std::string>& kept_caps);

// "1G", "512M", "64K", "1000" -> bytes; "30s", "5m", "100ms" -> ms.
// nullopt for anything else; *too_large (if given) when the form is right
// but the value does not fit in 64 bits.
std::optional<uint64_t> parse_bytes(const std::string& s, bool* too_large = nullptr);
std::optional<uint64_t> parse_duration_ms(const std::string& s, bool* too_large = nullptr);

}  // namespace flightrec::policy
