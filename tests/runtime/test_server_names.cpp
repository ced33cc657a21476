// Server names checked (network.sni): a connection admitted by name alone
// must name, in its first payload, a server the session's resolver
// answered with that address, or it is cut before that payload leaves.
// The test's sink (tests/programs/sink_server.py) logs what reaches it:
// a cut connection is accepted (the TCP handshake went through), and
// nothing of it ever arrives.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "runtime/harness.h"

using nlohmann::json;
using namespace rt;

namespace {

void put(const std::string& path, const std::string& data) { std::ofstream(path) << data; }

// The sink at NET1 beside the names world; its certificate made here.
struct Sink {
  TempDir dir;
  Proc proc;
  explicit Sink(const std::string& addr) {
    Result r = run({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir.file("key.pem"), "-out",
                    dir.file("cert.pem"), "-days", "1", "-subj", "/CN=api.test"});
    REQUIRE_MESSAGE(r.code == 0, r.err);
    proc = start({"/usr/bin/python3", std::string(SOURCE_DIR) + "/tests/programs/sink_server.py", addr,
                  dir.file("cert.pem"), dir.file("key.pem"), dir.file("log")});
    await_ready(proc);
  }
  ~Sink() {
    kill(proc.pid, SIGKILL);
    wait(proc);
  }
  std::string log() const { return slurp(dir.file("log")); }
};

// A client in the sandbox: lines "what result", one per try.
const char* kClient =
    "import socket, ssl, sys, errno, time\n"
    "addr = socket.getaddrinfo('api.test', 8443, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]\n"
    "ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE\n"
    "def tls(name):\n"
    "    try:\n"
    "        s = ctx.wrap_socket(socket.create_connection((addr, 8443), timeout=20), server_hostname=name)\n"
    "        s.sendall(b'GET /' + name.encode() + b' HTTP/1.1\\r\\nHost: ' + name.encode() + b'\\r\\n\\r\\n')\n"
    "        return s.recv(10).decode().strip()\n"
    "    except (OSError, ssl.SSLError) as e:\n"
    "        return 'timeout' if isinstance(e, socket.timeout) else 'cut'\n"
    "def plain(data):\n"
    "    try:\n"
    "        s = socket.create_connection((addr, 8081), timeout=20)\n"
    "        s.sendall(data)\n"
    "        got = s.recv(10).decode().strip()\n"
    "        return got or 'cut'\n"
    "    except socket.timeout:\n"
    "        return 'timeout'\n"
    "    except OSError as e:\n"
    "        return 'cut'\n"
    "def raw(port, *chunks):\n"  // each chunk its own segment
    "    try:\n"
    "        s = socket.create_connection((addr, port), timeout=20)\n"
    "        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)\n"
    "        for c in chunks:\n"
    "            s.sendall(c); time.sleep(0.2)\n"
    "        return s.recv(10).decode(errors='replace').strip() or 'cut'\n"
    "    except socket.timeout:\n"
    "        return 'timeout'\n"
    "    except OSError:\n"
    "        return 'cut'\n"
    "def udp():\n"
    "    try:\n"
    "        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', (addr, 8081)); return 'sent'\n"
    "    except OSError as e:\n"
    "        return errno.errorcode.get(e.errno)\n";

std::string policy(const std::string& net, const std::string& sni) {
  return "version: 1\nname: names\nextends: agent\nnetwork:\n  mode: allowlist\n"
         "  allow: [\"api.test:8443\", \"api.test:8081\"]\n  dns_upstream: [\"" + net + "53\"]\n"
         "  dns_private: true\n  explain: true\n" + (sni.empty() ? "" : "  sni: " + sni + "\n");
}

// evil.test shares api.test's address (a CDN's front end), and is not allowed.
const char* kSharedZone = "{\"api.test\": {\"A\": [\"NET1\"], \"ttl\": 60}, \"evil.test\": {\"A\": [\"NET1\"], \"ttl\": 60}}";

// A session of the client (kClient, then `body`) under policy(sni), in the
// names world `zone`, beside the sink.
struct Session {
  TempDir dir;
  NamesWorld names;
  Sink sink;
  std::string db;
  Result r;
  Session(const std::string& zone, const std::string& sni, const std::string& body)
      : names(zone), sink(names.net + "1"), db(dir.file("s.db")) {
    std::string work = dir.file("work");
    mkdir(work.c_str(), 0755);
    put(dir.file("names.yaml"), policy(names.net, sni));
    put(work + "/client.py", std::string(kClient) + body);
    r = run_in(work, {FLIGHTREC_BIN, "run", "--policy", dir.file("names.yaml"), "--db", db, "--", "python3", "client.py"});
  }
};

}  // namespace

TEST_CASE("server names: a TLS server name or HTTP Host the address was not answered for is cut before its payload leaves" *
          doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  Session s(kSharedZone, "",
      "print('tls allowed', tls('api.test'))\n"
      "print('tls any case', tls('API.test'))\n"
      "print('tls forged', tls('evil.test'))\n"
      "print('http allowed', plain(b'GET /a HTTP/1.1\\r\\nUser-Agent: t\\r\\nhost: api.test:8081\\r\\n\\r\\n'))\n"
      "print('http forged', plain(b'GET /b HTTP/1.1\\r\\nHost: evil.test\\r\\n\\r\\n'))\n"
      "print('no name', plain(b'hello there\\n'))\n"
      "print('ssh banner', plain(b'SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\\r\\n'))\n"
      "print('text without a line end', plain(b'x' * 5000))\n"
      "print('udp', udp())\n"
      "import os, time\n"
      "for _ in range(200):\n"
      "    text = open(os.environ['FLIGHTREC_REFUSALS']).read()\n"
      "    if text.count('network.sni') >= 2: break\n"
      "    time.sleep(0.05)\n"
      "print('explained', 'evil.test was not answered with that address' in text)\n");
  const Result& r = s.r;
  const std::string& db = s.db;
    INFO(r.out);
  INFO(r.err);
  INFO(s.sink.log());
  REQUIRE(r.code == 0);
  CHECK(r.out ==
        "tls allowed ok\n"
        "tls any case ok\n"
        "tls forged cut\n"
        "http allowed ok\n"
        "http forged cut\n"
        "no name ok\n"
        "ssh banner ok\n"
        "text without a line end ok\n"
        "udp EPERM\n"
        "explained True\n");
  // What reached the sink: the allowed ones; of the forged, the TCP handshake alone.
  std::string log = s.sink.log();
  CHECK(log.find("tls hello api.test") != std::string::npos);
  CHECK(log.find("evil.test") == std::string::npos);
  CHECK(log.find("8081 got GET /a HTTP/1.1") != std::string::npos);
  CHECK(log.find("8081 got GET /b") == std::string::npos);
  CHECK(log.find("8081 got hello there") != std::string::npos);

  auto all = entries(db);
  auto cuts = of_type(all, "connection_cut");
  REQUIRE(cuts.size() == 2);
  for (const auto& c : cuts) {
    CHECK(c["addr"] == s.names.net + "1");
    CHECK(c["host"] == "api.test");
    CHECK(c["server_name"] == "evil.test");
    CHECK(c["reason"] == "mismatch");
    CHECK(c["shut"] == 1);
  }
  CHECK(cuts[0]["protocol"] == "tls");
  CHECK(cuts[0]["port"] == 8443);
  CHECK(cuts[1]["protocol"] == "http");
  CHECK(cuts[1]["port"] == 8081);
  int violations = 0;
  for (const auto& v : of_type(all, "violation"))
    if (v.value("rule_id", "") == "network.sni") {
      ++violations;
      CHECK(v["subject_pid"] == cuts[0]["pid"]);  // the offender, not flightrec
      CHECK(v.value("comm", "") == "python3");
    }
  CHECK(violations == 2);
  CHECK(r.err.find("ALERT network.sni denied: connection to " + s.names.net + "1 port 8443 (api.test) cut before its payload left: "
                   "its TLS server name evil.test was not answered with that address") != std::string::npos);
  CHECK(flightrec({"verify", "--db", db}).code == 0);
}

TEST_CASE("server names: under sni: required a connection that names no server is cut" *
          doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  Session s("{\"api.test\": {\"A\": [\"NET1\"], \"ttl\": 60}}", "required",
            "print('tls allowed', tls('api.test'))\n"
            "print('no name', plain(b'hello there\\n'))\n"
            "print('address literal', plain(b'GET / HTTP/1.1\\r\\nHost: ' + addr.encode() + b'\\r\\n\\r\\n'))\n"
            "print('udp', udp())\n");
  const Result& r = s.r;
  INFO(r.err);
  INFO(s.sink.log());
  REQUIRE(r.code == 0);
  CHECK(r.out == "tls allowed ok\nno name cut\naddress literal cut\nudp EPERM\n");
  CHECK(s.sink.log().find("8081 got") == std::string::npos);
  auto cuts = of_type(entries(s.db), "connection_cut");
  REQUIRE(cuts.size() == 2);
  CHECK(cuts[0]["reason"] == "missing");
  CHECK(cuts[0]["protocol"] == "other");
  CHECK(cuts[1]["reason"] == "missing");
  CHECK(cuts[1]["protocol"] == "http");
}

TEST_CASE("server names: a name sent in pieces, twice, or where a server reads another, is cut" *
          doctest::test_suite("vm-sandbox")) {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  // A real ClientHello naming evil.test, from an ssl object that is never
  // connected (its first flight, read off its memory BIO).
  Session s(kSharedZone, "",
      "out = ssl.MemoryBIO()\n"
      "o = ctx.wrap_bio(ssl.MemoryBIO(), out, server_hostname='evil.test')\n"
      "try:\n"
      "    o.do_handshake()\n"
      "except ssl.SSLWantReadError:\n"
      "    pass\n"
      "hello = out.read()\n"
      "print('hello in pieces', raw(8443, hello[:3], hello[3:]))\n"
      "print('hello after another record', raw(8443, b'\\x15\\x03\\x03\\x00\\x02\\x01\\x00' + hello))\n"
      "print('request in pieces', raw(8081, b'GE', b'T /p HTTP/1.1\\r\\nHost: evil.test\\r\\n\\r\\n'))\n"
      "print('two hosts', raw(8081, b'GET /q HTTP/1.1\\r\\nHost: api.test\\r\\nHost: evil.test\\r\\n\\r\\n'))\n"
      "print('absolute form', raw(8081, b'GET http://evil.test/r HTTP/1.1\\r\\nHost: api.test\\r\\n\\r\\n'))\n"
      "print('headers unended', raw(8081, b'GET /s HTTP/1.1\\r\\nHost: api.test\\r\\nX-A: b\\r\\n', b'Host: evil.test\\r\\n\\r\\n'))\n"
      "print('name with a space', raw(8081, b'GET /t HTTP/1.1\\r\\nHost: api.test evil.test\\r\\n\\r\\n'))\n"
      // What servers read more leniently than the program: lines ended by
      // LF alone, a blank line first, HTTP/2's preface, urgent data.
      "print('blank line first', raw(8081, b'\\r\\nGET /v HTTP/1.1\\r\\nHost: evil.test\\r\\n\\r\\n'))\n"
      "print('bare LF', raw(8081, b'GET /w HTTP/1.1\\nHost: evil.test\\n\\n'))\n"
      "print('LF in headers', raw(8081, b'POST /x HTTP/1.1\\r\\nHost: evil.test\\nContent-Length: 23\\n\\n\\r\\nHost: api.test\\r\\n\\r\\n'))\n"
      "print('h2 preface', raw(8081, b'PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n'))\n"
      "print('long method', raw(8081, b'PROPPATCH /y HTTP/1.1\\r\\nHost: evil.test\\r\\n\\r\\n'))\n"
      "def urgent():\n"
      "    s = socket.create_connection((addr, 8081), timeout=20)\n"
      "    try:\n"
      "        s.send(b'G', socket.MSG_OOB); time.sleep(0.2)\n"
      "        s.sendall(b'ET /z HTTP/1.1\\r\\nHost: api.test\\r\\n\\r\\n')\n"
      "        return s.recv(10).decode().strip() or 'cut'\n"
      "    except OSError:\n"
      "        return 'cut'\n"
      "print('urgent', urgent())\n"
      "print('whole and allowed', raw(8081, b'GET /u HTTP/1.1\\r\\nHost: api.test\\r\\n\\r\\n'))\n");
  const Result& r = s.r;
  INFO(r.err);
  INFO(s.sink.log());
  REQUIRE(r.code == 0);
  CHECK(r.out ==
        "hello in pieces cut\n"
        "hello after another record cut\n"
        "request in pieces cut\n"
        "two hosts cut\n"
        "absolute form cut\n"
        "headers unended cut\n"
        "name with a space cut\n"
        "blank line first cut\n"
        "bare LF cut\n"
        "LF in headers cut\n"
        "h2 preface cut\n"
        "long method cut\n"
        "urgent cut\n"
        "whole and allowed ok\n");
  // The cut payloads stay unsent after the session, its egress programs
  // gone: the sockets were aborted, so no retransmission of them comes
  // (TCP's next one, backed off, would within a few seconds).
  sleep(3);
  std::string log = s.sink.log();
  CHECK(log.find("tls hello") == std::string::npos);
  CHECK(log.find("8443 got") == std::string::npos);
  CHECK(log.find("8081 got GET /u HTTP/1.1") != std::string::npos);
  for (const char* line : {"GET /p", "T /p", "GET /q", "GET /r", "GET /s", "GET /t", "GET /v", "GET /w", "POST /x",
                           "PRI", "PROPPATCH", "ET /z"})
    CHECK_MESSAGE(log.find(std::string("got ") + line) == std::string::npos, line);
  auto cuts = of_type(entries(s.db), "connection_cut");
  REQUIRE(cuts.size() == 13);
  int unreadable = 0;
  for (const auto& c : cuts) {
    unreadable += c["reason"] == "unreadable";
    CHECK(c["shut"] == 1);
  }
  CHECK(unreadable == 12);  // and the long method's Host: a mismatch
}
