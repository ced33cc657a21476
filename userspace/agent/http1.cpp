#include "agent/http1.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace flightrec::agent {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

bool looks_like_start(std::string_view b) {
  static const char* starts[] = {"GET ", "POST ", "PUT ", "PATCH ", "DELETE ", "HEAD ", "OPTIONS ", "HTTP/1."};
  for (const char* s : starts) {
    std::string_view w(s);
    if (b.substr(0, std::min(b.size(), w.size())) == w.substr(0, std::min(b.size(), w.size()))) return true;
  }
  return false;
}

}  // namespace

std::string HttpMessage::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return "";
}

void Http1Stream::keep(std::string_view bytes) {
  size_t room = kMaxBody - std::min(kMaxBody, msg_.body.size());
  msg_.body.append(bytes.substr(0, room));
  if (bytes.size() > room) {
    dropped_ += bytes.size() - room;
    msg_.problem = "body larger than " + std::to_string(kMaxBody >> 20) + " MiB: the rest is not decoded";
  }
}

bool Http1Stream::parse_head() {
  // line_ holds the head up to and with its blank line.
  size_t eol = line_.find("\r\n");
  std::string_view first(line_.data(), eol);
  if (first.starts_with("HTTP/1.")) {
    msg_.request = false;
    size_t sp = first.find(' ');
    if (sp == std::string_view::npos || first.size() < sp + 4) return false;
    int status = 0;
    auto [p, ec] = std::from_chars(first.data() + sp + 1, first.data() + sp + 4, status);
    if (ec != std::errc() || p != first.data() + sp + 4 || status < 100 || status > 999) return false;
    msg_.status = status;
  } else {
    size_t a = first.find(' '), b = first.rfind(' ');
    if (a == std::string_view::npos || b == a || !first.substr(b + 1).starts_with("HTTP/1.")) return false;
    msg_.request = true;
    msg_.method = std::string(first.substr(0, a));
    msg_.target = std::string(first.substr(a + 1, b - a - 1));
  }
  for (size_t pos = eol + 2; pos < line_.size();) {
    size_t end = line_.find("\r\n", pos);
    if (end == std::string::npos || end == pos) break;
    std::string_view l(line_.data() + pos, end - pos);
    pos = end + 2;
    size_t colon = l.find(':');
    if (colon == std::string_view::npos) continue;
    if (msg_.headers.size() < 256) msg_.headers.emplace_back(lower(trim(l.substr(0, colon))), std::string(trim(l.substr(colon + 1))));
  }
  return true;
}

void Http1Stream::begin_body() {
  std::string te = lower(msg_.header("transfer-encoding")), cl = msg_.header("content-length");
  bool no_body = !msg_.request && (msg_.status / 100 == 1 || msg_.status == 204 || msg_.status == 304);
  if (no_body) {
    state_ = State::Start;
    return;
  }
  if (te.find("chunked") != std::string::npos) {
    state_ = State::ChunkSize;
    line_.clear();
    return;
  }
  if (!cl.empty()) {
    uint64_t n = 0;
    auto [p, ec] = std::from_chars(cl.data(), cl.data() + cl.size(), n);
    if (ec != std::errc() || p != cl.data() + cl.size()) {
      state_ = State::Lost;
      return;
    }
    left_ = n;
    state_ = n ? State::Body : State::Start;
    return;
  }
  // A request without a length has no body; a response is read until the
  // connection closes.
  state_ = msg_.request ? State::Start : State::UntilClose;
}

void Http1Stream::finish(std::vector<HttpMessage>& out) {
  out.push_back(std::move(msg_));
  msg_ = HttpMessage{};
  dropped_ = 0;
  state_ = State::Start;
}

void Http1Stream::feed(uint64_t at, uint64_t length, std::string_view b, int64_t seq, uint64_t ts,
                       std::vector<HttpMessage>& out) {
  if (state_ == State::Lost) return;
  if (!started_) {
    started_ = true;
    next_ = at;
    if (!looks_like_start(b)) {
      state_ = State::Lost;  // not HTTP/1 (HTTP/2, or joined mid-stream)
      return;
    }
  }
  if (at != next_) {
    // Bytes missing. Inside a body of known length they are skipped (the
    // message says so); anywhere framing was, the stream is lost.
    uint64_t gap = at > next_ ? at - next_ : 0;
    if (at < next_ || state_ != State::Body || gap >= left_) {
      state_ = State::Lost;
      return;
    }
    left_ -= gap;
    msg_.problem = "bytes of the body are missing from the record";
  }
  next_ = at + length;
  auto touch = [&] {  // this entry holds bytes of the open message
    if (!msg_.seqs.empty() && msg_.seqs.back() == seq) return;
    if (msg_.seqs.empty()) msg_.first_ts = ts;
    if (msg_.seqs.size() < 65536) msg_.seqs.push_back(seq);
    msg_.last_ts = ts;
  };
  while (!b.empty() && state_ != State::Lost) {
    switch (state_) {
      case State::Start:
        if (!looks_like_start(b)) {
          state_ = State::Lost;
          return;
        }
        state_ = State::Head;
        line_.clear();
        [[fallthrough]];
      case State::Head: {
        touch();
        // Up to the blank line, looking back 3 bytes for one split across chunks.
        size_t from = line_.size() >= 3 ? line_.size() - 3 : 0;
        size_t take = std::min(b.size(), kMaxHead + 4 - std::min(kMaxHead + 4, line_.size()));
        line_.append(b.substr(0, take));
        size_t end = line_.find("\r\n\r\n", from);
        if (end == std::string::npos) {
          if (line_.size() > kMaxHead) state_ = State::Lost;
          b.remove_prefix(take);
          break;
        }
        size_t used = end + 4 - (line_.size() - take);
        line_.resize(end + 4);
        b.remove_prefix(used);
        if (!parse_head()) {
          state_ = State::Lost;
          return;
        }
        begin_body();
        if (state_ == State::Start) finish(out);
        break;
      }
      case State::Body: {
        touch();
        size_t n = size_t(std::min<uint64_t>(left_, b.size()));
        keep(b.substr(0, n));
        b.remove_prefix(n);
        left_ -= n;
        if (!left_) finish(out);
        break;
      }
      case State::UntilClose:
        touch();
        keep(b);
        b = {};
        break;
      case State::ChunkSize:
      case State::Trailer: {
        touch();
        size_t eol = b.find('\n');
        line_.append(b.substr(0, eol == std::string_view::npos ? b.size() : eol + 1));
        if (line_.size() > 4096) {
          state_ = State::Lost;
          return;
        }
        if (eol == std::string_view::npos) {
          b = {};
          break;
        }
        b.remove_prefix(eol + 1);
        std::string l = std::string(trim(line_));
        line_.clear();
        if (state_ == State::Trailer) {
          if (l.empty()) finish(out);  // the trailer's end
          break;
        }
        uint64_t n = 0;
        std::string_view hex(l);
        hex = hex.substr(0, hex.find(';'));
        auto [p, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), n, 16);
        if (ec != std::errc() || hex.empty()) {
          state_ = State::Lost;
          return;
        }
        left_ = n;
        state_ = n ? State::ChunkData : State::Trailer;
        break;
      }
      case State::ChunkData: {
        touch();
        size_t n = size_t(std::min<uint64_t>(left_, b.size()));
        keep(b.substr(0, n));
        b.remove_prefix(n);
        left_ -= n;
        if (!left_) {
          state_ = State::ChunkEnd;
          left_ = 2;  // its CRLF
        }
        break;
      }
      case State::ChunkEnd: {
        touch();
        size_t n = size_t(std::min<uint64_t>(left_, b.size()));
        b.remove_prefix(n);
        left_ -= n;
        if (!left_) state_ = State::ChunkSize;
        break;
      }
      case State::Lost:
        return;
    }
  }
}

bool Http1Stream::take_open(HttpMessage& out) {
  if (msg_.seqs.empty() || state_ == State::Start || state_ == State::Head) return false;
  if (state_ != State::UntilClose && msg_.problem.empty()) msg_.problem = "the message was cut short";
  out = std::move(msg_);
  msg_ = HttpMessage{};
  state_ = State::Lost;
  return true;
}

}  // namespace flightrec::agent
