#pragma once
// Where TLS probes go: the TLS library files (OpenSSL's libssl, GnuTLS's
// libgnutls) the session's processes use. The system's are attached before
// the command starts; others are found as processes open them (recorded
// file_open entries) or, for watch, in the memory maps of the processes
// already there.
#include <sys/types.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "probe/source.h"
#include "session/pipeline.h"

namespace flightrec {
class ProcessHolder;
}  // namespace flightrec

namespace flightrec::probe {
class Capture;
class RingReader;
}  // namespace flightrec::probe

namespace flightrec::session {

class EarlyTlsAttach;

// Attaches to the system's TLS libraries that exist; returns the errors.
std::vector<std::string> attach_system_tls(probe::TlsProbes& capture);
// Attaches to every TLS library mapped by the processes in these cgroups and below.
std::vector<std::string> attach_mapped_tls(probe::TlsProbes& capture, const std::vector<std::string>& cgroups);
// The command itself, when it links a TLS library in (e.g. node, OpenSSL).
// "" when it was probed or carries no TLS stack the probes know; else why
// it could not be probed.
std::string attach_program_tls(probe::TlsProbes& capture, const std::string& program);
// Attaches probes to the TLS library files the session's processes open
// later, and to executables that carry one, as they exec. And where a
// process starts a TLS handshake (a tls_hello entry) while no probed file
// is mapped in it, says so: a tls_uncaptured entry with the library it
// uses, or "statically linked, unknown". Paths are resolved
// as the process sees them; host_view: its view is the host's (no sandbox,
// no containers).
class TlsFollower : public Observer {
 public:
  TlsFollower(probe::TlsProbes& capture, bool host_view) : capture_(capture), host_view_(host_view) {}
  // Where the processes it follows may be held (run, watch): each hold is
  // said in the record, a program_held entry.
  void say_holds_of(EarlyTlsAttach* early) { early_ = early; }
  void observe(const events::Entry& entry, Emitted& out) override;
  // At the session's end: the hellos still waiting for plaintext.
  void finish(Emitted& out);

 private:
  void uncaptured(const events::Entry& hello, uint32_t pid, Emitted& out);
  void say_holds(Emitted& out);  // program_held entries
  void describe(const events::Entry& hello, uint32_t pid, events::Entry& e);
  // Hellos of programs probed below their TLS library (at an AEAD), which
  // handshake before their first probed call: tls_uncaptured unless a tls
  // entry of that process and socket follows (by (pid, fd); bounded).
  struct Waiting {
    uint32_t pid;
    int64_t fd;
    events::Entry said;  // the tls_uncaptured entry's fields, as they were at the hello
  };
  std::deque<Waiting> waiting_;
  void say(const Waiting& w, Emitted& out);
  probe::TlsProbes& capture_;
  bool host_view_;
  EarlyTlsAttach* early_ = nullptr;
  // Why a process's program, a TLS stack, could not be probed: said again
  // in the tls_uncaptured entries of its hellos (bounded; pids are reused,
  // so an exec replaces its pid's).
  std::map<uint32_t, std::string> not_probed_;
  // When each process's program had its probes live, from its exec: a hello
  // sent before then had none (bounded as not_probed_).
  std::map<uint32_t, uint64_t> probed_since_;
};

// Probes a program the moment its file is first exec'd (the kernel's exec
// notices, a ring of their own), on a thread of its own. The exec entry is
// read in record order, behind everything queued before it, and a program
// that carries its own TLS (Codex) can make its first handshake meanwhile.
// TlsFollower still handles the exec entry, and says any error: it finds
// the file probed already, and when.
class EarlyTlsAttach {
 public:
  // every_session: the execs of all the capture's sessions (run, watch);
  // else of those follow() names (flightrecd: its sessions with TLS
  // capture, not runs, whose clients probe within their budget).
  // hold: a program whose file takes a while to read (a large one, read
  // the first time: Codex's takes ~0.3 s, about as long as it takes to
  // make its first handshake) is held still meanwhile (ProcessHolder).
  EarlyTlsAttach(probe::Capture& capture, bool every_session, bool hold);  // starts the thread
  ~EarlyTlsAttach();                                            // stops it
  EarlyTlsAttach(const EarlyTlsAttach&) = delete;
  EarlyTlsAttach& operator=(const EarlyTlsAttach&) = delete;
  // tenant: whose share of the probes its programs are charged to
  // (TenantTlsProbes::tenant(); 0: the capture's own).
  void follow(uint32_t session, uint32_t tenant);
  void unfollow(uint32_t session);
  // The holds made since the last take (bounded): for the record.
  struct Hold {
    uint32_t pid;
    std::string exe;
    uint64_t held_ns;
  };
  std::vector<Hold> take_holds();
  bool holds_waiting() const { return holds_waiting_; }

 private:
  void run();
  std::optional<uint32_t> followed(uint32_t session);  // the tenant, when followed
  probe::Capture& capture_;
  const bool every_session_;
  std::unique_ptr<ProcessHolder> holder_;  // with hold
  std::mutex mu_;
  std::map<uint32_t, uint32_t> sessions_;  // followed -> tenant
  std::vector<Hold> holds_;
  std::atomic<bool> holds_waiting_{false};
  std::unique_ptr<probe::RingReader> ring_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace flightrec::session
