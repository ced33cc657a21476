#pragma once
// One direction of an HTTP/2 connection (RFC 9113), put back together from
// the TLS plaintext chunks that carried it: a message per stream (its header
// block decoded with HPACK, its DATA frames as the body), each with the
// record seqs of the chunks that held it. The bytes are the traced
// program's: every length is checked, and what the open streams may hold
// together is bounded.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/http1.h"
#include "events/http2.h"

namespace flightrec::agent {

class Http2Stream {
 public:
  static constexpr size_t kMaxStreams = 256;       // messages open at once (the oldest is cut)
  static constexpr size_t kMaxBlock = 64 << 10;    // one header block, its fragments put together
  static constexpr size_t kMaxBodies = 16 << 20;   // body bytes kept over all open messages
  static constexpr size_t kMaxHeaders = 128;       // header fields kept per message

  // client: the direction the client sends (it starts with the preface).
  explicit Http2Stream(bool client);
  // The chunk of entry `seq` at stream offset `at` (a later offset than
  // expected means bytes are missing), recorded at ts. The messages it
  // completes are appended to out: a request's method and target come from
  // :method and :path, a response's status from :status, and :authority is
  // its "host" header when it has none. A message cut by a reset, a loss or
  // the bounds comes out with `problem` said.
  void feed(uint64_t at, uint64_t length, std::string_view bytes, int64_t seq, uint64_t ts, std::vector<HttpMessage>& out);
  // True once the stream cannot be followed (bytes lost where framing or
  // a header block was, or not HTTP/2): nothing more comes out of it.
  bool lost() const { return state_ == State::Lost; }
  // The messages still open at the connection's end, cut short.
  void take_open(std::vector<HttpMessage>& out);

 private:
  enum class State { Preface, FrameHeader, Payload, Lost };
  struct Open {
    HttpMessage msg;
    bool head = false;      // its (final) header block has come
    size_t dropped = 0;     // body bytes not kept
  };
  void skip(uint64_t n, std::vector<HttpMessage>& out);
  void lose(const std::string& why, std::vector<HttpMessage>& out);
  void frame_header_done(std::vector<HttpMessage>& out);
  void frame_done(std::vector<HttpMessage>& out);
  void block_done(std::vector<HttpMessage>& out);
  void body(std::string_view bytes);
  Open* open_stream(uint32_t id, std::vector<HttpMessage>& out);
  void finish(uint32_t id, const std::string& problem, std::vector<HttpMessage>& out);
  void touch(HttpMessage& m, int64_t seq);

  bool client_;
  State state_;
  uint64_t next_ = 0;
  bool started_ = false;
  size_t preface_got_ = 0;
  uint8_t header_[9] = {};
  size_t header_got_ = 0;
  uint8_t type_ = 0, flags_ = 0;
  uint32_t stream_ = 0, length_ = 0, got_ = 0, pad_ = 0;
  std::string payload_;                // a non-DATA frame's payload, as far as it is kept
  std::vector<int64_t> frame_seqs_;    // the chunks the current frame came in
  int64_t seq_ = 0;
  uint64_t ts_ = 0;
  // A header block being put together (HEADERS or PUSH_PROMISE, then CONTINUATION).
  bool in_block_ = false, block_end_stream_ = false, block_promise_ = false;
  uint32_t block_stream_ = 0;
  uint32_t last_opened_ = 0;           // the client's streams are opened in increasing order
  std::string block_;
  std::vector<int64_t> block_seqs_;
  events::HpackDecoder hpack_;
  std::map<uint32_t, Open> open_;      // by stream id
  size_t kept_ = 0;                    // body bytes held by open messages
};

}  // namespace flightrec::agent
