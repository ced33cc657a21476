#pragma once
// A confined session's egress allowlist in the kernel: the programs of
// bpf/egress.bpf.c, loaded on their own (a small object: a few ms) and
// attached to the session's cgroup. connect(), unconnected sendmsg() and
// bind() outside the list fail with EPERM, sockets other than TCP and UDP
// cannot be made, and packets to or from anywhere but loopback and the list
// are dropped and counted. Whoever records the session (this process, or
// flightrecd) does not matter: the filter is the sandbox's. Destroying it
// detaches the programs.
#include <string>
#include <vector>

#include "probe/source.h"

struct flightrec_egress_bpf;
struct bpf_link;
struct ring_buffer;

namespace flightrec::probe {

class EgressFilter {
 public:
  struct Options {
    int cgroup_fd = -1;                 // the session's cgroup (and below)
    std::vector<fr_egress_rule> rules;  // at most FR_EGRESS_MAX
    // The runtime connect grants' maps (fr_egress_granted, fr_egress_tickets),
    // shared with the grant supervisor; -1: empty maps of the filter's own.
    int granted_fd = -1, tickets_fd = -1;
    int named_fd = -1;  // fr_egress_named, the session's resolver's (-1: an empty map)
    // Server names checked (fr_sni_mode) against fr_egress_names, the resolver's.
    uint32_t sni_mode = FR_SNI_OFF;
    int server_names_fd = -1;
    bool verbose = false;  // libbpf's own messages to stderr
  };
  explicit EgressFilter(const Options& opts);  // throws Error
  ~EgressFilter();
  EgressFilter(const EgressFilter&) = delete;
  EgressFilter& operator=(const EgressFilter&) = delete;

  // Packets dropped since load, indexed by fr_net_drop_kind: totals, and
  // the far end of one of them.
  std::vector<NetDrops> net_drops() const;
  // Readable when connections were cut for their server name: take them.
  int cuts_fd() const;
  std::vector<fr_sni_cut> take_cuts();
  // "cgroup/connect4", ...: what is attached, for the genesis entry.
  std::vector<std::string> attached() const;

 private:
  flightrec_egress_bpf* skel_ = nullptr;
  std::vector<bpf_link*> links_;
  ring_buffer* cuts_ = nullptr;
  std::vector<fr_sni_cut> taken_;
};

}  // namespace flightrec::probe
