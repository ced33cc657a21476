#include "agent/http2.h"

#include <algorithm>
#include <cctype>

namespace flightrec::agent {
namespace {

constexpr uint8_t kData = 0x0, kHeaders = 0x1, kRstStream = 0x3, kPushPromise = 0x5, kContinuation = 0x9;
constexpr uint8_t kEndStream = 0x1, kEndHeaders = 0x4, kPadded = 0x8, kPriority = 0x20;

bool carries_block(uint8_t type) { return type == kHeaders || type == kPushPromise || type == kContinuation; }

}  // namespace

Http2Stream::Http2Stream(bool client) : client_(client), state_(client ? State::Preface : State::FrameHeader) {}

void Http2Stream::touch(HttpMessage& m, int64_t seq) {
  if (!m.seqs.empty() && m.seqs.back() == seq) return;
  if (m.seqs.empty()) m.first_ts = ts_;
  if (m.seqs.size() < 65536) m.seqs.push_back(seq);
}

Http2Stream::Open* Http2Stream::open_stream(uint32_t id, std::vector<HttpMessage>& out) {
  auto it = open_.find(id);
  if (it != open_.end()) return &it->second;
  if (open_.size() >= kMaxStreams)
    finish(open_.begin()->first, "cut: more than " + std::to_string(kMaxStreams) + " streams were open at once", out);
  Open& o = open_[id];
  o.msg.request = client_;
  o.msg.stream = id;
  return &o;
}

void Http2Stream::finish(uint32_t id, const std::string& problem, std::vector<HttpMessage>& out) {
  auto it = open_.find(id);
  if (it == open_.end()) return;
  HttpMessage& m = it->second.msg;
  if (m.problem.empty()) m.problem = problem;
  m.last_ts = std::max(m.last_ts, ts_);
  kept_ -= std::min(kept_, m.body.size());
  // A stream whose header block never came holds no message.
  if (it->second.head) out.push_back(std::move(m));
  open_.erase(it);
}

void Http2Stream::lose(const std::string& why, std::vector<HttpMessage>& out) {
  state_ = State::Lost;
  while (!open_.empty()) finish(open_.begin()->first, why, out);
}

void Http2Stream::take_open(std::vector<HttpMessage>& out) {
  if (state_ != State::Lost) lose("the message was cut short", out);
}

void Http2Stream::body(std::string_view bytes) {
  auto it = open_.find(stream_);
  if (it == open_.end() || !it->second.head || bytes.empty()) return;  // DATA on a stream not open: nothing to keep
  Open& o = it->second;
  touch(o.msg, seq_);
  size_t room = kMaxBodies - std::min(kMaxBodies, kept_);
  size_t take = std::min(room, bytes.size());
  o.msg.body.append(bytes.substr(0, take));
  kept_ += take;
  if (take < bytes.size()) {
    o.dropped += bytes.size() - take;
    o.msg.problem = "bodies larger than " + std::to_string(kMaxBodies >> 20) + " MiB open at once: the rest is not decoded";
  }
}

void Http2Stream::feed(uint64_t at, uint64_t length, std::string_view b, int64_t seq, uint64_t ts,
                       std::vector<HttpMessage>& out) {
  if (state_ == State::Lost) return;
  seq_ = seq;
  ts_ = ts;
  if (!started_) {
    started_ = true;
    if (at != 0) return lose("the connection's start is not in the record", out);
  }
  if (at < next_) return lose("bytes of the connection came twice", out);
  if (at > next_) {
    skip(at - next_, out);
    if (state_ == State::Lost) return;
  }
  b = b.substr(0, std::min<uint64_t>(b.size(), length));
  uint64_t missing = length - b.size();  // bytes the chunk had but the record does not
  next_ = at + length;
  if ((state_ == State::Payload || header_got_) && !frame_seqs_.empty() && frame_seqs_.size() < 4096 &&
      frame_seqs_.back() != seq)
    frame_seqs_.push_back(seq);  // the frame begun in an earlier chunk goes on in this one
  while (!b.empty() && state_ != State::Lost) {
    switch (state_) {
      case State::Preface: {
        std::string_view want = events::kHttp2Preface.substr(preface_got_);
        size_t n = std::min(want.size(), b.size());
        if (b.substr(0, n) != want.substr(0, n)) return lose("not HTTP/2", out);
        preface_got_ += n;
        b.remove_prefix(n);
        if (preface_got_ == events::kHttp2Preface.size()) state_ = State::FrameHeader;
        break;
      }
      case State::FrameHeader: {
        if (header_got_ == 0) {
          frame_seqs_.clear();
          frame_seqs_.push_back(seq);
        }
        size_t n = std::min(sizeof(header_) - header_got_, b.size());
        std::copy_n(b.begin(), n, header_ + header_got_);
        header_got_ += n;
        b.remove_prefix(n);
        if (header_got_ == sizeof(header_)) frame_header_done(out);
        break;
      }
      case State::Payload: {
        size_t n = size_t(std::min<uint64_t>(length_ - got_, b.size()));
        std::string_view part = b.substr(0, n);
        if (type_ == kData) {
          // The body is what lies between the pad length and the padding.
          size_t begin = got_, end = got_ + n;
          size_t body_from = (flags_ & kPadded) ? 1 : 0;
          if ((flags_ & kPadded) && begin == 0) {
            pad_ = uint8_t(part[0]);
            if (pad_ + 1 > length_) return lose("a DATA frame's padding is longer than the frame", out);
          }
          size_t body_to = length_ - ((flags_ & kPadded) ? pad_ : 0);
          size_t from = std::max(begin, body_from), to = std::min(end, body_to);
          if (from < to) body(part.substr(from - begin, to - from));
        } else if (payload_.size() < kMaxBlock + 16) {
          payload_.append(part.substr(0, kMaxBlock + 16 - payload_.size()));
        }
        got_ += uint32_t(n);
        b.remove_prefix(n);
        if (got_ == length_) frame_done(out);
        break;
      }
      case State::Lost:
        return;
    }
  }
  if (missing && state_ != State::Lost) skip(missing, out);
}

void Http2Stream::skip(uint64_t n, std::vector<HttpMessage>& out) {
  // Bytes never recorded: harmless inside a frame that carries no header
  // block (a DATA frame's message says so); anywhere else the connection
  // cannot be followed.
  bool pad_unknown = type_ == kData && (flags_ & kPadded) && got_ == 0;
  if (state_ != State::Payload || carries_block(type_) || in_block_ || n > length_ - got_ || pad_unknown)
    return lose("bytes of the connection are missing from the record", out);
  if (type_ == kData)
    if (auto it = open_.find(stream_); it != open_.end())
      it->second.msg.problem = "bytes of the body are missing from the record";
  got_ += uint32_t(n);
  payload_.clear();
  if (got_ == length_) {
    if (type_ == kData) frame_done(out);
    else state_ = State::FrameHeader, header_got_ = 0;  // a control frame whose bytes are missing is passed over
  }
}

void Http2Stream::frame_header_done(std::vector<HttpMessage>& out) {
  length_ = (uint32_t(header_[0]) << 16) | (uint32_t(header_[1]) << 8) | header_[2];
  type_ = header_[3];
  flags_ = header_[4];
  stream_ = ((uint32_t(header_[5]) << 24) | (uint32_t(header_[6]) << 16) | (uint32_t(header_[7]) << 8) | header_[8]) &
            0x7fffffff;
  header_got_ = 0;
  got_ = 0;
  pad_ = 0;
  payload_.clear();
  // Between HEADERS and END_HEADERS only CONTINUATION of that stream may come (RFC 9113 6.10).
  if (in_block_ && (type_ != kContinuation || stream_ != block_stream_))
    return lose("a header block was interrupted", out);
  if (carries_block(type_) && length_ > kMaxBlock) return lose("a header block larger than 64 KiB", out);
  if (type_ == kContinuation && !in_block_) return lose("a CONTINUATION frame with no header block open", out);
  if ((type_ == kHeaders || type_ == kPushPromise) && stream_ == 0) return lose("a header block on stream 0", out);
  state_ = State::Payload;
  if (length_ == 0) frame_done(out);
}

void Http2Stream::frame_done(std::vector<HttpMessage>& out) {
  state_ = State::FrameHeader;
  std::string_view p = payload_;
  if (type_ == kData) {
    if (flags_ & kEndStream) finish(stream_, "", out);
    return;
  }
  if (type_ == kRstStream) {
    if (p.size() == 4) {
      uint32_t code = (uint32_t(uint8_t(p[0])) << 24) | (uint32_t(uint8_t(p[1])) << 16) | (uint32_t(uint8_t(p[2])) << 8) | uint8_t(p[3]);
      finish(stream_, "the stream was reset (error " + std::to_string(code) + ")", out);
    }
    return;
  }
  if (!carries_block(type_)) return;  // SETTINGS, PING, WINDOW_UPDATE, GOAWAY, PRIORITY: nothing of a message
  size_t skip_front = 0, pad = 0;
  if (type_ != kContinuation) {
    if (flags_ & kPadded) {
      if (p.empty()) return lose("a malformed header frame", out);
      pad = uint8_t(p[0]);
      skip_front = 1;
    }
    if (type_ == kHeaders && (flags_ & kPriority)) skip_front += 5;
    if (type_ == kPushPromise) skip_front += 4;
    if (skip_front + pad > p.size()) return lose("a malformed header frame", out);
    in_block_ = true;
    block_.clear();
    block_seqs_.clear();
    block_stream_ = stream_;
    block_end_stream_ = type_ == kHeaders && (flags_ & kEndStream);
    block_promise_ = type_ == kPushPromise;
  }
  if (block_.size() + p.size() > kMaxBlock) return lose("a header block larger than 64 KiB", out);
  block_.append(p.substr(skip_front, p.size() - skip_front - pad));
  for (int64_t s : frame_seqs_)
    if ((block_seqs_.empty() || block_seqs_.back() != s) && block_seqs_.size() < 4096) block_seqs_.push_back(s);
  if (flags_ & kEndHeaders) block_done(out);
}

void Http2Stream::block_done(std::vector<HttpMessage>& out) {
  in_block_ = false;
  std::vector<std::pair<std::string, std::string>> fields;
  // Every block is decoded, a pushed one too: the dynamic table is shared.
  bool cut = false;
  if (!hpack_.decode(block_, fields, &cut)) return lose("a header block that is not valid HPACK", out);
  if (block_promise_) return;
  if (client_ && !open_.count(block_stream_)) {
    // A client opens each stream once, in increasing order (RFC 9113 5.1.1).
    if (block_stream_ <= last_opened_) return lose("a stream opened twice, or out of order", out);
    last_opened_ = block_stream_;
  }
  Open* o = open_stream(block_stream_, out);
  if (cut) o->msg.problem = "a header block larger than 256 KiB: its last fields are not kept";
  for (int64_t s : block_seqs_) touch(o->msg, s);
  if (!o->head) {  // the head (or, for a response, an interim 1xx head the final one replaces)
    HttpMessage& m = o->msg;
    m.headers.clear();
    std::string authority;
    for (auto& [name, value] : fields) {
      if (name == ":method") m.method = value;
      else if (name == ":path") m.target = value;
      else if (name == ":authority") authority = value;
      else if (name == ":status") {
        m.status = 0;
        if (value.size() == 3 && std::all_of(value.begin(), value.end(), ::isdigit)) m.status = std::stoi(value);
        else m.problem = "a response status that is not 3 digits";
      } else if (!name.starts_with(":") && m.headers.size() < kMaxHeaders) {
        std::transform(name.begin(), name.end(), name.begin(), ::tolower);
        m.headers.emplace_back(std::move(name), std::move(value));
      }
    }
    if (!authority.empty() && m.header("host").empty()) m.headers.emplace_back("host", authority);
    o->head = client_ || m.status / 100 != 1 || block_end_stream_;
  }
  // (a second block on a stream is its trailers: nothing of them is kept)
  if (block_end_stream_) finish(block_stream_, "", out);
}

}  // namespace flightrec::agent
