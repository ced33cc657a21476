// Egress by name: the session's resolver answers the names the policy
// allows from the test's own DNS server, admits their addresses for the
// answer's TTL, and refuses other names at once. Everything runs on
// loopback addresses of the test's own (127.x.y.z), which the egress
// programs judge as they would any other address.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>

#include "runtime/harness.h"

using nlohmann::json;
using namespace rt;

namespace {

void put(const std::string& path, const std::string& data) { std::ofstream(path) << data; }

}  // namespace

TEST_CASE("egress by name: allowed names admit their answers' addresses for the TTL, a wildcard, other names refused at once, DNS over TCP, no other resolver" *
          doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  // api.test moves from .1 to .2 after its first answer (TTL 1 s);
  // *.files.test admits x.files.test (.3) but not files.test itself.
  NamesWorld servers("{\"api.test\": {\"A_seq\": [[\"NET1\"], [\"NET2\"]], \"ttl\": 1},"
                  " \"x.files.test\": {\"CNAME\": \"edge.cdn.test\", \"ttl\": 30},"
                  " \"edge.cdn.test\": {\"A\": [\"NET3\"], \"ttl\": 30},"
                  " \"files.test\": {\"A\": [\"NET3\"], \"ttl\": 30}}");
  const std::string& net = servers.net;
  std::string work = dir.file("work"), db = dir.file("s.db");
  mkdir(work.c_str(), 0755);
  put(dir.file("names.yaml"), "version: 1\nname: names\nextends: agent\nnetwork:\n  mode: allowlist\n"
                              "  allow: [\"api.test:8080\", \"*.files.test:8080\"]\n"
                              "  dns_upstream: [\"" + net + "53\"]\n  dns_ttl_min: 1s\n  dns_ttl_max: 1h\n"
                              "  dns_private: true\n  explain: true\n");  // the test's addresses are loopback ones
  put(work + "/client.py",
      "import socket, struct, time, errno\n"
      "def lookup(name):\n"
      "    try:\n"
      "        return socket.getaddrinfo(name, 8080, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]\n"
      "    except socket.gaierror as e:\n"
      "        return 'no address'\n"
      "def connect(addr):\n"
      "    try:\n"
      "        s = socket.create_connection((addr, 8080), timeout=5)\n"
      "        return s, s.recv(100).decode().strip()\n"
      "    except OSError as e:\n"
      "        return None, errno.errorcode.get(e.errno, str(e))\n"
      "a1 = lookup('api.test'); kept, said = connect(a1); print('first', a1 == '" + net + "1', said)\n"
      "time.sleep(2.5)  # the answer's TTL (1 s) runs out\n"
      "a2 = lookup('api.test'); s, said = connect(a2); print('moved', a2 == '" + net + "2', said)\n"
      "s, said = connect(a1); print('old address', said)\n"
      "kept.sendall(b'still\\n'); print('kept connection', kept.recv(100).decode().strip())\n"
      "a3 = lookup('x.files.test'); s, said = connect(a3); print('wildcard', said)\n"
      "print('bare domain', lookup('files.test'))\n"
      "print('not allowed', lookup('evil.test'))\n"
      "s, said = connect('" + net + "4'); print('no name', said)\n"
      // DNS over TCP to the sandbox's resolver, an A query for api.test.
      "ns = [l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver')][0]\n"
      "q = struct.pack('>HHHHHH', 7, 0x0100, 1, 0, 0, 0) + b'\\x03api\\x04test\\x00' + struct.pack('>HH', 1, 1)\n"
      "t = socket.create_connection((ns, 53), timeout=5); t.sendall(struct.pack('>H', len(q)) + q)\n"
      "n = struct.unpack('>H', t.recv(2))[0]; r = t.recv(n)\n"
      "print('tcp', ns.startswith('127.53.'), r[3] & 15, socket.inet_ntoa(r[-4:]) == '" + net + "2')\n"
      // Straight to another resolver (the test's own): refused by the egress programs.
      "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
      "try:\n"
      "    u.sendto(q, ('" + net + "53', 53)); print('other resolver reached')\n"
      "except OSError as e:\n"
      "    print('other resolver', errno.errorcode.get(e.errno))\n"
      // network.explain: the refusals, for the agent to read (written as they are recorded).
      "import os\n"
      "path = os.environ.get('FLIGHTREC_REFUSALS', '')\n"
      "for _ in range(200):\n"
      "    text = open(path).read() if path else ''\n"
      "    if 'evil.test' in text and '" + net + "4 port 8080' in text: break\n"
      "    time.sleep(0.05)\n"
      "print('explained', path, 'name evil.test refused (NXDOMAIN)' in text, 'rule network.allow' in text)\n");
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--policy", dir.file("names.yaml"), "--db", db, "--", "python3", "client.py"});
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out ==
        "first True from " + net + "1\n"
        "moved True from " + net + "2\n"
        "old address EPERM\n"
        "kept connection still\n"
        "wildcard from " + net + "3\n"
        "bare domain no address\n"
        "not allowed no address\n"
        "no name EPERM\n"
        "tcp True 0 True\n"
        "other resolver EPERM\n"
        "explained /tmp/flightrec-refusals.txt True True\n");
  // Refused names never reached the upstream; allowed ones did, over TCP too.
  std::string asked = "\n" + servers.queries();
  CHECK(asked.find("\nevil.test ") == std::string::npos);
  CHECK(asked.find("\nfiles.test ") == std::string::npos);
  CHECK(asked.find("\nx.files.test A udp\n") != std::string::npos);
  // The agent is told which name was refused and how to allow it.
  CHECK(r.err.find("flightrec: name evil.test refused at once (NXDOMAIN): not on the network allowlist of policy names") !=
        std::string::npos);
  CHECK(r.err.find("connect to " + net + "1 port 8080 (api.test) is not on the allowlist") != std::string::npos);

  auto all = entries(db);
  auto dns = of_type(all, "dns");
  auto find = [&](const std::string& name, const std::string& qtype, const std::string& verdict) {
    std::vector<json> out;
    for (const auto& e : dns)
      if (e.value("name", "") == name && e.value("qtype", "") == qtype && e.value("verdict", "") == verdict) out.push_back(e);
    return out;
  };
  auto api = find("api.test", "A", "allowed");
  REQUIRE(api.size() >= 3);
  CHECK(api[0]["addresses"] == json::array({net + "1"}));
  CHECK(api[0]["admitted_s"] == 1);
  CHECK(api[0]["ports"] == json::array({8080}));
  CHECK(api[0]["rule"] == "api.test:8080");
  CHECK(api[1]["addresses"] == json::array({net + "2"}));
  CHECK(api.back()["transport"] == "tcp");
  CHECK(api.back().value("client", "").starts_with("127."));  // the TCP peer, as for UDP
  auto wild = find("x.files.test", "A", "allowed");
  REQUIRE(wild.size() == 1);
  CHECK(wild[0]["cnames"] == json::array({"edge.cdn.test"}));
  CHECK(wild[0]["rule"] == "*.files.test:8080");
  for (const char* name : {"files.test", "evil.test"}) {
    auto refused = find(name, "A", "refused");
    REQUIRE(refused.size() == 1);
    CHECK(refused[0]["rcode"] == "NXDOMAIN");
    CHECK(refused[0]["rule_id"] == "network.allow");
  }
  // Connects carry the name their address was looked up by (the name asked, not its CNAME's).
  int named_connects = 0;
  for (const auto& e : of_type(all, "connect"))
    if (e.value("addr", "") == net + "3" && e.value("ret", -1) == -115) named_connects += e.value("host", "") == "x.files.test";
  CHECK(named_connects == 1);
  CHECK(all.front()["sandbox"].dump().find("asks " + net + "53 for allowed names (api.test:8080, *.files.test:8080)") !=
        std::string::npos);
  // flightrec's own files in the sandbox are no change of the session's.
  for (const auto& c : of_type(all, "file_change")) {
    CHECK(c.value("path", "") != "/tmp/flightrec-refusals.txt");
    CHECK(c.value("path", "") != "/etc/resolv.conf");
  }
  // Each query names its asker's socket.
  CHECK(api[0].value("client", "").starts_with("127.0.0.1:"));
  CHECK(flightrec({"verify", "--db", db}).code == 0);
}

TEST_CASE("egress by name: an answer's loopback or private address is not admitted unless the policy says so (DNS rebinding)") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  TempDir dir;
  NamesWorld servers("{\"api.test\": {\"A\": [\"NET1\"], \"ttl\": 60}}");
  const std::string& net = servers.net;
  std::string work = dir.file("work"), db = dir.file("s.db");
  mkdir(work.c_str(), 0755);
  put(dir.file("names.yaml"), "version: 1\nname: names\nextends: agent\nnetwork:\n  mode: allowlist\n"
                              "  allow: [\"api.test:8080\"]\n  dns_upstream: [\"" + net + "53\"]\n");
  put(work + "/client.py",
      "import socket, errno\n"
      "a = socket.getaddrinfo('api.test', 8080, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]\n"
      "try:\n"
      "    socket.create_connection((a, 8080), timeout=5); print('connected')\n"
      "except OSError as e:\n"
      "    print(a == '" + net + "1', errno.errorcode.get(e.errno))\n");
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--policy", dir.file("names.yaml"), "--db", db, "--", "python3", "client.py"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "True EPERM\n");  // answered as it is, admitted nowhere
  bool said = false;
  for (const auto& e : of_type(entries(db), "dns"))
    if (e.value("name", "") == "api.test" && e.value("qtype", "") == "A") {
      said = true;
      CHECK(e["not_admitted"] == json::array({net + "1"}));
      CHECK_FALSE(e.contains("admitted_s"));
    }
  CHECK(said);
}

TEST_CASE("names under watch: the DNS answers a watched process receives are recorded, and its connects carry the name") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  std::string root = cgroup2_root();
  REQUIRE_MESSAGE(!root.empty(), "no cgroup v2 hierarchy");
  TempDir dir;
  NamesWorld servers("{\"api.test\": {\"A\": [\"NET1\"], \"ttl\": 60}, \"x.cdn.test\": {\"CNAME\": \"edge.cdn.test\", \"ttl\": 30},"
                     " \"edge.cdn.test\": {\"A\": [\"NET2\"], \"ttl\": 30}}");
  const std::string& net = servers.net;
  // Its own resolver, asked straight (as glibc asks the nameserver of
  // resolv.conf): recvfrom for one name, recvmsg for the other.
  put(dir.file("client.py"),
      "import socket, struct\n"
      "def ask(name, use_recvmsg):\n"
      "    q = struct.pack('>HHHHHH', 7, 0x0100, 1, 0, 0, 0)\n"
      "    for label in name.split('.'):\n"
      "        q += bytes([len(label)]) + label.encode()\n"
      "    q += b'\\0' + struct.pack('>HH', 1, 1)\n"
      "    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(5)\n"
      "    u.sendto(q, ('" + net + "53', 53))\n"
      "    r = u.recvmsg(512)[0] if use_recvmsg else u.recvfrom(512)[0]\n"
      "    return socket.inet_ntoa(r[-4:])\n"
      "for name, use_recvmsg in (('api.test', False), ('x.cdn.test', True)):\n"
      "    s = socket.create_connection((ask(name, use_recvmsg), 8080), timeout=5)\n"
      "    print(s.recv(100).decode().strip())\n");
  std::string cg = root + "/flightrec-test-names-" + std::to_string(getpid()), db = dir.file("w.db");
  REQUIRE(mkdir(cg.c_str(), 0755) == 0);
  Proc watch = start({FLIGHTREC_BIN, "watch", "--cgroup", cg, "--db", db});
  // Its programs attached (under tools/vmtest's emulation that takes seconds): it says so.
  std::string said = await_said(watch, "watching");
  REQUIRE_MESSAGE(said.find("watching") != std::string::npos, said);
  Result r = run({"sh", "-c", "echo $$ > " + cg + "/cgroup.procs && exec /usr/bin/python3 " + dir.file("client.py")});
  kill(watch.pid, SIGINT);
  Result watched = wait(watch);
  rmdir(cg.c_str());
  INFO(r.err);
  INFO(watched.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "from " + net + "1\nfrom " + net + "2\n");
  REQUIRE(watched.code == 0);
  auto all = entries(db);
  auto answers = of_type(all, "dns_answer");
  REQUIRE(answers.size() == 2);
  CHECK(answers[0]["name"] == "api.test");
  CHECK(answers[0]["qtype"] == "A");
  CHECK(answers[0]["rcode"] == "NOERROR");
  CHECK(answers[0]["addresses"] == json::array({net + "1"}));
  CHECK(answers[0]["server"] == net + "53");
  CHECK(answers[1]["name"] == "x.cdn.test");
  CHECK(answers[1]["cnames"] == json::array({"edge.cdn.test"}));
  CHECK(answers[1]["addresses"] == json::array({net + "2"}));
  std::map<std::string, std::string> hosts;
  for (const auto& e : of_type(all, "connect"))
    if (e.value("port", 0) == 8080) hosts[e.value("addr", "")] = e.value("host", "");
  CHECK(hosts[net + "1"] == "api.test");
  CHECK(hosts[net + "2"] == "x.cdn.test");  // the name asked, not its CNAME's
}
