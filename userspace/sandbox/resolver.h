#pragma once
// The sandbox's nameserver, one per session: its /etc/resolv.conf names
// it, on 127.53.x.y port 53, UDP and TCP, in the network namespace the
// sandbox uses (the egress programs let no other port 53 be reached).
//
// A name the policy allows (network.allow NAME:PORT or *.DOMAIN:PORT) is
// asked of the upstream resolvers; the addresses of the answer are put in
// fr_egress_named for the answer's TTL (floored and capped: network.
// dns_ttl_min/max) before the answer is passed on, so the connect that
// follows goes through. Any other name is refused at once (NXDOMAIN, or
// REFUSED), so a lookup fails in a millisecond with any libc (musl waits
// out 5 s for a resolver it cannot reach); with network.dns: true it is
// answered, and nothing admitted. Answers are cached for their TTL.
// Every query becomes a NameEvent for the record.
#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "events/host_names.h"
#include "policy/policy.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::sandbox {

struct NameEvent {
  uint64_t mono_ns = 0;      // when the query came (CLOCK_MONOTONIC)
  std::string name, type;    // the question
  uint16_t qtype = 0;
  std::string transport;     // "udp" or "tcp"
  std::string client;        // the asker's address:port (any process that reaches the address can ask)
  std::string verdict;       // "allowed" (addresses admitted), "answered" (network.dns: true), "refused"
  std::string rule;          // the allowlist entry that allowed the name; empty when refused
  std::string rcode;         // of the reply given
  std::vector<std::string> addresses, cnames;
  uint64_t addresses_left_out = 0;  // past the 32 admitted and recorded
  uint32_t ttl = 0;          // the answer's
  uint32_t admitted_s = 0;   // how long new connects to its addresses may start
  std::vector<uint16_t> ports;  // where (0: any port)
  std::vector<std::string> not_admitted;  // private addresses answered (network.dns_private: false)
  bool cached = false;
  uint64_t took_us = 0;
  std::string error;         // why the upstream gave no answer (SERVFAIL was given)
  uint64_t unrecorded = 0;   // verdict "unrecorded": queries left out, the recording having fallen behind
  uint64_t repeats = 0;      // the same refused question again within a second, not yet recorded
  bool waited = false;       // held for a grant first (ask.connect; grants/name_asks.h)
  uint64_t ask = 0;          // the grant supervisor's number of that ask (0: not known)
};

class Resolver {
 public:
  static constexpr const char* kOwnNetworkAddress = "127.53.0.1";  // free in a namespace of its own
  struct Options {
    std::vector<policy::HostRule> allow;  // the names allowed
    bool answer_all = false;              // network.dns: true
    policy::NameService service;
    std::vector<std::string> upstream;    // policy::upstream_resolvers
    int named_map_fd = -1;                // fr_egress_named; -1: nothing admitted
    int server_names_map_fd = -1;         // fr_egress_names: (name asked, address) pairs; -1: not kept
    events::HostNames* names = nullptr;   // told every address answered
    // ask.connect: a name no rule allows waits for a name grant, asked of
    // the grant supervisor over this socket (policy/name_ask_messages.h), up to
    // ask_timeout_ms; -1: such a name is refused at once.
    int asks_fd = -1;
    uint64_t ask_timeout_ms = 0;
  };
  // Binds in the network namespace netns_fd names (-1: flightrec's own;
  // the calling thread visits the other and comes back) at `address`, or
  // at a free 127.53.x.y when it is empty; no thread yet, so it may be made
  // before the sandbox's init is forked. Throws Error.
  Resolver(int netns_fd, const std::string& address, Options opts);
  void start();  // serves from now on, on a thread of its own
  // Serves no more: every query taken is answered (its event posted) first.
  void stop();
  ~Resolver();
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  const std::string& address() const { return address_; }
  // Names granted at run time (ask.connect): answered as allowlist
  // entries are until ungranted or until_ns (CLOCK_MONOTONIC; 0: no end).
  // Ungranted, what only it admitted is taken out of the kernel's map and
  // its cached answers forgotten. A grant is taken once: told again (by
  // the supervisor's answer to an ask, and by the record), or after its
  // end, it changes nothing.
  void grant(uint64_t id, const std::string& name, uint16_t port, uint64_t until_ns);
  void ungrant(uint64_t id);
  void ungrant_all();
  // Readable while events wait to be taken.
  int events_fd() const { return events_fd_; }
  std::vector<NameEvent> take_events();

 private:
  struct Client;
  struct Cached {
    std::string reply;  // the upstream's, id and question to be the asker's
    size_t question_end;
    uint64_t expires_ns;
    NameEvent event;    // what it said (addresses, rule, ...)
  };
  void serve();
  // A query that waited for a grant, taken up again: when it came, and the ask.
  struct Resumed {
    uint64_t asked_ns, ask;
  };
  void guarded_query(const uint8_t* msg, size_t size, const std::shared_ptr<Client>& client,
                     const Resumed* resumed = nullptr);
  void on_query(const uint8_t* msg, size_t size, const std::shared_ptr<Client>& client, const Resumed* resumed);
  // ask.connect (resolver_asks.cpp): a refused name's query held while the
  // supervisor is asked; false when it cannot wait (refused at once then).
  bool park(const uint8_t* msg, size_t size, const std::shared_ptr<Client>& client, const NameEvent& ev);
  void take_answers();                      // the supervisor's, on asks_fd
  void end_asks(uint64_t now_ns, bool all);  // refuses what waited past its deadline (all: every one)
  int ask_wait_ms();                         // until the next deadline; -1: none
  // A rule that allows a name: the policy's (id 0) or a grant's (its id).
  using Rule = std::pair<uint64_t, policy::HostRule>;
  void ask_upstream(std::string query, std::shared_ptr<Client> client, NameEvent ev, std::vector<Rule> rules);
  void ungrant_locked(uint64_t id);
  void finish(const std::shared_ptr<Client>& client, const std::string& reply, NameEvent ev);
  void admit(NameEvent& ev, const std::vector<Rule>& rules);
  void admit_server_name(NameEvent& ev, const fr_egress_endpoint& to, uint16_t port, const std::vector<Rule>& rules);
  // Into fr_egress_names and its LRU; the key, or "" when the kernel refused it (errno says why).
  std::string put_server_name_locked(const std::string& name, const fr_egress_endpoint& to, uint16_t port);
  void keep_server_name_locked(const std::string& key);
  // Records which of `rules` admitted a maps' key; false when none holds
  // it any more (nor the policy, nor another grant): its grants ended
  // while upstream answered, so it must be taken out again.
  bool own_key_locked(const std::string& key, const std::vector<Rule>& rules);
  void touch_server_names_locked(const NameEvent& ev);
  void post(NameEvent ev);

  Options opts_;
  int sock_ = -1, tcp_ = -1, stop_fd_ = -1, events_fd_ = -1;
  std::string address_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;  // guards what follows: workers post from their threads
  std::vector<NameEvent> events_;
  struct Granted {
    policy::HostRule rule;
    uint64_t until_ns = 0;
    std::set<std::string> keys;  // the maps' keys (fr_egress_endpoint, fr_egress_name bytes) its answers admitted
  };
  std::map<uint64_t, Granted> granted_;  // by grant id
  std::set<uint64_t> grants_ended_;      // ungranted: never taken again
  struct Parked {
    std::string query;
    std::shared_ptr<Client> client;
    uint64_t asked_ns;
    bool tcp;
  };
  struct Asking {  // one ask of the supervisor per name, for every query of it meanwhile
    std::string name;
    uint64_t deadline_ns;
    std::vector<Parked> queries;
  };
  std::map<uint64_t, Asking> asking_;  // by tag
  size_t parked_tcp_ = 0;              // of their queries, those over TCP
  void resume(Parked held, uint64_t ask);  // answers it as it stands now (ask: the supervisor's number)
  uint64_t next_tag_ = 0;
  std::atomic<bool> asks_open_{true};  // false once the supervisor is gone, or the resolver stops
  std::set<std::string> policy_keys_;    // the keys the policy's own rules admitted (kept on ungrant)
  // fr_egress_names's keys, least recently answered first (the map is kept an LRU here).
  std::list<std::string> server_name_order_;
  std::map<std::string, std::list<std::string>::iterator> server_names_;
  std::map<std::pair<std::string, uint16_t>, Cached> cache_;
  std::vector<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> workers_;  // upstream exchanges, and whether done
  std::atomic<int> busy_{0};
};

}  // namespace flightrec::sandbox
