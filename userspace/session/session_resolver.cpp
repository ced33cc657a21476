#include "session/session_resolver.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "common/system.h"
#include "ledger/hash.h"
#include "policy/network.h"
#include "session/stderr_log.h"

namespace flightrec::session {
namespace {

constexpr size_t kMaxRefusalsShown = 20;

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

}  // namespace

sandbox::Resolver::Options SessionResolver::options(const policy::Policy& policy) const {
  sandbox::Resolver::Options o;
  if (own_network_) return o;  // nothing reachable: every name refused
  o.allow = policy.allow_hosts;
  o.answer_all = policy.allow_dns;
  o.service = policy.dns;
  o.upstream = policy::upstream_resolvers(policy);
  return o;
}

SessionResolver::SessionResolver(const policy::Policy& policy, const std::string& upper, const std::string& tmp)
    : own_network_(policy::own_network(policy)), policy_name_(policy.name), upper_(upper),
      log_stderr_(policy.log_stderr) {
  if (policy.dns.explain) {
    // Root's, read-only to the sandbox, in its sticky /tmp: the agent reads it, cannot replace it.
    explain_path_ = tmp + std::string(kRefusalsFile).substr(4);
    int fd = ::open(explain_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(errno_message("cannot make the sandbox's " + std::string(kRefusalsFile), errno));
    close(fd);
  }
  opts_ = options(policy);
  if (!opts_.allow.empty() || (policy.ask.connect && !own_network_)) {  // names allowed, or grantable
    // Made before the programs load (they reuse them); as they declare them.
    named_ = UniqueFd(bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "fr_egress_named", sizeof(fr_egress_endpoint),
                                     sizeof(uint64_t), FR_EGRESS_NAMED_MAX, nullptr));
    if (named_.get() < 0) throw Error(errno_message("cannot make the BPF map of the addresses allowed names resolve to", errno));
    opts_.named_map_fd = named_.get();
    if (policy.dns.server_names != policy::NameService::ServerNames::Off) {
      LIBBPF_OPTS(bpf_map_create_opts, no_prealloc, .map_flags = BPF_F_NO_PREALLOC);
      server_names_ = UniqueFd(bpf_map_create(BPF_MAP_TYPE_HASH, "fr_egress_names", sizeof(fr_egress_name), sizeof(uint8_t),
                                              FR_EGRESS_NAMES_MAX, &no_prealloc));
      if (server_names_.get() < 0) throw Error(errno_message("cannot make the BPF map of the server names allowed", errno));
      opts_.server_names_map_fd = server_names_.get();
    }
  }
  opts_.names = &names_;
  if (policy.ask.connect && !own_network_ && !policy.allow_dns) {  // a name off the allowlist waits for a grant (grants/name_asks.h)
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
      throw Error(errno_message("cannot make the socket the resolver asks for grants on", errno));
    asks_ = UniqueFd(pair[0]);
    supervisor_asks_ = UniqueFd(pair[1]);
    opts_.asks_fd = asks_.get();
    opts_.ask_timeout_ms = policy.ask.timeout_ms;
  }
  std::string address = sandbox::Resolver::kOwnNetworkAddress;
  if (!own_network_) {
    resolver_ = std::make_unique<sandbox::Resolver>(-1, "", opts_);
    address = resolver_->address();
  }
  // Its resolv.conf says what it is (the same text in either namespace).
  // One attempt (it answers at once, or says why not); one that waits for
  // a grant waits as long as the ask does (glibc takes up to 30 s).
  std::string timeout = opts_.asks_fd >= 0 ? " timeout:" + std::to_string(std::min<uint64_t>(30, opts_.ask_timeout_ms / 1000 + 2)) : "";
  conf_ = "nameserver " + address + "\noptions attempts:1" + timeout + "\n";
  conf_ = (opts_.asks_fd >= 0 ? "# flightrec: the session's resolver: names the policy allows are answered (network.allow), "
                                "others wait for a grant (ask.connect).\n"
           : opts_.allow.empty() && !opts_.answer_all
               ? "# flightrec: names are not resolved in this sandbox; its resolver refuses every name at once.\n"
               : "# flightrec: the session's resolver: names the policy allows are answered (network.allow), "
                 "others refused at once.\n") +
          conf_;
  std::string etc = upper_ + "/etc";
  int fd = mkdir(etc.c_str(), 0755) == 0 ? ::open((etc + "/resolv.conf").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644) : -1;
  bool written = fd >= 0 && write(fd, conf_.data(), conf_.size()) == ssize_t(conf_.size());
  int err = errno;
  if (fd >= 0) close(fd);
  if (!written) throw Error(errno_message("cannot write the sandbox's /etc/resolv.conf", err));
  conf_sha256_ = ledger::to_hex(ledger::sha256(conf_));
}

SessionResolver::~SessionResolver() {
  resolver_.reset();  // its threads stop before the maps go
}

void SessionResolver::start(pid_t sandbox_init) {
  supervisor_asks_ = UniqueFd();  // the grant supervisor (forked before) holds its own
  if (!resolver_) {
    int netns = ::open(("/proc/" + std::to_string(sandbox_init) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC);
    if (netns < 0) throw Error(errno_message("cannot open the sandbox's network namespace", errno));
    try {
      resolver_ = std::make_unique<sandbox::Resolver>(netns, sandbox::Resolver::kOwnNetworkAddress, opts_);
    } catch (...) {
      close(netns);
      throw;
    }
    close(netns);
  }
  resolver_->start();
}

int SessionResolver::named_map_read_only_fd() {
  if (named_.get() < 0 || named_read_only_.get() >= 0) return named_read_only_.get();
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  LIBBPF_OPTS(bpf_get_fd_by_id_opts, read_only, .open_flags = BPF_F_RDONLY);
  if (bpf_obj_get_info_by_fd(named_.get(), &info, &len) != 0 ||
      (named_read_only_ = UniqueFd(bpf_map_get_fd_by_id_opts(info.id, &read_only))).get() < 0)
    throw Error(errno_message("cannot open the names' BPF map read-only for the grant supervisor", errno));
  return named_read_only_.get();
}

std::optional<fr_egress_rule> SessionResolver::egress_rule() const {
  if (!resolver_) return std::nullopt;
  // Its own address alone (its TCP port is its own too, so no resolver
  // of the host's listening on every address answers).
  fr_egress_rule r{};
  r.family = AF_INET;
  inet_pton(AF_INET, resolver_->address().c_str(), r.addr);
  r.prefix = 32;
  r.port = 53;
  return r;
}

std::optional<policy::Endpoint> SessionResolver::endpoint() const {
  auto rule = egress_rule();
  if (!rule) return std::nullopt;
  policy::Endpoint e;
  e.text = "the session's resolver";
  e.family = int(rule->family);
  std::memcpy(e.addr, rule->addr, sizeof(e.addr));
  e.prefix = rule->prefix;
  e.port = rule->port;
  return e;
}

void SessionResolver::record(Emitted& out) {
  if (!resolver_) return;
  for (auto& ev : resolver_->take_events()) {
    auto& e = out.add("dns");
    if (ev.verdict == "unrecorded") {
      e.set("verdict", "unrecorded");
      e.set("queries", ev.unrecorded);
      e.set("why", "the recording fell behind the sandbox's lookups; these were answered but not recorded one by one");
      continue;
    }
    e.set("name", ev.name);
    if (!ev.type.empty()) e.set("qtype", ev.type);
    e.set("transport", ev.transport);
    if (!ev.client.empty()) e.set("client", ev.client);
    e.set("verdict", ev.verdict);
    if (!ev.rule.empty()) e.set("rule", ev.rule);
    if (ev.verdict == "refused" && ev.error.empty()) e.set("rule_id", "network.allow");
    e.set("rcode", ev.rcode);
    if (!ev.addresses.empty()) e.set("addresses", ev.addresses);
    if (ev.addresses_left_out) e.set("addresses_left_out", ev.addresses_left_out);
    if (!ev.cnames.empty()) e.set("cnames", ev.cnames);
    if (!ev.addresses.empty()) e.set("ttl", ev.ttl);
    if (!ev.not_admitted.empty()) e.set("not_admitted", ev.not_admitted);
    if (ev.admitted_s) {
      e.set("admitted_s", ev.admitted_s);
      e.set("ports", std::vector<int64_t>(ev.ports.begin(), ev.ports.end()));
    }
    if (ev.cached) e.set("cached", 1);
    if (ev.waited) e.set("waited_for_grant", 1);
    if (ev.ask) e.set("ask_id", ev.ask);
    if (ev.repeats) e.set("repeats", ev.repeats);
    e.set("took_us", ev.took_us);
    if (!ev.error.empty()) e.set("error", ev.error);
    e.set("asked_mono_ns", ev.mono_ns);  // when the query came (the entry's own time is when it was recorded)
    if (ev.verdict != "refused" || !ev.error.empty()) continue;
    if (explains() && explained_.size() < 1000 && explained_.insert(ev.name).second)
      explain("name " + ev.name + " refused (" + ev.rcode + "): not on the network allowlist of policy " + policy_name_ +
              " (rule network.allow); the user can allow it: flightrec run --allow " + ev.name + ":443");
    if (log_stderr_ < 2 || told_.size() > kMaxRefusalsShown) continue;
    if (!told_.insert(ev.name).second) continue;
    if (told_.size() > kMaxRefusalsShown) {
      StderrLog::get().line("flightrec: further refused names are in the record only (flightrec query --type dns)");
      continue;
    }
    if (ev.waited) {
      StderrLog::get().line("flightrec: name " + ev.name + " refused (" + ev.rcode + "): no grant came for it" +
                            (ev.ask ? " (ask " + std::to_string(ev.ask) + ")" : std::string()));
      continue;
    }
    StderrLog::get().line("flightrec: name " + ev.name + " refused at once (" + ev.rcode +
                          "): not on the network allowlist of policy " + policy_name_ +
                          "; to allow it: flightrec run --allow " + ev.name + ":443 (or add it to network.allow)");
  }
}

std::string SessionResolver::describe() const {
  std::string where = resolver_ ? resolver_->address() : sandbox::Resolver::kOwnNetworkAddress;
  if (opts_.allow.empty() && !opts_.answer_all && opts_.asks_fd < 0)
    return "dns: every name refused at once by flightrec's resolver at " + where + " (/etc/resolv.conf names it)";
  std::vector<std::string> names;
  for (const auto& r : opts_.allow) names.push_back(r.text);
  std::string which = names.empty() ? "" : "allowed names (" + joined(names) + ")";
  if (opts_.answer_all) which += std::string(names.empty() ? "" : " and ") + "every other name (nothing admitted for those)";
  else if (opts_.asks_fd >= 0)
    which += "; others wait up to " + std::to_string(opts_.ask_timeout_ms) + " ms for a name grant (ask.connect), then are refused";
  else which += std::string("; others refused at once (") + (opts_.service.refuse_nxdomain ? "NXDOMAIN)" : "REFUSED)");
  return "dns: flightrec's resolver at " + where + " (/etc/resolv.conf names it) asks " +
         (opts_.upstream.empty() ? std::string("no upstream") : joined(opts_.upstream)) + " for " + which +
         "; addresses answered are allowed for new connects for the answer's TTL, from " +
         std::to_string(opts_.service.ttl_min_s) + " s to " + std::to_string(opts_.service.ttl_max_s) + " s";
}

void SessionResolver::grant(uint64_t id, const std::string& name, uint16_t port, uint64_t duration_ms, bool ended) {
  if (!resolver_) return;
  if (ended) return resolver_->ungrant(id);
  resolver_->grant(id, name, port, duration_ms ? mono_ns() + duration_ms * 1'000'000 : 0);
}

void SessionResolver::ungrant_all() {
  if (resolver_) resolver_->ungrant_all();
}

void SessionResolver::stop() {
  if (resolver_) resolver_->stop();
}

void SessionResolver::explain(const std::string& line) {
  if (explain_path_.empty() || explained_bytes_ + line.size() + 1 > (1u << 20)) return;
  int fd = ::open(explain_path_.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  std::string text = line + "\n";
  if (write(fd, text.data(), text.size()) == ssize_t(text.size())) explained_bytes_ += text.size();
  close(fd);
}

bool SessionResolver::wrote(const sandbox::FileChange& c) const {
  if (!explain_path_.empty() && c.path == kRefusalsFile) return true;  // flightrec's, not the session's
  return c.path == "/etc" + std::string(c.kind == "dir" ? "" : "/resolv.conf") &&
         (c.kind == "dir" || c.sha256_after == conf_sha256_);
}

}  // namespace flightrec::session
