#pragma once
// Runtime grants of one session: what the granter (the session's owner,
// over the grant socket) has allowed, for how long and how often, and the
// requests of the socket's small JSON protocol. Pure data: no system calls,
// so it is unit-tested as it is.
//
// Protocol: one JSON object per line, one reply line each.
//   {"op":"grant","kind":"write","path":"/abs/dir","duration_ms":5000,"uses":3,"reason":"..."}
//   {"op":"grant","kind":"syscall","syscall":"mknod","uses":1,"reason":"..."}
//   {"op":"grant","kind":"connect","address":"192.0.2.7","port":443,"uses":1,"reason":"..."}
//   {"op":"grant","kind":"exec","path":"/opt/tools/bin/fmt","uses":1,"reason":"..."}
//   {"op":"grant","kind":"name","name":"*.example.com","port":443,"duration_ms":600000,"reason":"..."}
//   {"op":"revoke","id":7,"reason":"..."}
//   {"op":"list"}
// Replies: {"ok":true,"id":7} (grant), {"ok":true} (revoke),
// {"ok":true,"grants":[...],"waiting":[...]} (list), {"ok":false,"error":"..."}.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flightrec::grants {

enum class Kind { Write, Syscall, Connect, Exec, Name };
const char* kind_name(Kind k);

struct Grant {
  uint64_t id = 0;
  Kind kind = Kind::Write;
  std::string path;          // Write: a directory as the sandbox sees it (absolute); Exec: a file or a
                             // directory, made canonical by the supervisor (symlinks resolved)
  int syscall = -1;          // Syscall: its x86-64 number
  // Connect: one address and port (an IPv4-mapped IPv6 address is IPv4).
  int family = 0;            // AF_INET or AF_INET6
  uint8_t addr[16] = {};     // network order; IPv4 in the first 4 bytes
  uint16_t port = 0;
  std::string address;       // as the kernel's maps key it, in text
  // Name: a host name or *.domain (as network.allow takes them, lower case)
  // that the session's resolver then answers, its addresses admitted on
  // `port` (0: any) as an allowlist entry's would be.
  std::string name;
  uint64_t expires_ns = 0;   // CLOCK_MONOTONIC; 0: until revoked or the session ends
  int64_t uses_left = -1;    // -1: unlimited
  std::string reason;
};

struct Request {
  enum class Op { Grant, Revoke, List } op = Op::List;
  Grant grant;               // Grant: everything but id and expiry (from duration_ms)
  uint64_t duration_ms = 0;  // 0: no time limit
  uint64_t revoke_id = 0;
  std::string reason;        // Revoke
};

// Parses one request line; nullopt with *error set when it is not one.
// Strict: unknown keys, wrong types, relative or over-long paths,
// unknown syscalls, addresses that are not IP literals, port 0, zero uses
// and durations past 24 h are errors.
std::optional<Request> parse_request(const std::string& line, std::string* error);

// family/addr (network order, 16 bytes) as grants and the BPF maps key
// them: IPv4-mapped IPv6 becomes IPv4. Returns the family.
int normal_endpoint(int family, uint8_t* addr);

class GrantTable {
 public:
  uint64_t add(Grant g);  // sets and returns its id
  bool revoke(uint64_t id);
  // Removes and returns the grants whose time is up.
  std::vector<Grant> expire(uint64_t now_ns);
  // The earliest expiry (0: none).
  uint64_t next_expiry() const;
  // A valid grant for syscall nr, or nullptr.
  Grant* for_syscall(int nr, uint64_t now_ns);
  // A valid connect grant for this endpoint (family/addr as Grant keeps them), or nullptr.
  Grant* for_connect(int family, const uint8_t* addr, uint16_t port, uint64_t now_ns);
  // A valid exec grant for the file at `canonical` (the path itself or a
  // directory above it), or nullptr.
  Grant* for_exec(const std::string& canonical, uint64_t now_ns);
  // A valid name grant that covers host `name` (normalised; any port), or nullptr.
  Grant* for_name(const std::string& name, uint64_t now_ns);
  // Valid write grants, oldest first.
  std::vector<Grant*> writes(uint64_t now_ns);
  // One use taken; true when that was its last (it is removed: g is invalid then).
  bool use(Grant& g);
  const std::vector<Grant>& all() const { return grants_; }

 private:
  std::vector<Grant> grants_;
  uint64_t next_id_ = 1;
};

}  // namespace flightrec::grants
