#pragma once
// A policy's network section: the allowlist (addresses, ranges and names,
// a name with a leading wildcard label) and how the session's resolver
// answers names. Names are not resolved here: the resolver admits the
// addresses of its answers for their TTL (sandbox/resolver.h); only
// /etc/hosts' entries for an exact name are fixed at load, as no lookup
// ever reaches the resolver for them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.h"
#include "policy/yaml_reader.h"

namespace flightrec::policy {

using PolicyReader = YamlReader<PolicyError>;

// network: into p (mode, allow, dns, dns_refusal, dns_ttl_min, dns_ttl_max, dns_upstream, dns_private, explain, sni).
void parse_network(const PolicyReader& r, const YAML::Node& net, Policy& p);
// One allowlist entry: "ADDR:PORT", "CIDR:PORT", "NAME:PORT", "*.DOMAIN:PORT"
// (PORT may be *), into p.allow or p.allow_hosts.
void parse_allow_entry(const PolicyReader& r, const YAML::Node& n, Policy& p);

// Whether family/addr (network order)/port is on the allowlist's addresses
// and ranges (as the egress programs judge it: fr_egress_allowed).
bool endpoint_allowed(const std::vector<Endpoint>& allow, int family, const uint8_t* addr, uint16_t port);

// A resolver's address as network.dns_upstream and resolv.conf write it:
// ADDR, ADDR:PORT, V6 or [V6]:PORT (port 53 when none); nullopt and why
// when it is not one.
struct UpstreamAddress {
  int family = 0;
  uint8_t addr[16] = {};
  uint16_t port = 53;
};
std::optional<UpstreamAddress> parse_upstream(const std::string& text, std::string* why = nullptr);

// A host name as a rule or a DNS question spells it: lower case, without
// a trailing dot; nullopt if it is not one (labels of letters, digits, '-'
// and '_', 1-63 bytes each, 253 in all). wildcard: a leading "*." is kept.
std::optional<std::string> normal_host_name(std::string_view name, bool wildcard = false);
// Whether a rule names a host (normalised): exactly, or under its wildcard.
bool host_matches(const HostRule& rule, std::string_view name);
// The policy's rules that name a host (normalised), in policy order.
std::vector<const HostRule*> host_rules_for(const Policy& p, std::string_view name);

// Whether an address (network order; family AF_INET or AF_INET6) is one
// an allowed name's answer admits only under network.dns_private:
// loopback, private, carrier-grade NAT, link-local, unique local,
// unspecified, multicast and reserved ranges.
bool private_address(int family, const uint8_t* addr);

// The resolvers the session's resolver asks, "ADDR" or "ADDR:PORT"
// ("[V6]:PORT"): the policy's dns_upstream, or /etc/resolv.conf's nameservers.
std::vector<std::string> upstream_resolvers(const Policy& p);

}  // namespace flightrec::policy
