#include "events/http2.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace flightrec::events {
namespace {

constexpr size_t kNameMax = 128;
constexpr size_t kValueMax = 1024;  // of a pseudo-header field's value kept for the summary
constexpr uint64_t kTableMax = 1 << 20;  // a dynamic table larger than any peer asks for (the default is 4096)
constexpr uint8_t kData = 0x0, kHeaders = 0x1, kRstStream = 0x3, kPushPromise = 0x5, kContinuation = 0x9, kSettings = 0x4;
constexpr size_t kBodiesMax = 256;  // streams whose DATA is followed at once
constexpr uint8_t kEndStream = 0x1, kEndHeaders = 0x4, kPadded = 0x8, kPriority = 0x20;

// RFC 7541 Appendix B: the code length of each symbol (256 is EOS). The
// code is canonical: codes follow from the lengths, shortest first, then
// by symbol.
constexpr uint8_t kCodeLength[257] = {
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    6,  10, 10, 12, 13, 6,  8,  11, 10, 10, 8,  11, 8,  6,  6,  6,
    5,  5,  5,  6,  6,  6,  6,  6,  6,  6,  7,  8,  15, 6,  12, 10,
    13, 6,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,
    7,  7,  7,  7,  7,  7,  7,  7,  8,  7,  8,  13, 19, 13, 14, 6,
    15, 5,  6,  5,  6,  5,  6,  6,  6,  5,  7,  7,  6,  6,  6,  5,
    6,  7,  6,  5,  5,  6,  7,  7,  7,  7,  7,  15, 11, 14, 13, 28,
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
    30,
};

struct Huffman {
  std::array<uint32_t, 257> code{};
  // Canonical decoding: per length, the first code and where its symbols start in `sorted`.
  std::array<uint32_t, 31> first{}, count{}, offset{};
  std::array<uint16_t, 257> sorted{};
  Huffman() {
    std::array<uint16_t, 257> order{};
    for (uint16_t s = 0; s < 257; ++s) order[s] = s;
    std::stable_sort(order.begin(), order.end(), [](uint16_t a, uint16_t b) { return kCodeLength[a] < kCodeLength[b]; });
    uint32_t c = 0;
    unsigned prev = kCodeLength[order[0]];
    for (size_t i = 0; i < order.size(); ++i) {
      unsigned len = kCodeLength[order[i]];
      if (i) c = (c + 1) << (len - prev);
      prev = len;
      code[order[i]] = c;
      sorted[i] = order[i];
      if (!count[len]) {
        first[len] = c;
        offset[len] = uint32_t(i);
      }
      ++count[len];
    }
  }
  // The symbol whose code is the top `len` bits of `bits` (nbits long), or -1.
  int match(uint64_t bits, unsigned nbits, unsigned len) const {
    if (!count[len] || nbits < len) return -1;
    uint32_t v = uint32_t(bits >> (nbits - len));
    if (v < first[len] || v - first[len] >= count[len]) return -1;
    return sorted[offset[len] + (v - first[len])];
  }
};

const Huffman& huffman() {
  static const Huffman h;
  return h;
}

// Feeds one octet into a Huffman decoding; appends the decoded symbols
// (lower case if `lower`) to out while it is shorter than `keep`, and
// counts all in *n. False on EOS in the data.
bool huffman_step(uint8_t byte, uint64_t& bits, unsigned& nbits, std::string* out, size_t keep, uint64_t* n,
                  bool lower = true) {
  const Huffman& h = huffman();
  bits = (bits << 8) | byte;
  nbits += 8;
  for (;;) {
    int sym = -1;
    for (unsigned len = 5; len <= 30 && len <= nbits && sym < 0; ++len) sym = h.match(bits, nbits, len);
    if (sym < 0) return nbits <= 30;  // needs more bits (a code is at most 30)
    if (sym == 256) return false;
    nbits -= kCodeLength[sym];
    bits &= nbits ? (uint64_t(1) << nbits) - 1 : 0;
    if (out && out->size() < keep) *out += char(lower ? std::tolower(sym) : sym);
    ++*n;
  }
}

// The end of a Huffman string: at most 7 bits left, all ones (RFC 7541 5.2).
bool huffman_end(uint64_t bits, unsigned nbits) { return nbits <= 7 && bits == (uint64_t(1) << nbits) - 1; }

// RFC 7541 Appendix A: the static table's names (1-based).
constexpr const char* kStaticNames[] = {
    ":authority", ":method", ":method", ":path", ":path", ":scheme", ":scheme", ":status", ":status", ":status",
    ":status", ":status", ":status", ":status", "accept-charset", "accept-encoding", "accept-language",
    "accept-ranges", "accept", "access-control-allow-origin", "age", "allow", "authorization", "cache-control",
    "content-disposition", "content-encoding", "content-language", "content-length", "content-location",
    "content-range", "content-type", "cookie", "date", "etag", "expect", "expires", "from", "host", "if-match",
    "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified", "link", "location",
    "max-forwards", "proxy-authenticate", "proxy-authorization", "range", "referer", "refresh", "retry-after",
    "server", "set-cookie", "strict-transport-security", "transfer-encoding", "user-agent", "vary", "via",
    "www-authenticate"};
constexpr uint64_t kStaticCount = sizeof(kStaticNames) / sizeof(kStaticNames[0]);
// ... and the values of its first 14 entries (the others have none).
constexpr const char* kStaticValues[] = {"",    "GET", "POST", "/",   "/index.html", "http", "https",
                                         "200", "204", "206",  "304", "400",         "404",  "500"};

bool pseudo_header(const std::string& name) { return !name.empty() && name[0] == ':'; }

}  // namespace

bool starts_http2_client(std::string_view first) {
  return !first.empty() && kHttp2Preface.starts_with(first.substr(0, kHttp2Preface.size()));
}

bool starts_http2_server(std::string_view first) {
  // A SETTINGS frame on stream 0, not an ACK, a whole number of settings.
  if (first.size() < 9) return false;
  auto b = [&](size_t i) { return uint8_t(first[i]); };
  uint32_t len = (uint32_t(b(0)) << 16) | (uint32_t(b(1)) << 8) | b(2);
  return b(3) == kSettings && b(4) == 0 && len % 6 == 0 && len <= 16384 && !(b(5) | b(6) | b(7) | b(8));
}

int64_t huffman_decoded_length(std::string_view bytes) {
  uint64_t bits = 0, n = 0;
  unsigned nbits = 0;
  for (char c : bytes)
    if (!huffman_step(uint8_t(c), bits, nbits, nullptr, 0, &n)) return -1;
  return huffman_end(bits, nbits) ? int64_t(n) : -1;
}

std::string huffman_decode(std::string_view bytes, bool lower) {
  uint64_t bits = 0, n = 0;
  unsigned nbits = 0;
  std::string out;
  for (char c : bytes)
    if (!huffman_step(uint8_t(c), bits, nbits, &out, SIZE_MAX, &n, lower)) return {};
  return huffman_end(bits, nbits) ? out : std::string();
}

std::string huffman_filler(size_t bytes, uint64_t symbols) {
  // Printable symbols of each code length, then any symbol, chosen
  // greedily (longest first) so the codes fill 8*bytes-7 .. 8*bytes bits.
  const Huffman& h = huffman();
  uint64_t hi = 8 * uint64_t(bytes), lo = hi >= 7 ? hi - 7 : 0;
  for (bool printable_only : {true, false}) {
    std::array<int, 31> by_length;
    by_length.fill(-1);
    for (int s = 0; s < 256; ++s)
      if ((!printable_only || (s > 0x20 && s < 0x7f && s != '\\')) && by_length[kCodeLength[s]] < 0)
        by_length[kCodeLength[s]] = s;
    unsigned longest = 0;
    for (unsigned l = 0; l <= 30; ++l)
      if (by_length[l] >= 0) longest = l;
    std::vector<int> chosen;
    uint64_t used = 0;
    bool ok = true;
    for (uint64_t i = 0; i < symbols && ok; ++i) {
      uint64_t after = symbols - i - 1;
      ok = false;
      for (unsigned l = longest; l >= 5; --l) {
        if (by_length[l] < 0) continue;
        if (used + l + 5 * after <= hi && used + l + longest * after >= lo) {
          chosen.push_back(by_length[l]);
          used += l;
          ok = true;
          break;
        }
      }
    }
    if (!ok || used < lo || used > hi) continue;
    std::string out;
    uint64_t acc = 0;
    unsigned n = 0;
    for (int s : chosen) {
      acc = (acc << kCodeLength[s]) | h.code[s];
      n += kCodeLength[s];
      while (n >= 8) {
        out += char(uint8_t(acc >> (n - 8)));
        n -= 8;
        acc &= (uint64_t(1) << n) - 1;
      }
    }
    if (n) out += char(uint8_t((acc << (8 - n)) | ((1u << (8 - n)) - 1)));  // EOS padding
    if (out.size() == bytes) return out;
  }
  return {};
}

void Http2Redactor::skip(uint64_t n) {
  // Bytes never seen: harmless inside a frame that carries no header block.
  while (n && state_ != State::Lost) {
    if (state_ == State::Payload && !headers_frame_) {
      uint64_t k = std::min<uint64_t>(n, length_ - at_);
      at_ += uint32_t(k);
      n -= k;
      if (at_ == length_) state_ = State::FrameHeader, header_got_ = 0;
    } else {
      state_ = State::Lost;
    }
  }
}

void Http2Redactor::lose(std::string& bytes, size_t from, std::vector<std::string>& names) {
  // Frames can no longer be told apart: any byte may be part of a header.
  state_ = State::Lost;
  names.push_back("(after a gap)");
  std::fill(bytes.begin() + long(from), bytes.end(), '*');
}

void Http2Redactor::frame_header_done() {
  length_ = (uint32_t(header_[0]) << 16) | (uint32_t(header_[1]) << 8) | header_[2];
  type_ = header_[3];
  flags_ = header_[4];
  at_ = 0;
  pad_ = 0;
  headers_frame_ = type_ == kHeaders || type_ == kPushPromise || type_ == kContinuation;
  data_frame_ = type_ == kData;
  stream_ = ((uint32_t(header_[5]) << 24) | (uint32_t(header_[6]) << 16) | (uint32_t(header_[7]) << 8) | header_[8]) &
            0x7fffffffu;
  pre_ = data_frame_ && (flags_ & kPadded) ? 1 : 0;
  if (data_frame_) {
    if (bodies_.size() >= kBodiesMax && !bodies_.count(stream_)) {
      // Bounded: streams between members are forgotten, never one inside
      // a value (opening streams must not end another's mask). When all
      // are inside one, this stream's DATA is masked whole.
      std::erase_if(bodies_, [](const auto& b) { return b.second.idle(); });
    }
    body_ = bodies_.size() < kBodiesMax || bodies_.count(stream_) ? &bodies_[stream_] : nullptr;
  }
  if (type_ == kHeaders) pre_ = (flags_ & kPadded ? 1 : 0) + (flags_ & kPriority ? 5 : 0);
  if (type_ == kPushPromise) pre_ = (flags_ & kPadded ? 1 : 0) + 4;
  if (type_ == kHeaders) {
    in_block_ = true;
    block_ = Http2Headers{};
    block_.stream = stream_;
  } else if (type_ != kContinuation) {
    in_block_ = false;
  }
  state_ = State::Payload;
}

void Http2Redactor::frame_done() {
  state_ = State::FrameHeader;
  header_got_ = 0;
  // A stream's end: DATA or trailers with END_STREAM, or a reset.
  if (((data_frame_ || type_ == kHeaders) && (flags_ & kEndStream)) || type_ == kRstStream) {
    bodies_.erase(stream_);
    body_ = nullptr;
  }
  if (in_block_ && (type_ == kHeaders || type_ == kContinuation) && (flags_ & kEndHeaders)) {
    in_block_ = false;
    if (blocks_) blocks_->push_back(std::move(block_));
  }
}

void Http2Redactor::feed(uint64_t at, std::string& bytes, const std::vector<std::string>& secret,
                         std::vector<std::string>& names, std::vector<Http2Headers>& blocks) {
  blocks_ = &blocks;
  struct Done {
    std::vector<Http2Headers>*& p;
    ~Done() { p = nullptr; }
  } done{blocks_};
  if (at > pos_) skip(at - pos_);
  else if (at < pos_) state_ = State::Lost;  // bytes seen twice: not a stream we can follow
  pos_ = at + bytes.size();
  for (size_t i = 0; i < bytes.size(); ++i) {
    uint8_t c = uint8_t(bytes[i]);
    switch (state_) {
      case State::Lost:
        lose(bytes, i, names);
        return;
      case State::Preface:
        if (c != uint8_t(kHttp2Preface[preface_got_])) {
          lose(bytes, i, names);
          return;
        }
        if (++preface_got_ == kHttp2Preface.size()) state_ = State::FrameHeader, header_got_ = 0;
        break;
      case State::FrameHeader:
        header_[header_got_++] = c;
        if (header_got_ == 9) {
          frame_header_done();
          if (length_ == 0) frame_done();
        }
        break;
      case State::Payload: {
        uint32_t p = at_++;
        if (data_frame_) {
          // A body's bytes, masked in place where a JSON member names a
          // credential (events/body_redact.h); the padding is not body.
          if (p == 0 && (flags_ & kPadded)) {
            pad_ = c;
            if (pre_ + pad_ > length_) {
              lose(bytes, i, names);
              return;
            }
          } else if (p < length_ - pad_) {
            if (!body_ && p == pre_) names.push_back("(too many streams inside a masked value)");
            bytes[i] = body_ ? body_->next(char(c), names) : '*';
          }
        } else if (headers_frame_) {
          if (p < pre_) {
            if (p == 0 && (flags_ & kPadded)) {
              pad_ = c;
              if (pre_ + pad_ > length_) {  // a protocol error: the peer will not use it
                lose(bytes, i, names);
                return;
              }
            }
          } else if (p < length_ - pad_) {
            if (!hpack(bytes, i, secret, names)) {
              lose(bytes, i, names);
              return;
            }
          }
        }
        if (at_ == length_) frame_done();
        break;
      }
    }
  }
}

bool Http2Redactor::lookup(uint64_t index, Field& f) const {
  if (index >= 1 && index <= kStaticCount) {
    f.name = kStaticNames[index - 1];
    f.name_len = f.name.size();
    f.value = index <= std::size(kStaticValues) ? kStaticValues[index - 1] : "";
    f.value_len = f.value.size();
    return true;
  }
  if (index > kStaticCount && index - kStaticCount - 1 < table_.size()) {
    f = table_[index - kStaticCount - 1];
    return true;
  }
  return false;
}

void Http2Redactor::evict() {
  while (table_size_ > table_max_ && !table_.empty()) {
    table_size_ -= table_.back().name_len + table_.back().value_len + 32;
    table_.pop_back();
  }
}

void Http2Redactor::note(const Field& f) {
  if (!in_block_ || !pseudo_header(f.name)) return;
  std::string* to = f.name == ":method"      ? &block_.method
                    : f.name == ":scheme"    ? &block_.scheme
                    : f.name == ":authority" ? &block_.authority
                    : f.name == ":path"      ? &block_.path
                    : f.name == ":status"    ? &block_.status
                                             : nullptr;
  if (to) *to = f.value;
}

void Http2Redactor::insert(const Field& f) {
  uint64_t size = f.name_len + f.value_len + 32;
  if (size > table_max_) {  // empties the table and is not added (RFC 7541 4.4)
    table_.clear();
    table_size_ = 0;
    return;
  }
  table_.push_front(f);
  table_size_ += size;
  evict();
}

bool Http2Redactor::int_done() {
  // Called when the integer of the current step is complete.
  switch (kind_) {
    case Kind::Indexed: {
      step_ = Step::Start;
      Field f;
      if (int_ == 0 || !lookup(int_, f)) return false;
      note(f);
      return true;
    }
    case Kind::SizeUpdate:
      if (int_ > kTableMax) return false;  // beyond any peer's setting we follow: give up, safely
      table_max_ = int_;
      evict();
      step_ = Step::Start;
      return true;
    case Kind::Incremental:
    case Kind::Literal:
      field_ = Field{};
      in_value_ = int_ != 0;
      if (int_ != 0 && !lookup(int_, field_)) return false;
      step_ = Step::StrStart;
      return true;
  }
  return false;
}

bool Http2Redactor::string_done() {
  if (huffman_ && !huffman_end(bits_, nbits_)) return false;
  if (!in_value_) {
    in_value_ = true;
    step_ = Step::StrStart;
    return true;
  }
  if (kind_ == Kind::Incremental) insert(field_);
  note(field_);
  step_ = Step::Start;
  return true;
}

uint8_t Http2Redactor::replacement_byte() {
  uint64_t k = replaced_++;
  if (k < replacement_.size()) return uint8_t(replacement_[k]);
  if (!huffman_) return '*';
  // '0' (code 00000) for every 5 bits, then the padding: ones.
  if (k + 1 < value_bytes_) return 0;
  unsigned padding = unsigned(8 * value_bytes_ % 5);
  return uint8_t((1u << padding) - 1);
}

// One continuation octet of an HPACK integer (RFC 7541 5.1); true while more follow.
bool Http2Redactor::int_continues(uint8_t c) {
  int_ += uint64_t(c & 0x7f) << shift_;
  shift_ += 7;
  return c & 0x80;
}

bool Http2Redactor::hpack(std::string& bytes, size_t i, const std::vector<std::string>& secret,
                          std::vector<std::string>& names) {
  uint8_t c = uint8_t(bytes[i]);
  auto begin_int = [&](unsigned prefix_bits) {
    uint8_t mask = uint8_t((1u << prefix_bits) - 1);
    int_ = c & mask;
    shift_ = 0;
    return int_ < mask;  // complete in the prefix
  };
  switch (step_) {
    case Step::Start:
      if (c & 0x80) kind_ = Kind::Indexed;
      else if (c & 0x40) kind_ = Kind::Incremental;
      else if (c & 0x20) kind_ = Kind::SizeUpdate;
      else kind_ = Kind::Literal;
      {
        unsigned prefix = kind_ == Kind::Indexed ? 7 : kind_ == Kind::Incremental ? 6 : kind_ == Kind::SizeUpdate ? 5 : 4;
        if (begin_int(prefix)) return int_done();
        step_ = Step::Int;
      }
      return true;
    case Step::Int:
      if (shift_ > 28) return false;
      if (int_continues(c)) return true;
      return int_done();
    case Step::StrStart:
      huffman_ = c & 0x80;
      bits_ = 0;
      nbits_ = 0;
      if (in_value_) field_.value.clear(), field_.value_len = 0;
      else field_.name.clear(), field_.name_len = 0;
      if (!begin_int(7)) {
        step_ = Step::StrLen;
        return true;
      }
      break;
    case Step::StrLen:
      if (shift_ > 28) return false;
      if (int_continues(c)) return true;
      break;
    case Step::StrBody: {
      uint8_t original = c;
      if (redacting_) bytes[i] = char(replacement_byte());
      uint64_t n = 0;
      // The name, and a pseudo-header field's value (as sent: not lower
      // case), unless that value is being redacted.
      std::string* out = !in_value_                                ? &field_.name
                         : pseudo_header(field_.name) && !redacting_ ? &field_.value
                                                                     : nullptr;
      size_t keep = in_value_ ? kValueMax : kNameMax;
      if (huffman_) {
        if (!huffman_step(original, bits_, nbits_, out, keep, &n, !in_value_)) return false;
      } else {
        n = 1;
        if (out && out->size() < keep) *out += char(in_value_ ? original : std::tolower(original));
      }
      (in_value_ ? field_.value_len : field_.name_len) += n;
      if (--str_left_ == 0) return string_done();
      return true;
    }
  }
  // The string's length is known (int_): its body follows, or it is empty.
  str_left_ = int_;
  redacting_ = false;
  if (in_value_ && std::find(secret.begin(), secret.end(), field_.name) != secret.end()) {
    redacting_ = true;
    field_.value = "[REDACTED]";
    names.push_back(field_.name);
    replaced_ = 0;
    value_bytes_ = str_left_;
    replacement_.clear();
    if (huffman_ && i + 1 + str_left_ <= bytes.size() && at_ + str_left_ <= length_ - pad_) {
      // The whole value is in view: the same decoded length, so a decoder
      // of the record sizes its dynamic table as the peers did.
      int64_t n = huffman_decoded_length(std::string_view(bytes).substr(i + 1, str_left_));
      if (n >= 0) replacement_ = huffman_filler(str_left_, uint64_t(n));
    }
  }
  if (str_left_ == 0) return string_done();
  step_ = Step::StrBody;
  return true;
}

namespace {

// An HPACK integer with an n-bit prefix (RFC 7541 5.1) at b[i]; false when
// it runs past the block or past 2^32.
bool hpack_int(std::string_view b, size_t& i, unsigned prefix, uint64_t& v) {
  if (i >= b.size()) return false;
  uint64_t max = (1u << prefix) - 1;
  v = uint8_t(b[i++]) & max;
  if (v < max) return true;
  for (unsigned shift = 0; i < b.size() && shift <= 28; shift += 7) {
    uint8_t c = uint8_t(b[i++]);
    v += uint64_t(c & 0x7f) << shift;
    if (!(c & 0x80)) return v <= UINT32_MAX;
  }
  return false;
}

// An HPACK string literal (5.2) at b[i], Huffman-coded or not.
bool hpack_string(std::string_view b, size_t& i, std::string& out) {
  if (i >= b.size()) return false;
  bool huffman = uint8_t(b[i]) & 0x80;
  uint64_t len;
  if (!hpack_int(b, i, 7, len) || len > b.size() - i) return false;
  std::string_view raw = b.substr(i, len);
  i += len;
  if (!huffman) {
    out.assign(raw);
    return true;
  }
  if (raw.empty()) {
    out.clear();
    return true;
  }
  out = huffman_decode(raw, false);
  return !out.empty();
}

}  // namespace

bool HpackDecoder::field(uint64_t index, std::pair<std::string, std::string>& f) const {
  if (index >= 1 && index <= kStaticCount) {
    f.first = kStaticNames[index - 1];
    f.second = index <= std::size(kStaticValues) ? kStaticValues[index - 1] : index == 16 ? "gzip, deflate" : "";
    return true;
  }
  if (index > kStaticCount && index - kStaticCount - 1 < table_.size()) {
    f = table_[index - kStaticCount - 1];
    return true;
  }
  return false;
}

void HpackDecoder::insert(const std::pair<std::string, std::string>& f) {
  uint64_t size = f.first.size() + f.second.size() + 32;
  if (size > max_) {  // empties the table and is not added (RFC 7541 4.4)
    table_.clear();
    size_ = 0;
    return;
  }
  table_.push_front(f);
  size_ += size;
  evict();
}

void HpackDecoder::evict() {
  while (size_ > max_ && !table_.empty()) {
    size_ -= table_.back().first.size() + table_.back().second.size() + 32;
    table_.pop_back();
  }
}

bool HpackDecoder::decode(std::string_view b, std::vector<std::pair<std::string, std::string>>& out, bool* cut) {
  size_t i = 0, total = 0;
  if (cut) *cut = false;
  while (!broken_ && i < b.size()) {
    uint8_t c = uint8_t(b[i]);
    std::pair<std::string, std::string> f;
    uint64_t index;
    if (c & 0x80) {  // indexed field (6.1)
      if (!hpack_int(b, i, 7, index) || !field(index, f)) broken_ = true;
    } else if ((c & 0xe0) == 0x20) {  // dynamic table size update (6.3)
      broken_ = !hpack_int(b, i, 5, index) || index > kTableMax;
      if (broken_) break;
      max_ = index;
      evict();
      continue;
    } else {  // a literal: with incremental indexing (6.2.1), without (6.2.2), never indexed (6.2.3)
      bool incremental = (c & 0xc0) == 0x40;
      if (!hpack_int(b, i, incremental ? 6 : 4, index)) broken_ = true;
      else if (index ? !field(index, f) : !hpack_string(b, i, f.first)) broken_ = true;
      else if (!hpack_string(b, i, f.second)) broken_ = true;
      else if (incremental) insert(f);
    }
    if (broken_) break;
    total += f.first.size() + f.second.size() + 32;
    if (total <= kMaxList) out.push_back(std::move(f));
    else if (cut) *cut = true;
  }
  return !broken_;
}

}  // namespace flightrec::events
