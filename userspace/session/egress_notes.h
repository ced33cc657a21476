#pragma once
// What the egress programs did on their own, into the record: packets they
// dropped (counted per direction) and connections they cut for the server
// name they named (fr_sni_cuts). A cut connection's packets are already
// dropped in the kernel while they are attached; here its socket is also
// aborted, so what it queued is thrown away (never sent once the programs
// are gone) and the agent's reads and writes fail at once instead of
// waiting out TCP's retransmissions, and the cut is recorded as a connection_cut
// entry (the process, the address, the names it was answered for, the
// server name given) with a network.sni violation about it.
#include <cstdint>
#include <string>

#include "events/host_names.h"
#include "policy/judge.h"
#include "session/pipeline.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::session {

// The violation for `fresh` packets of kind (fr_net_drop_kind) dropped, d the last one.
policy::Violation packet_drop_violation(uint32_t kind, uint64_t fresh, const fr_net_drop& d);

// Aborts the cut connection's socket (sock_diag SOCK_DESTROY: its queue
// thrown away, an RST the programs drop, ECONNABORTED for the process):
// "" once done, or why not (a kernel without CONFIG_INET_DIAG_DESTROY).
std::string destroy_socket(const fr_sni_cut& cut);
// Disconnects the socket of process tgid whose SO_COOKIE is cookie (its
// queue thrown away, ECONNRESET for the process): "" once done, or why not
// (the process is gone, passed the socket on).
std::string shut_socket(uint32_t tgid, uint64_t cookie);

struct CutNote {
  events::Entry* entry = nullptr;  // the connection_cut entry, in the Emitted given
  policy::Violation violation;
  std::string explained;           // a line for the agent (network.explain)
};
// Shuts the cut connection's socket and records it in out.
CutNote record_cut(const fr_sni_cut& cut, const events::HostNames* names, Emitted& out);

}  // namespace flightrec::session
