#include "daemon/runs.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>

#include "common/error.h"
#include "common/system.h"
#include "common/text.h"
#include "sandbox/cgroup.h"

namespace flightrec::daemon {
namespace {

using control::refusal;

constexpr size_t kMaxHeldRequest = 8192;

}  // namespace

RunSessions::~RunSessions() {
  for (auto& [fd, run] : held_) ::close(fd);
  for (auto& [fd, f] : forwards_) ::close(fd);
}

nlohmann::json RunSessions::open_forward(const control::ForwardRequest& request, control::Exchange& ex) {
  uint32_t number = request.session;
  ucred peer{};
  socklen_t len = sizeof(peer);
  if (getsockopt(ex.fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) return refusal("forward: who is asking?");
  bool ours = false;
  for (const auto& [fd, run] : held_) ours = ours || (run.number == number && run.pid == peer.pid && peer.uid == 0);
  if (!ours) return refusal("forward: not the client of that run");
  if (forwards_.size() >= kMaxRuns) return refusal("busy: too many forwarding runs");
  ex.hold = [this](int fd) {
    if (fd < 0) return;
    forwards_.emplace(fd, Forward{ship::ForwardedStream(hub_), ""});
    try {
      watch_(fd);
    } catch (const std::exception& e) {
      std::cerr << "flightrecd: a run's forwarding could not be held: " << e.what() << "\n";
      forwards_.erase(fd);
      ::close(fd);
    }
  };
  return control::to_json(control::ForwardAnswer{true});
}

void RunSessions::serve_forward(int fd, Forward& f) {
  bool closed = false;
  std::string why;
  for (;;) {
    char buf[65536];
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      f.in.append(buf, size_t(n));
      if (f.in.size() <= ship::ForwardedStream::kMaxLine) continue;
      why = "a line longer than " + std::to_string(ship::ForwardedStream::kMaxLine) + " bytes";
    }
    closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || !why.empty();
    break;
  }
  size_t start = 0, nl;
  try {
    for (; (nl = f.in.find('\n', start)) != std::string::npos; start = nl + 1)
      f.stream.take(std::string_view(f.in).substr(start, nl - start));
  } catch (const std::exception& e) {
    why = e.what();
    closed = true;
  }
  f.in.erase(0, start);
  if (!why.empty()) std::cerr << "flightrecd: a run's forwarded entries refused: " << printable(why) << "\n";
  if (closed) {
    forwards_.erase(fd);
    ::close(fd);
  }
}

nlohmann::json RunSessions::open(const control::SessionRequest& request, control::Exchange& ex, bool tls_loaded,
                                 const std::vector<std::string>& tls_errors, const std::string& recorded_by) {
  // The session's client reads the ring of every process in the cgroup it
  // names, and the daemon attaches probes for it: root's to ask.
  if (ex.peer_uid != 0) return refusal("permission denied: only root hands a run to flightrecd");
  if (held_.size() + opening_ >= kMaxRuns) return refusal("busy: " + std::to_string(kMaxRuns) + " runs at once");
  const std::string& path = request.cgroup;
  uint64_t ring = request.ring_bytes;
  bool tls = request.tls;
  bool entry_times = request.entry_times;  // its calls seen at their entry too, unless it asks for their return alone
  // Below the root, in plain components: the same cgroup always has the same path here.
  bool plain = path.starts_with(cgroup_root_ + "/");
  for (size_t at = cgroup_root_.size(); plain && at < path.size();) {
    size_t next = path.find('/', at + 1);
    std::string part = path.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    plain = !part.empty() && part != "." && part != "..";
    at = next == std::string::npos ? path.size() : next;
  }
  if (!plain) return refusal("session: not a cgroup below " + cgroup_root_ + ": " + printable(path));
  if (!probe::valid_ring_size(ring) || ring > kMaxRingBytes)
    return refusal("session: ring_bytes must be a power of two from 64 KiB to " + std::to_string(kMaxRingBytes >> 20) +
                   " MiB");
  if (tls && !tls_loaded) return refusal("session: TLS capture is not loaded in this flightrecd (runs.tls: false)");
  if (!recorded_by.empty()) return refusal("session: watch rule " + recorded_by + " records that cgroup already");
  if (holds(path)) return refusal("session: another run holds that cgroup");
  uint64_t id = sandbox::Cgroup::open(path).id();  // throws Error: answered as the refusal
  uint32_t session = capture_.open_session({id}, {.entry_times = entry_times, .own_ring_bytes = ring});
  // Its first process waits there for go: from its next return on (whose
  // entry was not seen) it is the session's, as if it had joined.
  capture_.track_existing(session, {path});
  likely_ring_bytes_ = ring;
  int ring_fd = fcntl(capture_.session_ring(session), F_DUPFD_CLOEXEC, 3);
  int drops_fd = capture_.session_drops_map_readonly();
  if (ring_fd < 0 || drops_fd < 0) {
    int err = errno;
    if (ring_fd >= 0) ::close(ring_fd);
    if (drops_fd >= 0) ::close(drops_fd);
    capture_.close_session(session);
    capture_.reader_gone(session, false);
    return refusal(errno_message("session: cannot pass its ring buffer", err));
  }
  nlohmann::json answer;
  try {
    control::SessionAnswer a;
    a.session = session;
    a.ring_bytes = ring;
    a.program_misses = capture_.program_misses();
    a.traits = capture_.traits(entry_times);
    a.tls_chunk = tls_chunk_;
    a.tls_cap = tls_cap_;
    if (tls) a.tls_errors = tls_errors;
    // The entry types the daemon's outputs send: the client forwards those (ship/forward.h).
    if (!hub_->empty()) a.ship = hub_->wanted_types();
    answer = control::to_json(a);
  } catch (...) {
    ::close(ring_fd);
    ::close(drops_fd);
    capture_.close_session(session);
    capture_.reader_gone(session, false);
    throw;
  }
  // Nothing throws past here: the session is the hold's to end.
  ex.fds = {ring_fd, drops_fd};
  ucred peer{};
  socklen_t len = sizeof(peer);
  pid_t pid = getsockopt(ex.fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 ? peer.pid : 0;
  ++opening_;
  ex.hold = [this, session, path, pid](int fd) {
    --opening_;
    if (fd < 0) {  // the client is gone before its answer
      capture_.close_session(session);
      capture_.reader_gone(session, false);
    }
    else adopt(fd, session, path, pid);
  };
  return answer;
}

void RunSessions::adopt(int fd, uint32_t session, const std::string& cgroup, pid_t pid) {
  held_[fd] = Run{session, cgroup, pid, real_ns(), "", session, nullptr};
  try {
    watch_(fd);
  } catch (const std::exception& e) {
    std::cerr << "flightrecd: a run could not be held: " << e.what() << "\n";
    end(fd);
  }
}

void RunSessions::end(int fd, bool clean) {
  auto it = held_.find(fd);
  if (it == held_.end()) return;
  // Its ring may serve another run only if the client asked to end and
  // then closed the connection: it no longer reads the ring (HandedSession
  // unmaps it before closing). Else it may still, and the ring is let go.
  clean = clean && it->second.session == 0;
  if (it->second.session) capture_.close_session(it->second.session);
  capture_.reader_gone(it->second.number, clean);
  held_.erase(it);
  ::close(fd);  // its epoll registration goes with it
}

bool RunSessions::holds(const std::string& cgroup_path) const {
  for (const auto& [fd, run] : held_)
    if (run.session && run.cgroup == cgroup_path) return true;
  return false;
}

void RunSessions::serve(int fd) {
  if (auto f = forwards_.find(fd); f != forwards_.end()) return serve_forward(fd, f->second);
  auto it = held_.find(fd);
  if (it == held_.end()) return;
  Run& run = it->second;
  std::vector<int> passed;
  bool closed = false, eof = false;
  for (;;) {
    char buf[4096];
    long n = receive_with_fds(fd, buf, sizeof(buf), passed, MSG_DONTWAIT);
    // One descriptor goes with one request: any more are closed at once.
    while (passed.size() > 1) {
      ::close(passed.back());
      passed.pop_back();
    }
    if (n > 0) {
      run.in.append(buf, size_t(n));
      if (run.in.size() <= kMaxHeldRequest) continue;
    }
    eof = n == 0;
    closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || run.in.size() > kMaxHeldRequest;
    break;
  }
  // The client waits for each answer before its next request: what came
  // with this one is the one descriptor it may carry.
  size_t nl;
  while (!closed && (nl = run.in.find('\n')) != std::string::npos) {
    nlohmann::json answer;
    try {
      answer = handle(run, control::parse_run_request(nlohmann::json::parse(run.in.substr(0, nl))),
                      passed.empty() ? -1 : passed.front());
    } catch (const nlohmann::json::exception&) {
      answer = refusal("the request is not a JSON object");
    } catch (const std::exception& e) {
      answer = refusal(e.what());
    }
    for (int p : passed) ::close(p);
    passed.clear();
    run.in.erase(0, nl + 1);
    std::string line = control::line_of(answer);
    // A client that does not read its answers is ended, not waited for.
    if (send(fd, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL) != ssize_t(line.size())) {
      closed = true;
      eof = false;
    }
  }
  for (int p : passed) ::close(p);
  if (closed) end(fd, eof && run.in.empty());
}

nlohmann::json RunSessions::handle(Run& run, const control::RunRequest& request, int passed_fd) {
  if (std::holds_alternative<control::EndRequest>(request)) {
    // Its tasks are let go: the client drains the ring, then closes. (Its
    // ring leaves the kernel's table at the daemon's next tick.)
    if (run.session) capture_.close_session(run.session);
    run.session = 0;
    run.tls.reset();  // its files' probes go, unless another session uses them
    return control::to_json(control::EndAnswer{capture_.program_misses()});
  }
  if (!run.session) return refusal("the session has ended");
  // Files come as descriptors the client opened: never a path resolved here.
  if (const auto* attach = std::get_if<control::AttachTlsRequest>(&request)) {
    if (passed_fd < 0) return refusal("attach_tls: no file");
    // Charged to the run (its share of the daemon's probes), released at its end.
    if (!run.tls) run.tls = std::make_shared<probe::TenantTlsProbes>(capture_.tls());
    control::AttachTlsAnswer a;
    a.result = run.tls->attach_tls(passed_fd, attach->name, &a.tls_file, &a.live_since_ns);
    return control::to_json(a);
  }
  if (passed_fd < 0) return refusal("probes_file: no file");
  return control::to_json(control::ProbesFileAnswer{capture_.tls().probes_file(passed_fd)});
}

std::vector<control::RunStatus> RunSessions::status() const {
  std::vector<control::RunStatus> runs;
  for (const auto& [fd, run] : held_) runs.push_back({run.cgroup, run.pid, run.started_real_ns, run.session == 0});
  return runs;
}

}  // namespace flightrec::daemon
