#pragma once
// RFC 5424 syslog messages over TCP with octet-counting framing (RFC 6587
// §3.4.1), or over TLS (RFC 5425, the same framing). One message per
// entry the filter lets through (by default violations, session start and
// end, and losses); its MSG is the entry's canonical form E itself, and
// its structured data carries the entry's leaf hash, so a line in a SIEM
// is proven against the record (SHA-256(0x00 || MSG) = leaf).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "ship/connection.h"
#include "ship/hub.h"

namespace flightrec::ship {

struct SyslogSettings {
  std::string name;     // the config's, for metrics and messages
  std::string address;  // "host:port", as configured
  std::string host;
  uint16_t port = 0;
  TlsSettings tls;
  int facility = 10;    // authpriv: entries quote commands and paths
  EntryFilter filter;
  size_t queue_max = 100000;            // messages held while the server is away
  size_t queue_max_bytes = 64u << 20;
  std::string sd_id = "flightrec@32473";  // RFC 5612's documentation enterprise number
  std::string hostname;                 // HOSTNAME field; "" -> this host's name
  bool operator==(const SyslogSettings&) const = default;
};

// Facility by RFC 5424's names (kern, user, ..., authpriv, local0-7); -1 if none.
int syslog_facility(std::string_view name);
// The severity an entry is sent with: a violation's level by name
// (CRITICAL -> 2 crit, ALERT -> 1 alert, INFO -> 6 info); error 3; lost,
// malformed and recording_suspended 4 warning; genesis and session_end 5
// notice; every other entry 6 info.
int syslog_severity(std::string_view type, std::string_view body);
// One message, unframed.
std::string syslog_message(const SyslogSettings& s, std::string_view hostname, const std::string& origin,
                           int64_t session, const ledger::SealedEntry& entry);

class SyslogOutput : public ThreadedOutput {
 public:
  explicit SyslogOutput(SyslogSettings settings);
  ~SyslogOutput() override { close(std::chrono::milliseconds(0)); }

  void offer(const std::string& origin, int64_t session, std::span<const ledger::SealedEntry> entries,
             std::span<const ledger::SealedCheckpoint> checkpoints) override;
  const EntryFilter& filter() const override { return settings_.filter; }

 private:
  void run() override;
  void fill(OutputStats& s) const override {
    s.queued = queue_.size();
  }
  bool send_some(std::unique_ptr<Connection>& conn);  // false: failed (conn reset)

  SyslogSettings settings_;
  std::string hostname_;
  std::deque<std::string> queue_;  // framed messages, under mu_
  size_t queued_bytes_ = 0;
};

}  // namespace flightrec::ship
