#include "session/tls_attach.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/process_hold.h"
#include "common/system.h"
#include "probe/capture.h"
#include "probe/ring_reader.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::session {
namespace {

// Attaches to `path` as process `pid` names it, resolved in its own view.
// A process gone before its event is read takes its view along; when its
// view is the host's (run without a sandbox), the host's is used instead.
std::string attach_as_seen_by(probe::TlsProbes& capture, uint32_t pid, const std::string& path, bool host_view,
                              bool* tls_file = nullptr, uint64_t* live_since_ns = nullptr) {
  int fd = open_as_seen_by(int(pid), path);
  // Exited (a zombie too): its root cannot be read any more.
  char root[8];
  bool gone = fd < 0 && errno == ENOENT &&
              readlink(("/proc/" + std::to_string(pid) + "/root").c_str(), root, sizeof(root)) < 0;
  if (gone && host_view && path.rfind('/', 0) == 0) return capture.attach_tls(path, tls_file, live_since_ns);
  // Gone with its view (a sandbox): nothing left to probe. Said only where
  // the host's file of that name is not probed already (the system's TLS
  // libraries are, from the start); a ClientHello it sent unprobed is a
  // tls_uncaptured entry all the same.
  if (gone && path.rfind('/', 0) == 0 && capture.probes_file(path)) return "";
  if (gone) return path + " as process " + std::to_string(pid) + " saw it: the process exited before it was probed";
  if (fd < 0) return errno_message(path + " as process " + std::to_string(pid) + " sees it", errno);
  std::string err = capture.attach_tls(fd, path, tls_file, live_since_ns);
  close(fd);
  return err;
}

// When process pid started, in clock ticks since boot (/proc/PID/stat's
// starttime); -1 if it cannot be read.
int64_t start_ticks(uint32_t pid) {
  auto fields = proc_stat_fields(int(pid));
  return fields && fields->size() > 22 - 3 ? std::strtoll((*fields)[22 - 3].c_str(), nullptr, 10) : -1;
}

// Whether a file name is a TLS library's the probes know (tls_stacks()).
bool tls_library_name(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  for (const char* known : {"libssl.so", "libgnutls.so", "libnspr4.so", "libssl3.so"})
    if (name.rfind(known, 0) == 0) return true;
  return false;
}

}  // namespace

std::vector<std::string> attach_system_tls(probe::TlsProbes& capture) {
  std::vector<std::string> errors;
  for (const auto& path : probe::system_tls_libraries())
    if (std::string err = capture.attach_tls(path); !err.empty()) errors.push_back(err);
  return errors;
}

std::vector<std::string> attach_mapped_tls(probe::TlsProbes& capture, const std::vector<std::string>& cgroups) {
  std::vector<std::string> errors;
  std::set<uint32_t> pids;
  for (const auto& cg : cgroups) {
    std::error_code ec;
    std::vector<std::string> dirs{cg};
    for (auto it = std::filesystem::recursive_directory_iterator(cg, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
      if (it->is_directory()) dirs.push_back(it->path());
    for (const auto& d : dirs) {
      std::ifstream procs(d + "/cgroup.procs");
      uint32_t pid;
      while (procs >> pid) pids.insert(pid);
    }
  }
  for (uint32_t pid : pids) {
    // The program itself, where it carries its TLS (node, a Go program);
    // most do not, and each file is read once.
    std::string exe = "/proc/" + std::to_string(pid) + "/exe";
    if (int fd = open(exe.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY); fd >= 0) {
      std::error_code ec;
      bool tls_file = false;
      std::string err = capture.attach_tls(fd, std::filesystem::read_symlink(exe, ec).string(), &tls_file);
      if (tls_file && !err.empty()) errors.push_back(err);
      close(fd);
    }
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    std::string line;
    std::set<std::string> seen;
    while (std::getline(maps, line)) {
      size_t at = line.find('/');
      if (at == std::string::npos || !tls_library_name(line.substr(at))) continue;
      std::string path = line.substr(at);
      if (!seen.insert(path).second) continue;
      if (std::string err = attach_as_seen_by(capture, pid, path, false); !err.empty()) errors.push_back(err);
    }
  }
  return errors;
}

void TlsFollower::say_holds(Emitted& out) {
  if (!early_ || !early_->holds_waiting()) return;
  for (const auto& hold : early_->take_holds()) {
    events::Entry& said = out.add("program_held");
    said.set("subject_pid", int64_t(hold.pid));
    said.set_bytes("exe", hold.exe);
    said.set("held_ns", hold.held_ns);
  }
}

void TlsFollower::observe(const events::Entry& e, Emitted& out) {
  say_holds(out);
  auto text = [&](const char* key) -> const std::string* {
    const events::Value* v = e.get(key);
    return v ? std::get_if<std::string>(v) : nullptr;
  };
  uint32_t pid = uint32_t(e.int_or("pid"));
  const std::string type = e.type();
  if (type == "tls_hello") {
    uncaptured(e, pid, out);
    return;
  }
  if (type == "tls" && !waiting_.empty()) {  // plaintext on a socket whose hello waits: captured
    int64_t fd = e.int_or("fd", -1);
    std::erase_if(waiting_, [&](const Waiting& w) { return w.pid == pid && w.fd == fd && fd >= 0; });
    return;
  }
  if (type == "exec") {
    // Programs that link a TLS library in (node exports SSL_write from its
    // binary); most executables do not, so failing here is the normal case.
    not_probed_.erase(pid);
    probed_since_.erase(pid);
    if (const std::string* file = text("filename")) {
      bool tls_file = false;
      uint64_t since = 0;
      std::string err = attach_as_seen_by(capture_, pid, *file, host_view_, &tls_file, &since);
      if (since) {
        if (probed_since_.size() >= 4096) probed_since_.clear();
        probed_since_[pid] = since;
      }
      if (tls_file && !err.empty()) {
        out.add("error").set_bytes("detail", "TLS capture: " + err);
        if (not_probed_.size() >= 4096) not_probed_.clear();
        not_probed_[pid] = err;
      }
    }
    return;
  }
  if (type != "file_open" || e.int_or("ret") < 0) return;
  // The file the kernel opened, where it says; not user memory.
  const std::string* path = e.get("kernel_path") && !e.get("kernel_path_truncated") ? text("kernel_path") : text("path");
  if (!path || !tls_library_name(*path)) return;
  if (std::string err = attach_as_seen_by(capture_, pid, *path, host_view_); !err.empty())
    out.add("error").set_bytes("detail", "TLS capture: " + err);
}

void TlsFollower::uncaptured(const events::Entry& hello, uint32_t pid, Emitted& out) {
  // The kernel said whether the hello came from a probed call, or from a
  // program that makes them (docs/FORMAT.md: what that proves).
  if (hello.int_or("in_probed_call") != 0 || hello.int_or("probed_program") != 0) return;
  // A program whose own file is probed, before its first probed call (a
  // TLS stack probed below it, at its AEAD: rustls handshakes before it
  // seals or opens anything): said at the end unless plaintext follows on
  // that socket, as another TLS stack in it would not give. Unless its
  // probes went live after this hello (its exec is read from the ring after
  // the program ran on): then the connection's first plaintext may be
  // missing whatever follows, said now.
  auto since = probed_since_.find(pid);
  if (since != probed_since_.end() && uint64_t(hello.int_or("ts_mono_ns")) < since->second) {
    events::Entry& e = out.add("tls_uncaptured");
    describe(hello, pid, e);
    e.set("probes_late", int64_t(1));
    e.set("probes_live_mono_ns", since->second);
    return;
  }
  if (since != probed_since_.end() || capture_.probes_file("/proc/" + std::to_string(pid) + "/exe")) {
    Waiting w{pid, hello.int_or("fd", -1), {}};
    describe(hello, pid, w.said);
    waiting_.push_back(std::move(w));
    if (waiting_.size() > 256) {  // bounded: the oldest is said now
      say(waiting_.front(), out);
      waiting_.pop_front();
    }
    return;
  }
  describe(hello, pid, out.add("tls_uncaptured"));
}

void TlsFollower::finish(Emitted& out) {
  say_holds(out);
  for (const auto& w : waiting_) say(w, out);
  waiting_.clear();
}

// A waiting hello's tls_uncaptured entry, as described at the hello (its
// keys copied: some are owned by the entry that holds them).
void TlsFollower::say(const Waiting& w, Emitted& out) {
  events::Entry& e = out.add("tls_uncaptured");
  for (const auto& [key, value] : w.said.fields())
    std::visit([&, k = key](const auto& v) { e.set(e.key(k, ""), v); }, value);
}

// The fields of a tls_uncaptured entry about `hello`.
void TlsFollower::describe(const events::Entry& hello, uint32_t pid, events::Entry& e) {
  // Which library it was, from what the process maps now (a TLS library
  // no probe knows), if it is still there.
  // Bounded: the process may be hostile (and this runs on the thread that
  // drains the ring buffer).
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line, library;
  bool any = false;
  for (int lines = 0; lines < 4096 && std::getline(maps, line); ++lines) {
    any = true;
    std::istringstream f(line);
    std::string range, perms, offset, dev;
    uint64_t ino = 0;
    f >> range >> perms >> offset >> dev >> ino;
    size_t at = line.find('/');
    if (ino == 0 || at == std::string::npos) continue;  // files only, not named anonymous memory
    std::string path = line.substr(at), name = path.substr(path.rfind('/') + 1);
    for (const char* known : {"libssl", "libgnutls", "libnss3", "libnspr4", "libwolfssl", "libmbedtls", "libbearssl",
                              "libboringssl", "libs2n", "librustls"})
      if (library.empty() && name.rfind(known, 0) == 0) library = path;
  }
  if (!any) library = "unknown: the process had exited";
  else if (library.empty()) library = "statically linked, unknown";
  std::error_code ec;
  std::string exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).string();
  e.set("subject_pid", int64_t(pid));
  e.set("of_seq", hello.int_or("seq", -1));
  e.set("fd", hello.int_or("fd", -1));
  if (const std::string comm = hello.string_or("comm"); !comm.empty()) e.set("subject_comm", comm);
  for (const char* key : {"server_name", "server_name_b64", "remote_addr"})
    if (const std::string v = hello.string_or(key); !v.empty()) e.set(key, v);
  if (hello.get("remote_port")) e.set("remote_port", hello.int_or("remote_port"));
  if (!exe.empty()) e.set_bytes("exe", exe);
  e.set_bytes("library", library);
  // What was tried on its program (a TLS stack linked in that could not be
  // told apart), where that is known.
  if (auto tried = not_probed_.find(pid); tried != not_probed_.end()) e.set_bytes("tried", tried->second);
}

std::string attach_program_tls(probe::TlsProbes& capture, const std::string& program) {
  bool tls_file = false;
  std::string err = capture.attach_tls(program, &tls_file);
  return tls_file ? err : "";  // most programs carry no TLS stack
}

EarlyTlsAttach::EarlyTlsAttach(probe::Capture& capture, bool every_session, bool hold)
    : capture_(capture),
      every_session_(every_session),
      holder_(hold ? std::make_unique<ProcessHolder>() : nullptr),
      ring_(std::make_unique<probe::RingReader>(capture.exec_notices_fd(), 64 * 1024)) {
  thread_ = std::thread([this] { run(); });
}

void EarlyTlsAttach::follow(uint32_t session, uint32_t tenant) {
  std::lock_guard lock(mu_);
  sessions_[session] = tenant;
}

void EarlyTlsAttach::unfollow(uint32_t session) {
  std::lock_guard lock(mu_);
  sessions_.erase(session);
}

std::vector<EarlyTlsAttach::Hold> EarlyTlsAttach::take_holds() {
  std::lock_guard lock(mu_);
  holds_waiting_ = false;
  return std::exchange(holds_, {});
}

std::optional<uint32_t> EarlyTlsAttach::followed(uint32_t session) {
  std::lock_guard lock(mu_);
  if (every_session_) return 0;
  if (auto it = sessions_.find(session); it != sessions_.end()) return it->second;
  return std::nullopt;
}

EarlyTlsAttach::~EarlyTlsAttach() {
  stop_ = true;
  thread_.join();
}

void EarlyTlsAttach::run() {
  auto on_notice = [&](const void* data, size_t size) {
    if (size < sizeof(fr_exec_notice)) return;
    fr_exec_notice notice;
    std::memcpy(&notice, data, sizeof(notice));
    std::optional<uint32_t> tenant = followed(notice.session);
    if (!tenant) return;
    // The file the process runs, whatever its view of paths. A process gone
    // (or exec'd again) meanwhile is TlsFollower's, at its exec entries; so
    // is one whose pid another process has now (pidfd: while it is open, the
    // pid is that process's, and it runs the file exec'd).
    UniqueFd pidfd(int(syscall(SYS_pidfd_open, pid_t(notice.pid), 0)));
    if (pidfd.get() < 0) return;
    std::string exe = "/proc/" + std::to_string(notice.pid) + "/exe";
    UniqueFd fd(open(exe.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
    struct stat st {};
    // (Not the device: an overlay shows a lower layer's file on a device
    // of its own, not its superblock's.)
    if (fd.get() < 0 || fstat(fd.get(), &st) != 0 || st.st_ino != notice.ino ||
        start_ticks(notice.pid) != int64_t(notice.start_boottime / (1000000000 / uint64_t(sysconf(_SC_CLK_TCK)))))
      return;
    std::error_code ec;
    std::string name = std::filesystem::read_symlink(exe, ec).string();
    struct Held {  // let go however this ends (an exception too)
      ProcessHolder* holder = nullptr;
      ~Held() {
        if (holder) holder->release();
      }
    } held;
    uint64_t held_at = mono_ns();
    // Held by pid: then still that process (alive or not reaped), or let go.
    if (holder_ && !capture_.tls().answers_quickly(fd.get()) && holder_->hold(pid_t(notice.pid))) {
      if (syscall(SYS_pidfd_send_signal, pidfd.get(), 0, nullptr, 0) == 0) held.holder = holder_.get();
      else holder_->release();
    }
    // flightrecd: charged to the session (its share of the probes).
    capture_.tls().attach_tls_as(*tenant, fd.get(), name);  // errors: said by TlsFollower
    if (held.holder) {
      held.holder->release();
      held.holder = nullptr;
      std::lock_guard lock(mu_);
      if (holds_.size() < 1024) holds_.push_back({notice.pid, name, mono_ns() - held_at});
      holds_waiting_ = true;
    }
  };
  // A thread catches at its top (common/error.h): a notice it could not act
  // on is TlsFollower's, at the exec entry.
  auto on_notice_caught = [&](const void* data, size_t size) {
    try {
      on_notice(data, size);
    } catch (const std::exception&) {
    }
  };
  while (!stop_) {
    while (!stop_ && ring_->consume(64, on_notice_caught) > 0) {
    }
    epoll_event ev;
    epoll_wait(ring_->epoll_fd(), &ev, 1, 100);  // 100 ms: how long the destructor may wait
  }
}

}  // namespace flightrec::session
