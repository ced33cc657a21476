// TLS plaintext capture with real clients against a real local HTTPS server
// (self-signed certificate made here): exact request lines, headers and
// bodies, chunking and truncation that add up byte for byte, redaction, and
// nothing from clients outside the session.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "common/text.h"
#include "runtime/harness.h"

using nlohmann::json;
using namespace rt;

namespace {

std::string data_of(const json& e) { return *flightrec::base64_decode(e["data_b64"].get<std::string>()); }

std::vector<json> tls_entries(const std::string& db, const std::string& direction) {
  std::vector<json> out;
  for (auto& e : of_type(entries(db), "tls"))
    if (e["direction"] == direction) out.push_back(e);
  std::stable_sort(out.begin(), out.end(), [](const json& a, const json& b) {
    return a["stream_offset"].get<uint64_t>() < b["stream_offset"].get<uint64_t>();
  });
  return out;
}

std::string stream(const std::vector<json>& es) {
  std::string out;
  for (const auto& e : es) out += data_of(e);
  return out;
}

// Each entry continues its direction's stream where the one before ended:
// no gap.
void check_contiguous(const std::vector<json>& es) {
  uint64_t expect = 0;
  for (const auto& e : es) {
    CHECK(e["stream_offset"].get<uint64_t>() == expect);
    expect += e["len"].get<uint64_t>();
  }
}

// Everything a reader of the record can be shown: every entry as JSON, and
// the captured bytes decoded (the file itself holds compressed blocks, where
// a search for a secret would prove nothing).
std::string everything_in(const std::string& db) {
  std::string out;
  for (const auto& e : entries(db)) {
    out += e.dump() + "\n";
    if (e.contains("data_b64")) out += data_of(e) + "\n";
  }
  return out;
}

// The request and response of one client's session checked the same way
// for every stack: the request with its Authorization redacted and the
// secret nowhere in the record, the response stream contiguous and its
// body byte for byte, every chunk on the connection the hello named, and
// no tls_uncaptured (the hello came from a probed call or program).
void check_captured_get(const std::string& db, const HttpsServer& srv, const std::string& comm,
                        const std::string& send_func, const std::string& recv_func, const std::string& secret,
                        const std::string& request_line) {
  auto all = entries(db);
  auto hellos = of_type(all, "tls_hello");
  REQUIRE(hellos.size() == 1);
  CHECK(hellos[0]["comm"] == comm);
  CHECK((hellos[0]["in_probed_call"] == 1 || hellos[0]["probed_program"] == 1));
  CHECK(of_type(all, "tls_uncaptured").empty());
  auto sent = tls_entries(db, "send");
  REQUIRE(!sent.empty());
  CHECK(sent[0]["func"] == send_func);
  CHECK(sent[0]["comm"] == comm);
  CHECK(sent[0]["http_method"] == "GET");
  CHECK(sent[0]["http_path"] == "/big");
  CHECK(sent[0]["redacted"] == json::array({"authorization"}));
  CHECK(sent[0]["remote_port"] == srv.port);
  std::string request = stream(sent);
  CHECK(request.rfind(request_line, 0) == 0);
  CHECK(request.find("\r\nAuthorization: [REDACTED]\r\n") != std::string::npos);
  CHECK(everything_in(db).find(secret) == std::string::npos);
  auto received = tls_entries(db, "recv");
  REQUIRE(received.size() > 10);
  check_contiguous(received);
  for (const auto& e : received) CHECK(e["func"] == recv_func);
  for (const auto& e : of_type(all, "tls")) CHECK(e["fd"] == hellos[0]["fd"]);
  std::string response = stream(received);
  CHECK(response.rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
  CHECK(response.substr(response.find("\r\n\r\n") + 4) == srv.big);
  CHECK(rt::flightrec({"verify", "--db", db}).code == 0);
}

// tests/programs/h2_server.py on a local port, with HttpsServer's certificate.
struct H2Server {
  HttpsServer certs;
  TempDir dir;
  Proc proc;
  int port = 0;
  H2Server() {
    proc = start({"/usr/bin/python3", H2_SERVER, certs.dir.file("cert.pem"), certs.dir.file("key.pem"),
                  dir.file("port")});
    port = port_when_listening(dir.file("port"), "the HTTP/2 server");
  }
  ~H2Server() { stop(); }
  void stop() {
    if (proc.pid <= 0) return;
    kill(proc.pid, SIGKILL);
    wait(proc);
    proc.pid = -1;
  }
  std::string url(const std::string& path) const { return "https://127.0.0.1:" + std::to_string(port) + path; }
};

// Every header name a session's tls entries say they redacted.
std::set<std::string> redacted_names(const std::string& db) {
  std::set<std::string> out;
  for (const auto& e : of_type(entries(db), "tls"))
    for (const auto& n : e.value("redacted", json::array())) out.insert(n);
  return out;
}

// The entries where HTTP/2 header blocks end: [0] sent, [1] received.
std::array<std::vector<json>, 2> summarized_h2(const std::string& db) {
  std::array<std::vector<json>, 2> out;
  for (int d = 0; d < 2; ++d)
    for (const auto& e : tls_entries(db, d ? "recv" : "send"))
      if (e.contains("http2_headers")) out[d].push_back(e);
  return out;
}

// An empty NSS database in dir, for tstclnt (-o takes any certificate).
std::string nss_db(const TempDir& dir) {
  std::string path = dir.file("nssdb");
  std::filesystem::create_directory(path);
  Result r = run({"certutil", "-N", "-d", "sql:" + path, "--empty-password"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return "sql:" + path;
}

}  // namespace

TEST_CASE("curl: request line, headers, response and body; Authorization redacted" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("s.db"), headers = dir.file("headers");
  // From a file, so the secret is not in curl's argv (which is recorded).
  std::ofstream(headers) << "Authorization: Bearer s3cret-token\n";
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", "curl", "-sk", "-H", "@" + headers, srv.url("/x")});
  REQUIRE(r.code == 0);
  CHECK(r.out == "hello tls body\n");
  auto sent = tls_entries(db, "send");
  REQUIRE(!sent.empty());
  std::string request = stream(sent);
  CHECK(request.rfind("GET /x HTTP/1.1\r\n", 0) == 0);
  CHECK(request.find("\r\nHost: 127.0.0.1:" + std::to_string(srv.port) + "\r\n") != std::string::npos);
  CHECK(request.find("\r\nAuthorization: [REDACTED]\r\n") != std::string::npos);
  CHECK(sent[0]["http_method"] == "GET");
  CHECK(sent[0]["http_path"] == "/x");
  CHECK(sent[0]["redacted"] == json::array({"authorization"}));
  CHECK(sent[0]["remote_addr"] == "127.0.0.1");
  CHECK(sent[0]["remote_port"] == srv.port);
  CHECK(sent[0]["comm"] == "curl");
  // The secret is nowhere in the record, in any encoding.
  std::string all = everything_in(db);
  CHECK(all.find("s3cret-token") == std::string::npos);
  CHECK(all.find(flightrec::base64_encode("s3cret-token").substr(0, 12)) == std::string::npos);

  auto received = tls_entries(db, "recv");
  std::string response = stream(received);
  CHECK(response.rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
  CHECK(response.substr(response.find("\r\n\r\n") + 4) == "hello tls body\n");
  CHECK(received[0]["http_status"] == 200);
  CHECK(rt::flightrec({"verify", "--db", db}).code == 0);
}

TEST_CASE("a 1 MiB response arrives as chunks whose concatenation is the body, byte for byte") {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("s.db");
  REQUIRE(rt::flightrec({"run", "--policy", "observe", "--db", db, "--", "curl", "-sk", "-o", "/dev/null", srv.url("/big")}).code == 0);
  auto received = tls_entries(db, "recv");
  REQUIRE(received.size() > 60);
  check_contiguous(received);
  for (const auto& e : received) CHECK_FALSE(e.contains("truncated_bytes"));
  std::string response = stream(received);
  CHECK(response.substr(response.find("\r\n\r\n") + 4) == srv.big);
}

TEST_CASE("wget (GnuTLS): the request with Authorization redacted, and a 1 MiB body byte for byte" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("s.db"), rc = dir.file("wgetrc");
  // From wget's configuration file, so the secret is not in argv (recorded).
  std::ofstream(rc) << "header = Authorization: Bearer s3cret-wget-token\n";
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", "env", "WGETRC=" + rc, "wget", "-q",
                            "--no-check-certificate", "-O", "/dev/null", srv.url("/big")});
  REQUIRE(r.code == 0);
  check_captured_get(db, srv, "wget", "gnutls_record_send", "gnutls_record_recv", "s3cret-wget-token",
                     "GET /big HTTP/1.1\r\n");
}

TEST_CASE("tstclnt (NSS): the request with Authorization redacted, and a 1 MiB body byte for byte" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("s.db"), req = dir.file("request");
  // From a file on stdin, so the secret is not in argv (recorded).
  std::ofstream(req) << "GET /big HTTP/1.0\r\nHost: localhost\r\nAuthorization: Bearer s3cret-nss-token\r\n\r\n";
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", "sh", "-c",
                            "exec tstclnt -h 127.0.0.1 -p " + std::to_string(srv.port) + " -d " + nss_db(dir) +
                                " -o < " + req});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.substr(r.out.find("\r\n\r\n") + 4) == srv.big);
  check_captured_get(db, srv, "tstclnt", "PR_Write", "PR_Read", "s3cret-nss-token", "GET /big HTTP/1.0\r\n");
}

TEST_CASE("Go crypto/tls (net/http): the request with Authorization redacted, and a 1 MiB body byte for byte" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("s.db"), token = dir.file("token");
  std::ofstream(token) << "s3cret-go-token";
  // The session's own program: probed before it starts (a Go program that
  // a session execs later is probed as its exec is read, which can be
  // after its first connection: that one is then a tls_uncaptured entry).
  Result r = rt::flightrec(
      {"run", "--policy", "observe", "--db", db, "--", GO_TLS_CLIENT_BIN, "http", srv.url("/big"), token});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == srv.big);
  check_captured_get(db, srv, "go_tls_client", "crypto/tls.(*Conn).Write", "crypto/tls.(*Conn).Read",
                     "s3cret-go-token", "GET /big HTTP/1.1\r\n");
}

TEST_CASE("a Go program exec'd again in a session is captured from its first byte: its probes are per file") {
  // Only a file's first exec wakes the collector at once (to probe it as
  // it starts); a later exec of the same file must find the probes there.
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("s.db");
  std::string get = std::string(GO_TLS_CLIENT_BIN) + " raw 127.0.0.1:" + std::to_string(srv.port) + " /big";
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", "sh", "-c", get + " >/dev/null && " + get});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.substr(r.out.find("\r\n\r\n") + 4) == srv.big);
  std::vector<int64_t> go_pids;
  for (const auto& e : of_type(entries(db), "exec"))
    if (e.value("filename", "") == GO_TLS_CLIENT_BIN) go_pids.push_back(e["pid"].get<int64_t>());
  REQUIRE(go_pids.size() == 2);
  std::vector<json> sent, received;
  for (const auto& e : tls_entries(db, "send"))
    if (e["pid"] == go_pids[1]) sent.push_back(e);
  for (const auto& e : tls_entries(db, "recv"))
    if (e["pid"] == go_pids[1]) received.push_back(e);
  CHECK(stream(sent) == "GET /big HTTP/1.0\r\nHost: localhost\r\n\r\n");
  REQUIRE_FALSE(received.empty());
  CHECK(received.front()["stream_offset"] == 0);
  CHECK(stream(received) == r.out);
}

TEST_CASE("Go crypto/tls, stripped, reading into stack buffers Go moves mid-call: the response byte for byte" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("s.db");
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", GO_TLS_CLIENT_STRIPPED_BIN, "raw",
                            "127.0.0.1:" + std::to_string(srv.port), "/big"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  // The case this test is for happened: some Read's buffer moved with its
  // stack while the Read was in progress.
  size_t at = r.err.find("stack moved during ");
  REQUIRE(at != std::string::npos);
  REQUIRE(std::stoi(r.err.substr(at + 19)) > 0);
  auto received = tls_entries(db, "recv");
  REQUIRE(!received.empty());
  check_contiguous(received);
  for (const auto& e : received) {
    CHECK(e["func"] == "crypto/tls.(*Conn).Read");
    CHECK_FALSE(e.contains("data_error"));
  }
  CHECK(stream(received) == r.out);  // what the program read, byte for byte
  CHECK(r.out.substr(r.out.find("\r\n\r\n") + 4) == srv.big);
  CHECK(stream(tls_entries(db, "send")) == "GET /big HTTP/1.0\r\nHost: localhost\r\n\r\n");
}

TEST_CASE("git clone and git push over HTTPS (libcurl-gnutls): requests and pack negotiation, credentials redacted") {
  REQUIRE(is_root());
  TempDir dir;
  std::string repos = dir.file("repos"), cert = dir.file("cert.pem"), key = dir.file("key.pem");
  REQUIRE(run({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
               "-subj", "/CN=localhost"})
              .code == 0);
  std::filesystem::create_directories(repos);
  REQUIRE(run({"git", "init", "-q", "--bare", "-b", "main", repos + "/repo.git"}).code == 0);
  Proc server = start({"/usr/bin/python3", GIT_SERVER, repos, cert, key, dir.file("port"), "agent", "s3cret-git-pass"});
  int port = port_when_listening(dir.file("port"), "the git HTTPS server");
  std::string url = "https://127.0.0.1:" + std::to_string(port) + "/repo.git";
  // git asks for the credentials the server's 401 wants through a program,
  // so they are in no argv or environment the record holds.
  std::string askpass = dir.file("askpass");
  std::ofstream(askpass) << "#!/bin/sh\ncase \"$1\" in Username*) echo agent;; *) echo s3cret-git-pass;; esac\n";
  chmod(askpass.c_str(), 0755);
  std::string src = dir.file("src");
  REQUIRE(run({"sh", "-c", "git init -q -b main " + src + " && cd " + src +
                               " && echo 'pushed content' > f && git add f && git -c user.email=a@b -c user.name=t "
                               "commit -q -m first"})
              .code == 0);
  std::string commit = run({"git", "-C", src, "rev-parse", "HEAD"}).out.substr(0, 40);
  std::string env = "GIT_ASKPASS=" + askpass;
  std::string push_db = dir.file("push.db"), clone_db = dir.file("clone.db");
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", push_db, "--", "env", env, "GIT_SSL_NO_VERIFY=1", "git",
                            "-C", src, "push", "-q", url, "main"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  r = rt::flightrec({"run", "--policy", "observe", "--db", clone_db, "--", "env", env, "GIT_SSL_NO_VERIFY=1", "git",
                     "clone", "-q", url, dir.file("clone")});
  kill(server.pid, SIGKILL);
  wait(server);
  REQUIRE(r.code == 0);
  CHECK(slurp(dir.file("clone/f")) == "pushed content\n");

  std::string pushed = stream(tls_entries(push_db, "send"));
  CHECK(pushed.find("GET /repo.git/info/refs?service=git-receive-pack HTTP/1.1\r\n") != std::string::npos);
  CHECK(pushed.find("POST /repo.git/git-receive-pack HTTP/1.1\r\n") != std::string::npos);
  // The ref update (old id, new id, ref) and the pack itself.
  CHECK(pushed.find(std::string(40, '0') + " " + commit + " refs/heads/main") != std::string::npos);
  CHECK(pushed.find("PACK") != std::string::npos);
  CHECK(stream(tls_entries(push_db, "recv")).find("ok refs/heads/main") != std::string::npos);
  std::string cloned = stream(tls_entries(clone_db, "send"));
  CHECK(cloned.find("POST /repo.git/git-upload-pack HTTP/1.1\r\n") != std::string::npos);
  CHECK(cloned.find("want " + commit) != std::string::npos);
  for (const auto& db : {push_db, clone_db}) {
    auto sent = tls_entries(db, "send");
    REQUIRE(!sent.empty());
    CHECK(sent[0]["func"] == "gnutls_record_send");
    int redacted = 0;
    for (const auto& e : sent) redacted += e.contains("redacted") && e["redacted"] == json::array({"authorization"});
    CHECK(redacted >= 2);  // every request after the 401
    CHECK(stream(sent).find("\r\nAuthorization: [REDACTED]\r\n") != std::string::npos);
    std::string all = everything_in(db);
    CHECK(all.find("s3cret-git-pass") == std::string::npos);
    CHECK(all.find(flightrec::base64_encode("agent:s3cret-git-pass")) == std::string::npos);
    CHECK(rt::flightrec({"verify", "--db", db}).code == 0);
  }
}

TEST_CASE("a TLS client whose library no probe covers leaves a tls_uncaptured entry; probed clients leave none" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("s.db"), port = std::to_string(srv.port);
  // curl (OpenSSL), wget (GnuTLS), python3 (OpenSSL through its own
  // module), then a client with OpenSSL linked in and stripped.
  Result r = rt::flightrec(
      {"run", "--policy", "observe", "--db", db, "--", "sh", "-c",
       "curl -sk " + srv.url("/x") + " && wget -q --no-check-certificate -O - " + srv.url("/x") +
           " && python3 -c \"import ssl, urllib.request; urllib.request.urlopen('" + srv.url("/x") +
           "', context=ssl._create_unverified_context()).read()\" && " + STATIC_TLS_CLIENT_BIN + " " + port +
           " static.test /x?static 2"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("hello tls body\n") != std::string::npos);
  auto all = entries(db);
  auto hellos = of_type(all, "tls_hello");
  REQUIRE(hellos.size() == 4);
  std::map<std::string, json> by_comm;
  for (const auto& h : hellos) {
    by_comm[h["comm"]] = h;
    CHECK(h["remote_addr"] == "127.0.0.1");
    CHECK(h["remote_port"] == srv.port);
  }
  for (const char* probed : {"curl", "wget", "python3"}) {
    INFO(probed);
    REQUIRE(by_comm.count(probed));
    CHECK(by_comm[probed]["in_probed_call"] == 1);  // sent inside SSL_connect, SSL_do_handshake, gnutls_handshake
  }
  REQUIRE(by_comm.count("static_tls_clie"));  // comm: 15 bytes
  const json& hello = by_comm["static_tls_clie"];
  CHECK(hello["in_probed_call"] == 0);
  CHECK(hello["probed_program"] == 0);
  CHECK(hello["server_name"] == "static.test");
  CHECK_FALSE(hello.contains("alpn"));  // it offers none
  auto uncaptured = of_type(all, "tls_uncaptured");
  REQUIRE(uncaptured.size() == 1);
  CHECK(uncaptured[0]["of_seq"] == hello["seq"]);
  CHECK(uncaptured[0]["subject_pid"] == hello["pid"]);
  CHECK(uncaptured[0]["fd"] == hello["fd"]);
  CHECK(uncaptured[0]["server_name"] == "static.test");
  CHECK(uncaptured[0]["remote_port"] == srv.port);
  CHECK(uncaptured[0]["exe"] == STATIC_TLS_CLIENT_BIN);
  CHECK(uncaptured[0]["library"] == "statically linked, unknown");
  // Its plaintext is not in the record; the others' is.
  std::string sent;
  for (const auto& e : of_type(all, "tls")) {
    CHECK(e["comm"] != "static_tls_clie");
    sent += data_of(e);
  }
  CHECK(sent.find("/x?static") == std::string::npos);
  CHECK(rt::flightrec({"verify", "--db", db}).code == 0);
}

TEST_CASE("a ClientHello of 1.5 KiB and of 15 KiB (large key shares first) has its server name and ALPN recorded") {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("s.db"), hello = std::string(SOURCE_DIR) + "/tests/programs/big_client_hello.py";
  std::string port = std::to_string(srv.port);
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", "sh", "-c",
                            "python3 " + hello + " " + port + " big.hello.test 1600 && python3 " + hello + " " + port +
                                " huge.hello.test 15000"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  std::map<std::string, json> by_name;
  for (const auto& h : of_type(entries(db), "tls_hello")) by_name[h.value("server_name", "")] = h;
  for (const char* name : {"big.hello.test", "huge.hello.test"}) {
    INFO(name);
    REQUIRE(by_name.count(name));
    CHECK(by_name[name]["alpn"] == json::array({"h2", "http/1.1"}));
    CHECK_FALSE(by_name[name].contains("hello_cut"));
  }
  CHECK(by_name["big.hello.test"]["sent_bytes"].get<int>() > 1500);
  CHECK(by_name["huge.hello.test"]["sent_bytes"].get<int>() > 14900);
}

TEST_CASE("a credential in a URL's query (curl, HTTP/1.1) is redacted in the stream and the summary") {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  for (const char* version : {"--http1.1"}) {
    CAPTURE(version);
    std::string db = dir.file(std::string("q") + version + ".db");
    Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", "curl", "-sk", version,
                              srv.url("/x?page=2&api_key=sk-query-secret-42")});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(everything_in(db).find("sk-query-secret-42") == std::string::npos);
    bool summarized = false;
    for (const auto& e : tls_entries(db, "send"))
      summarized |= e.value("http_path", "") == "/x?page=2&api_key=[REDACTED]";
    CHECK(summarized);
  }
}

TEST_CASE("calls beyond the cap leave exact truncation markers") {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("s.db");
  REQUIRE(rt::flightrec({"run", "--policy", "observe", "--db", db, "--tls-chunk", "1K", "--tls-cap", "4K", "--", "curl", "-sk", "-o",
                     "/dev/null", srv.url("/big")})
              .code == 0);
  auto received = tls_entries(db, "recv");
  uint64_t kept = 0, truncated = 0, calls_total = 0;
  int truncating_calls = 0;
  for (const auto& e : received) {
    CHECK(e["len"].get<uint64_t>() <= 1024);
    kept += e["len"].get<uint64_t>();
    if (e["call_offset"] == 0) calls_total += e["call_bytes"].get<uint64_t>();
    if (e.contains("truncated_bytes")) {
      ++truncating_calls;
      CHECK(e["call_offset"].get<uint64_t>() + e["len"].get<uint64_t>() == 4096);
      CHECK(e["truncated_bytes"].get<uint64_t>() == e["call_bytes"].get<uint64_t>() - 4096);
      truncated += e["truncated_bytes"].get<uint64_t>();
    }
  }
  CHECK(truncating_calls > 10);
  CHECK(kept + truncated == calls_total);  // every byte is either kept or counted
  CHECK(calls_total > srv.big.size());     // body plus headers
}

TEST_CASE("python3 (SSL_write_ex/SSL_read_ex) and openssl s_client are captured too" * doctest::test_suite("vm-kernel")) {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("py.db");
  std::string py = "import ssl, urllib.request\n"
                   "ctx = ssl._create_unverified_context()\n"
                   "print(urllib.request.urlopen('" + srv.url("/x?from=python") + "', context=ctx).read().decode(), end='')";
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", "/usr/bin/python3", "-c", py});
  REQUIRE(r.code == 0);
  CHECK(r.out == "hello tls body\n");
  auto sent = tls_entries(db, "send");
  REQUIRE(!sent.empty());
  CHECK(stream(sent).rfind("GET /x?from=python HTTP/1.1\r\n", 0) == 0);
  CHECK(sent[0]["func"].get<std::string>().find("SSL_write") == 0);
  CHECK(stream(tls_entries(db, "recv")).find("hello tls body\n") != std::string::npos);

  std::string sdb = dir.file("s_client.db");
  r = rt::flightrec({"run", "--policy", "observe", "--db", sdb, "--", "sh", "-c",
                 "printf 'GET /x?from=s_client HTTP/1.0\\r\\nHost: t\\r\\n\\r\\n' | openssl s_client -quiet "
                 "-connect 127.0.0.1:" + std::to_string(srv.port) + " 2>/dev/null"});
  CHECK(r.out.find("hello tls body") != std::string::npos);
  CHECK(stream(tls_entries(sdb, "send")).find("GET /x?from=s_client HTTP/1.0\r\n") != std::string::npos);
  CHECK(stream(tls_entries(sdb, "recv")).find("hello tls body\n") != std::string::npos);
}

TEST_CASE("credentials are redacted on the reassembled stream: split headers, headers that start a write, API keys") {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("s.db");
  // One SSL_write per piece: the request line, then a header split in the
  // middle of its value, an API key alone in its write, a custom header.
  std::string py = "import socket, ssl\n"
                   "ctx = ssl._create_unverified_context()\n"
                   "s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', " + std::to_string(srv.port) + ")))\n"
                   "for piece in [b'GET /x HTTP/1.1\\r\\nHost: t\\r\\n', b'Authorization: Bearer spl', "
                   "b'it-s3cret\\r\\n', b'x-api-key: sk-ant-s3cret\\r\\n', b'X-Team-Token: team-s3cret\\r\\n', "
                   "b'Connection: close\\r\\n\\r\\n']:\n"
                   "    s.write(piece)\n"
                   "print(s.read(4096).split(b' ')[1].decode())\n";
  std::string script = dir.file("client.py");  // from a file: argv is recorded
  std::ofstream(script) << py;
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--tls-redact-header", "X-Team-Token", "--",
                            "/usr/bin/python3", script});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "200\n");
  auto sent = tls_entries(db, "send");
  REQUIRE(sent.size() == 6);
  CHECK(stream(sent) ==
        "GET /x HTTP/1.1\r\nHost: t\r\nAuthorization: [REDACTED]\r\nx-api-key: [REDACTED]\r\n"
        "X-Team-Token: [REDACTED]\r\nConnection: close\r\n\r\n");
  CHECK(sent[1]["redacted"] == json::array({"authorization"}));
  CHECK(sent[3]["redacted"] == json::array({"x-api-key"}));
  CHECK(sent[4]["redacted"] == json::array({"x-team-token"}));
  std::string all = everything_in(db);
  for (const char* secret : {"s3cret", "it-s3cret", "sk-ant"}) CHECK(all.find(secret) == std::string::npos);
  auto genesis = entries(db).front();
  auto names = genesis["tls_redact_headers"];
  CHECK(std::find(names.begin(), names.end(), "x-team-token") != names.end());
}

TEST_CASE("HTTP/2 (curl --http2): credentials redacted inside HPACK, both ways; another decoder still reads it") {
  REQUIRE(is_root());
  TempDir dir;
  H2Server server;
  std::string url = server.url("/h2path");
  std::string db = dir.file("s.db"), headers = dir.file("headers");
  std::ofstream(headers) << "Authorization: Bearer client-s3cret\nx-api-key: key-s3cret\n";  // argv is recorded
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", "curl", "-sk", "--http2", "-H",
                            "@" + headers, url});
  // The same server to git over GnuTLS (libcurl-gnutls speaks HTTP/2 too),
  // with redaction off: git fails on the answer, but its request is summarized.
  std::string git_db = dir.file("git.db");
  rt::flightrec({"run", "--policy", "observe", "--tls-redact", "off", "--db", git_db, "--", "env", "GIT_SSL_NO_VERIFY=1",
                 "git", "-c", "http.version=HTTP/2", "ls-remote", url.substr(0, url.rfind('/')) + "/repo.git"});
  server.stop();
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "hello h2\n");
  // Each direction's header block, summarized in the entry where it ends.
  std::string authority = url.substr(8, url.rfind('/') - 8);
  auto summarized = summarized_h2(db);
  REQUIRE(summarized[0].size() == 1);
  CHECK(summarized[0][0]["http2_headers"] ==
        json::array({"stream=1 :method=GET :scheme=https :authority=" + authority + " :path=/h2path"}));
  CHECK(summarized[0][0]["http_method"] == "GET");
  CHECK(summarized[0][0]["http_path"] == "/h2path");
  CHECK(summarized[0][0]["http_host"] == authority);
  CHECK(summarized[0][0]["http_version"] == "HTTP/2");
  CHECK(summarized[0][0]["http2_stream"] == 1);
  REQUIRE(summarized[1].size() == 1);
  CHECK(summarized[1][0]["http2_headers"] == json::array({"stream=1 :status=200"}));
  CHECK(summarized[1][0]["http_status"] == 200);
  std::vector<std::string> git_blocks;
  for (const auto& e : tls_entries(git_db, "send")) {
    CHECK(e["func"] == "gnutls_record_send");
    for (const auto& b : e.value("http2_headers", json::array())) git_blocks.push_back(b);
  }
  REQUIRE(!git_blocks.empty());
  CHECK(git_blocks[0] == "stream=1 :method=GET :scheme=https :authority=" + authority +
                             " :path=/repo.git/info/refs?service=git-upload-pack");
  // Each direction, reassembled, decoded by python's hpack: every header
  // block still decodes; secrets are gone, the rest is as sent.
  std::map<std::string, std::vector<json>> blocks;
  for (const char* direction : {"send", "recv"}) {
    std::string file = dir.file(direction);
    std::ofstream(file, std::ios::binary) << stream(tls_entries(db, direction));
    Result d = run({"/usr/bin/python3", H2_DECODE, file});
    INFO(direction << ": " << d.err);
    REQUIRE(d.code == 0);
    std::istringstream lines(d.out);
    for (std::string line; std::getline(lines, line);) blocks[direction].push_back(json::parse(line));
  }
  REQUIRE(blocks["send"].size() == 1);
  REQUIRE(blocks["recv"].size() == 1);
  std::map<std::string, std::string> req, resp;
  for (const auto& h : blocks["send"][0]) req[h[0]] = h[1];
  for (const auto& h : blocks["recv"][0]) resp[h[0]] = h[1];
  CHECK(req[":path"] == "/h2path");
  CHECK(req[":method"] == "GET");
  CHECK(req["user-agent"].rfind("curl/", 0) == 0);
  REQUIRE(req.count("authorization"));
  CHECK(req["authorization"].find("s3cret") == std::string::npos);
  CHECK(req["authorization"].size() == std::string("Bearer client-s3cret").size());  // the same decoded length
  REQUIRE(req.count("x-api-key"));
  CHECK(req["x-api-key"].find("s3cret") == std::string::npos);
  CHECK(resp[":status"] == "200");
  CHECK(resp["x-served-by"] == "h2_server");
  REQUIRE(resp.count("set-cookie"));
  CHECK(resp["set-cookie"].find("s3cret") == std::string::npos);
  std::set<std::string> redacted = redacted_names(db);
  CHECK(redacted == std::set<std::string>{"authorization", "x-api-key", "set-cookie"});
  CHECK(everything_in(db).find("s3cret") == std::string::npos);
}

TEST_CASE("HTTP/2 from Go's crypto/tls and HPACK: request summarized, Authorization redacted") {
  REQUIRE(is_root());
  TempDir dir;
  H2Server server;
  std::string url = server.url("/h2path");
  std::string db = dir.file("s.db"), token = dir.file("token");
  std::ofstream(token) << "go-h2-s3cret";
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", GO_TLS_CLIENT_BIN, "h2", url, token});
  server.stop();
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "hello h2\n");
  std::string authority = url.substr(8, url.rfind('/') - 8);
  auto summarized = summarized_h2(db);
  REQUIRE(summarized[0].size() == 1);
  CHECK(summarized[0][0]["func"] == "crypto/tls.(*Conn).Write");
  CHECK(summarized[0][0]["http2_headers"] ==
        json::array({"stream=1 :method=GET :scheme=https :authority=" + authority + " :path=/h2path"}));
  CHECK(summarized[0][0]["http_method"] == "GET");
  CHECK(summarized[0][0]["http_version"] == "HTTP/2");
  REQUIRE(summarized[1].size() == 1);
  CHECK(summarized[1][0]["http_status"] == 200);
  std::set<std::string> redacted = redacted_names(db);
  CHECK(redacted.count("authorization") == 1);
  CHECK(everything_in(db).find("go-h2-s3cret") == std::string::npos);
  // Python's HPACK decoder still reads the redacted request.
  std::string file = dir.file("send");
  std::ofstream(file, std::ios::binary) << stream(tls_entries(db, "send"));
  Result d = run({"/usr/bin/python3", H2_DECODE, file});
  INFO(d.err);
  REQUIRE(d.code == 0);
  CHECK(d.out.find(":path") != std::string::npos);
  CHECK(d.out.find("authorization") != std::string::npos);
  CHECK(d.out.find("s3cret") == std::string::npos);
}

TEST_CASE("a client outside the session is not captured; --tls off attaches nothing") {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("s.db");
  Proc outside = start({"sh", "-c", "for i in 1 2 3 4 5 6 7 8; do curl -sk " + srv.url("/x?outside-marker") +
                                        " >/dev/null; sleep 0.1; done"});
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", "curl", "-sk", srv.url("/x?inside-marker")});
  wait(outside);
  REQUIRE(r.code == 0);
  std::string all_sent = stream(tls_entries(db, "send"));
  CHECK(all_sent.find("inside-marker") != std::string::npos);
  CHECK(all_sent.find("outside-marker") == std::string::npos);

  std::string off = dir.file("off.db");
  REQUIRE(rt::flightrec({"run", "--policy", "observe", "--tls", "off", "--db", off, "--", "curl", "-sk", srv.url("/x")}).code == 0);
  auto es = entries(off);
  CHECK(of_type(es, "tls").empty());
  CHECK(es.front()["tls_capture"] == 0);
  for (const auto& c : es.front()["capture"]) CHECK(c.get<std::string>().find("uprobe") == std::string::npos);
}

TEST_CASE("node, which links OpenSSL into its own binary, is captured through it") {
  REQUIRE(is_root());
  if (run({"sh", "-c", "command -v node"}).code != 0) {
    MESSAGE("node is not installed: skipped");
    return;
  }
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("s.db");
  std::string js = "require('https').get({host:'127.0.0.1',port:" + std::to_string(srv.port) +
                   ",path:'/x?from=node',rejectUnauthorized:false},r=>r.on('data',d=>process.stdout.write(d)))";
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", "node", "-e", js});
  REQUIRE(r.code == 0);
  CHECK(r.out == "hello tls body\n");
  CHECK(stream(tls_entries(db, "send")).rfind("GET /x?from=node HTTP/1.1\r\n", 0) == 0);
  CHECK(stream(tls_entries(db, "recv")).find("hello tls body\n") != std::string::npos);
  // node sends its handshake itself, after SSL_do_handshake filled a memory
  // BIO: outside the call, by a program that made one; not uncaptured.
  auto hellos = of_type(entries(db), "tls_hello");
  REQUIRE(hellos.size() == 1);
  CHECK(hellos[0]["probed_program"] == 1);
  CHECK(of_type(entries(db), "tls_uncaptured").empty());
}

TEST_CASE("watch captures TLS of processes already running in the cgroup, and of those started there (OpenSSL, GnuTLS, NSS, Go)") {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string cg;
  {
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line))
      if (line.find(" - cgroup2 ") != std::string::npos) {
        std::istringstream head(line);
        std::string a, b, c, d, mp;
        head >> a >> b >> c >> d >> mp;
        cg = mp + "/flightrec-test-tls-" + std::to_string(getpid());
        break;
      }
  }
  REQUIRE(mkdir(cg.c_str(), 0755) == 0);
  // A python client that is already running (libssl mapped) before watch starts.
  std::string py = "import ssl, time, urllib.request\n"
                   "ctx = ssl._create_unverified_context()\n"
                   "for i in range(40):\n"
                   "    urllib.request.urlopen('" + srv.url("/x?watched") + "', context=ctx).read()\n"
                   "    time.sleep(0.1)\n";
  Proc client = start({"sh", "-c", "echo $$ > " + cg + "/cgroup.procs && exec /usr/bin/python3 -c \"$0\"", py});
  // And GnuTLS: wget runs started in the cgroup while it is watched.
  Proc wgets = start({"sh", "-c", "echo $$ > " + cg + "/cgroup.procs && for i in $(seq 40); do wget -q "
                      "--no-check-certificate -O /dev/null '" + srv.url("/x?watched-wget") + "'; sleep 0.1; done"});
  // NSS (tstclnt) and Go runs started there too. The Go program is
  // probed at its first exec while watched; the runs after it are captured.
  std::string req = dir.file("request"), token = dir.file("token"), nss = nss_db(dir);
  std::ofstream(req) << "GET /x?watched-nss HTTP/1.0\r\nHost: localhost\r\n\r\n";
  std::ofstream(token) << "t";
  Proc others = start({"sh", "-c", "echo $$ > " + cg + "/cgroup.procs && for i in $(seq 40); do tstclnt -h 127.0.0.1 -p " +
                       std::to_string(srv.port) + " -d " + nss + " -o < " + req + " >/dev/null 2>&1; " +
                       GO_TLS_CLIENT_BIN + " http '" + srv.url("/x?watched-go") + "' " + token +
                       " >/dev/null; sleep 0.1; done"});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::string db = dir.file("w.db");
  Result r = rt::flightrec({"watch", "--cgroup", cg, "--db", db, "--duration", "2"});
  for (Proc* p : {&client, &wgets, &others}) {
    kill(p->pid, SIGKILL);
    wait(*p);
  }
  run({"sh", "-c", "for p in $(cat " + cg + "/cgroup.procs); do kill -9 $p; done; sleep 0.2"});
  rmdir(cg.c_str());
  REQUIRE(r.code == 0);
  std::string sent = stream(tls_entries(db, "send"));
  CHECK(sent.find("GET /x?watched HTTP/1.1\r\n") != std::string::npos);
  CHECK(sent.find("GET /x?watched-wget HTTP/1.1\r\n") != std::string::npos);
  CHECK(sent.find("GET /x?watched-nss HTTP/1.0\r\n") != std::string::npos);
  CHECK(sent.find("GET /x?watched-go HTTP/1.1\r\n") != std::string::npos);
}

TEST_CASE("a token in a JSON body, chunked, and a folded credential header (Python's ssl, HTTP/1.1): masked in the record") {
  REQUIRE(is_root());
  HttpsServer srv;
  TempDir dir;
  std::string db = dir.file("s.db");
  // An OAuth refresh as agents send it, its body chunked (the token split
  // across two chunks), and a header folded over two lines (obs-fold,
  // which curl will not send): bytes from a file, so argv holds none.
  std::string body1 = R"({"grant_type":"refresh_token","refresh_token":"rt-body-)", body2 = R"(secret-42"})";
  auto hex = [](size_t n) {
    char buf[16];
    snprintf(buf, sizeof(buf), "%zx", n);
    return std::string(buf);
  };
  std::string request = "POST /v1/oauth/token HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
                        "X-Api-Key: sk-folded-first\r\n  sk-folded-second-part\r\nConnection: close\r\n\r\n" +
                        hex(body1.size()) + "\r\n" + body1 + "\r\n" + hex(body2.size()) + "\r\n" + body2 + "\r\n0\r\n\r\n";
  std::string raw = dir.file("request");
  std::ofstream(raw, std::ios::binary) << request;
  const char* client =
      "import socket, ssl, sys\n"
      "ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE\n"
      "s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', int(sys.argv[1]))))\n"
      "s.sendall(open(sys.argv[2], 'rb').read())\n"
      "s.settimeout(5)\n"
      "try:\n"
      "    s.recv(65536)\n"
      "except OSError:\n"
      "    pass\n";
  Result r = rt::flightrec({"run", "--policy", "observe", "--db", db, "--", "python3", "-c", client,
                            std::to_string(srv.port), raw});
  INFO(r.err);
  REQUIRE(r.code == 0);
  std::string all = everything_in(db);
  CHECK(all.find("secret-42") == std::string::npos);
  CHECK(all.find("rt-body-") == std::string::npos);
  CHECK(all.find("sk-folded-second-part") == std::string::npos);
  CHECK(all.find("sk-folded-first") == std::string::npos);
  CHECK(all.find("X-Api-Key: [REDACTED]\r\n  [REDACTED]\r\n") != std::string::npos);  // the folded line was sent
  std::set<std::string> names = redacted_names(db);
  CHECK(names.count("body:refresh_token"));
  CHECK(names.count("x-api-key"));
  // What is not a credential is kept, each chunk the size it says.
  CHECK(all.find(R"({"grant_type":"refresh_token","refresh_token":"********)" "\r\n" + hex(body2.size()) + "\r\n*********\"}") !=
        std::string::npos);
}
