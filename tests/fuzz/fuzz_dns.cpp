// A DNS message as the session's resolver reads it (events/dns_message.h):
// from the sandbox (a query) or from a server (an answer), both hostile.
// The first byte picks the TTL cap.
#include <string>

#include "events/dns_message.h"
#include "fuzz_input.h"

namespace dns = flightrec::events::dns;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  uint32_t cap = in.byte();
  std::string msg(in.rest);
  const auto* bytes = reinterpret_cast<const uint8_t*>(msg.data());
  if (auto q = dns::parse_query(bytes, msg.size())) (void)dns::type_name(q->type);
  (void)dns::refusal(bytes, msg.size(), dns::kNxDomain);
  if (auto r = dns::parse_response(bytes, msg.size())) {
    (void)dns::resolve(*r, r->question.name);
    (void)dns::rcode_name(r->rcode);
  }
  std::string capped = msg;
  if (dns::cap_ttls(capped, cap) && capped.size() != msg.size()) __builtin_trap();  // in place, never resized
  return 0;
}
