#pragma once
// The messages of a lookup that waits for a grant (ask.connect), between
// the session's resolver (sandbox/resolver.h) and the grant supervisor
// (grants/name_asks.h), over a SOCK_SEQPACKET pair made for the two of
// them (nothing else can ask), one JSON object each way:
//   resolver -> supervisor: {"tag":T,"name":"api.example.com","qtype":"A","client":"127.0.0.1:40000"}
//   supervisor -> resolver: {"tag":T,"ask":A,"grant":G,"name":"*.example.com","port":443,"until_ns":U}
//                       or: {"tag":T,"ask":A,"denied":"no grant within 10000 ms"}
// A grant's until_ns is CLOCK_MONOTONIC (0: until revoked).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flightrec::policy {

struct NameAsk {
  uint64_t tag = 0;
  std::string name;    // normalised (policy::normal_host_name)
  std::string qtype;   // for the record
  std::string client;  // the asker's address:port, for the record
};
struct NameAnswer {
  uint64_t tag = 0, ask = 0;
  uint64_t grant = 0;  // 0: denied
  std::string name;    // the grant's (a wildcard keeps its "*.")
  uint16_t port = 0;
  uint64_t until_ns = 0;
  std::string denied;  // why
};
std::string encode(const NameAsk& a);
std::string encode(const NameAnswer& a);
// Strict: nullopt for anything but a message of that shape.
std::optional<NameAsk> parse_name_ask(std::string_view msg);
std::optional<NameAnswer> parse_name_answer(std::string_view msg);

}  // namespace flightrec::policy
