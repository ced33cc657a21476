#pragma once
// Runs handed to flightrecd: `flightrec run` (as root) asks on the control
// socket for a session of its own cgroup. The daemon opens one on its
// loaded programs, with a ring buffer of its own, and answers with that
// ring and a read-only view of the session's drop counters (SCM_RIGHTS).
// The client seals its record itself, exactly as it would in-process; the
// daemon only keeps the programs loaded and attaches TLS probes for it.
// The connection stays open for the session's life: the client's requests
// come on it (attach_tls, probes_file, end), and when it closes, however
// the client ended, the session is closed.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "control/protocol.h"
#include "control/server.h"
#include "probe/capture.h"
#include "ship/forward.h"

namespace flightrec::daemon {

class RunSessions {
 public:
  // watch: called with each connection to hold (add it to the daemon's
  // epoll; serve() when it is readable).
  // tls_chunk, tls_cap: the capture's (CaptureOptions), told to clients.
  RunSessions(probe::Capture& capture, std::string cgroup_root, size_t tls_chunk, size_t tls_cap,
              std::shared_ptr<ship::Hub> hub, std::function<void(int fd)> watch)
      : capture_(capture), cgroup_root_(std::move(cgroup_root)), tls_chunk_(tls_chunk), tls_cap_(tls_cap),
        hub_(std::move(hub)), watch_(std::move(watch)) {}
  ~RunSessions();  // closes every connection (their sessions end with the capture)
  RunSessions(const RunSessions&) = delete;
  RunSessions& operator=(const RunSessions&) = delete;

  // The "session" request. Returns the answer (a SessionAnswer, or a
  // refusal) and fills ex.
  // tls_loaded: the TLS programs are; tls_errors: what attaching the
  // system's libraries said. recorded_by: the watch rule that records that
  // cgroup already, or "".
  nlohmann::json open(const control::SessionRequest& request, control::Exchange& ex, bool tls_loaded,
                      const std::vector<std::string>& tls_errors, const std::string& recorded_by);
  // The "forward" request from the client of run N (the same process): the
  // connection then carries that run's committed entries (ship/forward.h)
  // for the outputs.
  nlohmann::json open_forward(const control::ForwardRequest& request, control::Exchange& ex);
  bool owns(int fd) const { return held_.count(fd) != 0 || forwards_.count(fd) != 0; }
  void serve(int fd);  // a held connection is readable
  bool holds(const std::string& cgroup_path) const;
  size_t size() const { return held_.size(); }
  // The ring size the next run will likely ask for (the last one asked,
  // at first `flightrec run`'s default), for Capture::prepare_ring.
  size_t likely_ring_bytes() const { return likely_ring_bytes_; }
  std::vector<control::RunStatus> status() const;

  static constexpr size_t kMaxRuns = 1024;
  static constexpr size_t kMaxRingBytes = 256u << 20;

 private:
  struct Run {
    uint32_t session = 0;   // the capture's number; 0 once ended
    std::string cgroup;
    pid_t pid = 0;          // the client's, as the kernel recorded it at connect
    uint64_t started_real_ns = 0;
    std::string in;         // a request still arriving
    uint32_t number = 0;    // the capture's number, kept after the end (its ring's reader is this client)
    // Its share of the TLS probes: files it probed, released when it ends.
    std::shared_ptr<probe::TenantTlsProbes> tls;
  };
  struct Forward {
    ship::ForwardedStream stream;
    std::string in;
  };
  void adopt(int fd, uint32_t session, const std::string& cgroup, pid_t pid);
  void serve_forward(int fd, Forward& f);
  // Closes the session (if still open) and the connection. clean: the
  // client closed it after its end request.
  void end(int fd, bool clean = false);
  nlohmann::json handle(Run& run, const control::RunRequest& request, int passed_fd);

  probe::Capture& capture_;
  std::string cgroup_root_;
  size_t tls_chunk_, tls_cap_;
  std::shared_ptr<ship::Hub> hub_;
  std::function<void(int fd)> watch_;
  std::map<int, Run> held_;  // by connection
  std::map<int, Forward> forwards_;  // by connection
  size_t opening_ = 0;       // answered, not yet held (or dropped)
  size_t likely_ring_bytes_ = 8u << 20;
};

}  // namespace flightrec::daemon
