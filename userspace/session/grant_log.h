#pragma once
// The grant supervisor's reports (grants/supervisor.h), as record entries:
// every ask, grant, use, expiry, revocation, denial and refused client,
// with the grant's id and reason. Reads the supervisor's JSON lines; a
// line it cannot read is recorded as such, never dropped.
#include <cstdint>
#include <functional>
#include <string>

#include "session/pipeline.h"

namespace flightrec::session {

class GrantLog {
 public:
  explicit GrantLog(int fd) : fd_(fd) {}
  ~GrantLog();
  GrantLog(const GrantLog&) = delete;
  GrantLog& operator=(const GrantLog&) = delete;
  int fd() const { return fd_; }  // -1 once closed
  void close();
  // A name grant given (ended: false) or one that expired or was revoked
  // (ended: true; name and port empty): for the session's resolver.
  struct NameGrant {
    uint64_t id = 0;
    std::string name;
    uint16_t port = 0;
    uint64_t duration_ms = 0;  // 0: until revoked
    bool ended = false;
  };
  void on_name_grant(std::function<void(const NameGrant&)> f) { on_name_grant_ = std::move(f); }
  // Reads what is there; entries into out, lines for stderr into *notes.
  // False at EOF (the supervisor is gone).
  bool read(Emitted& out, std::string* notes);

 private:
  void entry(const std::string& line, Emitted& out, std::string* notes);
  int fd_;
  std::string pending_;
  static constexpr uint64_t kMaxNameNotes = 100;  // asks and denials of names said on stderr
  uint64_t name_notes_ = 0;
  std::function<void(const NameGrant&)> on_name_grant_;
};

}  // namespace flightrec::session
