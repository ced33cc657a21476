#pragma once
// A session whose programs flightrecd keeps loaded (daemon/runs.h): this
// process asked for it on the daemon's control socket and holds the
// connection for the session's life. Its records come from the ring buffer
// the daemon passed over, its losses from the daemon's counters (read
// only), and TLS probes are attached by the daemon on request. Everything
// else (the record, the sandbox, the judge) is this process's, as when it
// loads the programs itself.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/protocol.h"
#include "ledger/writer.h"
#include "probe/ring_reader.h"
#include "probe/source.h"

namespace flightrec::session {

class HandedSession : public probe::Source, public probe::TlsProbes {
 public:
  using Handler = std::function<void(const void* data, size_t size)>;
  // Asks flightrecd on `socket` for a session of the cgroup at cgroup_path
  // (and below) with a ring of ring_bytes, TLS probes if `tls`, its calls
  // seen at their entry too if entry_times. Throws Error when no daemon
  // answers or it refuses; the caller records in-process then.
  HandedSession(const std::string& socket, const std::string& cgroup_path, size_t ring_bytes, bool tls,
                bool entry_times);
  ~HandedSession() override;  // closing the connection ends the session in the daemon
  HandedSession(const HandedSession&) = delete;
  HandedSession& operator=(const HandedSession&) = delete;

  // Called for every record of the session, in ring order (before the first consume()).
  void set_handler(Handler handler) { handler_ = std::move(handler); }
  // Readable (EOF) if the daemon goes away: nothing is recorded after that.
  int connection_fd() const { return sock_; }
  // What attaching the system's TLS libraries said in the daemon.
  const std::vector<std::string>& tls_errors() const { return tls_errors_; }
  uint32_t number() const { return session_; }
  // Whether the connection has ended (or carries what was not asked for):
  // the daemon and its programs are gone. Never blocks.
  bool connection_lost();
  // Where the run's writer tells what it committed, for the daemon's
  // outputs (fleet shipping); null when the daemon has none.
  std::shared_ptr<ledger::SealedSink> forwarding() const { return forwarding_; }
  // Bytes per TLS record and per SSL call that the daemon's probes keep.
  size_t tls_chunk() const { return tls_chunk_; }
  size_t tls_cap() const { return tls_cap_; }

  int poll_fd() const override { return ring_->epoll_fd(); }
  int ring_fd() const override { return ring_map_; }
  using Source::consume;
  int consume(int budget) override;
  void drain_to_now() override;
  std::vector<uint64_t> drops_per_cpu() const override;
  // The daemon's program runs the kernel skipped (no session can be told
  // for them: each open session counts them), from the session's start,
  // as the daemon said when the session ended (before: 0).
  uint64_t program_misses() const override { return misses_; }
  double ring_fill() const override;
  // The daemon closes the session; the ring still drains. (Nothing to
  // stop if the daemon is gone: connection_lost() says so.)
  void detach() override;
  probe::CaptureTraits traits() const override { return traits_; }

  std::string attach_tls(const std::string& library_path, bool* tls_file = nullptr,
                         uint64_t* live_since_ns = nullptr) override;
  std::string attach_tls(int fd, const std::string& name, bool* tls_file = nullptr,
                         uint64_t* live_since_ns = nullptr) override;
  bool probes_file(const std::string& path) override;

 private:
  void open_forwarding(const std::string& socket, std::vector<std::string> types);

  int sock_ = -1, ring_map_ = -1, drops_map_ = -1;
  uint32_t session_ = 0;
  size_t cpus_ = 0;
  bool detached_ = false, lost_ = false;
  bool tls_ = false;                     // asked for: TLS records are kept
  uint64_t misses_at_start_ = 0, misses_ = 0;
  size_t tls_chunk_ = 0, tls_cap_ = 0;
  std::unique_ptr<probe::RingReader> ring_;
  Handler handler_;
  probe::CaptureTraits traits_;
  std::vector<std::string> tls_errors_;
  std::shared_ptr<ledger::SealedSink> forwarding_;
  // One request on the connection; a daemon that does not answer in time
  // (or breaks the protocol) is taken as gone: the connection is shut.
  nlohmann::json call(const control::RunRequest& request, int pass_fd = -1, int timeout_ms = 5000);
};

}  // namespace flightrec::session
