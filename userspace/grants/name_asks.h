#pragma once
// Lookups that wait for a grant (ask.connect), the supervisor's side. The
// session's resolver holds a query for a name no rule allows and asks
// about the name (policy/name_ask_messages.h). The supervisor records the
// ask, lists it among the waiting calls, and answers it when a name grant
// that covers the name is given (or is already there), or denies it at
// the ask's deadline. The resolver admits the name as the grant says,
// whichever of this answer and the recorder's copy of the grant comes first.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grants/grants.h"
#include "policy/name_ask_messages.h"

namespace flightrec::grants {

using policy::NameAnswer;
using policy::NameAsk;

// The supervisor's side: the asks waiting, by deadline.
class NameAsks {
 public:
  using Emit = std::function<void(const nlohmann::json&)>;
  static constexpr size_t kMaxWaiting = 256;  // then an ask is denied at once
  NameAsks(int fd, uint64_t timeout_ms) : fd_(fd), timeout_ms_(timeout_ms) {}
  int fd() const { return fd_; }  // -1: none, or the resolver is gone
  // Takes what the resolver sent; each ask is numbered with ++*asks and
  // recorded; one a grant in the table covers is answered at once.
  void receive(GrantTable& table, uint64_t* asks, const Emit& emit);
  // A name grant given: the asks it covers are answered.
  void granted(const Grant& g, const Emit& emit);
  // Asks past their deadline are denied.
  void expire(uint64_t now_ns, const Emit& emit);
  uint64_t next_deadline() const;  // 0: none
  // For a list reply: as waiting calls are listed.
  void list(nlohmann::json* waiting, size_t max, uint64_t now_ns) const;
  size_t size() const { return waiting_.size(); }

 private:
  struct Waiting {
    NameAsk ask;
    uint64_t id, deadline_ns;
  };
  void answer(const Waiting& w, const Grant& g, const Emit& emit);
  void deny(const NameAsk& a, uint64_t id, const std::string& why, const Emit& emit);
  void send(const std::string& msg);
  int fd_;
  uint64_t timeout_ms_;
  std::vector<Waiting> waiting_;
};

}  // namespace flightrec::grants
