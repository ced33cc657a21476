#pragma once
// HTTP/2 (RFC 9113) on one direction of one connection's plaintext:
// credential redaction, in place (the value of a header on the list is
// overwritten byte for byte inside its HPACK (RFC 7541) representation, so
// frame lengths stay right and the record still decodes as HTTP/2; a
// Huffman-coded value is replaced by a valid Huffman string of the same
// decoded length where the whole value is in view, so a later decoder's
// dynamic table keeps the sizes the peers had), and a summary of each
// request and response header block: its pseudo-header fields.
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "events/body_redact.h"

namespace flightrec::events {

// The client connection preface (RFC 9113 3.4).
inline constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Whether the first bytes of a direction start HTTP/2: the client's
// preface, or a server's first SETTINGS frame.
bool starts_http2_client(std::string_view first);
bool starts_http2_server(std::string_view first);

// What one HEADERS block (with its CONTINUATION frames) said: the stream
// and the pseudo-header fields (RFC 9113 8.3), each cut at 1024 bytes;
// empty where the block had none.
struct Http2Headers {
  uint32_t stream = 0;
  std::string method, scheme, authority, path, status;
};

class Http2Redactor {
 public:
  explicit Http2Redactor(bool client) : state_(client ? State::Preface : State::FrameHeader) {}
  // `bytes` are at stream offset `at`; rewritten in place. Names redacted
  // are added to `names`, and the header blocks that end in these bytes to
  // `blocks`. Bytes never seen (a gap) are skipped where they fall inside a
  // frame that carries no headers; anywhere else the parse is lost and
  // every later byte is overwritten ("(after a gap)").
  void feed(uint64_t at, std::string& bytes, const std::vector<std::string>& secret, std::vector<std::string>& names,
            std::vector<Http2Headers>& blocks);

 private:
  enum class State { Preface, FrameHeader, Payload, Lost };
  // HPACK: what the next byte of a header block is.
  enum class Step { Start, Int, StrStart, StrLen, StrBody };
  enum class Kind { Indexed, Incremental, SizeUpdate, Literal };
  struct Field {
    std::string name;   // decoded, lower case, at most kNameMax bytes
    std::string value;  // decoded, kept for pseudo-header fields only
    uint64_t name_len = 0, value_len = 0;  // decoded lengths (table entry size)
  };

  void skip(uint64_t n);
  void lose(std::string& bytes, size_t from, std::vector<std::string>& names);
  void frame_header_done();
  void frame_done();  // the frame's last byte was read
  // One byte of a header block fragment; returns it, or its replacement.
  // Returns false when the block cannot be parsed.
  bool hpack(std::string& bytes, size_t i, const std::vector<std::string>& secret, std::vector<std::string>& names);
  uint8_t replacement_byte();
  bool int_continues(uint8_t c);
  bool int_done();
  bool string_done();
  void insert(const Field& f);
  void note(const Field& f);  // a field of the header block being read is complete
  bool lookup(uint64_t index, Field& f) const;
  void evict();

  State state_;
  uint64_t pos_ = 0;            // stream offset of the next byte expected
  size_t preface_got_ = 0;
  uint8_t header_[9] = {};
  size_t header_got_ = 0;
  uint32_t length_ = 0, at_ = 0;  // this frame's payload length, bytes of it seen
  uint8_t type_ = 0, flags_ = 0;
  uint32_t pre_ = 0, pad_ = 0;    // header frames: bytes before the fragment, padding after it
  bool headers_frame_ = false;
  bool data_frame_ = false;
  uint32_t stream_ = 0;            // this frame's stream
  std::map<uint32_t, BodyRedactor> bodies_;  // DATA of each open stream, scanned for credentials (bounded)
  BodyRedactor* body_ = nullptr;             // this DATA frame's stream's
  // The request or response header block being read (HEADERS, then
  // CONTINUATION frames up to END_HEADERS); not a PUSH_PROMISE's.
  bool in_block_ = false;
  Http2Headers block_;
  std::vector<Http2Headers>* blocks_ = nullptr;  // during feed()

  // HPACK decoder state, kept across header blocks.
  Step step_ = Step::Start;
  Kind kind_ = Kind::Indexed;
  uint64_t int_ = 0;
  unsigned shift_ = 0;
  bool in_value_ = false;       // the string being read is the value (else the name)
  bool huffman_ = false;
  uint64_t str_left_ = 0;
  Field field_;
  // Huffman decoding of the current string.
  uint64_t bits_ = 0;
  unsigned nbits_ = 0;
  // Replacement of a value being redacted.
  bool redacting_ = false;
  std::string replacement_;     // a whole Huffman value's (empty: '*' or 5-bit '0's byte by byte)
  uint64_t replaced_ = 0, value_bytes_ = 0;

  std::deque<Field> table_;     // dynamic table, newest first
  uint64_t table_size_ = 0, table_max_ = 4096;
};

// RFC 7541 Huffman code (canonical; Appendix B): the decoded length of
// `bytes`, or -1 when they are not a valid code; and a string of exactly
// `bytes` octets that decodes to `symbols` printable symbols (empty when
// none exists).
int64_t huffman_decoded_length(std::string_view bytes);
std::string huffman_filler(size_t bytes, uint64_t symbols);
// The symbols of `bytes` (lower case if `lower`), or "" when they are not a valid code.
std::string huffman_decode(std::string_view bytes, bool lower = true);

// HPACK (RFC 7541) decoding of whole header blocks, one decoder per
// direction of a connection (the dynamic table lives across blocks). For
// reading the record, where the blocks are put together first; the
// redactor above works byte by byte on bytes as they come.
class HpackDecoder {
 public:
  // What one block's fields may come to, counted as RFC 7541 4.1 sizes
  // them (name + value + 32 each, as SETTINGS_MAX_HEADER_LIST_SIZE does).
  static constexpr size_t kMaxList = 256 << 10;
  // Appends the block's fields, names as sent (lower case in HTTP/2), to
  // out; past kMaxList the rest is decoded (the table stays right) but not
  // appended, and *cut says so. False when the block is not valid HPACK:
  // the table cannot be trusted after it, so every later call fails too.
  bool decode(std::string_view block, std::vector<std::pair<std::string, std::string>>& out, bool* cut = nullptr);

 private:
  bool field(uint64_t index, std::pair<std::string, std::string>& f) const;
  void insert(const std::pair<std::string, std::string>& f);
  void evict();
  std::deque<std::pair<std::string, std::string>> table_;  // newest first
  uint64_t size_ = 0, max_ = 4096;
  bool broken_ = false;
};

}  // namespace flightrec::events
