// Egress by name: allowlist entries by name and wildcard, the resolver's
// settings, and the DNS messages the session's resolver reads (hostile
// input: compression loops, counts past the end, lies about lengths).
#include <doctest/doctest.h>

#include <arpa/inet.h>

#include <string>

#include "events/dns_message.h"
#include "policy/network.h"
#include "policy/policy.h"
#include "policy_error.h"

using namespace flightrec;
using namespace flightrec::policy;
using policy_test::error_of;
namespace dns = flightrec::events::dns;

namespace {

std::string name_bytes(const std::string& name) {
  std::string out;
  size_t start = 0;
  while (start < name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    out += char(dot - start) + name.substr(start, dot - start);
    start = dot + 1;
  }
  return out + '\0';
}

std::string u16(unsigned v) { return {char(v >> 8), char(v & 0xff)}; }
std::string u32(unsigned v) { return u16(v >> 16) + u16(v & 0xffff); }

std::string query(const std::string& name, unsigned type = 1, unsigned id = 0x1234) {
  return u16(id) + u16(0x0100) + u16(1) + u16(0) + u16(0) + u16(0) + name_bytes(name) + u16(type) + u16(1);
}

// A response to query(name): answers appended as they are given.
std::string response(const std::string& name, unsigned answers, const std::string& records, unsigned rcode = 0) {
  return u16(0x1234) + u16(0x8180 | rcode) + u16(1) + u16(answers) + u16(0) + u16(0) + name_bytes(name) + u16(1) + u16(1) +
         records;
}

std::string a_record(const std::string& owner, unsigned ttl, const std::string& addr4) {
  return owner + u16(1) + u16(1) + u32(ttl) + u16(4) + addr4;
}

const uint8_t* bytes(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

}  // namespace

TEST_CASE("allowlist entries by name: exact names, leading wildcards, /etc/hosts, and the resolver's settings") {
  Policy p = parse("version: 1\nname: x\nnetwork:\n  mode: allowlist\n"
                   "  allow: [\"API.Example.com.:443\", \"*.githubusercontent.com:443\", \"10.0.0.0/8:*\", \"localhost:8080\"]\n"
                   "  dns_refusal: refused\n  dns_ttl_min: 2s\n  dns_ttl_max: 10m\n  dns_upstream: [\"10.0.0.2\", \"[fd00::53]:5353\"]\n",
                   "t.yaml");
  REQUIRE(p.allow_hosts.size() == 3);
  CHECK(p.allow_hosts[0].name == "api.example.com");  // lower case, no trailing dot
  CHECK(p.allow_hosts[0].port == 443);
  CHECK(p.allow_hosts[1].name == "*.githubusercontent.com");
  CHECK(p.allow_hosts[2].name == "localhost");
  // localhost never reaches a resolver: its /etc/hosts addresses are fixed at load.
  bool loopback = false;
  for (const auto& e : p.allow) loopback = loopback || (e.text == "localhost:8080" && e.port == 8080 && e.addr[0] == 127);
  CHECK(loopback);
  CHECK_FALSE(p.dns.refuse_nxdomain);
  CHECK(p.dns.ttl_min_s == 2);
  CHECK(p.dns.ttl_max_s == 600);
  CHECK(upstream_resolvers(p) == std::vector<std::string>{"10.0.0.2", "[fd00::53]:5353"});
  CHECK_FALSE(own_network(p));

  CHECK(host_matches(p.allow_hosts[1], "raw.githubusercontent.com"));
  CHECK(host_matches(p.allow_hosts[1], "a.b.githubusercontent.com"));
  CHECK_FALSE(host_matches(p.allow_hosts[1], "githubusercontent.com"));
  CHECK_FALSE(host_matches(p.allow_hosts[1], "evilgithubusercontent.com"));
  CHECK(host_matches(p.allow_hosts[0], "api.example.com"));
  CHECK_FALSE(host_matches(p.allow_hosts[0], "x.api.example.com"));
  CHECK(host_rules_for(p, "objects.githubusercontent.com").size() == 1);

  // Names only: the sandbox shares the host's stack (the resolver's answers are its way out).
  Policy names = parse("version: 1\nname: x\nnetwork:\n  mode: allowlist\n  allow: [\"*.example.com:443\"]\n", "t.yaml");
  CHECK(names.allow.empty());
  CHECK_FALSE(own_network(names));
  add_allowed(names, "pypi.org:443");
  CHECK(names.allow_hosts.size() == 2);
  CHECK(names.overrides.back() == "network.allow+=pypi.org:443");
  CHECK_THROWS_AS(add_allowed(names, "py*pi.org:443"), PolicyError);

  auto priv = [](int family, const char* text) {
    uint8_t a[16] = {};
    REQUIRE(inet_pton(family, text, a) == 1);
    return private_address(family, a);
  };
  for (const char* a : {"127.0.0.53", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254",
                        "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "198.18.0.1", "198.19.255.255",
                        "192.0.2.1", "198.51.100.7", "203.0.113.9", "192.88.99.1"})
    CHECK_MESSAGE(priv(AF_INET, a), a);
  for (const char* a : {"8.8.8.8", "172.32.0.1", "160.79.104.10", "100.128.0.1", "198.20.0.1", "192.0.3.1"})
    CHECK_MESSAGE(!priv(AF_INET, a), a);
  // IPv4 inside IPv6 is judged as the IPv4 address: mapped, compatible, NAT64, 6to4.
  for (const char* a : {"::1", "::", "fd00::1", "fe80::1", "fec0::1", "::ffff:10.0.0.1", "ff02::1", "::10.0.0.5",
                        "64:ff9b::a00:5", "64:ff9b:1::1", "2002:a00:5::1", "2001:0:4136::1"})
    CHECK_MESSAGE(priv(AF_INET6, a), a);
  for (const char* a : {"2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"})
    CHECK_MESSAGE(!priv(AF_INET6, a), a);

  CHECK(normal_host_name("Foo-1.Example.COM.") == "foo-1.example.com");
  CHECK_FALSE(normal_host_name("a..b"));
  CHECK_FALSE(normal_host_name(std::string(64, 'a') + ".com"));
  CHECK_FALSE(normal_host_name("*.example.com"));  // a wildcard only where one is allowed
  CHECK(normal_host_name("*.example.com", true) == "*.example.com");
  CHECK_FALSE(normal_host_name("exa mple.com"));

  const std::string head = "version: 1\nname: x\nnetwork:\n  mode: allowlist\n";
  CHECK(error_of(head + "  allow: [\"*.*.example.com:443\"]\n").find("network.allow: '*.*.example.com:443'") != std::string::npos);
  CHECK(error_of(head + "  allow: [\"*:443\"]\n").find("network.allow") != std::string::npos);
  CHECK(error_of(head + "  allow: [\"example.com\"]\n").find("needs a port") != std::string::npos);
  CHECK(error_of(head + "  allow: [\"example.com/8:443\"]\n").find("a prefix needs an address") != std::string::npos);
  CHECK(error_of(head + "  dns_refusal: drop\n").find("t.yaml:5: network.dns_refusal: 'drop' is not one of") != std::string::npos);
  CHECK(error_of(head + "  dns_ttl_min: 0s\n").find("network.dns_ttl_min: must be a duration from 1s to 24h") != std::string::npos);
  CHECK(error_of(head + "  dns_ttl_min: 1h\n  dns_ttl_max: 1m\n").find("is above dns_ttl_max") != std::string::npos);
  CHECK(error_of(head + "  dns_upstream: [\"dns.google\"]\n").find("network.dns_upstream: 'dns.google' is not an address") !=
        std::string::npos);
  CHECK(error_of(head + "  dns_upstream: []\n").find("1 to 8 addresses") != std::string::npos);
  // Server names: checked by default, a name-less connection let through unless required.
  CHECK(p.dns.server_names == NameService::ServerNames::Optional);
  CHECK(parse(head + "  sni: required\n", "t.yaml").dns.server_names == NameService::ServerNames::Required);
  CHECK(parse(head + "  sni: off\n", "t.yaml").dns.server_names == NameService::ServerNames::Off);
  CHECK(error_of(head + "  sni: strict\n").find("t.yaml:5: network.sni: 'strict' is not one of") != std::string::npos);
}

TEST_CASE("DNS messages: a query's question, an answer's chain of CNAMEs and addresses, TTLs capped") {
  auto q = dns::parse_query(bytes(query("Api.Example.COM", 28)), query("Api.Example.COM", 28).size());
  REQUIRE(q);
  CHECK(q->name == "api.example.com");
  CHECK(q->type == dns::kTypeAaaa);
  CHECK(q->id == 0x1234);
  CHECK(dns::type_name(q->type) == "AAAA");
  // A name byte that is no host name character is escaped (and so matches no rule).
  std::string odd = query("a.b");
  odd[13] = '*';
  CHECK(dns::parse_query(bytes(odd), odd.size())->name == "\\042.b");
  // A response is not a query.
  std::string r0 = response("x.test", 0, "", dns::kNxDomain);
  CHECK_FALSE(dns::parse_query(bytes(r0), r0.size()));
  CHECK(dns::parse_response(bytes(r0), r0.size())->rcode == dns::kNxDomain);

  // api.test CNAME edge.cdn.test (pointer to the question's name), edge A 192.0.2.7;
  // an A record of another owner does not count.
  const std::string to_question = "\xc0\x0c";
  std::string edge = name_bytes("edge.cdn.test");
  std::string cname = to_question + u16(5) + u16(1) + u32(300) + u16(uint16_t(edge.size())) + edge;
  size_t edge_at = 12 + name_bytes("api.test").size() + 4 + to_question.size() + 10;
  std::string to_edge = {char(0xc0), char(edge_at)};
  std::string records = cname + a_record(to_edge, 60, std::string("\xc0\x00\x02\x07", 4)) +
                        a_record(name_bytes("other.test"), 60, std::string("\x0a\x00\x00\x01", 4));
  std::string r = response("api.test", 3, records);
  auto parsed = dns::parse_response(bytes(r), r.size());
  REQUIRE(parsed);
  REQUIRE(parsed->answers.size() == 3);
  auto res = dns::resolve(*parsed, "api.test");
  CHECK(res.addresses == std::vector<std::string>{"192.0.2.7"});
  CHECK(res.cnames == std::vector<std::string>{"edge.cdn.test"});
  CHECK(res.ttl == 60);  // the least along the chain
  CHECK(dns::resolve(*parsed, "nothing.test").addresses.empty());

  // TTLs capped in place; a capped message still parses to the same records.
  std::string capped = r;
  REQUIRE(dns::cap_ttls(capped, 30));
  auto again = dns::parse_response(bytes(capped), capped.size());
  REQUIRE(again);
  for (const auto& rec : again->answers) CHECK(rec.ttl == 30);
  std::string short_one = r.substr(0, r.size() - 3);
  CHECK_FALSE(dns::cap_ttls(short_one, 30));

  // A refusal: the header and question, QR and RD, the rcode, nothing else.
  std::string asked = query("evil.test");
  std::string no = dns::refusal(bytes(asked), asked.size(), dns::kNxDomain);
  CHECK(no.size() == asked.size());
  CHECK((uint8_t(no[2]) & 0x81) == 0x81);
  CHECK((no[3] & 0xf) == dns::kNxDomain);
  CHECK(no.substr(12) == asked.substr(12));
  CHECK(dns::refusal(bytes(r), r.size(), dns::kRefused).empty());  // a response gets no answer
  std::string garbage = asked.substr(0, 14);
  CHECK(dns::refusal(bytes(garbage), garbage.size(), dns::kRefused)[3] == dns::kFormErr);
}

TEST_CASE("DNS messages: the query asked upstream is the question alone") {
  auto built = dns::build_query(0xbeef, "api.example.com", 28);
  REQUIRE(built);
  CHECK(*built == u16(0xbeef) + u16(0x0100) + u16(1) + u16(0) + u16(0) + u16(0) + name_bytes("api.example.com") + u16(28) +
                      u16(1));
  // A name read with escapes goes back to its bytes; what cannot be a name does not go.
  auto odd = dns::build_query(1, "a\\042b.test", 1);
  REQUIRE(odd);
  CHECK(dns::parse_query(bytes(*odd), odd->size())->name == "a\\042b.test");
  CHECK_FALSE(dns::build_query(1, "a..test", 1));
  CHECK_FALSE(dns::build_query(1, "a\\99", 1));
  CHECK_FALSE(dns::build_query(1, "a\\256.test", 1));
  CHECK_FALSE(dns::build_query(1, std::string(64, 'a') + ".test", 1));
  CHECK(dns::build_query(1, "", 2));  // the root
}

TEST_CASE("DNS messages: compression loops, pointers forwards, counts and lengths past the end are unreadable") {
  // A pointer into the header.
  std::string into_header = u16(1) + u16(0x0100) + u16(1) + u16(0) + u16(0) + u16(0) + "\x01" + "a" + "\xc0\x02" + u16(1) + u16(1);
  CHECK_FALSE(dns::parse_query(bytes(into_header), into_header.size()));
  // The question's name points at itself.
  std::string loop = u16(1) + u16(0x0100) + u16(1) + u16(0) + u16(0) + u16(0) + "\xc0\x0c" + u16(1) + u16(1);
  CHECK_FALSE(dns::parse_query(bytes(loop), loop.size()));
  // An answer whose owner points forwards.
  std::string fwd = response("a.test", 1, std::string("\xc0\x7f") + u16(1) + u16(1) + u32(1) + u16(4) + "abcd");
  CHECK_FALSE(dns::parse_response(bytes(fwd), fwd.size()));
  // More answers counted than there are; an rdata longer than the message.
  std::string counted = response("a.test", 5, a_record("\xc0\x0c", 1, "abcd"));
  CHECK_FALSE(dns::parse_response(bytes(counted), counted.size()));
  std::string longer = response("a.test", 1, std::string("\xc0\x0c") + u16(1) + u16(1) + u32(1) + u16(400) + "abcd");
  CHECK_FALSE(dns::parse_response(bytes(longer), longer.size()));
  // A TTL with its top bit set is 0 (RFC 2181).
  std::string huge = response("a.test", 1, a_record("\xc0\x0c", 0x80000000u, "abcd"));
  CHECK(dns::parse_response(bytes(huge), huge.size())->answers.at(0).ttl == 0);
  // A CNAME chain that loops ends.
  std::string chain = response("a.test", 1, std::string("\xc0\x0c") + u16(5) + u16(1) + u32(1) + u16(2) + "\xc0\x0c");
  auto p = dns::parse_response(bytes(chain), chain.size());
  REQUIRE(p);
  CHECK(dns::resolve(*p, "a.test").addresses.empty());
}
