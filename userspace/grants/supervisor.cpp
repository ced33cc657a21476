#include "grants/supervisor.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>  // RENAME_NOREPLACE
#include <cstring>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/error.h"
#include "common/system.h"
#include "common/text.h"
#include "events/syscall_table.h"
#include "flightrec/abi/events.h"
#include "grants/agent_view.h"
#include "grants/file_calls.h"
#include "grants/grants.h"
#include "grants/name_asks.h"
#include "grants/unasked_connects.h"
#include "policy/network.h"
#include "policy/judge.h"
#include "policy/policy.h"

// Linux 6.6+ (Debian 12's headers are 6.1's).
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

namespace flightrec::grants {
namespace {

using nlohmann::json;

constexpr size_t kMaxClients = 8;
constexpr size_t kMaxLine = 64 * 1024;
constexpr size_t kMaxWaiting = 1024;
constexpr uint64_t kMaxRefusalsRecorded = 100;
constexpr uint64_t kUseDelayNs = 1'000'000;
constexpr size_t kUseBatch = 16 * 1024;
constexpr int kSupervisorNice = -10;  // see start_supervisor
// SIGTERM (the session ends), or SIGINT, SIGHUP, SIGQUIT from the
// terminal flightrec runs in: what is pending is written first.
volatile sig_atomic_t g_terminate = 0;
constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
constexpr uint64_t kWriteBits = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | 020000000 /* __O_TMPFILE */;
// How long a connect or exec ticket waits for the kernel to take it: the
// call goes on at once, so only a thread that changed its argument
// afterwards leaves one (for itself, for one connect to a granted address
// or one exec of a granted file).
constexpr uint64_t kTicketNs = 1'000'000'000ull;

fr_egress_endpoint endpoint_key(const Grant& g) {
  fr_egress_endpoint e{};
  std::memcpy(e.addr, g.addr, sizeof(e.addr));
  e.family = uint32_t(g.family);
  e.port = g.port;
  return e;
}

std::string hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// JSON text that never throws: bytes that are not UTF-8 (a file name the
// agent chose) become U+FFFD; paths the record must keep whole go as hex.
std::string text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string syscall_name(int nr) {
  const events::SyscallInfo* info = nr >= 0 ? events::syscall_info(uint32_t(nr)) : nullptr;
  return info && info->name ? std::string(info->name) : "syscall_" + std::to_string(nr);
}

// A grant's scope, as list replies and grant events show it.
void describe(const Grant& g, json* j) {
  switch (g.kind) {
    case Kind::Write:
    case Kind::Exec: (*j)["path"] = g.path; break;
    case Kind::Syscall: (*j)["syscall"] = syscall_name(g.syscall); break;
    case Kind::Connect:
      (*j)["address"] = g.address;
      (*j)["port"] = g.port;
      break;
    case Kind::Name:
      (*j)["name"] = g.name;
      (*j)["port"] = g.port;
      break;
  }
}

// fr_view_gen, mapped read-only; null where it cannot be (then /proc is read each time).
const volatile uint64_t* map_view_gen(int fd) {
  if (fd < 0) return nullptr;
  void* p = mmap(nullptr, size_t(sysconf(_SC_PAGESIZE)), PROT_READ, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<const volatile uint64_t*>(p);
}

class Supervisor {
 public:
  explicit Supervisor(const SupervisorSpec& s)
      : spec_(s), view_(map_view_gen(s.view_gen_map)), name_asks_(s.name_asks_fd, s.timeout_ms) {}
  ~Supervisor() { flush(); }
  [[noreturn]] void run();

 private:
  struct Client {
    int fd;
    uid_t uid;
    pid_t pid;
    std::string in;
  };
  struct Waiting {
    std::vector<char> notif;  // struct seccomp_notif, as the kernel sized it
    uint64_t ask;
    uint64_t deadline_ns;
    json about;  // what it asks for, as its ask event said (path, address, ...)
  };
  enum class Verdict { Answered, Wait, Gone };

  // A line for the recorder. A use waits up to kUseDelayNs (or until any
  // other line, or kUseBatch bytes) so that a burst of granted calls is one
  // write and one wake-up of the recorder, not one per call.
  void emit(const json& j, bool wait = false);
  void emit_line(const std::string& line, bool wait);
  void flush();
  [[noreturn]] void stop(const std::string& why);
  seccomp_notif& notif(std::vector<char>& buf) { return *reinterpret_cast<seccomp_notif*>(buf.data()); }
  bool valid(uint64_t id) { return ioctl(listener_, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0; }
  bool respond(uint64_t id, int64_t val, int err, bool go_on);  // false: the call is gone
  // Tickets handed to the kernel (connect and exec grants), oldest first:
  // each is taken by the call it was made for, at once; one left is removed
  // at its deadline, or when its grant is revoked or runs out of time.
  struct Ticket {
    int map;
    std::vector<uint8_t> key;
    uint64_t grant, deadline_ns;
  };
  bool put_ticket(int map, const void* key, size_t size, uint64_t grant);
  void drop_ticket(const Ticket& t);
  void drop_tickets(uint64_t grant, uint64_t now);  // grant 0: those past their deadline
  void receive_listener();
  void on_notification();
  Verdict decide(const seccomp_notif& n, uint64_t ask, json* about);
  Verdict decide_file(const seccomp_notif& n, uint64_t ask, json* about);
  Verdict decide_connect(const seccomp_notif& n, uint64_t ask, json* about);
  Verdict decide_exec(const seccomp_notif& n, uint64_t ask, json* about);
  // A granted connect or exec goes on with a ticket (map, key) for the
  // kernel to take; a ticket that cannot be made denies it.
  Verdict go_with_ticket(const seccomp_notif& n, uint64_t ask, const json& about, Grant& g, int map, const void* key,
                         size_t size);
  bool exec_listed(const std::string& canonical) const;
  std::string sandbox_file(const std::string& path, std::string* error);
  void retry_waiting();
  void expire_waiting(uint64_t now);
  void expire_grants(uint64_t now);
  void accept_client();
  void serve(Client& c);
  json handle(const Client& c, const std::string& line);
  int sandbox_dir(const std::string& path);  // an O_PATH fd of a directory in the sandbox, -1 with errno
  void resolve_writable();
  void drop_grant_dir(uint64_t id);
  // A use's line, and what it changes. A call let go on (CONTINUE) has its
  // line made before the answer: the thread woken runs once this process,
  // at a higher priority, is back in ppoll; and a call gone meanwhile
  // leaves no use.
  std::string use_line(const Grant& g, const seccomp_notif& n, uint64_t ask, json about,
                       std::optional<int64_t> result) const;
  void used(Grant& g, const std::string& line);
  void used(Grant& g, const seccomp_notif& n, uint64_t ask, json about, std::optional<int64_t> result) {
    used(g, use_line(g, n, ask, std::move(about), result));
  }

  SupervisorSpec spec_;
  int listener_ = -1;
  bool listener_done_ = false;
  seccomp_notif_sizes sizes_{};
  AgentView view_;
  GrantTable table_;
  NameAsks name_asks_;  // lookups of the session's resolver waiting for a name grant
  NameAsks::Emit emitter_ = [this](const json& j) { emit(j); };
  struct GrantDir {
    int fd;      // O_PATH: holds the inode, so its number is not reused
    FileId id;
  };
  std::map<uint64_t, GrantDir> grant_dirs_;  // write grant id -> its directory
  std::vector<int> writable_fds_;            // the policy's writable trees, inside (held: inodes not reused)
  std::vector<FileId> writable_dirs_;
  std::vector<FileId> writable_files_;
  bool writable_resolved_ = false;
  std::vector<Client> clients_;
  std::vector<Waiting> waiting_;
  static constexpr size_t kListedWaiting = 64, kListedPathHex = 1024;  // in a list reply
  std::deque<Ticket> tickets_;
  uint64_t asks_ = 0, refusals_ = 0;
  std::string pending_;       // lines not yet written to events_fd
  uint64_t flush_by_ns_ = 0;  // when they must be
};

void Supervisor::emit(const json& j, bool wait) { emit_line(text(j), wait); }

void Supervisor::emit_line(const std::string& line, bool wait) {
  if (pending_.empty()) flush_by_ns_ = mono_ns() + kUseDelayNs;
  pending_ += line;
  pending_ += '\n';
  if (!wait || pending_.size() >= kUseBatch) flush();
}

void Supervisor::flush() {
  // The recorder is gone: nothing may go on unrecorded.
  if (!pending_.empty() && !write_full(spec_.events_fd, pending_.data(), pending_.size())) _exit(0);
  pending_.clear();
}

void Supervisor::stop(const std::string& why) {
  emit({{"event", "stopped"}, {"why", why}});
  _exit(0);
}

bool Supervisor::put_ticket(int map, const void* key, size_t size, uint64_t grant) {
  uint64_t deadline = mono_ns() + kTicketNs;
  if (bpf_map_update_elem(map, key, &deadline, BPF_ANY) != 0) return false;
  const auto* bytes = static_cast<const uint8_t*>(key);
  tickets_.push_back({map, std::vector<uint8_t>(bytes, bytes + size), grant, deadline});
  return true;
}

void Supervisor::drop_ticket(const Ticket& t) {
  // Unless taken (ENOENT), or made again for a later call of the same
  // thread with the same argument (a later deadline): that one stays.
  uint64_t deadline = 0;
  if (bpf_map_lookup_elem(t.map, t.key.data(), &deadline) == 0 && deadline == t.deadline_ns)
    bpf_map_delete_elem(t.map, t.key.data());
}

void Supervisor::drop_tickets(uint64_t grant, uint64_t now) {
  if (!grant) {
    for (; !tickets_.empty() && tickets_.front().deadline_ns <= now; tickets_.pop_front()) drop_ticket(tickets_.front());
    return;
  }
  std::erase_if(tickets_, [&](const Ticket& t) {
    if (t.grant == grant) drop_ticket(t);
    return t.grant == grant;
  });
}

bool Supervisor::respond(uint64_t id, int64_t val, int err, bool go_on) {
  std::vector<char> buf(std::max<size_t>(sizes_.seccomp_notif_resp, sizeof(seccomp_notif_resp)), 0);
  auto& r = *reinterpret_cast<seccomp_notif_resp*>(buf.data());
  r.id = id;
  r.val = val;
  r.error = err ? -err : 0;
  r.flags = go_on ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0;
  return ioctl(listener_, SECCOMP_IOCTL_NOTIF_SEND, &r) == 0;  // ENOENT: the call is gone (a signal, an exit)
}

void Supervisor::receive_listener() {
  listener_ = receive_fd(spec_.notify_sock);
  close(spec_.notify_sock);
  spec_.notify_sock = -1;
  if (listener_ < 0) {
    stop("the sandbox sent no seccomp listener");
    return;
  }
  // An asked call is a hand-off: the thread waits while the supervisor
  // decides. Woken on the waker's CPU each way, a hand-off is a few us
  // instead of a cross-CPU wake-up (~10 us). Older kernels: EINVAL, and
  // the usual wake-ups.
  ioctl(listener_, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
}

void Supervisor::on_notification() {
  std::vector<char> buf(std::max<size_t>(sizes_.seccomp_notif, sizeof(seccomp_notif)), 0);
  if (ioctl(listener_, SECCOMP_IOCTL_NOTIF_RECV, buf.data()) != 0) return;  // gone already
  uint64_t ask = ++asks_;
  json about;
  if (decide(notif(buf), ask, &about) != Verdict::Wait) return;
  if (waiting_.size() >= kMaxWaiting) {
    respond(notif(buf).id, 0, EACCES, false);
    emit({{"event", "denied"}, {"ask", ask}, {"pid", notif(buf).pid}, {"why", "too many calls waiting"}});
    return;
  }
  about["event"] = "ask";
  about["ask"] = ask;
  about["pid"] = notif(buf).pid;
  about["syscall"] = syscall_name(notif(buf).data.nr);
  about["timeout_ms"] = spec_.timeout_ms;
  emit(about);
  about.erase("event");
  waiting_.push_back({std::move(buf), ask, mono_ns() + spec_.timeout_ms * 1'000'000ull, std::move(about)});
}

Supervisor::Verdict Supervisor::decide(const seccomp_notif& n, uint64_t ask, json* about) {
  const auto& w = policy::write_ask_syscalls();
  if (std::find(w.begin(), w.end(), n.data.nr) != w.end()) return decide_file(n, ask, about);
  if (n.data.nr == SYS_connect && spec_.tickets_map >= 0) return decide_connect(n, ask, about);
  if ((n.data.nr == SYS_execve || n.data.nr == SYS_execveat) && spec_.exec_tickets_map >= 0)
    return decide_exec(n, ask, about);
  (*about)["kind"] = "syscall";
  Grant* g = table_.for_syscall(n.data.nr, mono_ns());
  if (!g) return valid(n.id) ? Verdict::Wait : Verdict::Gone;
  // The decision rests on the call's number, which the kernel does not read
  // again: letting the call go on is safe here.
  std::string line = use_line(*g, n, ask, *about, 0);
  if (!respond(n.id, 0, 0, true)) return Verdict::Gone;
  used(*g, line);
  return Verdict::Answered;
}

std::string Supervisor::use_line(const Grant& g, const seccomp_notif& n, uint64_t ask, json about,
                                 std::optional<int64_t> result) const {
  about["event"] = "use";
  about["id"] = g.id;
  about["pid"] = n.pid;
  about["syscall"] = syscall_name(n.data.nr);
  if (result) about["result"] = *result;
  if (ask) about["ask"] = ask;
  return text(about);
}

void Supervisor::used(Grant& g, const std::string& line) {
  emit_line(line, true);
  uint64_t id = g.id;
  if (table_.use(g)) {
    drop_grant_dir(id);
    emit({{"event", "expired"}, {"id", id}, {"why", "uses"}});
  }
}

void Supervisor::drop_grant_dir(uint64_t id) {
  if (auto it = grant_dirs_.find(id); it != grant_dirs_.end()) {
    close(it->second.fd);
    grant_dirs_.erase(it);
  }
}

void Supervisor::resolve_writable() {
  if (writable_resolved_) return;
  writable_resolved_ = true;
  view_.become_root();
  for (const auto& p : spec_.writable) {
    int fd = sandbox_dir(p);
    if (auto id = fd >= 0 ? file_id(fd) : std::nullopt) {
      writable_fds_.push_back(fd);
      writable_dirs_.push_back(*id);
      continue;
    }
    if (fd >= 0) close(fd);
    // A single writable file (a device): matched by inode.
    int root = openat(view_.proc(), (std::to_string(spec_.sandbox_init) + "/root").c_str(), O_PATH | O_CLOEXEC);
    open_how how{O_PATH | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    int f = root >= 0 ? int(syscall(SYS_openat2, root, p.c_str(), &how, sizeof(how))) : -1;
    if (auto id = f >= 0 ? file_id(f) : std::nullopt) writable_files_.push_back(*id);
    if (f >= 0) close(f);
    if (root >= 0) close(root);
  }
}

Supervisor::Verdict Supervisor::decide_connect(const seccomp_notif& n, uint64_t ask, json* about) {
  (*about)["kind"] = "connect";
  // What this cannot read or judge goes on: the cgroup programs refuse what is off the allowlist.
  auto go_on = [&] {
    respond(n.id, 0, 0, true);
    return Verdict::Answered;
  };
  uint64_t len = n.data.args[2];
  if (len > sizeof(sockaddr_storage)) return valid(n.id) ? go_on() : Verdict::Gone;  // EINVAL from the kernel
  union {
    sockaddr_storage any;
    sockaddr_in v4;
    sockaddr_in6 v6;
  } sa{};
  size_t want = std::min<uint64_t>(len, sizeof(sockaddr_in6));
  iovec local{&sa, want}, remote{reinterpret_cast<void*>(n.data.args[1]), want};
  bool read_ok = want >= sizeof(sa_family_t) && process_vm_readv(pid_t(n.pid), &local, 1, &remote, 1, 0) == ssize_t(want);
  if (!read_ok) return valid(n.id) ? go_on() : Verdict::Gone;
  int family = sa.any.ss_family;
  uint8_t addr[16] = {};
  uint16_t port = 0;
  if (family == AF_INET && want >= sizeof(sockaddr_in)) {
    std::memcpy(addr, &sa.v4.sin_addr, 4);
    port = ntohs(sa.v4.sin_port);
  } else if (family == AF_INET6 && want >= 24) {  // SIN6_LEN_RFC2133: no scope id
    std::memcpy(addr, &sa.v6.sin6_addr, 16);
    port = ntohs(sa.v6.sin6_port);
  } else {
    return valid(n.id) ? go_on() : Verdict::Gone;  // not IP: not the allowlist's
  }
  // Judged as the BPF programs key it: the allowlist as written, the maps as grants key them.
  bool allowed = policy::endpoint_allowed(spec_.allow, family, addr, port);
  family = normal_endpoint(family, addr);
  if (allowed || named_admits(spec_.named_map, family, addr, port)) return valid(n.id) ? go_on() : Verdict::Gone;
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(family, addr, text, sizeof(text));
  (*about)["address"] = text;
  (*about)["port"] = port;
  Grant* g = table_.for_connect(family, addr, port, mono_ns());
  if (!g) return valid(n.id) ? Verdict::Wait : Verdict::Gone;
  if (!valid(n.id)) return Verdict::Gone;
  fr_egress_ticket ticket{};
  ticket.to = endpoint_key(*g);
  ticket.tid = n.pid;
  return go_with_ticket(n, ask, *about, *g, spec_.tickets_map, &ticket, sizeof(ticket));
}

Supervisor::Verdict Supervisor::go_with_ticket(const seccomp_notif& n, uint64_t ask, const json& about, Grant& g,
                                               int map, const void* key, size_t size) {
  if (!put_ticket(map, key, size, g.id)) {
    int err = errno;
    respond(n.id, 0, EPERM, false);
    emit({{"event", "denied"}, {"ask", ask}, {"pid", n.pid}, {"syscall", syscall_name(n.data.nr)}, {"errno", EPERM},
          {"why", errno_message("grant " + std::to_string(g.id) + " could not be handed to the kernel", err)}});
    return Verdict::Answered;
  }
  // The kernel makes the call: its own entries have the result.
  std::string line = use_line(g, n, ask, about, std::nullopt);
  if (!respond(n.id, 0, 0, true)) {
    drop_ticket(tickets_.back());
    tickets_.pop_back();
    return Verdict::Gone;
  }
  used(g, line);
  return Verdict::Answered;
}

bool Supervisor::exec_listed(const std::string& canonical) const {
  return std::any_of(spec_.exec_rules.begin(), spec_.exec_rules.end(),
                     [&](const std::string& rule) { return policy::path_under(canonical, rule); });
}

// The canonical path (symlinks resolved) of a file or directory in the
// sandbox's root, "" with *error set when there is none.
std::string Supervisor::sandbox_file(const std::string& path, std::string* error) {
  view_.become_root();
  int fd = -1;
  if (int e = view_.enter(spec_.sandbox_init); e != 0) errno = e;
  else fd = view_.open_file(AT_FDCWD, path, 0);
  std::string name = fd >= 0 ? view_.name_of(fd) : "";
  if (fd < 0) *error = errno_message(path + " is not in the sandbox", errno);
  else if (name.empty() || name[0] != '/') *error = path + " has no path in the sandbox";
  else if (name.size() >= FR_PATH_RULE_MAX) *error = path + " leads to a path too long for an exec grant: " + name;
  if (fd >= 0) close(fd);
  return error->empty() ? name : "";
}

Supervisor::Verdict Supervisor::decide_exec(const seccomp_notif& n, uint64_t ask, json* about) {
  (*about)["kind"] = "exec";
  // What this cannot resolve goes on: BPF-LSM then refuses any file off
  // the exec list, for which there is no ticket.
  auto go_on = [&] {
    respond(n.id, 0, 0, true);
    return Verdict::Answered;
  };
  view_.become_root();  // as the kernel resolves an exec: the file is then judged by its path
  if (view_.enter(pid_t(n.pid)) != 0) return valid(n.id) ? go_on() : Verdict::Gone;
  bool at = n.data.nr == SYS_execveat;
  int err = 0;
  uint64_t addr = at ? n.data.args[1] : n.data.args[0];
  // execveat(fd, NULL, AT_EMPTY_PATH) is the descriptor itself (Linux 6.11+).
  auto path = at && addr == 0 && (n.data.args[4] & AT_EMPTY_PATH) ? std::optional<std::string>("")
                                                                   : view_.read_path(addr, &err);
  if (!path) return go_on();
  (*about)["paths_hex"] = json::array({hex(*path)});
  int fd = view_.open_file(at ? int(n.data.args[0]) : AT_FDCWD, *path, at ? n.data.args[4] : 0);
  if (fd < 0) return go_on();  // the kernel's own error (ENOENT, EACCES, ELOOP...)
  struct stat st;
  std::string file = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? view_.name_of(fd) : "";
  close(fd);
  if (file.empty() || file[0] != '/' || exec_listed(file)) return go_on();
  Grant* g = table_.for_exec(file, mono_ns());
  if (!g) return valid(n.id) ? Verdict::Wait : Verdict::Gone;
  if (!valid(n.id)) return Verdict::Gone;  // what was read may be another thread's
  fr_exec_ticket ticket{};
  ticket.tid = n.pid;
  ticket.len = uint32_t(file.size());
  if (file.size() >= FR_PATH_RULE_MAX) {
    respond(n.id, 0, EPERM, false);
    emit({{"event", "denied"}, {"ask", ask}, {"pid", n.pid}, {"syscall", syscall_name(n.data.nr)}, {"errno", EPERM},
          {"why", "the file's path is too long for an exec grant"}});
    return Verdict::Answered;
  }
  std::memcpy(ticket.path, file.data(), file.size());
  return go_with_ticket(n, ask, *about, *g, spec_.exec_tickets_map, &ticket, sizeof(ticket));
}

Supervisor::Verdict Supervisor::decide_file(const seccomp_notif& n, uint64_t ask, json* about) {
  (*about)["kind"] = "write";
  resolve_writable();
  // Anything this cannot judge goes on: the kernel and Landlock then
  // decide as if there were no ask, which never allows more than the policy.
  auto go_on = [&] {
    respond(n.id, 0, 0, true);
    return Verdict::Answered;
  };
  FileCall call;
  if (view_.enter(pid_t(n.pid)) != 0) return valid(n.id) ? go_on() : Verdict::Gone;
  if (!file_call(n.data, view_, &call)) return go_on();
  if (call.op == FileCall::Op::Open && !(call.flags & kWriteBits)) return go_on();
  Place places[2];
  struct Close {
    Place* p;
    ~Close() { close_place(p[0]), close_place(p[1]); }
  } closer{places};
  std::vector<FileId> grant_ids;
  std::vector<Grant*> grants = table_.writes(mono_ns());
  for (Grant* g : grants) grant_ids.push_back(grant_dirs_.count(g->id) ? grant_dirs_[g->id].id : FileId{});
  // Resolves the call's paths and sorts them: inside the policy's trees,
  // under a grant, or outside both.
  enum class Where { Inside, Granted, Outside, Kernel };
  Grant* using_grant = nullptr;
  json paths;
  auto classify = [&]() -> Where {
    using_grant = nullptr;
    paths = json::array();
    bool outside_all = false;
    for (int i = 0; i < call.count; ++i) {
      close_place(places[i]);
      int err = 0;
      auto path = view_.read_path(call.paths[i].addr, &err);
      if (!path) return Where::Kernel;
      paths.push_back(hex(*path));
      if (view_.place(call.paths[i].dirfd, *path, call.resolve, &places[i]) != 0) return Where::Kernel;
      Place& p = places[i];
      auto under = view_.beneath(p.dir_fd, writable_dirs_, grant_ids);
      if (under.tree >= 0) continue;
      struct stat st;
      bool exists = p.leaf != "." && fstatat(p.dir_fd, p.leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
      if (p.leaf != "." && refused_by_leaf(call, i, exists))
        return Where::Kernel;  // EEXIST or ENOENT from the kernel, as without an ask (mkdir -p of /home)
      if (exists) {
        if (S_ISLNK(st.st_mode) && call.op == FileCall::Op::Open && !(call.flags & O_NOFOLLOW))
          return Where::Kernel;  // where an open follows a final symlink is the kernel's to say
        if (std::find(writable_files_.begin(), writable_files_.end(), FileId{st.st_dev, st.st_ino}) !=
            writable_files_.end())
          continue;  // a device the policy lets it write
      }
      if (under.other < 0) outside_all = true;
      else if (!using_grant) using_grant = grants[size_t(under.other)];
    }
    return outside_all ? Where::Outside : using_grant ? Where::Granted : Where::Inside;
  };
  // Sorted with the ids held: root's, or those of the last thread acted
  // for (nearly always this one's, so nothing is switched). A call that
  // goes on is judged by the kernel with the thread's own ids, so root's
  // answer is good enough for it; the held ids may have failed only where
  // root's would not (a directory they may not search), so those answers
  // are sorted again as root. What is done under a grant is done only on
  // places sorted with this thread's own ids, groups and umask: a
  // directory it may not search stays closed to it.
  Where where = classify();
  if ((where == Where::Outside || where == Where::Kernel) && view_.acting()) {
    view_.become_root();
    where = classify();
  }
  if (where == Where::Granted) {
    bool switched = false;
    if (view_.become(&switched) != 0) return valid(n.id) ? go_on() : Verdict::Gone;
    if (switched) where = classify();
  }
  (*about)["paths_hex"] = paths;
  if (!valid(n.id)) return Verdict::Gone;  // what was read may be another thread's
  if (where == Where::Inside || where == Where::Kernel) return go_on();
  if (where == Where::Outside) return Verdict::Wait;

  // Under a grant: done here, on the directories resolved above.
  Place& p = places[0];
  int64_t result = 0;
  int err = 0;
  switch (call.op) {
    case FileCall::Op::Open: {
      open_how how{};
      // Never blocking: a FIFO without a reader or a leased file would
      // hold the supervisor, and every asked call, as long as the agent
      // likes (such an open fails with ENXIO or EWOULDBLOCK instead).
      how.flags = call.flags | O_CLOEXEC | O_NONBLOCK;
      how.mode = call.mode & 07777;
      how.resolve = call.resolve | RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
      int fd = int(syscall(SYS_openat2, p.dir_fd, p.leaf.c_str(), &how, sizeof(how)));
      if (fd < 0) {
        err = errno;
        break;
      }
      if (!(call.flags & O_NONBLOCK) && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
        err = errno;
        close(fd);
        break;
      }
      seccomp_notif_addfd add{};
      add.id = n.id;
      add.flags = SECCOMP_ADDFD_FLAG_SEND;
      add.srcfd = uint32_t(fd);
      add.newfd_flags = uint32_t(call.flags & O_CLOEXEC);
      int got = ioctl(listener_, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
      int add_err = errno;
      close(fd);
      if (got < 0) {
        if (add_err == ENOENT) return Verdict::Gone;
        err = add_err;
        break;
      }
      used(*using_grant, n, ask, *about, got);
      return Verdict::Answered;
    }
    case FileCall::Op::Mkdir:
      if (mkdirat(p.dir_fd, p.leaf.c_str(), mode_t(call.mode & 07777)) != 0) err = errno;
      break;
    case FileCall::Op::Unlink:
      if (unlinkat(p.dir_fd, p.leaf.c_str(), int(call.flags)) != 0) err = errno;
      break;
    case FileCall::Op::Rename:
      if (syscall(SYS_renameat2, p.dir_fd, p.leaf.c_str(), places[1].dir_fd, places[1].leaf.c_str(),
                  unsigned(call.flags)) != 0)
        err = errno;
      break;
  }
  respond(n.id, result, err, false);
  used(*using_grant, n, ask, *about, err ? -int64_t(err) : result);
  return Verdict::Answered;
}

void Supervisor::retry_waiting() {
  for (size_t i = 0; i < waiting_.size();) {
    json about;
    Verdict v = decide(notif(waiting_[i].notif), waiting_[i].ask, &about);
    if (v == Verdict::Wait) {
      ++i;
      continue;
    }
    if (v == Verdict::Gone) emit({{"event", "ask_ended"}, {"ask", waiting_[i].ask}});
    waiting_.erase(waiting_.begin() + long(i));
  }
}

void Supervisor::expire_waiting(uint64_t now) {
  for (size_t i = 0; i < waiting_.size();) {
    Waiting& w = waiting_[i];
    const seccomp_notif& n = notif(w.notif);
    if (w.deadline_ns > now && valid(n.id)) {
      ++i;
      continue;
    }
    if (w.deadline_ns > now) {
      emit({{"event", "ask_ended"}, {"ask", w.ask}});
    } else {
      const auto& ws = policy::write_ask_syscalls();
      int err = std::find(ws.begin(), ws.end(), n.data.nr) != ws.end() ? EACCES : EPERM;  // connect: as the allowlist
      respond(n.id, 0, err, false);
      emit({{"event", "denied"}, {"ask", w.ask}, {"pid", n.pid}, {"syscall", syscall_name(n.data.nr)},
            {"errno", err}, {"why", "no grant within " + std::to_string(spec_.timeout_ms) + " ms"}});
    }
    waiting_.erase(waiting_.begin() + long(i));
  }
}

void Supervisor::expire_grants(uint64_t now) {
  drop_tickets(0, now);
  for (const Grant& g : table_.expire(now)) {
    drop_grant_dir(g.id);
    drop_tickets(g.id, now);
    emit({{"event", "expired"}, {"id", g.id}, {"why", "time"}});
  }
}

int Supervisor::sandbox_dir(const std::string& path) {
  view_.become_root();
  int root = openat(view_.proc(), (std::to_string(spec_.sandbox_init) + "/root").c_str(),
                    O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return -1;
  open_how how{O_PATH | O_DIRECTORY | O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
  int fd = int(syscall(SYS_openat2, root, path.c_str(), &how, sizeof(how)));
  int e = errno;
  close(root);
  errno = e;
  return fd;
}

void Supervisor::accept_client() {
  int fd = accept4(spec_.listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return;
  ucred cred{};
  socklen_t len = sizeof(cred);
  std::string why;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) why = "no peer credentials";
  else if (cred.uid != 0 && cred.uid != spec_.owner) why = "uid " + std::to_string(cred.uid) + " is not the session's owner";
  else if (clients_.size() >= kMaxClients) why = "too many clients";
  else {
    // The session's own processes never grant themselves anything.
    // (Through the host's /proc: the supervisor's root is a sandboxed thread's.)
    struct stat mine, theirs;
    std::string a = std::to_string(cred.pid) + "/ns/pid";
    std::string b = std::to_string(spec_.sandbox_init) + "/ns/pid";
    if (fstatat(view_.proc(), a.c_str(), &theirs, 0) != 0 || fstatat(view_.proc(), b.c_str(), &mine, 0) != 0 ||
        theirs.st_ino == mine.st_ino)
      why = "the client is inside the session";
  }
  if (!why.empty()) {
    std::string reply = text({{"ok", false}, {"error", "refused: " + why}}) + "\n";
    (void)!send(fd, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    close(fd);
    if (++refusals_ <= kMaxRefusalsRecorded)
      emit({{"event", "refused"}, {"client_uid", cred.uid}, {"client_pid", cred.pid}, {"why", why}});
    return;
  }
  clients_.push_back({fd, cred.uid, cred.pid, {}});
}

json Supervisor::handle(const Client& c, const std::string& line) {
  std::string error;
  auto req = parse_request(line, &error);
  if (!req) return {{"ok", false}, {"error", error}};
  json who = {{"client_uid", c.uid}, {"client_pid", c.pid}};
  uint64_t now = mono_ns();
  if (req->op == Request::Op::List) {
    json grants = json::array(), waiting = json::array();
    for (const Grant& g : table_.all()) {
      json j = {{"id", g.id}, {"kind", kind_name(g.kind)}, {"reason", g.reason}};
      describe(g, &j);
      if (g.expires_ns) j["expires_in_ms"] = g.expires_ns > now ? (g.expires_ns - now) / 1'000'000 : 0;
      if (g.uses_left >= 0) j["uses_left"] = g.uses_left;
      grants.push_back(j);
    }
    // Bounded: the reply goes out in one non-blocking send, and the
    // session's calls (their number, their paths) must not make it too
    // large for the person deciding on them to read.
    for (const auto& w : waiting_) {
      if (waiting.size() >= kListedWaiting) break;
      json j = w.about;  // ask, pid, syscall and what it asks for
      if (j.contains("paths_hex"))
        for (auto& hex : j["paths_hex"])
          if (hex.is_string() && hex.get_ref<const std::string&>().size() > kListedPathHex) {
            hex = hex.get<std::string>().substr(0, kListedPathHex);
            j["paths_cut"] = true;
          }
      j["times_out_in_ms"] = w.deadline_ns > now ? (w.deadline_ns - now) / 1'000'000 : 0;
      waiting.push_back(std::move(j));
    }
    name_asks_.list(&waiting, kListedWaiting, now);
    return {{"ok", true}, {"grants", grants}, {"waiting", waiting}, {"waiting_count", waiting_.size() + name_asks_.size()}};
  }
  if (req->op == Request::Op::Revoke) {
    if (!table_.revoke(req->revoke_id)) return {{"ok", false}, {"error", "no grant with id " + std::to_string(req->revoke_id)}};
    drop_grant_dir(req->revoke_id);
    drop_tickets(req->revoke_id, now);
    json e = who;
    e.update({{"event", "revoked"}, {"id", req->revoke_id}, {"reason", req->reason}});
    emit(e);
    return {{"ok", true}};
  }
  Grant g = req->grant;
  int dir = -1;
  if (g.kind == Kind::Write) {
    // Bound to the directory the path names now, in the sandbox's root.
    dir = sandbox_dir(g.path);
    if (dir < 0)
      return {{"ok", false}, {"error", g.path + " is not a directory in the sandbox: " + strerror(errno)}};
  }
  if (g.kind == Kind::Exec) {
    if (spec_.exec_tickets_map < 0) return {{"ok", false}, {"error", "the session's policy does not ask for execs (ask.exec)"}};
    std::string error, asked = g.path;
    g.path = sandbox_file(asked, &error);  // as lsm/file_open will name it
    if (g.path.empty()) return {{"ok", false}, {"error", error}};
    // A symlink (the agent's, perhaps) may lead anywhere: never to everything.
    if (g.path == "/") return {{"ok", false}, {"error", asked + " leads to /: an exec grant of everything is refused"}};
    if (!is_valid_utf8(g.path)) return {{"ok", false}, {"error", asked + " leads to a path that is not UTF-8"}};
  }
  if (g.kind == Kind::Name && spec_.named_map < 0)  // the session's resolver admits what the name answers
    return {{"ok", false}, {"error", "the session's policy does not ask for connects (ask.connect)"}};
  if (g.kind == Kind::Connect) {
    if (spec_.granted_map < 0) return {{"ok", false}, {"error", "the session's policy does not ask for connects (ask.connect)"}};
    // Its packets pass the cgroup_skb filters from now on (a connection
    // made under the grant outlives it); each connect still needs a ticket.
    fr_egress_endpoint key = endpoint_key(g);
    uint8_t one = 1;
    if (bpf_map_update_elem(spec_.granted_map, &key, &one, BPF_ANY) != 0)
      return {{"ok", false}, {"error", errno_message("cannot grant " + g.address, errno)}};
  }
  if (req->duration_ms) g.expires_ns = now + req->duration_ms * 1'000'000ull;
  uint64_t id = g.id = table_.add(g);
  if (dir >= 0) grant_dirs_[id] = {dir, file_id(dir).value_or(FileId{})};
  json e = who;
  e.update({{"event", "grant"}, {"id", id}, {"kind", kind_name(g.kind)}, {"reason", g.reason}});
  describe(g, &e);
  if (req->duration_ms) e["duration_ms"] = req->duration_ms;
  if (g.uses_left >= 0) e["uses"] = g.uses_left;
  emit(e);
  retry_waiting();
  name_asks_.granted(g, emitter_);
  json reply = {{"ok", true}, {"id", id}};
  if (g.kind == Kind::Exec) reply["path"] = g.path;  // what it covers, symlinks resolved
  return reply;
}

void Supervisor::serve(Client& c) {
  char buf[4096];
  ssize_t n;
  while ((n = recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
    c.in.append(buf, size_t(n));
    size_t nl;
    while ((nl = c.in.find('\n')) != std::string::npos) {
      std::string line = c.in.substr(0, nl);
      c.in.erase(0, nl + 1);
      std::string reply = text(handle(c, line)) + "\n";
      if (send(c.fd, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL) != ssize_t(reply.size())) {
        n = 0;  // a client that does not read its replies is dropped
        break;
      }
    }
    if (c.in.size() > kMaxLine) n = 0;
    if (n == 0) break;
  }
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
    close(c.fd);
    c.fd = -1;
  }
}

void Supervisor::run() {
  if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes_) != 0) {
    stop("this kernel has no seccomp user notification");
  }
  sigset_t none;
  sigemptyset(&none);
  for (;;) {
    if (g_terminate) {
      flush();
      _exit(0);
    }
    uint64_t now = mono_ns();
    if (!pending_.empty() && now >= flush_by_ns_) flush();
    expire_grants(now);
    expire_waiting(now);
    name_asks_.expire(now, emitter_);
    std::erase_if(clients_, [](const Client& c) { return c.fd < 0; });
    std::vector<pollfd> fds;
    fds.push_back({spec_.events_fd, 0, 0});  // POLLERR/POLLHUP: the recorder is gone
    // Grants are taken once the sandbox has its root (it sends the
    // listener just before the command's exec): a path means the sandbox's.
    fds.push_back({listener_ >= 0 ? spec_.listen_fd : -1, POLLIN, 0});
    fds.push_back({listener_ >= 0 ? (listener_done_ ? -1 : listener_) : spec_.notify_sock, POLLIN, 0});
    fds.push_back({name_asks_.fd(), POLLIN, 0});
    for (const auto& c : clients_) fds.push_back({c.fd, POLLIN, 0});
    uint64_t next = table_.next_expiry();
    if (uint64_t asked = name_asks_.next_deadline(); asked && (!next || asked < next)) next = asked;
    if (!tickets_.empty() && (!next || tickets_.front().deadline_ns < next)) next = tickets_.front().deadline_ns;
    for (const auto& w : waiting_)
      if (!next || w.deadline_ns < next) next = w.deadline_ns;
    if (!pending_.empty() && (!next || flush_by_ns_ < next)) next = flush_by_ns_;
    // Waiting calls are also checked now and then: one may have been interrupted.
    if (!waiting_.empty() && (!next || now + 200'000'000 < next)) next = now + 200'000'000;
    timespec wait{}, *until = nullptr;
    if (next) {
      uint64_t left = next > now ? next - now : 0;
      wait = {time_t(left / 1'000'000'000), long(left % 1'000'000'000)};
      until = &wait;
    }
    // The stop signals are let in only here, so none cuts a decision short.
    if (ppoll(fds.data(), fds.size(), until, &none) < 0) {
      if (errno == EINTR) continue;
      _exit(125);
    }
    if (fds[0].revents) _exit(0);
    if (fds[1].revents & POLLIN) accept_client();
    if (fds[2].revents & POLLIN) {
      if (listener_ < 0) receive_listener();
      else on_notification();
    }
    if (fds[2].revents & (POLLHUP | POLLERR)) {
      if (listener_ < 0) {
        stop("the sandbox sent no seccomp listener");
      }
      listener_done_ = true;  // no process uses the filter any more
    }
    if (fds[3].revents) name_asks_.receive(table_, &asks_, emitter_);
    for (size_t i = 0; i < clients_.size(); ++i)
      if (fds[4 + i].revents) serve(clients_[i]);
  }
}

}  // namespace

pid_t start_supervisor(const SupervisorSpec& spec) {
  pid_t pid = fork();
  if (pid < 0) throw Error(errno_message("fork (grant supervisor)", errno));
  if (pid > 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  prctl(PR_SET_NAME, "flightrec-grant");
  // Every asked call waits for this process while the recorder's threads
  // seal in bulk on the same two or so CPUs; at an equal share it queues
  // behind them (a granted write took ~80 us, ~45 at nice -10). Its work
  // is bounded by the asked calls, one at a time. Without CAP_SYS_NICE it
  // stays at the usual share.
  setpriority(PRIO_PROCESS, 0, kSupervisorNice);
  signal(SIGPIPE, SIG_IGN);
  struct sigaction term {};
  term.sa_handler = [](int) { g_terminate = 1; };
  sigset_t blocked;
  sigemptyset(&blocked);
  for (int sig : kStopSignals) {
    sigaction(sig, &term, nullptr);
    sigaddset(&blocked, sig);
  }
  sigprocmask(SIG_SETMASK, &blocked, nullptr);
  // Nothing of flightrec's but what it needs: not the record, not the key.
  for (int fd = 3; fd < 4096; ++fd)
    if (fd != spec.notify_sock && fd != spec.listen_fd && fd != spec.events_fd && fd != spec.granted_map &&
        fd != spec.tickets_map && fd != spec.named_map && fd != spec.exec_tickets_map && fd != spec.view_gen_map &&
        fd != spec.name_asks_fd)
      close(fd);
  syscall(SYS_close_range, 4096, ~0u, 0);
  try {
    Supervisor(spec).run();
  } catch (...) {  // no memory: the exit below closes the listener, and the kernel fails every asked call
  }
  _exit(125);  // (~Supervisor wrote what was pending)
}

}  // namespace flightrec::grants
