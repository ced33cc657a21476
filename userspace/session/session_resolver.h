#pragma once
// A confined session's names (sandbox/resolver.h): the resolver its
// /etc/resolv.conf names, the kernel map of the addresses allowed names
// were answered with (fr_egress_named, read by the egress programs), the
// names those addresses answer to (for the record's connects), and each
// query as a `dns` entry. A refused name is said once on stderr, with the
// rule that refused it and how to allow it, so an agent (or its user)
// asks for it instead of retrying.
#include <sys/types.h>

#include <memory>
#include <optional>
#include <set>
#include <string>

#include "common/system.h"
#include "events/host_names.h"
#include "policy/policy.h"
#include "sandbox/changes.h"
#include "sandbox/resolver.h"
#include "session/pipeline.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::session {

class SessionResolver {
 public:
  // For a sandbox under network none or allowlist: writes etc/resolv.conf
  // under `upper` (the root overlay's upper layer), makes the map when
  // names are allowed, and binds now when the sandbox shares flightrec's
  // network namespace. Throws Error.
  // tmp: the sandbox's /tmp on the host (for network.explain's file).
  SessionResolver(const policy::Policy& policy, const std::string& upper, const std::string& tmp);
  ~SessionResolver();
  // Once the sandbox's init exists: binds in its namespace if it has one
  // of its own, and serves. Throws Error.
  void start(pid_t sandbox_init);

  int named_map_fd() const { return named_.get(); }
  // The same map, opened read-only (for the grant supervisor, which only
  // looks up what a name admitted); -1 without it. Throws Error.
  int named_map_read_only_fd();  // -1 without allowed names
  int server_names_map_fd() const { return server_names_.get(); }  // fr_egress_names; -1: not checked
  events::HostNames* host_names() { return &names_; }
  // Its own address, port 53, for the egress allowlist (once bound).
  std::optional<fr_egress_rule> egress_rule() const;
  // The same as an allowlist entry (for the grant supervisor).
  std::optional<policy::Endpoint> endpoint() const;
  int fd() const { return resolver_ ? resolver_->events_fd() : -1; }
  // ask.connect: the grant supervisor's end of the socket the resolver asks
  // for name grants on (grants/name_asks.h); -1 without. Closed here by
  // start(), the supervisor holding its own by then.
  int supervisor_asks_fd() const { return supervisor_asks_.get(); }
  // A runtime grant by name (grants/grants.h Kind::Name) given, or ended.
  void grant(uint64_t id, const std::string& name, uint16_t port, uint64_t duration_ms, bool ended);
  void ungrant_all();  // the supervisor is gone: no grant of its holds
  // Answers no more (the session's end): what it took is answered first.
  void stop();
  // The queries answered since the last call, as entries.
  void record(Emitted& out);
  // network.explain: a line for the agent in the sandbox's
  // /tmp/flightrec-refusals.txt (at most 1 MiB in all); nothing otherwise.
  static constexpr const char* kRefusalsFile = "/tmp/flightrec-refusals.txt";
  void explain(const std::string& line);
  bool explains() const { return !explain_path_.empty(); }
  // For the session's sandbox description.
  std::string describe() const;
  // Whether a change of the root's upper layer is flightrec's own
  // resolv.conf (or its /etc), as it was written.
  bool wrote(const sandbox::FileChange& c) const;

 private:
  sandbox::Resolver::Options options(const policy::Policy& policy) const;
  bool own_network_;
  std::string policy_name_;
  sandbox::Resolver::Options opts_;
  UniqueFd named_, named_read_only_, server_names_, asks_, supervisor_asks_;
  events::HostNames names_;
  std::unique_ptr<sandbox::Resolver> resolver_;
  std::string upper_, conf_, conf_sha256_;
  std::set<std::string> told_;  // names refused already said on stderr
  std::set<std::string> explained_;  // and in the refusals file
  std::string explain_path_;
  size_t explained_bytes_ = 0;
  int log_stderr_ = 2;
};

}  // namespace flightrec::session
