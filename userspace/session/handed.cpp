#include "session/handed.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>

#include "common/error.h"
#include "common/system.h"
#include "control/client.h"
#include "ship/forward.h"

namespace flightrec::session {
namespace {

// A descriptor the daemon passed is the map it says it is.
void check_map(int fd, uint32_t type, uint32_t max_entries, uint32_t value_size, const char* what) {
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0 || info.type != type || info.max_entries != max_entries ||
      info.value_size != value_size)
    throw Error(std::string("flightrecd passed something that is not the session's ") + what);
}

}  // namespace

HandedSession::HandedSession(const std::string& socket, const std::string& cgroup_path, size_t ring_bytes, bool tls,
                             bool entry_times)
    : tls_(tls) {
  control::HeldConnection held =
      control::request_held(socket, control::SessionRequest{cgroup_path, ring_bytes, tls, entry_times});
  sock_ = held.fd;
  if (held.fds.size() == 2) {
    ring_map_ = held.fds[0];
    drops_map_ = held.fds[1];
    held.fds.clear();
  }
  try {
    // The records a root process signs come from this daemon: it must be root's.
    ucred peer{};
    socklen_t len = sizeof(peer);
    if (getsockopt(sock_, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.uid != 0)
      throw Error("the process answering on " + socket + " is not root's; not handing the session to it");
    if (ring_map_ < 0 || !held.fds.empty()) throw Error("flightrecd's answer to a session request came without its ring");
    control::SessionAnswer a = control::parse_session_answer(held.answer);
    if (a.ring_bytes != ring_bytes) throw Error("flightrecd's answer to a session request is for another ring size");
    session_ = a.session;
    int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0) throw Error("cannot tell how many CPUs there are");
    cpus_ = size_t(ncpu);
    check_map(ring_map_, BPF_MAP_TYPE_RINGBUF, uint32_t(ring_bytes), 0, "ring buffer");
    check_map(drops_map_, BPF_MAP_TYPE_PERCPU_ARRAY, FR_MAX_SESSIONS, sizeof(uint64_t), "drop counters");
    traits_ = std::move(a.traits);
    tls_errors_ = std::move(a.tls_errors);
    tls_chunk_ = a.tls_chunk;
    tls_cap_ = a.tls_cap;
    misses_at_start_ = a.program_misses;
    ring_ = std::make_unique<probe::RingReader>(ring_map_, ring_bytes);
    if (!a.ship.empty()) open_forwarding(socket, std::move(a.ship));
  } catch (...) {
    // Closing the connection ends the session in the daemon.
    for (int fd : held.fds) close(fd);
    if (ring_map_ >= 0) close(ring_map_);
    if (drops_map_ >= 0) close(drops_map_);
    close(sock_);
    throw;
  }
}

void HandedSession::open_forwarding(const std::string& socket, std::vector<std::string> types) {
  // The record does not depend on it: a daemon that will not take the
  // entries is said, and the run goes on.
  try {
    control::HeldConnection held = control::request_held(socket, control::ForwardRequest{session_});
    for (int fd : held.fds) close(fd);
    if (!control::parse_forward_answer(held.answer).forward) {
      close(held.fd);
      throw Error("flightrecd did not take the run's entries for its outputs");
    }
    // A daemon that stops reading holds the run's sealing back at most this long.
    timeval tv{5, 0};
    setsockopt(held.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    forwarding_ = std::make_shared<ship::ForwardingSink>(held.fd, std::move(types));
  } catch (const std::exception& e) {
    std::cerr << "flightrec: the record is not shipped by flightrecd's outputs: " << e.what() << "\n";
  }
}

HandedSession::~HandedSession() {
  ring_.reset();
  if (ring_map_ >= 0) close(ring_map_);
  if (drops_map_ >= 0) close(drops_map_);
  if (sock_ >= 0) close(sock_);
}

int HandedSession::consume(int budget) {
  return ring_->consume(budget > 0 ? budget : 1, [this](const void* data, size_t size) {
    // The ring is this session's alone; a record of any other is not ours.
    // The daemon's TLS programs serve every session: a run that did not
    // ask for plaintext keeps none (in-process, they would not be loaded).
    const auto* h = static_cast<const fr_header*>(data);
    if (size >= sizeof(fr_header) && (h->session != session_ || (!tls_ && (h->type == FR_REC_TLS || h->type == FR_REC_TLS_HELLO))))
      return;
    handler_(data, size);
  });
}

void HandedSession::drain_to_now() {
  uint64_t target = ring_->producer_pos();
  // Once the session has ended, a program that was writing a record when
  // the daemon closed it finishes soon (it may be preempted): the last
  // drain waits for it a little, rather than leave it unread.
  uint64_t deadline = mono_ns() + 100'000'000;
  while (int64_t(target - ring_->consumer_pos()) > 0)
    if (consume() == 0) {
      if (!detached_ || mono_ns() > deadline) break;
      sched_yield();
    }
}

std::vector<uint64_t> HandedSession::drops_per_cpu() const {
  std::vector<uint64_t> values(cpus_, 0);
  uint32_t key = session_ % FR_MAX_SESSIONS;
  if (bpf_map_lookup_elem(drops_map_, &key, values.data()) != 0)
    throw Error(errno_message("cannot read the session's drop counters", errno));
  return values;
}

double HandedSession::ring_fill() const {
  uint64_t prod = ring_->producer_pos(), cons = ring_->consumer_pos();
  return prod > cons ? double(prod - cons) / double(ring_->size()) : 0.0;
}

void HandedSession::detach() {
  if (detached_ || connection_lost()) return;
  detached_ = true;
  // The session's tasks have all exited (run ends it once its cgroup is
  // empty), and a task runs its programs to the end before it leaves its
  // cgroup: what they wrote is in the ring. drain_to_now() waits for one
  // still being written.
  try {
    uint64_t misses = control::parse_end_answer(call(control::EndRequest{})).program_misses;
    misses_ = misses >= misses_at_start_ ? misses - misses_at_start_ : 0;
  } catch (const Error&) {  // the daemon is gone: the misses counted so far are what the record says
  }
}

nlohmann::json HandedSession::call(const control::RunRequest& request, int pass_fd, int timeout_ms) {
  if (lost_) throw Error("flightrecd is gone");
  try {
    return control::held_request(sock_, request, pass_fd, timeout_ms);
  } catch (const Error& e) {
    // A refusal is an answer; anything else leaves the connection out of step.
    if (std::string(e.what()).rfind("flightrecd: ", 0) == 0) throw;
    shutdown(sock_, SHUT_RDWR);
    lost_ = true;
    throw;
  }
}

bool HandedSession::connection_lost() {
  if (lost_) return true;
  char buf[256];
  ssize_t n = recv(sock_, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  if (n > 0) {
    // Unasked bytes: the daemon is out of step with us; as good as gone.
    shutdown(sock_, SHUT_RDWR);
  }
  lost_ = true;
  return true;
}

std::string HandedSession::attach_tls(const std::string& library_path, bool* tls_file, uint64_t* live_since_ns) {
  // Opened here and passed: the daemon's view of the paths may differ
  // (its unit's private /tmp).
  int fd = open(library_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_message("TLS capture: cannot open " + library_path, errno);
  std::string err = attach_tls(fd, library_path, tls_file, live_since_ns);
  close(fd);
  return err;
}

std::string HandedSession::attach_tls(int fd, const std::string& name, bool* tls_file, uint64_t* live_since_ns) {
  if (live_since_ns) *live_since_ns = 0;
  try {
    auto a = control::parse_attach_tls_answer(call(control::AttachTlsRequest{name}, fd, 30000));
    if (tls_file) *tls_file = a.tls_file;
    if (live_since_ns) *live_since_ns = a.live_since_ns;  // the daemon's clock is this host's
    return a.result;
  } catch (const Error& e) {
    return name + ": " + e.what();
  }
}

bool HandedSession::probes_file(const std::string& path) {
  // By (device, inode), asked with the file itself: see attach_tls.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  bool probed = false;
  try {
    probed = control::parse_probes_file_answer(call(control::ProbesFileRequest{}, fd)).probes;
  } catch (const Error&) {  // no answer from the daemon: the file is taken as not probed
  }
  close(fd);
  return probed;
}

}  // namespace flightrec::session
