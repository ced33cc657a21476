// Credential headers are redacted on the reassembled stream of a TLS
// connection, however the writes cut it.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "events/body_redact.h"
#include "events/tls.h"
#include "http2_bytes.h"

using flightrec::events::default_redacted_headers;
using flightrec::events::HeaderRedactor;
using flightrec::events::Http2Headers;

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

// HTTP/2: RFC 7541's own examples (Appendix C.4, requests with Huffman
// coding) in HEADERS frames after the client preface.
namespace {

using flightrec::events::Http2Redactor;
using flightrec::events::huffman_decode;
using flightrec::events::huffman_filler;

// C.4.1, C.4.2, C.4.3: the third adds "custom-key: custom-value" with a literal Huffman name.
const std::string kBlock1 = unhex("828684418cf1e3c2e5f23a6ba0ab90f4ff");
const std::string kBlock2 = unhex("828684be5886a8eb10649cbf");
const std::string kBlock3 = unhex("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf");

}  // namespace

TEST_CASE("HPACK Huffman: RFC 7541's examples decode; a filler has the bytes and the symbol count asked for") {
  CHECK(huffman_decode(unhex("f1e3c2e5f23a6ba0ab90f4ff")) == "www.example.com");
  CHECK(huffman_decode(unhex("25a849e95bb8e8b4bf")) == "custom-value");
  CHECK(flightrec::events::huffman_decoded_length(unhex("a8eb10649cbf")) == 8);  // no-cache
  CHECK(flightrec::events::huffman_decoded_length(unhex("ff")) == -1);           // 8 bits of padding
  for (size_t bytes = 1; bytes <= 40; ++bytes)
    for (uint64_t symbols = (8 * bytes + 29) / 30; symbols <= 8 * bytes / 5; ++symbols) {
      std::string f = huffman_filler(bytes, symbols);
      INFO(bytes << " bytes, " << symbols << " symbols");
      REQUIRE(f.size() == bytes);
      CHECK(huffman_decode(f).size() == symbols);
    }
}

TEST_CASE("HTTP/2: a secret header's value is overwritten in place; the frames and the other fields stay") {
  std::string settings = frame(4, 0, 0, "");
  std::string f1 = frame(1, 0x5, 1, kBlock1), f2 = frame(1, 0x5, 3, kBlock2), f3 = frame(1, 0x5, 5, kBlock3);
  std::string stream = std::string(flightrec::events::kHttp2Preface) + settings + f1 + f2 + f3;
  // Cut anywhere: the same bytes outside the values; inside one, a value
  // cut in two still becomes a valid Huffman string of its byte length.
  size_t v1 = stream.find(unhex("f1e3c2e5f23a6ba0ab90f4ff")), v3 = stream.find(unhex("25a849e95bb8e8b4bf"));
  for (size_t cut : {size_t(3), size_t(30), v1 + 5, v1 + 12, stream.size() - 5}) {
    Http2Redactor r(true);
    std::vector<std::string> names;
    std::vector<Http2Headers> blocks;
    std::string a = stream.substr(0, cut), b = stream.substr(cut);
    r.feed(0, a, {"custom-key", ":authority"}, names, blocks);
    r.feed(cut, b, {"custom-key", ":authority"}, names, blocks);
    std::string out = a + b;
    INFO("cut at " << cut);
    REQUIRE(out.size() == stream.size());
    CHECK(names == std::vector<std::string>{":authority", "custom-key"});
    // Only the two values changed, to Huffman strings of the same decoded
    // length (where the value was in view whole).
    for (size_t i = 0; i < stream.size(); ++i)
      if (!((i >= v1 && i < v1 + 12) || (i >= v3 && i < v3 + 9))) CHECK(out[i] == stream[i]);
    std::string w1 = huffman_decode(out.substr(v1, 12)), w3 = huffman_decode(out.substr(v3, 9));
    // Split: 5-bit symbols fill it (12 bytes: 19; 9 bytes: 14).
    CHECK(w1.size() == (cut > v1 && cut < v1 + 12 ? 19u : 15u));
    CHECK(w1 != "www.example.com");
    CHECK(w3.size() == (cut > v3 && cut < v3 + 9 ? 14u : 12u));
    CHECK(w3 != "custom-value");
  }
}

TEST_CASE("HTTP/2: each header block's pseudo-header fields, from literals and both tables, wherever the bytes are cut") {
  std::string settings = frame(4, 0, 0, "");
  std::string f1 = frame(1, 0x5, 1, kBlock1), f2 = frame(1, 0x5, 3, kBlock2), f3 = frame(1, 0x5, 5, kBlock3);
  std::string stream = std::string(flightrec::events::kHttp2Preface) + settings + f1 + f2 + f3;
  for (size_t cut = 1; cut < stream.size(); cut += 7) {
    Http2Redactor r(true);
    std::vector<std::string> names;
    std::vector<Http2Headers> first, second;
    std::string a = stream.substr(0, cut), b = stream.substr(cut);
    r.feed(0, a, {}, names, first);
    r.feed(cut, b, {}, names, second);
    INFO("cut at " << cut);
    std::vector<Http2Headers> all = first;
    all.insert(all.end(), second.begin(), second.end());
    REQUIRE(all.size() == 3);
    // A block is reported with the bytes that end it.
    CHECK(first.size() == (cut >= stream.size() - f3.size() ? 2u : cut >= stream.size() - f3.size() - f2.size() ? 1u : 0u));
    CHECK(all[0].stream == 1);
    CHECK(all[0].method == "GET");
    CHECK(all[0].scheme == "http");  // static table entry with its value
    CHECK(all[0].path == "/");
    CHECK(all[0].authority == "www.example.com");  // a Huffman literal, as sent
    CHECK(all[1].stream == 3);
    CHECK(all[1].authority == "www.example.com");  // from the dynamic table
    CHECK(all[2].stream == 5);
    CHECK(all[2].scheme == "https");
    CHECK(all[2].path == "/index.html");
    CHECK(all[2].status.empty());
  }
  // A pseudo-header field that is redacted is redacted in the summary too,
  // and in the dynamic table entry later blocks refer to.
  Http2Redactor r(true);
  std::vector<std::string> names;
  std::vector<Http2Headers> blocks;
  std::string copy = stream;
  r.feed(0, copy, {":authority"}, names, blocks);
  REQUIRE(blocks.size() == 3);
  for (const auto& b : blocks) CHECK(b.authority == "[REDACTED]");
}

TEST_CASE("HTTP/2: a raw value, padding and CONTINUATION frames; a lost header byte overwrites the rest") {
  // literal without indexing, name index 23 (authorization), raw value "Bearer tok"
  std::string block = std::string("\x0f\x08", 2) + char(10) + "Bearer tok";
  std::string padded = std::string(1, char(3)) + block.substr(0, 5) + std::string(3, '\0');  // PADDED
  std::string stream = std::string(flightrec::events::kHttp2Preface) + frame(1, 0x8, 1, padded) +
                       frame(9, 0x4, 1, block.substr(5)) + frame(0, 1, 1, "body");
  Http2Redactor r(true);
  std::vector<std::string> names;
  std::vector<Http2Headers> blocks;
  std::string out = stream;
  r.feed(0, out, flightrec::events::default_redacted_headers(), names, blocks);
  CHECK(names == std::vector<std::string>{"authorization"});
  CHECK(out.find("Be") == std::string::npos);  // the value's first two bytes, in the first frame
  CHECK(out.find("arer tok") == std::string::npos);
  CHECK(out.find(std::string("\x0a**", 3)) != std::string::npos);
  CHECK(out.find("********") != std::string::npos);
  CHECK(out.substr(out.size() - 4) == "body");
  // Bytes that never arrived inside a DATA frame: skipped. Inside a header block: lost.
  Http2Redactor s(true);
  names.clear();
  std::string data = frame(0, 0, 1, std::string(100, 'd'));
  std::string head = std::string(flightrec::events::kHttp2Preface) + data.substr(0, 20);
  std::string tail = data.substr(60) + frame(1, 0x4, 1, block);
  s.feed(0, head, {"authorization"}, names, blocks);
  s.feed(60 + flightrec::events::kHttp2Preface.size(), tail, {"authorization"}, names, blocks);
  CHECK(names == std::vector<std::string>{"authorization"});
  Http2Redactor t(true);
  names.clear();
  std::string h = std::string(flightrec::events::kHttp2Preface) + frame(1, 0x4, 1, block).substr(0, 11);
  std::string rest = frame(1, 0x4, 1, block).substr(13);
  t.feed(0, h, {"authorization"}, names, blocks);
  t.feed(h.size() + 2, rest, {"authorization"}, names, blocks);
  CHECK(rest == std::string(rest.size(), '*'));
  CHECK(names == std::vector<std::string>{"(after a gap)"});
}

TEST_CASE("credentials in a request target's query are redacted, split across writes too; other parameters stay") {
  auto [out, names] = through({"GET /v1/models?limit=5&api_k", "ey=sk-secret-1&Token=t0ps3cret#frag HTTP/1.1\r\nHost: a\r\n\r\n",
                               "GET /next?key=AIza-xyz HTTP/1.1\r\n\r\n"});
  CHECK(out == "GET /v1/models?limit=5&api_key=[REDACTED]&Token=[REDACTED]#frag HTTP/1.1\r\nHost: a\r\n\r\n"
               "GET /next?key=[REDACTED] HTTP/1.1\r\n\r\n");
  CHECK(names == std::vector<std::string>{"?api_key", "?token", "?key"});
  // A response's start line and a body are not request targets.
  auto [resp, none] = through({"HTTP/1.1 200 OK?token=x\r\nContent-Length: 9\r\n\r\n?token=no"});
  CHECK(resp == "HTTP/1.1 200 OK?token=x\r\nContent-Length: 9\r\n\r\n?token=no");
  CHECK(none.empty());
  // The summary's path, the same way.
  std::vector<std::string> said;
  CHECK(flightrec::events::redact_query("/x?a=1&sig=abc&b=2", &said) == "/x?a=1&sig=[REDACTED]&b=2");
  CHECK(said == std::vector<std::string>{"?sig"});
  CHECK(flightrec::events::redact_query("/plain", nullptr) == "/plain");
  CHECK(flightrec::events::redact_query("/x?token", nullptr) == "/x?token");  // no value
}

TEST_CASE("a folded credential header (obs-fold) is redacted on its continuation lines too") {
  auto [out, names] = through({"GET / HTTP/1.1\r\nAuthorization: Bearer\r\n  s3cret-token\r\n\tmore-of-it\r\nHost: h\r\n",
                               " folded-host\r\n\r\n"});
  CHECK(out == "GET / HTTP/1.1\r\nAuthorization: [REDACTED]\r\n  [REDACTED]\r\n\t[REDACTED]\r\nHost: h\r\n folded-host\r\n\r\n");
  CHECK(names == std::vector<std::string>{"authorization"});
}

TEST_CASE("chunked bodies are followed: credentials in their trailers and JSON fields masked, the next message read") {
  // A trailer after the last chunk; the next request on the connection.
  std::string chunked = "POST /t HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nabcd\r\n0\r\nX-Api-Key: sk-123\r\n\r\n";
  auto [out, names] = through({chunked + "GET / HTTP/1.1\r\nCookie: c=1\r\n\r\n"});
  CHECK(out == "POST /t HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nabcd\r\n0\r\nX-Api-Key: [REDACTED]\r\n\r\n"
               "GET / HTTP/1.1\r\nCookie: [REDACTED]\r\n\r\n");
  CHECK(names == std::vector<std::string>{"x-api-key", "cookie"});
  // An OAuth refresh, its token split across two chunks and two writes:
  // masked in place, so every chunk keeps its size.
  std::string body = R"({"grant_type":"refresh_token","refresh_token":"rt-0123456789abcdef"})";
  std::string a = body.substr(0, 50), b = body.substr(50);
  auto hex = [](size_t n) {
    char buf[16];
    snprintf(buf, sizeof(buf), "%zx", n);
    return std::string(buf);
  };
  std::string head = "POST /v1/oauth/token HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  std::string msg = head + hex(a.size()) + "\r\n" + a + "\r\n" + hex(b.size()) + "\r\n" + b + "\r\n0\r\n\r\n";
  auto [out2, names2] = through({msg.substr(0, head.size() + 30), msg.substr(head.size() + 30)});
  CHECK(out2.size() == msg.size());
  CHECK(out2.find("rt-0123456789abcdef") == std::string::npos);
  CHECK(out2.find(R"("refresh_token":"***)" "\r\n") != std::string::npos);  // the first chunk's end
  CHECK(out2.find(std::string(16, '*') + "\"}\r\n0\r\n") != std::string::npos);  // the second's
  CHECK(out2.find(R"("grant_type":"refresh_token")") != std::string::npos);  // a value naming a key, not a secret
  CHECK(names2 == std::vector<std::string>{"body:refresh_token"});
}

TEST_CASE("JSON credential fields in bodies are masked, '*' a byte; other fields and escapes stay whole") {
  std::string body = R"({"model":"m","api_key" : "sk-ant-\"quoted\"-0123","token":"not-a-secret-here","n":{"password":"pw"},)"
                     R"("access_token":42})";
  std::string req = "POST /x HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  auto [out, names] = through({req});
  REQUIRE(out.size() == req.size());
  std::string got = out.substr(out.size() - body.size());
  CHECK(got == R"({"model":"m","api_key" : "**********************","token":"not-a-secret-here","n":{"password":"**"},)"
               R"("access_token":**})");  // a number too
  CHECK(names == std::vector<std::string>{"body:api_key", "body:password", "body:access_token"});
  // A body without a length (read to the connection's end) is scanned too.
  auto [out2, names2] = through({"HTTP/1.1 200 OK\r\n\r\n{\"id_token\":\"eyJhbGciOi\"}"});
  CHECK(out2 == "HTTP/1.1 200 OK\r\n\r\n{\"id_token\":\"**********\"}");
}

TEST_CASE("HTTP/2: credentials in JSON DATA are masked in place, per stream, across frames and cuts; padding is not body") {
  std::string settings = frame(4, 0, 0, "");
  std::string body1 = R"({"grant_type":"refresh_token","refresh_tok)", body2 = R"(en":"rt-h2-secret"})";
  std::string other = R"({"note":"password","password":"pw-other-stream"})";
  // Stream 1's body in two DATA frames (the second padded, END_STREAM); stream 3's between them.
  std::string padded = std::string(1, char(3)) + body2 + std::string(3, '\0');
  std::string stream = std::string(flightrec::events::kHttp2Preface) + settings + frame(0, 0, 1, body1) +
                       frame(0, 0x1, 3, other) + frame(0, 0x8 | 0x1, 1, padded);
  for (size_t cut = 1; cut < stream.size(); cut += 7) {
    Http2Redactor r(true);
    std::vector<std::string> names;
    std::vector<Http2Headers> blocks;
    std::string a = stream.substr(0, cut), b = stream.substr(cut);
    r.feed(0, a, {}, names, blocks);
    r.feed(cut, b, {}, names, blocks);
    std::string out = a + b;
    INFO("cut at " << cut);
    REQUIRE(out.size() == stream.size());
    CHECK(out.find("rt-h2-secret") == std::string::npos);
    CHECK(out.find("pw-other-stream") == std::string::npos);
    CHECK(out.find(R"("refresh_tok)") != std::string::npos);  // the name stays
    CHECK(out.find(R"(en":"************"})") != std::string::npos);
    CHECK(out.find(R"({"note":"password","password":"***************"})") != std::string::npos);
    CHECK(out.substr(out.size() - 3) == std::string(3, '\0'));  // the padding as it was
    CHECK(names == std::vector<std::string>{"body:password", "body:refresh_token"});
  }
}

TEST_CASE("a Content-Length of spaces, signs or too many digits is no length, never an exception") {
  for (const char* value : {" ", "  ", "+5", "-1", "1 2", "12345678901234567890", "0x10", ""}) {
    CAPTURE(value);
    auto [out, names] = through({std::string("POST / HTTP/1.1\r\nContent-Length: ") + value + "\r\n\r\nbody",
                                 "GET / HTTP/1.1\r\nCookie: c\r\n\r\n"});
    CHECK(out.find("body") != std::string::npos);
  }
}

namespace {

// A JSON body through the HTTP/1 redactor: the body as recorded, and the names.
std::pair<std::string, std::vector<std::string>> masked_body(const std::string& body) {
  std::string req = "POST /v1/messages HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  auto [out, names] = through({req});
  REQUIRE(out.size() == req.size());
  return {out.substr(out.size() - body.size()), names};
}

}  // namespace

TEST_CASE("JSON credential keys in any spelling: camelCase, dashes, capitals, and escapes in the key") {
  auto [got, names] = masked_body(R"({"apiKey":"k1","Client-Secret":"k22","pass\u0077ord":"k333","ACCESS_TOKEN":"k4444",)"
                                  R"("keyName":"kept","tokens":5})");
  CHECK(got == R"({"apiKey":"**","Client-Secret":"***","pass\u0077ord":"****","ACCESS_TOKEN":"*****",)"
               R"("keyName":"kept","tokens":5})");
  CHECK(names == std::vector<std::string>{"body:apikey", "body:client-secret", "body:password", "body:access_token"});
}

TEST_CASE("JSON inside a JSON string is read: a tool call's arguments, and arguments streamed in pieces") {
  using nlohmann::json;
  // OpenAI's function call: its arguments are a JSON document in a string.
  std::string body = R"({"tool_calls":[{"function":{"name":"deploy","arguments":"{\"api_key\": \"sk-inner-123\", )"
                     R"(\"password\": \"a\\b\\\"c\", \"q\": \"keep me\"}"}}]})";
  auto masked = masked_body(body);
  const std::string& got = masked.first;
  const std::vector<std::string>& names = masked.second;
  INFO(got);
  json outer = json::parse(got);  // still JSON, and so are its arguments
  json args = json::parse(outer["tool_calls"][0]["function"]["arguments"].get<std::string>());
  CHECK(args["api_key"] == "************");
  // Of a value masked inside a string, escape sequences stay (the string stays one).
  CHECK(args["password"] == "*\b\"*");
  CHECK(args["q"] == "keep me");
  CHECK(names == std::vector<std::string>{"body:api_key", "body:password"});
  // Anthropic's streamed tool input: the JSON cut across events, a key's
  // value begun in one and ended in the next, other members between.
  std::string sse = "event: content_block_delta\ndata: "
                    R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"cmd\": \"ls\", \"token\": 1, \"secret\": \"s3-"}})"
                    "\n\nevent: content_block_delta\ndata: "
                    R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"rest-of-it\"}"}})"
                    "\n\n";
  auto [got2, names2] = masked_body(sse);
  CHECK(got2.find("s3-") == std::string::npos);
  CHECK(got2.find("rest-of-it") == std::string::npos);
  CHECK(got2.find(R"(\"secret\": \"***"}})") != std::string::npos);
  CHECK(got2.find(R"("partial_json":"**********\"}"}})") != std::string::npos);
  CHECK(got2.find(R"(\"cmd\": \"ls\", \"token\": 1)") != std::string::npos);
  CHECK(names2 == std::vector<std::string>{"body:secret"});
}

TEST_CASE("a masked value is bounded: past 8192 bytes, or at a control byte, the body is read on and shown") {
  // A body cannot hide what follows behind a key it names.
  std::string body = R"({"password":")" + std::string(10000, 'a') + R"(","tool":"rm -rf /","api_key":"x"})";
  auto [got, names] = masked_body(body);
  CHECK(got.substr(13, 8192) == std::string(8192, '*'));
  CHECK(got.substr(13 + 8192, 10000 - 8192) == std::string(10000 - 8192, 'a'));
  CHECK(got.find(R"("tool":"rm -rf /")") != std::string::npos);
  CHECK(got.find(R"("api_key":"*"})") != std::string::npos);  // read on as JSON, in step
  CHECK(names == std::vector<std::string>{"body:password", "body:password (longer than 8192 bytes)", "body:api_key"});
  // No JSON string holds a line break: a value "open" across lines was none.
  auto [got2, names2] = masked_body("data: {\"secret\":\"abc\ndata: {\"tool\":\"shown\"}\n");
  CHECK(got2 == "data: {\"secret\":\"***\ndata: {\"tool\":\"shown\"}\n");
}

TEST_CASE("a tool call's decoded input is masked as a body is, whatever coding its bytes came in") {
  // What the llm_call reader decoded from a gzip'd response: the body
  // scanner saw compressed bytes only, so the input is masked on its own.
  std::vector<std::string> names;
  std::string input = R"({"command":"curl -H x","env":{"AWS_SECRET_ACCESS_KEY":"wJalr/K7MDENG","region":"eu"}})";
  CHECK(flightrec::events::masked_json_text(input, names) ==
        R"({"command":"curl -H x","env":{"AWS_SECRET_ACCESS_KEY":"*************","region":"eu"}})");
  CHECK(names == std::vector<std::string>{"body:aws_secret_access_key"});
}

TEST_CASE("responses without a body are framed as such: to a HEAD, 1xx, 204 and 304, whatever Content-Length says") {
  // Otherwise the next response's headers are read as body, unredacted.
  std::deque<bool> heads;
  HeaderRedactor requests, responses;
  requests.share_requests(&heads);
  responses.share_requests(&heads);
  std::vector<std::string> names;
  const auto& secret = default_redacted_headers();
  std::string asked = "HEAD /big HTTP/1.1\r\nHost: h\r\n\r\nGET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
  CHECK(requests.feed(0, asked, true, secret, names) == asked);
  std::string answered = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"            // to the HEAD
                         "HTTP/1.1 100 Continue\r\n\r\n"                                 // interim, then
                         "HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n"    // to /a
                         "HTTP/1.1 200 OK\r\nSet-Cookie: sid=s3cret\r\nContent-Length: 0\r\n\r\n";  // to /b
  std::string out = responses.feed(0, answered, true, secret, names);
  CHECK(out.find("s3cret") == std::string::npos);
  CHECK(out.find("Set-Cookie: [REDACTED]\r\n") != std::string::npos);
  CHECK(names == std::vector<std::string>{"set-cookie"});
  CHECK(heads.empty());
}

TEST_CASE("a folded line after a gap inside a header line is redacted with it") {
  HeaderRedactor r;
  std::vector<std::string> names;
  const auto& secret = default_redacted_headers();
  std::string first = "GET / HTTP/1.1\r\nX-Custom: ab";
  r.feed(0, first, true, secret, names);
  // Bytes lost (past the cap), then the rest of the line and a fold of it.
  std::string out = r.feed(first.size() + 10, "cd\r\n more-of-it\r\nHost: h\r\n\r\n", false, secret, names);
  CHECK(out.find("more-of-it") == std::string::npos);
  CHECK(out.find("Host: h") != std::string::npos);
  CHECK(names == std::vector<std::string>{"(after a gap)"});
}

TEST_CASE("HTTP/2: opening hundreds of streams does not end another stream's mask") {
  std::string settings = frame(4, 0, 0, "");
  std::string stream = std::string(flightrec::events::kHttp2Preface) + settings +
                       frame(0, 0, 1, R"({"api_key":"sk-first-half)");
  std::string idle = stream, busy = stream;
  for (uint32_t s = 3; s < 3 + 2 * 600; s += 2) {  // 600 streams more
    idle += frame(0, 0, s, R"({"note":"x"})");     // each between members
    busy += frame(0, 0, s, R"({"note":"x)");       // each inside a string
  }
  idle += frame(0, 0x1, 1, R"(-second-half"})");
  busy += frame(0, 0x1, 1, R"(-second-half"})");
  for (std::string* s : {&idle, &busy}) {
    Http2Redactor r(true);
    std::vector<std::string> names;
    std::vector<Http2Headers> blocks;
    r.feed(0, *s, {}, names, blocks);
    CHECK(s->find("sk-first-half") == std::string::npos);
    CHECK(s->find("-second-half") == std::string::npos);
    CHECK(s->find(std::string(12, '*') + "\"}") != std::string::npos);
    CHECK(names.front() == "body:api_key");
    // Past 256 streams inside values, a new stream's DATA is masked whole.
    bool whole = std::find(names.begin(), names.end(), "(too many streams inside a masked value)") != names.end();
    CHECK(whole == (s == &busy));
    if (s == &busy) CHECK(s->find(R"({"note":"x)") != std::string::npos);  // the first 255 still read
  }
}
