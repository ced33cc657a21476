#pragma once
// One direction of an HTTP/1.x connection, put back together from the TLS
// plaintext chunks that carried it: whole messages (start line, headers,
// the body with chunked framing removed), each with the record seqs of the
// chunks that held it. The bytes are the traced program's: every length is
// checked, and what one message may take is bounded.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flightrec::agent {

struct HttpMessage {
  bool request = false;
  std::string method, target;  // a request's
  int status = 0;              // a response's
  uint32_t stream = 0;         // HTTP/2: its stream (0 in HTTP/1)
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;
  std::vector<int64_t> seqs;   // the chunks that held it, in order
  uint64_t first_ts = 0, last_ts = 0;
  std::string problem;         // why the body is not whole ("" when it is)
  std::string header(std::string_view name) const;  // the first with that (lower-case) name, or ""
};

class Http1Stream {
 public:
  static constexpr size_t kMaxHead = 64 << 10;   // start line and headers
  static constexpr size_t kMaxBody = 16 << 20;   // body bytes kept; the rest is counted, not kept

  // The chunk of entry `seq` at stream offset `at` (consecutive chunks
  // continue where the previous ended; a later one means bytes are
  // missing), recorded at ts. Messages it completes are appended to out.
  // A response's framing depends on its request's method: head_request
  // says the response being read answers a HEAD.
  void feed(uint64_t at, uint64_t length, std::string_view bytes, int64_t seq, uint64_t ts, std::vector<HttpMessage>& out);
  // True once the stream cannot be followed (not HTTP/1, or bytes lost
  // where framing was): nothing more comes out of it.
  bool lost() const { return state_ == State::Lost; }
  // What the open message has so far, ended by the stream's end (a body
  // read until the connection closes, or one cut short).
  bool take_open(HttpMessage& out);

 private:
  enum class State { Start, Head, Body, ChunkSize, ChunkData, ChunkEnd, Trailer, UntilClose, Lost };
  void begin_body();
  void finish(std::vector<HttpMessage>& out);
  bool parse_head();
  void keep(std::string_view bytes);
  State state_ = State::Start;
  uint64_t next_ = 0;      // stream offset expected next
  bool started_ = false;
  std::string line_;       // head bytes so far, or a chunk-size / trailer line
  uint64_t left_ = 0;      // body or chunk bytes still to come
  HttpMessage msg_;
  size_t dropped_ = 0;     // body bytes past kMaxBody
};

}  // namespace flightrec::agent
