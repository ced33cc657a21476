// Credential headers are redacted on the reassembled stream of a TLS
// connection, however the writes cut it.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "events/tls.h"

using flightrec::events::default_redacted_headers;
using flightrec::events::HeaderRedactor;

namespace {

// Feeds the writes in order, as one direction of one connection; returns
// the concatenated output and every name redacted.
std::pair<std::string, std::vector<std::string>> through(const std::vector<std::string>& writes,
                                                         const std::vector<std::string>& secret = default_redacted_headers()) {
  HeaderRedactor r;
  std::string out;
  std::vector<std::string> names;
  uint64_t at = 0;
  for (const auto& w : writes) {
    out += r.feed(at, w, true, secret, names);
    at += w.size();
  }
  return {out, names};
}

}  // namespace

TEST_CASE("a credential header split across writes is redacted") {
  auto [out, names] = through({"GET / HTTP/1.1\r\nAuthorization: Bearer ", "s3cret-token\r\nHost: h\r\n\r\n"});
  CHECK(out == "GET / HTTP/1.1\r\nAuthorization: [REDACTED]\r\nHost: h\r\n\r\n");
  CHECK(names == std::vector<std::string>{"authorization"});
  // The name itself split too.
  auto [out2, names2] = through({"GET / HTTP/1.1\r\nAuthor", "ization: Basic dXNlcjpwdw==\r\n\r\n"});
  CHECK(out2 == "GET / HTTP/1.1\r\nAuthorization: [REDACTED]\r\n\r\n");
}

TEST_CASE("a credential header that starts a write is redacted; the API-key headers are on the list") {
  auto [out, names] =
      through({"POST /v1/messages HTTP/1.1\r\n", "Host: api.example\r\n", "x-api-key: sk-123\r\n", "X-Goog-Api-Key: g\r\n",
               "\r\n"});
  CHECK(out == "POST /v1/messages HTTP/1.1\r\nHost: api.example\r\nx-api-key: [REDACTED]\r\nX-Goog-Api-Key: [REDACTED]\r\n\r\n");
  CHECK(names == std::vector<std::string>{"x-api-key", "x-goog-api-key"});
}

TEST_CASE("bodies of known length are left alone; the next message on the connection is read again") {
  auto [out, names] = through({"POST / HTTP/1.1\r\nContent-Length: 28\r\n\r\nAuthorization: in the body\r\n",
                               "GET / HTTP/1.1\r\nCookie: a=b\r\n\r\n"});
  CHECK(out == "POST / HTTP/1.1\r\nContent-Length: 28\r\n\r\nAuthorization: in the body\r\n"
               "GET / HTTP/1.1\r\nCookie: [REDACTED]\r\n\r\n");
  CHECK(names == std::vector<std::string>{"cookie"});
  // Responses too, pipelined in one write.
  auto [resp, rnames] = through({"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nSet-Cookie: s=1\r\n\r\n"});
  CHECK(resp == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nSet-Cookie: [REDACTED]\r\n\r\n");
}

TEST_CASE("what is not HTTP/1.x is not touched; the list can be changed") {
  std::string h2 = std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + "authorization: x\r\n";
  CHECK(through({h2}).first == h2);
  auto [out, names] = through({"GET / HTTP/1.1\r\nX-Custom: secret\r\nCookie: kept\r\n\r\n"}, {"x-custom"});
  CHECK(out == "GET / HTTP/1.1\r\nX-Custom: [REDACTED]\r\nCookie: kept\r\n\r\n");
}

TEST_CASE("after bytes that went missing inside a header line, the rest of that line is redacted") {
  HeaderRedactor r;
  std::vector<std::string> names;
  std::string first = "GET / HTTP/1.1\r\nX-Thing: ab";
  std::string out = r.feed(0, first, true, default_redacted_headers(), names);
  out += r.feed(first.size() + 100, "cdef\r\nHost: h\r\n\r\n", true, default_redacted_headers(), names);
  CHECK(out == "GET / HTTP/1.1\r\nX-Thing: ab[REDACTED]\r\nHost: h\r\n\r\n");
  CHECK(names == std::vector<std::string>{"(after a gap)"});
}
