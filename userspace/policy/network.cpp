#include "policy/network.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "common/system.h"

namespace flightrec::policy {
namespace {

const char* const kAllowKey = "network.allow";

uint16_t parse_port(const PolicyReader& r, const YAML::Node& n, const std::string& text) {
  if (text == "*") return 0;
  char* end = nullptr;
  unsigned long v = strtoul(text.c_str(), &end, 10);
  if (text.empty() || *end || v == 0 || v > 65535 || text[0] == '-' || text[0] == '+')
    r.fail(n, kAllowKey, "'" + text + "' is not a port (1-65535 or *)");
  return uint16_t(v);
}

// "ADDR" / "ADDR/BITS" into e; false if host is not an address.
bool parse_address(const PolicyReader& r, const YAML::Node& n, const std::string& text, std::string host, Endpoint& e) {
  int prefix = -1;
  if (size_t slash = host.find('/'); slash != std::string::npos) {
    char* end = nullptr;
    prefix = int(strtol(host.c_str() + slash + 1, &end, 10));
    if (*end || slash + 1 == host.size() || prefix < 0) r.fail(n, kAllowKey, "'" + text + "': bad prefix length");
    host = host.substr(0, slash);
  }
  if (inet_pton(AF_INET, host.c_str(), e.addr) == 1) {
    e.family = AF_INET;
    e.prefix = prefix < 0 ? 32 : unsigned(prefix);
    if (e.prefix > 32) r.fail(n, kAllowKey, "'" + text + "': prefix longer than 32");
    return true;
  }
  if (inet_pton(AF_INET6, host.c_str(), e.addr) == 1) {
    e.family = AF_INET6;
    e.prefix = prefix < 0 ? 128 : unsigned(prefix);
    if (e.prefix > 128) r.fail(n, kAllowKey, "'" + text + "': prefix longer than 128");
    return true;
  }
  if (prefix >= 0) r.fail(n, kAllowKey, "'" + text + "': a prefix needs an address, not a host name");
  return false;
}

// An exact name's addresses in the sandbox root's /etc/hosts: lookups of
// it never reach the resolver, so they are fixed now.
void add_from_hosts_file(const Policy& p, const HostRule& rule, std::vector<Endpoint>& out) {
  std::string root = p.filesystem.root == "/" ? "" : p.filesystem.root;
  std::istringstream in(try_read_file(root + "/etc/hosts").value_or(""));
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string addr, name;
    if (!(words >> addr)) continue;
    while (words >> name) {
      if (normal_host_name(name) != rule.name) continue;
      Endpoint e;
      e.text = rule.text;
      e.port = rule.port;
      if (inet_pton(AF_INET, addr.c_str(), e.addr) == 1) e.family = AF_INET, e.prefix = 32;
      else if (inet_pton(AF_INET6, addr.c_str(), e.addr) == 1) e.family = AF_INET6, e.prefix = 128;
      else break;
      out.push_back(e);
      break;
    }
  }
}

uint32_t ttl_seconds(const PolicyReader& r, const YAML::Node& n, const std::string& key) {
  auto ms = parse_duration_ms(r.str(n, key));
  if (!ms || *ms < 1000 || *ms > 86'400'000) r.fail(n, key, "must be a duration from 1s to 24h, like 30s or 1h");
  return uint32_t(*ms / 1000);
}

// "ADDR", "ADDR:PORT" or "[V6]:PORT", checked; as written.
std::string upstream_address(const PolicyReader& r, const YAML::Node& n) {
  std::string text = r.str(n, "network.dns_upstream"), why;
  if (!parse_upstream(text, &why)) r.fail(n, "network.dns_upstream", why);
  return text;
}

}  // namespace

bool endpoint_allowed(const std::vector<Endpoint>& allow, int family, const uint8_t* addr, uint16_t port) {
  for (const auto& e : allow) {
    if (e.family != family || (e.port && e.port != port)) continue;
    unsigned full = std::min(e.prefix, 128u) / 8, rest = std::min(e.prefix, 128u) % 8;
    if (std::memcmp(addr, e.addr, full) != 0) continue;
    if (rest && ((addr[full] ^ e.addr[full]) & uint8_t(0xff << (8 - rest)))) continue;
    return true;
  }
  return false;
}

std::optional<UpstreamAddress> parse_upstream(const std::string& text, std::string* why) {
  auto fail = [&](const std::string& what) -> std::optional<UpstreamAddress> {
    if (why) *why = what;
    return std::nullopt;
  };
  UpstreamAddress out;
  std::string host = text, port;
  if (text.starts_with("[")) {
    size_t close = text.find(']');
    if (close == std::string::npos) return fail("'" + text + "': an unclosed [");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return fail("'" + text + "': expected [V6]:PORT");
      port = text.substr(close + 2);
    }
    if (inet_pton(AF_INET6, host.c_str(), out.addr) != 1) return fail("'" + text + "' is not an IPv6 address");
    out.family = AF_INET6;
  } else if (inet_pton(AF_INET6, text.c_str(), out.addr) == 1) {
    out.family = AF_INET6;
  } else {
    if (size_t colon = text.find(':'); colon != std::string::npos) host = text.substr(0, colon), port = text.substr(colon + 1);
    if (inet_pton(AF_INET, host.c_str(), out.addr) != 1)
      return fail("'" + text + "' is not an address (ADDR, ADDR:PORT or [V6]:PORT; names would need a resolver)");
    out.family = AF_INET;
  }
  if (!port.empty()) {
    char* end = nullptr;
    unsigned long v = strtoul(port.c_str(), &end, 10);
    if (*end || v == 0 || v > 65535 || !isdigit(static_cast<unsigned char>(port[0])))
      return fail("'" + port + "' is not a port");
    out.port = uint16_t(v);
  }
  return out;
}

bool private_address(int family, const uint8_t* a) {
  if (family == AF_INET) {
    auto in = [&](uint8_t b0, uint8_t b1, unsigned bits) {  // a in b0.b1.0.0/bits (bits 8 to 16)
      unsigned mask = 0xffffu << (16 - bits);
      return ((unsigned(a[0]) << 8 | a[1]) & mask) == ((unsigned(b0) << 8 | b1) & mask);
    };
    auto in24 = [&](uint8_t b0, uint8_t b1, uint8_t b2) { return a[0] == b0 && a[1] == b1 && a[2] == b2; };
    return a[0] == 0 || a[0] == 10 || a[0] == 127 || in(169, 254, 16) || in(172, 16, 12) || in(192, 168, 16) ||
           in(100, 64, 10) ||                                         // carrier-grade NAT
           in(198, 18, 15) ||                                         // benchmarking
           in24(192, 0, 0) || in24(192, 0, 2) || in24(198, 51, 100) || in24(203, 0, 113) ||  // IETF, documentation
           in24(192, 88, 99) ||                                       // 6to4 relays
           a[0] >= 224;                                               // multicast and reserved
  }
  static const uint8_t zero[16] = {};
  static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  // An IPv4 address inside IPv6 is judged as that address: mapped, compatible, NAT64, 6to4.
  if (std::memcmp(a, mapped, 12) == 0 || std::memcmp(a, zero, 12) == 0 || std::memcmp(a, nat64, 12) == 0)
    return private_address(AF_INET, a + 12);
  if (a[0] == 0x20 && a[1] == 0x02) return private_address(AF_INET, a + 2);
  return (a[0] == 0 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b) ||  // local-use NAT64 64:ff9b:1::/48
         (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) ||     // Teredo 2001::/32
         (a[0] & 0xfe) == 0xfc ||                                        // unique local fc00::/7
         (a[0] == 0xfe && (a[1] & 0x80) == 0x80) ||                      // link- and site-local fe80::/9
         a[0] == 0xff;                                                   // multicast
}

std::optional<std::string> normal_host_name(std::string_view name, bool wildcard) {
  std::string out;
  if (wildcard && name.starts_with("*.")) {
    out = "*.";
    name.remove_prefix(2);
  }
  if (name.ends_with('.')) name.remove_suffix(1);
  if (name.empty() || name.size() > 253) return std::nullopt;
  size_t label = 0;
  for (char c : name) {
    if (c == '.') {
      if (label == 0) return std::nullopt;
      label = 0;
      out += c;
      continue;
    }
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (!ok || ++label > 63) return std::nullopt;
    out += char(std::tolower(static_cast<unsigned char>(c)));
  }
  if (label == 0) return std::nullopt;
  return out;
}

bool host_matches(const HostRule& rule, std::string_view name) {
  if (!rule.name.starts_with("*.")) return name == rule.name;
  std::string_view suffix = std::string_view(rule.name).substr(1);  // ".example.com"
  return name.size() > suffix.size() && name.ends_with(suffix);
}

std::vector<const HostRule*> host_rules_for(const Policy& p, std::string_view name) {
  std::vector<const HostRule*> out;
  for (const auto& rule : p.allow_hosts)
    if (host_matches(rule, name)) out.push_back(&rule);
  return out;
}

void parse_allow_entry(const PolicyReader& r, const YAML::Node& n, Policy& p) {
  std::string text = r.str(n, kAllowKey);
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) r.fail(n, kAllowKey, "'" + text + "' needs a port: HOST:PORT, CIDR:PORT or ...:*");
  std::string host = text.substr(0, colon);
  uint16_t port = parse_port(r, n, text.substr(colon + 1));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  Endpoint e;
  e.text = text;
  e.port = port;
  if (parse_address(r, n, text, host, e)) {
    p.allow.push_back(e);
    return;
  }
  auto name = normal_host_name(host, true);
  if (!name)
    r.fail(n, kAllowKey, "'" + text + "': '" + host +
                             "' is neither an address nor a host name (letters, digits, '-' and '.'; a wildcard only "
                             "as a leading *.)");
  if (*name == "*." || name->find('*', 1) != std::string::npos)
    r.fail(n, kAllowKey, "'" + text + "': a wildcard is a whole leading label: *.example.com");
  HostRule rule{text, *name, port};
  if (!name->starts_with("*.")) add_from_hosts_file(p, rule, p.allow);
  p.allow_hosts.push_back(std::move(rule));
}

void parse_network(const PolicyReader& r, const YAML::Node& net, Policy& p) {
  r.only_keys(net, "network",
              {"mode", "allow", "dns", "dns_refusal", "dns_ttl_min", "dns_ttl_max", "dns_upstream", "dns_private", "explain", "sni"});
  if (net["mode"])
    p.network = r.choice<Network>(net["mode"], "network.mode",
                                  {{"none", Network::None}, {"allowlist", Network::Allowlist}, {"host", Network::Host}});
  if (net["allow"]) {
    if (!net["allow"].IsSequence()) r.fail(net["allow"], kAllowKey, "must be a list");
    if (p.network != Network::Allowlist) r.fail(net["allow"], kAllowKey, "only with mode: allowlist");
    for (const auto& item : net["allow"]) parse_allow_entry(r, item, p);
  }
  if (net["dns"]) p.allow_dns = r.boolean(net["dns"], "network.dns");
  if (net["dns_refusal"])
    p.dns.refuse_nxdomain = r.choice<bool>(net["dns_refusal"], "network.dns_refusal", {{"nxdomain", true}, {"refused", false}});
  if (net["explain"]) p.dns.explain = r.boolean(net["explain"], "network.explain");
  if (net["sni"])
    p.dns.server_names = r.choice<NameService::ServerNames>(net["sni"], "network.sni",
                                                           {{"optional", NameService::ServerNames::Optional},
                                                            {"required", NameService::ServerNames::Required},
                                                            {"off", NameService::ServerNames::Off}});
  if (net["dns_private"]) p.dns.admit_private = r.boolean(net["dns_private"], "network.dns_private");
  if (net["dns_ttl_min"]) p.dns.ttl_min_s = ttl_seconds(r, net["dns_ttl_min"], "network.dns_ttl_min");
  if (net["dns_ttl_max"]) p.dns.ttl_max_s = ttl_seconds(r, net["dns_ttl_max"], "network.dns_ttl_max");
  if (p.dns.ttl_min_s > p.dns.ttl_max_s)
    r.fail(net["dns_ttl_min"] ? net["dns_ttl_min"] : net["dns_ttl_max"], "network.dns_ttl_min", "is above dns_ttl_max");
  if (const auto& up = net["dns_upstream"]) {
    if (!up.IsSequence() || up.size() == 0 || up.size() > 8) r.fail(up, "network.dns_upstream", "must be a list of 1 to 8 addresses");
    p.dns.upstream.clear();
    for (const auto& item : up) p.dns.upstream.push_back(upstream_address(r, item));
  }
}

std::vector<std::string> upstream_resolvers(const Policy& p) {
  if (!p.dns.upstream.empty()) return p.dns.upstream;
  std::vector<std::string> out;
  std::istringstream in(try_read_file("/etc/resolv.conf").value_or(""));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kw, addr;
    uint8_t bytes[16];
    if (!(words >> kw >> addr) || kw != "nameserver") continue;
    if (inet_pton(AF_INET, addr.c_str(), bytes) == 1) out.push_back(addr);
    else if (inet_pton(AF_INET6, addr.c_str(), bytes) == 1) out.push_back("[" + addr + "]");
  }
  return out;
}

}  // namespace flightrec::policy
