#pragma once
// Where TLS probes go: the TLS library files (OpenSSL's libssl, GnuTLS's
// libgnutls) the session's processes use. The system's are attached before
// the command starts; others are found as processes open them (recorded
// file_open entries) or, for watch, in the memory maps of the processes
// already there.
#include <sys/types.h>

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "probe/source.h"
#include "session/pipeline.h"

namespace flightrec::session {

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
  void observe(const events::Entry& entry, Emitted& out) override;
  // At the session's end: the hellos still waiting for plaintext.
  void finish(Emitted& out);

 private:
  void uncaptured(const events::Entry& hello, uint32_t pid, Emitted& out);
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
  // Why a process's program, a TLS stack, could not be probed: said again
  // in the tls_uncaptured entries of its hellos (bounded; pids are reused,
  // so an exec replaces its pid's).
  std::map<uint32_t, std::string> not_probed_;
};

}  // namespace flightrec::session
