// flightrecd's otlp output: spans POSTed over HTTP/1.1 to an OTLP/HTTP
// endpoint (ship/otlp.h).
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <iostream>

#include "common/error.h"
#include "ship/otlp.h"

namespace flightrec::ship {

bool parse_otlp_endpoint(const std::string& url, OtlpSettings& s) {
  std::string rest;
  if (url.starts_with("http://")) rest = url.substr(7);
  else if (url.starts_with("https://")) rest = url.substr(8);
  else return false;
  s.tls.on = url.starts_with("https://");
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  s.path = slash == std::string::npos ? "/v1/traces" : rest.substr(slash);
  if (s.path.size() > 1024 || s.path.find_first_of(" \r\n\t#") != std::string::npos) return false;
  if (authority.find('@') != std::string::npos) return false;  // no credentials in the URL: headers carry them
  bool has_port = !authority.empty() && authority.back() != ']' && authority.rfind(':') != std::string::npos &&
                  (authority.front() != '[' || authority.rfind(':') > authority.find(']'));
  if (!has_port) authority += s.tls.on ? ":443" : ":4318";
  if (!split_address(authority, s.host, s.port)) return false;
  return !s.host.empty() && s.host.size() <= 253 &&
         s.host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:") == std::string::npos;
}

OtlpOutput::OtlpOutput(OtlpSettings settings) : ThreadedOutput("otlp", settings.name), settings_(std::move(settings)) {
  filter_.types = {"genesis", "llm_call", "session_end", "tool_call"};  // sorted: accepts() searches them
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  hostname_ = name;
  start();
}

void OtlpOutput::offer(const std::string& origin, int64_t session, std::span<const ledger::SealedEntry> entries,
                       std::span<const ledger::SealedCheckpoint>) {
  std::lock_guard lock(mu_);
  if (stopping_) return;
  std::vector<OtelSpan> spans;
  for (const auto& e : entries)
    if (filter_.accepts(e.type, e.body)) builder_.add(origin, session, e.seq, e.type, e.body, e.leaf, spans);
  if (spans.empty()) return;
  size_t dropped = 0;
  for (auto& s : spans) {
    size_t bytes = s.bytes();
    if (queue_.size() >= settings_.queue_max || queued_bytes_ + bytes > settings_.queue_max_bytes) {
      ++dropped;
      continue;
    }
    queued_bytes_ += bytes;
    queue_.push_back(std::move(s));
  }
  if (dropped && stats_.dropped == 0)
    std::cerr << "flightrecd: otlp output " << settings_.name << ": its queue is full (" << settings_.endpoint
              << " unreachable or slow); spans are dropped and counted\n";
  stats_.dropped += dropped;
  cv_.notify_one();
}

std::string OtlpOutput::post(std::unique_ptr<Connection>& conn, const std::vector<OtelSpan>& spans, bool* retry) {
  *retry = true;
  std::string body = settings_.json ? otlp_json(spans, hostname_) : otlp_protobuf(spans, hostname_);
  bool v6 = settings_.host.find(':') != std::string::npos;
  std::string host = (v6 ? "[" + settings_.host + "]" : settings_.host) + ":" + std::to_string(settings_.port);
  std::string head = "POST " + settings_.path + " HTTP/1.1\r\nHost: " + host +
                     "\r\nUser-Agent: flightrec/" FLIGHTREC_VERSION "\r\nContent-Type: " +
                     (settings_.json ? "application/json" : "application/x-protobuf") +
                     "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  for (const auto& [k, v] : settings_.headers) head += k + ": " + v + "\r\n";
  // One request and its answer within 10 s, however the endpoint trickles
  // its bytes (each read also times out after 5 s).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  try {
    if (conn->peer_gone()) throw Error("the endpoint closed the connection");  // an idle keep-alive it let go
    conn->write_all(head + "\r\n" + body);
    // The answer: its status line and head (interim 1xx heads skipped),
    // then its body, read and let go.
    std::string got;
    char buf[16384];
    size_t end = std::string::npos;
    int status = 0;
    for (;;) {
      size_t from = 0;
      while ((end = got.find("\r\n\r\n", from)) == std::string::npos) {
        if (got.size() > 64 * 1024) throw Error("an answer head larger than 64 KiB");
        if (std::chrono::steady_clock::now() > deadline) throw Error("no whole answer within 10 s");
        size_t n = conn->read_some(buf, sizeof(buf));
        if (!n) throw Error("the endpoint closed the connection without an answer");
        from = got.size() >= 3 ? got.size() - 3 : 0;
        got.append(buf, n);
      }
      status = 0;
      if (got.starts_with("HTTP/1.") && got.size() > 12) std::from_chars(got.data() + 9, got.data() + 12, status);
      if (status < 100 || status >= 200) break;
      got.erase(0, end + 4);
    }
    std::string lower = got.substr(0, end);
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    size_t length = 0;
    bool framed = false;
    if (size_t at = lower.find("\r\ncontent-length:"); at != std::string::npos) {
      size_t from = lower.find_first_not_of(' ', at + 17);
      framed = from != std::string::npos && std::from_chars(lower.data() + from, lower.data() + end, length).ec == std::errc();
    }
    size_t have = got.size() - end - 4;
    while (framed && have < length && length <= (1 << 20)) {
      if (std::chrono::steady_clock::now() > deadline) throw Error("no whole answer within 10 s");
      size_t n = conn->read_some(buf, std::min(sizeof(buf), length - have));
      if (!n) break;
      have += n;
    }
    // An answer without a length (chunked, or to the close), or with more
    // bytes than it said, is not followed further: the next request goes
    // on a new connection.
    if (!framed || length > (1 << 20) || have != length || lower.find("\r\nconnection: close") != std::string::npos)
      conn.reset();
    if (status >= 200 && status < 300) return "";
    // Busy or failing: later. Refused, or not HTTP: sending the same again would not help.
    *retry = status == 429 || status >= 500;
    return "the endpoint answered " + (status ? std::to_string(status) : "something that is not HTTP") +
           (*retry ? "" : ": the spans are dropped");
  } catch (const std::exception& e) {
    conn.reset();
    return e.what();
  }
}

void OtlpOutput::run() {
  using clock = std::chrono::steady_clock;
  std::unique_ptr<Connection> conn;
  auto backoff = std::chrono::milliseconds(100);
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (stopping_ && (queue_.empty() || due())) return;
    // A request of at most batch_max spans and about 4 MiB (one span at least).
    std::vector<OtelSpan> batch;
    for (size_t i = 0, bytes = 0; i < queue_.size() && i < settings_.batch_max; ++i) {
      bytes += queue_[i].bytes();
      if (i && bytes > (4u << 20)) break;
      batch.push_back(queue_[i]);
    }
    lock.unlock();
    bool retry = true;
    std::string failure = connect_if_needed(conn, settings_.host, settings_.port, settings_.tls);
    if (conn) failure = post(conn, batch, &retry);
    lock.lock();
    if (failure.empty() || !retry) {
      // Sent, or refused for good: these spans leave the queue (offer only appends).
      for (size_t i = 0; i < batch.size() && !queue_.empty(); ++i) {
        queued_bytes_ -= std::min(queued_bytes_, queue_.front().bytes());
        queue_.pop_front();
      }
      (failure.empty() ? stats_.sent : stats_.dropped) += batch.size();
    }
    if (failure.empty()) {
      backoff = std::chrono::milliseconds(100);
      continue;
    }
    stats_.connected = conn != nullptr;
    note_failure(failure, settings_.endpoint, retry);
    if (!retry) continue;
    pause(lock, clock::now() + backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
}

}  // namespace flightrec::ship
