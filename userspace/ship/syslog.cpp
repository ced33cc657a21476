#include "ship/syslog.h"

#include <unistd.h>

#include <ctime>
#include <iostream>

#include "common/error.h"
#include "common/system.h"
#include "ledger/canonical.h"

namespace flightrec::ship {

namespace {

// PRINTUSASCII (33..126), at most max bytes; "-" if nothing is left.
std::string header_field(std::string_view v, size_t max) {
  std::string out;
  for (char c : v) {
    if (out.size() == max) break;
    out += (c >= 33 && c <= 126) ? c : '_';
  }
  return out.empty() ? "-" : out;
}

// An SD-PARAM value: '"', '\' and ']' escaped (RFC 5424 §6.3.3).
void param(std::string& out, const char* name, std::string_view value) {
  out += ' ';
  out += name;
  out += "=\"";
  for (char c : value) {
    if (c == '"' || c == '\\' || c == ']') out += '\\';
    out += c;
  }
  out += '"';
}

std::string timestamp(std::optional<int64_t> real_ns) {
  if (!real_ns || *real_ns < 0) return "-";
  time_t secs = time_t(*real_ns / 1'000'000'000);
  tm t{};
  gmtime_r(&secs, &t);
  char buf[64];
  snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour,
           t.tm_min, t.tm_sec, int(*real_ns % 1'000'000'000 / 1000));
  return buf;
}

}  // namespace

int syslog_facility(std::string_view name) {
  static const char* names[] = {"kern", "user",   "mail",   "daemon", "auth",   "syslog", "lpr",    "news",
                                "uucp", "cron",   "authpriv", "ftp",  "ntp",    "audit",  "alert",  "clock",
                                "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"};
  for (int i = 0; i < 24; ++i)
    if (name == names[i]) return i;
  return -1;
}

namespace {
int severity(std::string_view type, const ledger::TopLevel& top) {
  if (type == "violation") {
    auto level = top.string("level");
    int l = level ? level_of(*level) : -1;
    return l == EntryFilter::Critical ? 2 : l == EntryFilter::Alert ? 1 : 6;
  }
  if (type == "error") return 3;
  if (type == "lost" || type == "malformed" || type == "recording_suspended") return 4;
  if (type == "genesis" || type == "session_end") return 5;
  return 6;
}
}  // namespace

int syslog_severity(std::string_view type, std::string_view body) {
  ledger::TopLevel top;
  ledger::check_canonical(body, &top);
  return severity(type, top);
}

std::string syslog_message(const SyslogSettings& s, std::string_view hostname, const std::string& origin,
                           int64_t session, const ledger::SealedEntry& entry) {
  ledger::TopLevel top;  // an entry we sealed: canonical (else its members read as absent)
  ledger::check_canonical(entry.body, &top);
  std::string m;
  m.reserve(entry.body.size() + 384);
  m += '<';
  m += std::to_string(s.facility * 8 + severity(entry.type, top));
  m += ">1 ";
  m += timestamp(top.integer("ts_real_ns"));
  m += ' ';
  m += header_field(hostname, 255);
  m += " flightrec ";
  // PROCID: the process the entry is about (a violation's subject, else the entry's pid).
  auto pid = entry.type == "violation" ? top.integer("subject_pid") : top.integer("pid");
  if (pid && *pid < 0) pid = std::nullopt;
  m += pid ? std::to_string(*pid) : "-";
  m += ' ';
  m += header_field(entry.type, 32);
  m += " [";
  m += s.sd_id;
  param(m, "origin", origin);
  param(m, "session", std::to_string(session));
  param(m, "seq", std::to_string(entry.seq));
  param(m, "type", entry.type);
  param(m, "leaf", ledger::to_hex(entry.leaf));
  if (entry.type == "violation") {
    for (const char* key : {"level", "rule_id", "action"})
      if (auto v = top.string(key)) param(m, key, *v);
  }
  m += "] ";
  m += entry.body;  // MSG-ANY: E exactly, no BOM, so the leaf hash covers it as sent
  return m;
}

SyslogOutput::SyslogOutput(SyslogSettings settings)
    : ThreadedOutput("syslog", settings.name), settings_(std::move(settings)) {
  hostname_ = settings_.hostname.empty() ? host_name() : settings_.hostname;
  start();
}

void SyslogOutput::offer(const std::string& origin, int64_t session, std::span<const ledger::SealedEntry> entries,
                         std::span<const ledger::SealedCheckpoint>) {
  std::vector<std::string> framed;
  for (const auto& e : entries) {
    if (!settings_.filter.accepts(e.type, e.body)) continue;
    std::string m = syslog_message(settings_, hostname_, origin, session, e);
    framed.push_back(std::to_string(m.size()) + ' ' + m);
  }
  if (framed.empty()) return;
  size_t dropped = 0;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    for (auto& f : framed) {
      if (queue_.size() >= settings_.queue_max || queued_bytes_ + f.size() > settings_.queue_max_bytes) {
        ++dropped;
        continue;
      }
      queued_bytes_ += f.size();
      queue_.push_back(std::move(f));
    }
    if (dropped && stats_.dropped == 0)
      std::cerr << "flightrecd: syslog output " << settings_.name << ": its queue is full (" << settings_.address
                << " unreachable or slow); messages are dropped and counted\n";
    stats_.dropped += dropped;
  }
  cv_.notify_one();
}

bool SyslogOutput::send_some(std::unique_ptr<Connection>& conn) {
  // Up to 256 KiB at once; taken off the queue only once written.
  std::string chunk;
  size_t n = 0;
  {
    std::lock_guard lock(mu_);
    for (; n < queue_.size() && (chunk.empty() || chunk.size() + queue_[n].size() <= (256u << 10)); ++n)
      chunk += queue_[n];
  }
  try {
    if (conn->peer_gone()) throw Error("the server closed the connection");
    conn->write_all(chunk);
  } catch (const std::exception& e) {
    conn.reset();
    std::lock_guard lock(mu_);
    stats_.connected = false;
    stats_.last_error = e.what();
    return false;
  }
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < n; ++i) {
    queued_bytes_ -= queue_.front().size();
    queue_.pop_front();
  }
  stats_.sent += n;
  return true;
}

void SyslogOutput::run() {
  using clock = std::chrono::steady_clock;
  std::unique_ptr<Connection> conn;
  auto backoff = std::chrono::milliseconds(100);
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (stopping_ && (queue_.empty() || due())) return;
    lock.unlock();
    std::string failure = connect_if_needed(conn, settings_.host, settings_.port, settings_.tls);
    if (conn && send_some(conn)) {
      backoff = std::chrono::milliseconds(100);
      lock.lock();
      continue;
    }
    lock.lock();
    note_failure(failure, settings_.address, true);
    // Wait before the next try (a server that accepts and hangs up is not
    // hammered), but not past a stop's deadline.
    pause(lock, clock::now() + backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
}

}  // namespace flightrec::ship
