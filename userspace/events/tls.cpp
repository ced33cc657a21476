#include "events/tls.h"

#include <charconv>

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/text.h"

namespace flightrec::events {
namespace {

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

const char* func_name(uint32_t f) {
  switch (f) {
    case FR_TLS_SSL_READ: return "SSL_read";
    case FR_TLS_SSL_WRITE: return "SSL_write";
    case FR_TLS_SSL_READ_EX: return "SSL_read_ex";
    case FR_TLS_SSL_WRITE_EX: return "SSL_write_ex";
    case FR_TLS_GNUTLS_RECV: return "gnutls_record_recv";
    case FR_TLS_GNUTLS_SEND: return "gnutls_record_send";
    case FR_TLS_NSPR_READ: return "PR_Read";
    case FR_TLS_NSPR_WRITE: return "PR_Write";
    case FR_TLS_GO_READ: return "crypto/tls.(*Conn).Read";
    case FR_TLS_GO_WRITE: return "crypto/tls.(*Conn).Write";
    case FR_TLS_AEAD_SEAL: return "EVP_AEAD_CTX_seal";
    case FR_TLS_AEAD_SEAL_SCATTER: return "EVP_AEAD_CTX_seal_scatter";
    case FR_TLS_AEAD_OPEN: return "EVP_AEAD_CTX_open";
    case FR_TLS_AEAD_OPEN_GATHER: return "EVP_AEAD_CTX_open_gather";
  }
  return "unknown";
}

// The HTTP/2 header blocks that end in a chunk: the first request or
// response in the HTTP/1 summary's fields, every block in http2_headers
// ("stream=N" then each pseudo-header field present).
void summarize(Entry& e, const std::vector<Http2Headers>& blocks, bool redact) {
  auto path = [&](const std::string& p) { return redact ? redact_query(p, nullptr) : p; };
  if (blocks.empty()) return;
  std::vector<std::string> all;
  bool summarized = false;
  for (const auto& b : blocks) {
    std::string line = "stream=" + std::to_string(b.stream);
    for (auto [name, value] : {std::pair{":method", &b.method}, {":scheme", &b.scheme}, {":authority", &b.authority},
                               {":path", &b.path}, {":status", &b.status}})
      if (!value->empty())
        line += std::string(" ") + name + "=" + (value == &b.path ? path(*value) : *value);
    all.push_back(printable(line));
    if (summarized) continue;
    summarized = !b.method.empty() || !b.status.empty();
    if (!b.method.empty()) {
      e.set_bytes("http_method", b.method);
      e.set_bytes("http_path", path(b.path));
      if (!b.authority.empty()) e.set_bytes("http_host", b.authority);
      e.set("http_version", "HTTP/2");
      e.set("http2_stream", uint64_t(b.stream));
    } else if (!b.status.empty()) {
      if (b.status.size() == 3 && std::all_of(b.status.begin(), b.status.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
        e.set("http_status", std::stoi(b.status));
      e.set("http_version", "HTTP/2");
      e.set("http2_stream", uint64_t(b.stream));
    }
  }
  e.set("http2_headers", std::move(all));
}

bool is_send(uint32_t f) {
  return f == FR_TLS_SSL_WRITE || f == FR_TLS_SSL_WRITE_EX || f == FR_TLS_GNUTLS_SEND || f == FR_TLS_NSPR_WRITE ||
         f == FR_TLS_GO_WRITE || f == FR_TLS_AEAD_SEAL || f == FR_TLS_AEAD_SEAL_SCATTER;
}

// "0100007F:20FB" (little-endian IPv4 or 4x32-bit IPv6 words) -> text, port.
std::pair<std::string, int> proc_net_address(const std::string& field) {
  size_t colon = field.find(':');
  if (colon == std::string::npos) return {"", 0};
  std::string hex = field.substr(0, colon);
  int port = int(std::stoul(field.substr(colon + 1), nullptr, 16));
  unsigned char b[16] = {};
  size_t n = hex.size() / 2;
  if (n != 4 && n != 16) return {"", port};
  for (size_t w = 0; w < n / 4; ++w) {
    uint32_t word = uint32_t(std::stoul(hex.substr(w * 8, 8), nullptr, 16));
    std::memcpy(b + w * 4, &word, 4);  // /proc prints host-order words
  }
  char text[64];
  if (n == 4) {
    std::snprintf(text, sizeof(text), "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
  } else {
    bool v4mapped = std::all_of(b, b + 10, [](unsigned char c) { return c == 0; }) && b[10] == 0xff && b[11] == 0xff;
    if (v4mapped) {
      std::snprintf(text, sizeof(text), "%u.%u.%u.%u", b[12], b[13], b[14], b[15]);
    } else {
      std::string out;
      for (int i = 0; i < 16; i += 2) {
        char part[8];
        std::snprintf(part, sizeof(part), "%x", (b[i] << 8) | b[i + 1]);
        out += (i ? ":" : "") + std::string(part);
      }
      return {out, port};
    }
  }
  return {text, port};
}

}  // namespace

const std::vector<std::string>& default_redacted_headers() {
  static const std::vector<std::string> names = {
      "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key",
      "x-auth-token", "x-access-token", "x-amz-security-token", "x-goog-api-key", "private-token",
      "x-csrf-token"};
  return names;
}

bool secret_query_key(std::string_view key) {
  static const char* const keys[] = {
      "api_key",  "apikey",        "api-key",          "key",          "token",            "access_token",
      "id_token", "refresh_token", "auth",             "auth_token",   "authorization",    "password",
      "passwd",   "secret",        "client_secret",    "signature",    "sig",              "private_token",
      "x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-goog-signature", "x-goog-credential"};
  for (const char* k : keys)
    if (key == k) return true;
  return false;
}

std::string redact_query(std::string_view target, std::vector<std::string>* names) {
  size_t q = target.find('?');
  if (q == std::string_view::npos) return std::string(target);
  std::string out(target.substr(0, q + 1));
  std::string_view rest = target.substr(q + 1);
  size_t hash = rest.find('#');
  std::string_view fragment = hash == std::string_view::npos ? std::string_view() : rest.substr(hash);
  rest = rest.substr(0, hash);
  for (size_t start = 0; start <= rest.size();) {
    size_t end = rest.find('&', start);
    if (end == std::string_view::npos) end = rest.size();
    std::string_view pair = rest.substr(start, end - start);
    size_t eq = pair.find('=');
    std::string key(pair.substr(0, eq));
    for (char& c : key) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (eq != std::string_view::npos && secret_query_key(key)) {
      out.append(pair.substr(0, eq + 1)).append("[REDACTED]");
      if (names) names->push_back("?" + key);
    } else {
      out.append(pair);
    }
    if (end < rest.size()) out += '&';
    start = end + 1;
  }
  return out.append(fragment);
}

namespace {

constexpr size_t kNameMax = 64, kValueMax = 64;

bool starts_http_message(std::string_view s) {
  for (std::string_view m : {"GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "PATCH ", "OPTIONS ", "CONNECT ", "TRACE ",
                             "HTTP/1."})
    if (s.starts_with(m)) return true;
  return false;
}

}  // namespace

void HeaderRedactor::header_byte(char c, const std::vector<std::string>& secret, std::vector<std::string>& names,
                                 std::string& out) {
  if (c == '\r') {
    out += c;
    redacting_ = false;
  } else if (in_name_ && line_empty_ && (c == ' ' || c == '\t')) {
    // A folded line (obs-fold, RFC 9112 5.2): more of the previous value.
    line_empty_ = false;
    in_name_ = false;
    redacting_ = line_secret_ = last_secret_;
    out += c;
  } else if (in_name_) {
    line_empty_ = false;
    out += c;
    if (c == ':') {
      in_name_ = false;
      if (std::find(secret.begin(), secret.end(), name_) != secret.end()) {
        redacting_ = line_secret_ = true;
        names.push_back(name_);
      }
    } else if (name_.size() < kNameMax) {
      name_ += char(std::tolower(static_cast<unsigned char>(c)));
    }
  } else if (redacting_) {
    line_empty_ = false;
    if ((c == ' ' || c == '\t') && !marked_) out += c;  // the space after the colon stays
    else if (!marked_) {
      out += "[REDACTED]";
      marked_ = true;
    }
  } else {
    line_empty_ = false;
    out += c;
    if (value_.size() < kValueMax) value_ += char(std::tolower(static_cast<unsigned char>(c)));
  }
}

void HeaderRedactor::end_of_line() {
  if (!in_name_ && name_ == "content-length") {
    // Digits, spaces around them: anything else (a value of spaces alone,
    // which once threw here and ended the record) is no length.
    std::string_view v = value_;
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    has_length_ = !v.empty() && v.size() <= 18 && ec == std::errc() && end == v.data() + v.size();
    if (has_length_) length_ = n;
  }
  if (!in_name_ && name_ == "transfer-encoding" && value_.find("chunked") != std::string::npos) chunked_ = true;
  // A folded line goes on with the header before it, secret or not.
  last_secret_ = !line_empty_ && line_secret_;
  line_secret_ = false;
  name_.clear();
  value_.clear();
  in_name_ = line_empty_ = true;
  redacting_ = marked_ = false;
  start_field_ = 0;
  in_query_ = in_query_value_ = query_redacting_ = query_marked_ = false;
  query_key_.clear();
}

std::string HeaderRedactor::feed(uint64_t at, std::string_view bytes, bool write_start,
                                 const std::vector<std::string>& secret, std::vector<std::string>& names) {
  if (at != pos_) {
    // Bytes went missing (past --tls-cap, or unreadable). Inside a header
    // line, what follows may be the rest of a secret: redact to its end.
    if (mode_ == Mode::Headers || mode_ == Mode::Trailers) {
      in_name_ = line_empty_ = false;
      if (!redacting_) names.push_back("(after a gap)");
      redacting_ = true;
      line_secret_ = true;  // and a folded line after it goes on with it
    } else {
      mode_ = Mode::Unknown;
    }
  }
  pos_ = at + bytes.size();
  // A new message: at the start of a stream, or a call that begins with one
  // while the length of the last body is not known.
  if ((mode_ == Mode::MessageStart || (mode_ == Mode::Unknown && write_start)) && !bytes.empty()) {
    mode_ = starts_http_message(bytes) ? Mode::StartLine : Mode::Unknown;
    method_.clear();
    status_ = 0;
  }
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    char c = bytes[i];
    switch (mode_) {
      case Mode::MessageStart:  // a message that follows a body of known length
        mode_ = starts_http_message(bytes.substr(i)) ? Mode::StartLine : Mode::Unknown;
        method_.clear();
        status_ = 0;
        [[fallthrough]];
      case Mode::StartLine:
      case Mode::Unknown:
        if (mode_ == Mode::StartLine && start_field_ == 1 && c != ' ' && c != '\r' && c != '\n') {
          // The request target: "?key=value&..." values of credential keys go.
          if (!in_query_) {
            in_query_ = c == '?';
          } else if (c == '&' || c == '#') {
            in_query_value_ = query_redacting_ = query_marked_ = false;
            query_key_.clear();
            in_query_ = c == '&';
          } else if (!in_query_value_ && c == '=') {
            in_query_value_ = true;
            query_redacting_ = secret_query_key(query_key_);
            if (query_redacting_) names.push_back("?" + query_key_);
          } else if (!in_query_value_ && query_key_.size() < kNameMax) {
            query_key_ += char(std::tolower(static_cast<unsigned char>(c)));
          } else if (query_redacting_) {
            if (!query_marked_) out += "[REDACTED]";
            query_marked_ = true;
            break;
          }
        }
        if (mode_ == Mode::StartLine && start_field_ == 0 && c != ' ' && method_.size() < 16) method_ += c;
        if (mode_ == Mode::StartLine && start_field_ == 1 && c >= '0' && c <= '9' && status_ < 1000)
          status_ = status_ * 10 + (c - '0');
        if (mode_ == Mode::StartLine && c == ' ' && start_field_ < 2) ++start_field_;
        // Bytes of no known framing (a body without a length, another
        // protocol) are still scanned for credentials in JSON.
        out += mode_ == Mode::Unknown ? body_.next(c, names) : c;
        if (mode_ == Mode::StartLine && c == '\n') {
          if (!method_.starts_with("HTTP/")) {
            status_ = 0;  // a request's target is no status
            if (heads_) {
              if (heads_->size() >= 4096) heads_->pop_front();  // bounded: one direction alone recorded
              heads_->push_back(method_ == "HEAD");
            }
          }
          mode_ = Mode::Headers;
          end_of_line();
          last_secret_ = false;
          has_length_ = chunked_ = false;
        }
        break;
      case Mode::Body:
        out += body_.next(c, names);
        if (--body_left_ == 0) mode_ = Mode::MessageStart;
        break;
      case Mode::ChunkSize:  // hex digits, then extensions to the line end
        out += c;
        if (c == '\n') {
          mode_ = chunk_left_ ? Mode::ChunkData : Mode::Trailers;
          end_of_line();
          last_secret_ = false;
        } else if (!in_name_) {
          // an extension (";name=value"): not read
        } else if (std::isxdigit(static_cast<unsigned char>(c)) && chunk_left_ < (uint64_t(1) << 56)) {
          chunk_left_ = chunk_left_ * 16 + uint64_t(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
        } else if (c != '\r') {
          in_name_ = false;  // the size ended
        }
        break;
      case Mode::ChunkData:
        out += body_.next(c, names);
        if (--chunk_left_ == 0) mode_ = Mode::ChunkEnd;
        break;
      case Mode::ChunkEnd:  // the CRLF after a chunk's data
        out += c;
        if (c == '\n') mode_ = Mode::ChunkSize;
        break;
      case Mode::Headers:
      case Mode::Trailers:
        if (c == '\n') {
          out += c;
          if (line_empty_ && mode_ == Mode::Trailers) {
            mode_ = Mode::MessageStart;  // the message's end
          } else if (line_empty_) {  // the blank line: the body follows
            bool known = has_length_ && !chunked_;
            body_left_ = known ? length_ : 0;
            body_.reset();
            chunk_left_ = 0;
            mode_ = chunked_ ? Mode::ChunkSize : !known ? Mode::Unknown : body_left_ ? Mode::Body : Mode::MessageStart;
            // Responses without a body whatever their headers say (RFC 9112
            // 6.3): to a HEAD, 1xx, 204 and 304. A 101 switches protocols.
            if (method_.starts_with("HTTP/")) {
              bool interim = status_ >= 100 && status_ < 200;
              bool to_head = false;
              if (!interim && heads_ && !heads_->empty()) {
                to_head = heads_->front();
                heads_->pop_front();
              }
              if (status_ == 101) mode_ = Mode::Unknown;
              else if (interim || to_head || status_ == 204 || status_ == 304) mode_ = Mode::MessageStart;
            }
            method_.clear();
            status_ = 0;
          }
          end_of_line();
        } else {
          header_byte(c, secret, names, out);
        }
        break;
    }
  }
  return out;
}

void TlsStreams::note_socket(uint32_t pid, int fd, bool local, const std::string& addr, int port) {
  if (sockets_.size() > 65536) sockets_.clear();  // bounded: a fallback, not a table of record
  Endpoints& ep = sockets_[{pid, fd}];
  (local ? ep.local_addr : ep.remote_addr) = addr;
  (local ? ep.local_port : ep.remote_port) = port;
}

void TlsStreams::add_endpoints(Entry& e, uint32_t pid, int fd) {
  Conn c;
  c.fd = fd;
  resolve(c, pid);
  set_endpoints(e, c);
}

void TlsStreams::set_endpoints(Entry& e, const Conn& c) {
  if (!c.local_addr.empty()) {
    e.set("local_addr", c.local_addr);
    e.set("local_port", c.local_port);
  }
  if (!c.remote_addr.empty()) {
    e.set("remote_addr", c.remote_addr);
    e.set("remote_port", c.remote_port);
  }
}

ClientHello parse_client_hello(std::string_view rec) {
  ClientHello out;
  // A reader that never reads past the end: each take fails once the bytes run out.
  size_t at = 0;
  bool short_of = false;
  auto take = [&](size_t n) -> std::string_view {
    if (short_of || rec.size() - at < n) {
      short_of = true;
      return {};
    }
    std::string_view v = rec.substr(at, n);
    at += n;
    return v;
  };
  auto number = [&](size_t n) -> size_t {
    std::string_view v = take(n);
    size_t x = 0;
    for (unsigned char c : v) x = x << 8 | c;
    return x;
  };
  if (number(1) != 22 || number(2) >> 8 != 3) return out;  // handshake record, TLS 1.x
  // Only this record's bytes: a hello split over records is read as cut
  // (the next record's header is not hello bytes).
  size_t record = number(2);
  if (short_of) return out;
  rec = rec.substr(0, std::min(rec.size(), at + record));
  if (number(1) != 1) return out;                          // ClientHello
  number(3);                                               // its length
  take(2 + 32);                                            // legacy_version, random
  take(number(1));                                         // legacy_session_id
  take(number(2));                                         // cipher_suites
  take(number(1));                                         // legacy_compression_methods
  size_t extensions = number(2);
  if (short_of) return out;
  size_t end = at + extensions;
  bool whole = end <= rec.size();  // every extension is in the bytes given
  end = std::min(end, rec.size());
  while (!short_of && at + 4 <= end) {
    size_t type = number(2), len = number(2);
    if (len > end - at) {  // runs past the extensions (or the bytes given)
      short_of = true;
      break;
    }
    std::string_view body = take(len);
    if (type == 0 && body.size() >= 5 && out.server_name.empty()) {  // server_name (the first): list length, type 0 (host_name), name length, name
      size_t n = (size_t(uint8_t(body[3])) << 8) | uint8_t(body[4]);
      if (uint8_t(body[2]) == 0 && n <= body.size() - 5) out.server_name = std::string(body.substr(5, n));
    } else if (type == 16 && body.size() >= 2 && out.alpn.empty()) {  // ALPN (the first): list length, then length-prefixed names
      for (size_t i = 2; i < body.size();) {
        size_t n = uint8_t(body[i]);
        if (n == 0 || n > body.size() - i - 1) break;
        out.alpn.emplace_back(body.substr(i + 1, n));
        i += 1 + n;
      }
    }
  }
  out.ok = whole && !short_of;
  return out;
}

void TlsStreams::resolve(Conn& c, uint32_t pid) {
  c.resolved = true;
  if (c.fd < 0) return;
  if (auto it = sockets_.find({pid, c.fd}); it != sockets_.end()) {
    c.local_addr = it->second.local_addr;
    c.local_port = it->second.local_port;
    c.remote_addr = it->second.remote_addr;
    c.remote_port = it->second.remote_port;
  }
  char link[256] = {};
  std::string fd_path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(c.fd);
  ssize_t n = readlink(fd_path.c_str(), link, sizeof(link) - 1);
  if (n <= 0) return;
  std::string target(link, size_t(n));
  if (target.rfind("socket:[", 0) != 0) return;
  std::string inode = target.substr(8, target.size() - 9);
  for (const char* table : {"tcp", "tcp6"}) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/net/" + table);
    std::string row;
    std::getline(in, row);  // header
    while (std::getline(in, row)) {
      std::istringstream f(row);
      std::string sl, local, remote, st, queues, tr, retr, uid, timeout, ino;
      f >> sl >> local >> remote >> st >> queues >> tr >> retr >> uid >> timeout >> ino;
      if (ino != inode) continue;
      std::tie(c.local_addr, c.local_port) = proc_net_address(local);
      std::tie(c.remote_addr, c.remote_port) = proc_net_address(remote);
      return;
    }
  }
}

void TlsStreams::complete(Entry& e, const fr_tls& r, std::string_view data) {
  if (conns_.size() > 65536) conns_.clear();  // bounded; positions restart, visibly
  Conn& c = conns_[{r.h.pid, r.ssl}];
  if (r.fd >= 0 && c.fd != r.fd) {
    c.fd = r.fd;
    c.resolved = false;
  }
  if (!c.resolved) resolve(c, r.h.pid);
  bool send = is_send(r.func);
  uint64_t& position = send ? c.sent : c.received;
  // The stream position of this chunk: where its call started, plus its
  // offset in the call. A call's first chunk advances the position.
  uint64_t call_start = position;
  if (r.offset == 0) position += r.call_bytes;
  else call_start = position - r.call_bytes;

  e.set("direction", send ? "send" : "recv");
  e.set("func", func_name(r.func));
  e.set("ssl", uint64_t(r.ssl));
  e.set("fd", int64_t(c.fd));
  e.set("call_bytes", r.call_bytes);
  e.set("call_offset", r.offset);
  e.set("len", r.len);
  e.set("stream_offset", call_start + r.offset);
  e.set("ts_enter_mono_ns", uint64_t(r.enter_ns));
  set_endpoints(e, c);
  if (r.flags & FR_TLS_FAULT) e.set("data_error", "unreadable");
  if (r.flags & (FR_TLS_UNBOUND | FR_TLS_NO_CONN)) e.set("connection_unknown", 1);  // ssl is the AEAD context
  // The last chunk kept (it ends at the cap) says how much of the call was not.
  uint64_t kept_end = uint64_t(r.offset) + r.len;
  if (r.call_bytes > cap_ && kept_end == cap_) e.set("truncated_bytes", uint64_t(r.call_bytes) - cap_);

  std::vector<std::string> redacted;
  uint64_t at = call_start + r.offset;
  auto& h2 = send ? c.h2_sent : c.h2_received;
  auto& other = send ? c.h2_received : c.h2_sent;
  if (at == 0 && !h2) {
    // HTTP/2 from the first bytes: the client's preface, or (the server
    // side) a first SETTINGS frame or a peer that sent the preface.
    if (starts_http2_client(data)) h2 = std::make_unique<Http2Redactor>(true);
    else if (other || starts_http2_server(data)) h2 = std::make_unique<Http2Redactor>(false);
  }

  std::string text(data);
  // An HTTP/1 summary where a chunk starts a message (pipelining: several
  // per call); HTTP/2's come from its header blocks, below.
  bool response = !h2 && text.starts_with("HTTP/1.");
  bool request = !h2 && !response && starts_http_message(text);
  if (request || response) {
    size_t eol = text.find("\r\n");
    std::string first = text.substr(0, eol == std::string::npos ? std::min<size_t>(text.size(), 256) : eol);
    std::istringstream words(first);
    std::string a, b, c3;
    words >> a >> b >> c3;
    size_t headers_end = text.find("\r\n\r\n");
    std::string_view headers(text.data(), headers_end == std::string::npos ? text.size() : headers_end);
    auto header = [&](std::string_view name) -> std::string {
      size_t pos = 0;
      while ((pos = headers.find("\r\n", pos)) != std::string_view::npos) {
        pos += 2;
        std::string_view line = headers.substr(pos, headers.find("\r\n", pos) - pos);
        if (starts_with_nocase(line, std::string(name) + ":")) {
          std::string_view v = line.substr(name.size() + 1);
          while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
          return std::string(v);
        }
      }
      return {};
    };
    if (request) {
      e.set_bytes("http_method", a);
      e.set_bytes("http_path", redact_.empty() ? b : redact_query(b, nullptr));  // the stream itself below
      e.set_bytes("http_version", c3);
      if (auto host = header("host"); !host.empty()) e.set_bytes("http_host", host);
    } else {
      e.set_bytes("http_version", a);
      if (!b.empty() && std::all_of(b.begin(), b.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) && b.size() <= 3) e.set("http_status", std::stoi(b));
      if (auto ct = header("content-type"); !ct.empty()) e.set_bytes("http_content_type", ct);
    }
  }
  if (h2) {
    // Followed for its summaries also with nothing to redact; then on a
    // copy, so the bytes kept are the bytes sent whatever the parse says.
    std::vector<Http2Headers> blocks;
    std::string copy = redact_.empty() ? text : std::string();
    h2->feed(at, redact_.empty() ? copy : text, redact_, redacted, blocks);
    summarize(e, blocks, !redact_.empty());
  } else if (!redact_.empty()) {
    HeaderRedactor& redactor = send ? c.redact_sent : c.redact_received;
    redactor.share_requests(&c.heads);
    text = redactor.feed(at, data, r.offset == 0, redact_, redacted);
  }
  if (!redacted.empty() && !redact_.empty()) e.set("redacted", std::move(redacted));
  e.set("data_b64", base64_encode(text));
  e.set_payload(std::move(text));
}

}  // namespace flightrec::events
