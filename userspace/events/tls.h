#pragma once
// Completes TLS plaintext entries with what one record cannot know: the
// connection's addresses, the position of each chunk in the connection's
// byte stream (so a verifier sees gaps), redaction of credentials, and a
// summary of HTTP/1.x messages.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "events/entry.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::events {

class TlsStreams {
 public:
  // cap: the bytes per call the kernel keeps (--tls-cap).
  explicit TlsStreams(bool redact = true, uint64_t cap = 262144) : redact_(redact), cap_(cap) {}
  // Adds the fields of one TLS record (whose chunk bytes are `data`) to e.
  void complete(Entry& e, const fr_tls& r, std::string_view data);
  // What recorded syscalls said about a socket (connect, accept,
  // getsockname, getpeername): used when /proc no longer knows it.
  void note_socket(uint32_t pid, int fd, bool local, const std::string& addr, int port);

 private:
  struct Conn {
    int fd = -1;
    uint64_t sent = 0, received = 0;  // bytes the calls moved so far, per direction
    bool resolved = false;
    std::string local_addr, remote_addr;
    int local_port = 0, remote_port = 0;
  };
  void resolve(Conn& c, uint32_t pid);
  bool redact_;
  uint64_t cap_;
  std::map<std::pair<uint32_t, uint64_t>, Conn> conns_;  // (pid, SSL*)
  struct Endpoints {
    std::string local_addr, remote_addr;
    int local_port = 0, remote_port = 0;
  };
  std::map<std::pair<uint32_t, int>, Endpoints> sockets_;  // (pid, fd)
};

// Replaces the values of Authorization, Proxy-Authorization, Cookie and
// Set-Cookie headers in an HTTP/1.x header block with "[REDACTED]".
// Returns the lower-case names of the headers it redacted.
std::vector<std::string> redact_http_headers(std::string& text);

}  // namespace flightrec::events
