// The grant protocol and table as data (userspace/grants/grants.h): what a
// client may ask, in which words, and how grants are matched and used up.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <sys/syscall.h>

#include "grants/grants.h"
#include "grants/name_asks.h"
#include "policy/policy.h"

using namespace flightrec;
using namespace flightrec::grants;

namespace {

std::string error_of(const std::string& line) {
  std::string error;
  auto r = parse_request(line, &error);
  return r ? "" : error;
}

std::string policy_error(const std::string& yaml) {
  try {
    policy::parse(yaml, "t.yaml");
  } catch (const policy::PolicyError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("grant requests: each kind with its own scope, strictly") {
  std::string error;
  auto w = parse_request(R"({"op":"grant","kind":"write","path":"/opt/x","duration_ms":5000,"reason":"r"})", &error);
  REQUIRE(w);
  CHECK(w->grant.kind == Kind::Write);
  CHECK(w->duration_ms == 5000);
  CHECK(w->grant.uses_left == -1);
  auto s = parse_request(R"({"op":"grant","kind":"syscall","syscall":"uname","uses":1})", &error);
  REQUIRE(s);
  CHECK(s->grant.syscall == SYS_uname);
  CHECK(s->grant.uses_left == 1);
  auto c = parse_request(R"({"op":"grant","kind":"connect","address":"192.0.2.7","port":443,"uses":2})", &error);
  REQUIRE(c);
  CHECK(c->grant.kind == Kind::Connect);
  CHECK(c->grant.family == AF_INET);
  CHECK(c->grant.port == 443);
  CHECK(c->grant.address == "192.0.2.7");
  // IPv4-mapped IPv6 is keyed as IPv4, as the kernel's maps key it.
  auto m = parse_request(R"({"op":"grant","kind":"connect","address":"::ffff:192.0.2.7","port":443})", &error);
  REQUIRE(m);
  CHECK(m->grant.family == AF_INET);
  CHECK(m->grant.address == "192.0.2.7");
  auto six = parse_request(R"({"op":"grant","kind":"connect","address":"2001:db8::1","port":22})", &error);
  REQUIRE(six);
  CHECK(six->grant.family == AF_INET6);

  CHECK(error_of(R"({"op":"grant","kind":"connect","address":"example.org","port":443})").find("IPv4 or IPv6") !=
        std::string::npos);
  CHECK(error_of(R"({"op":"grant","kind":"connect","address":"192.0.2.7"})").find("port (1 to 65535)") !=
        std::string::npos);
  CHECK(error_of(R"({"op":"grant","kind":"connect","address":"192.0.2.7","port":0})") != "");
  CHECK(error_of(R"({"op":"grant","kind":"connect","address":"192.0.2.7","port":65536})") != "");
  CHECK(error_of(R"({"op":"grant","kind":"connect","address":"192.0.2.7","port":1,"path":"/x"})") != "");
  CHECK(error_of(R"({"op":"grant","kind":"write","path":"/x","port":1})") != "");
  CHECK(error_of(R"({"op":"grant","kind":"syscall","syscall":"uname","address":"192.0.2.7"})") != "");
  CHECK(error_of(R"({"op":"grant","kind":"write","path":"relative"})") != "");
  CHECK(error_of(R"({"op":"grant","kind":"net","path":"/bin"})") == "kind must be write, syscall, connect, exec or name");
  // By name: a host name or *.domain, a port (0: any), nothing else.
  std::string why;
  auto by_name = parse_request(R"({"op":"grant","kind":"name","name":"*.GitHubUserContent.com.","port":443})", &why);
  REQUIRE(by_name);
  CHECK(by_name->grant.kind == Kind::Name);
  CHECK(by_name->grant.name == "*.githubusercontent.com");
  CHECK(by_name->grant.port == 443);
  for (const char* bad : {R"({"op":"grant","kind":"name","name":"a.*.com","port":443})",
                          R"({"op":"grant","kind":"name","name":"*.com","port":443})",
                          R"({"op":"grant","kind":"name","name":"dns.example.com","port":53})",
                          R"({"op":"grant","kind":"name","name":"example.com"})",
                          R"({"op":"grant","kind":"name","name":"example.com","port":443,"uses":1})",
                          R"({"op":"grant","kind":"name","name":"example.com","port":443,"address":"192.0.2.7"})",
                          R"({"op":"grant","kind":"connect","address":"192.0.2.7","port":443,"name":"x.com"})"})
    CHECK_MESSAGE(error_of(bad) != "", bad);
  CHECK(error_of(R"({"op":"grant","kind":"write","path":"/x","uses":0})").find("at least 1") != std::string::npos);
  CHECK(error_of(R"({"op":"grant","kind":"write","path":"/x","extra":1})") == "unknown key 'extra'");
  CHECK(error_of("not json") == "not a JSON object");
  CHECK(error_of(R"({"op":"revoke"})") == "revoke needs the grant's id");
}

TEST_CASE("the grant table: a connect grant matches its address and port alone, and is used up") {
  GrantTable t;
  std::string error;
  auto c = parse_request(R"({"op":"grant","kind":"connect","address":"192.0.2.7","port":443,"uses":2})", &error);
  REQUIRE(c);
  uint64_t id = t.add(c->grant);
  uint8_t addr[16] = {};
  inet_pton(AF_INET, "192.0.2.7", addr);
  uint8_t other[16] = {};
  inet_pton(AF_INET, "192.0.2.8", other);
  CHECK(t.for_connect(AF_INET, other, 443, 1) == nullptr);
  CHECK(t.for_connect(AF_INET, addr, 80, 1) == nullptr);
  CHECK(t.for_connect(AF_INET6, addr, 443, 1) == nullptr);
  Grant* g = t.for_connect(AF_INET, addr, 443, 1);
  REQUIRE(g);
  CHECK(g->id == id);
  CHECK_FALSE(t.use(*g));
  g = t.for_connect(AF_INET, addr, 443, 1);
  REQUIRE(g);
  CHECK(t.use(*g));  // the last use removes it
  CHECK(t.for_connect(AF_INET, addr, 443, 1) == nullptr);
  CHECK(t.all().empty());

  // Time: valid until its expiry, then expired and gone.
  Grant timed = c->grant;
  timed.uses_left = -1;
  timed.expires_ns = 1000;
  uint64_t tid = t.add(timed);
  CHECK(t.for_connect(AF_INET, addr, 443, 999) != nullptr);
  CHECK(t.for_connect(AF_INET, addr, 443, 1000) == nullptr);
  auto gone = t.expire(1000);
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].id == tid);
}

TEST_CASE("the grant table: an exec grant covers its file, or the files below its directory, by whole components") {
  GrantTable t;
  std::string error;
  auto e = parse_request(R"({"op":"grant","kind":"exec","path":"/opt/tools","uses":1})", &error);
  REQUIRE(e);
  CHECK(e->grant.kind == Kind::Exec);
  t.add(e->grant);
  CHECK(t.for_exec("/opt/tools", 1) != nullptr);
  CHECK(t.for_exec("/opt/tools/bin/fmt", 1) != nullptr);
  CHECK(t.for_exec("/opt/toolsX/fmt", 1) == nullptr);
  CHECK(t.for_exec("/opt/tool", 1) == nullptr);
  CHECK(t.for_exec("/opt", 1) == nullptr);
  CHECK(error_of(R"({"op":"grant","kind":"exec","path":"relative/x"})").find("an exec grant needs path") !=
        std::string::npos);
  CHECK(error_of(R"({"op":"grant","kind":"exec","path":"/x","syscall":"uname"})") != "");
}

TEST_CASE("normal_endpoint: IPv4-mapped IPv6 becomes IPv4, everything else stays") {
  uint8_t a[16] = {};
  inet_pton(AF_INET6, "::ffff:10.1.2.3", a);
  CHECK(normal_endpoint(AF_INET6, a) == AF_INET);
  uint8_t want[16] = {10, 1, 2, 3};
  CHECK(std::equal(a, a + 16, want));
  uint8_t b[16] = {};
  inet_pton(AF_INET6, "::1", b);
  CHECK(normal_endpoint(AF_INET6, b) == AF_INET6);
  uint8_t c[16] = {};
  inet_pton(AF_INET6, "64:ff9b::a01:203", c);  // NAT64, not mapped
  CHECK(normal_endpoint(AF_INET6, c) == AF_INET6);
}

TEST_CASE("policy ask.connect: only with an allowlist; connect is not a syscall ask; it shares the host's stack") {
  const std::string head = "version: 1\nname: t\n";
  CHECK(policy_error(head + "ask:\n  connect: true\n").find("ask.connect: needs network.mode: allowlist") !=
        std::string::npos);
  CHECK(policy_error(head + "network:\n  mode: host\nask:\n  connect: true\n").find("needs network.mode: allowlist") !=
        std::string::npos);
  CHECK(policy_error(head + "network:\n  mode: allowlist\nask:\n  syscalls: [connect]\n").find("ask.connect") !=
        std::string::npos);
  auto p = policy::parse(head + "network:\n  mode: allowlist\nask:\n  connect: true\n", "t.yaml");
  CHECK(p.ask.connect);
  CHECK(p.ask.any());
  CHECK_FALSE(policy::own_network(p));  // an empty allowlist alone would get its own namespace
  auto q = policy::parse(head + "network:\n  mode: allowlist\n", "t.yaml");
  CHECK(policy::own_network(q));
}

TEST_CASE("policy ask.exec: only with an exec list; execve is not a syscall ask") {
  const std::string head = "version: 1\nname: t\n";
  CHECK(policy_error(head + "ask:\n  exec: true\n").find("ask.exec: needs filesystem.exec") != std::string::npos);
  CHECK(policy_error(head + "ask:\n  syscalls: [execve]\n").find("ask.exec") != std::string::npos);
  auto p = policy::parse(head + "filesystem:\n  exec: [/usr/bin]\nask:\n  exec: true\n", "t.yaml");
  CHECK(p.ask.exec);
  auto c = policy::parse(head + "filesystem:\n  exec: [command]\nask:\n  exec: true\n", "t.yaml");
  CHECK(c.ask.exec);
}

TEST_CASE("name asks: the resolver's and the supervisor's messages read back as written; anything else is refused") {
  NameAsk a{7, "api.example.com", "AAAA", "127.0.0.1:40000"};
  auto back = policy::parse_name_ask(encode(a));
  REQUIRE(back);
  CHECK(back->tag == 7);
  CHECK(back->name == "api.example.com");
  CHECK(back->qtype == "AAAA");
  CHECK(back->client == "127.0.0.1:40000");
  // Names as the resolver normalises them, and nothing more.
  CHECK(!policy::parse_name_ask(R"({"tag":1,"name":"API.example.com","qtype":"A","client":""})"));
  CHECK(!policy::parse_name_ask(R"({"tag":1,"name":"*.example.com","qtype":"A","client":""})"));
  CHECK(!policy::parse_name_ask(R"({"tag":1,"name":"a b","qtype":"A","client":""})"));
  CHECK(!policy::parse_name_ask(R"({"tag":1,"name":"a.test","qtype":"A","client":"","more":1})"));
  CHECK(!policy::parse_name_ask(R"({"tag":-1,"name":"a.test","qtype":"A","client":""})"));
  CHECK(!policy::parse_name_ask(R"([1,2])"));
  CHECK(!policy::parse_name_ask("{"));
  CHECK(!policy::parse_name_ask(R"({"tag":1,"name":"a.test","qtype":"A","client":")" + std::string(100, 'x') + "\"}"));

  NameAnswer yes;
  yes.tag = 7;
  yes.ask = 3;
  yes.grant = 2;
  yes.name = "*.example.com";
  yes.port = 443;
  yes.until_ns = 123;
  auto y = policy::parse_name_answer(encode(yes));
  REQUIRE(y);
  CHECK(y->grant == 2);
  CHECK(y->name == "*.example.com");
  CHECK(y->port == 443);
  CHECK(y->until_ns == 123);
  CHECK(y->denied.empty());
  NameAnswer no;
  no.tag = 7;
  no.ask = 3;
  no.denied = "no grant within 10 ms";
  auto n = policy::parse_name_answer(encode(no));
  REQUIRE(n);
  CHECK(n->grant == 0);
  CHECK(n->denied == "no grant within 10 ms");
  CHECK(!policy::parse_name_answer(R"({"tag":7,"ask":3,"grant":0,"name":"a.test","port":1,"until_ns":0})"));
  CHECK(!policy::parse_name_answer(R"({"tag":7,"ask":3,"grant":1,"name":"a.test","port":70000,"until_ns":0})"));
  CHECK(!policy::parse_name_answer(R"({"tag":7,"ask":3})"));
}

TEST_CASE("GrantTable::for_name: a name grant covers its name or, as a wildcard, the names under it, on any port, until it ends") {
  GrantTable t;
  Grant exact;
  exact.kind = Kind::Name;
  exact.name = "api.test";
  exact.port = 443;
  Grant wild;
  wild.kind = Kind::Name;
  wild.name = "*.cdn.test";
  wild.expires_ns = 100;
  uint64_t e = t.add(exact), w = t.add(wild);
  REQUIRE(t.for_name("api.test", 50));
  CHECK(t.for_name("api.test", 50)->id == e);
  CHECK(!t.for_name("www.api.test", 50));
  CHECK(t.for_name("a.b.cdn.test", 50)->id == w);
  CHECK(!t.for_name("cdn.test", 50));
  CHECK(!t.for_name("a.cdn.test", 100));  // its time is up
  Grant connect;
  connect.kind = Kind::Connect;
  t.add(connect);
  CHECK(!t.for_name("", 0));
}
