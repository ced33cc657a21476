#pragma once
// Completes TLS plaintext entries with what one record cannot know: the
// connection's addresses, the position of each chunk in the connection's
// byte stream (so a verifier sees gaps), redaction of credentials (HTTP/1.x
// and HTTP/2), and a summary of HTTP/1.x messages.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "events/body_redact.h"
#include "events/entry.h"
#include "events/http2.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::events {

// Header names redacted unless told otherwise (lower case).
const std::vector<std::string>& default_redacted_headers();

// What the first bytes of a TLS ClientHello say (RFC 8446 4.1.2; the same
// layout in TLS 1.0-1.2): the server name asked for (server_name, RFC
// 6066) and the application protocols offered (ALPN, RFC 7301), from the
// first record only. Hostile bytes: every length is checked; ok is false
// when the extensions are not all there (cut, or spread over records) or
// malformed, and what was read before that stands.
struct ClientHello {
  bool ok = false;
  std::string server_name;
  std::vector<std::string> alpn;
};
ClientHello parse_client_hello(std::string_view record);

// HTTP/1.x credential headers, redacted on the reassembled byte stream of
// one direction of one connection, so a header split across two writes or
// one that starts a write is found as well as one inside a single write.
// A value becomes "[REDACTED]" (leading spaces and the line end kept).
// Whether a request target's query parameter (lower case) holds a
// credential (api_key, token, signature, ...), and the target with the
// values of those replaced by [REDACTED] (their keys added to *names as
// "?key").
bool secret_query_key(std::string_view key);
std::string redact_query(std::string_view target, std::vector<std::string>* names);

class HeaderRedactor {
 public:
  // The bytes at stream offset `at` (a gap before them is allowed);
  // write_start: they begin an SSL_write/SSL_read call. Returns them with
  // secret values replaced and adds the names it redacted to `names`.
  std::string feed(uint64_t at, std::string_view bytes, bool write_start, const std::vector<std::string>& secret,
                   std::vector<std::string>& names);
  // The queue both directions of a connection share: whether each request
  // not answered yet was a HEAD, whose response has no body whatever its
  // Content-Length says (RFC 9110 9.3.2). Without one, a HEAD's response is
  // taken to have the body its headers give.
  void share_requests(std::deque<bool>* heads) { heads_ = heads; }

 private:
  enum class Mode { MessageStart, StartLine, Headers, Body, ChunkSize, ChunkData, ChunkEnd, Trailers, Unknown };
  void end_of_line();
  // A header (or trailer) line's byte, with its value redacted when its name is secret.
  void header_byte(char c, const std::vector<std::string>& secret, std::vector<std::string>& names, std::string& out);
  Mode mode_ = Mode::MessageStart;
  uint64_t pos_ = 0;            // stream offset of the next byte expected
  std::string name_;            // this header line's name so far, lower case (bounded)
  std::string value_;           // its value so far, for content-length and transfer-encoding (bounded)
  bool in_name_ = true, line_empty_ = true, redacting_ = false, marked_ = false;
  bool line_secret_ = false;  // this header line's value is a secret's
  bool last_secret_ = false;  // the previous one's was: a folded line (obs-fold) goes on with it
  bool has_length_ = false, chunked_ = false;
  uint64_t length_ = 0, body_left_ = 0;
  // The start line's request target: its query parameters' values are
  // redacted where the key names a credential.
  int start_field_ = 0;  // 0 the method, 1 the target, 2 the rest
  std::string method_;   // the start line's first field (bounded): a method, or "HTTP/1.x"
  int status_ = 0;       // a response's status code
  std::deque<bool>* heads_ = nullptr;
  bool in_query_ = false, in_query_value_ = false, query_redacting_ = false, query_marked_ = false;
  std::string query_key_;  // lower case, bounded
  uint64_t chunk_left_ = 0;
  BodyRedactor body_;
};

class TlsStreams {
 public:
  // redact: header names to redact (empty: none); cap: the bytes per call
  // the kernel keeps (--tls-cap).
  explicit TlsStreams(std::vector<std::string> redact = default_redacted_headers(), uint64_t cap = 262144)
      : redact_(std::move(redact)), cap_(cap) {}
  // Adds the fields of one TLS record (whose chunk bytes are `data`) to e.
  void complete(Entry& e, const fr_tls& r, std::string_view data);
  // What recorded syscalls said about a socket (connect, accept,
  // getsockname, getpeername): used when /proc no longer knows it.
  void note_socket(uint32_t pid, int fd, bool local, const std::string& addr, int port);
  // Adds the addresses of process pid's socket fd to e, where known.
  void add_endpoints(Entry& e, uint32_t pid, int fd);

 private:
  struct Conn {
    int fd = -1;
    uint64_t sent = 0, received = 0;  // bytes the calls moved so far, per direction
    bool resolved = false;
    std::string local_addr, remote_addr;
    int local_port = 0, remote_port = 0;
    HeaderRedactor redact_sent, redact_received;
    std::deque<bool> heads;  // HeaderRedactor::share_requests
    // HTTP/2, when a direction starts with its preface or first SETTINGS.
    std::unique_ptr<Http2Redactor> h2_sent, h2_received;
  };
  void resolve(Conn& c, uint32_t pid);
  static void set_endpoints(Entry& e, const Conn& c);  // its known addresses
  std::vector<std::string> redact_;
  uint64_t cap_;
  std::map<std::pair<uint32_t, uint64_t>, Conn> conns_;  // (pid, SSL*)
  struct Endpoints {
    std::string local_addr, remote_addr;
    int local_port = 0, remote_port = 0;
  };
  std::map<std::pair<uint32_t, int>, Endpoints> sockets_;  // (pid, fd)
};


}  // namespace flightrec::events
