// HTTP/2 put back together for the agent's turns: HPACK decoding of whole
// header blocks (RFC 7541 Appendix C's examples), and one direction of a
// connection split at every size, multiplexed, padded, continued, reset,
// with gaps, and hostile.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "agent/http2.h"
#include "events/http2.h"
#include "http2_bytes.h"

using flightrec::agent::Http2Stream;
using flightrec::agent::HttpMessage;
using flightrec::events::HpackDecoder;
using Fields = std::vector<std::pair<std::string, std::string>>;

namespace {

// A literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2).
std::string literal(const std::string& name, const std::string& value) {
  auto str = [](const std::string& s) {
    std::string out;
    if (s.size() < 127) return std::string(1, char(s.size())) + s;
    out += char(0x7f);
    size_t v = s.size() - 127;
    while (v >= 128) {
      out += char(0x80 | (v & 0x7f));
      v >>= 7;
    }
    out += char(v);
    return out + s;
  };
  return std::string(1, '\0') + str(name) + str(value);
}

constexpr uint8_t kData = 0, kHeaders = 1, kRst = 3, kSettings = 4, kContinuation = 9;
constexpr uint8_t kEndStream = 1, kEndHeaders = 4, kPadded = 8;
const std::string kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

std::vector<HttpMessage> feed_all(Http2Stream& s, const std::string& bytes, size_t step) {
  std::vector<HttpMessage> out;
  int64_t seq = 100;
  for (size_t at = 0; at < bytes.size(); at += step) {
    std::string part = bytes.substr(at, step);
    s.feed(at, part.size(), part, seq++, at, out);
  }
  return out;
}

}  // namespace

TEST_CASE("hpack: RFC 7541's examples decode, with the dynamic table kept across blocks and entries evicted") {
  SUBCASE("C.3: requests without Huffman coding") {
    HpackDecoder d;
    Fields f;
    REQUIRE(d.decode(unhex("828684410f7777772e6578616d706c652e636f6d"), f));
    CHECK(f == Fields{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "www.example.com"}});
    f.clear();
    REQUIRE(d.decode(unhex("828684be58086e6f2d6361636865"), f));
    CHECK(f == Fields{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "www.example.com"},
                      {"cache-control", "no-cache"}});
    f.clear();
    REQUIRE(d.decode(unhex("828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565"), f));
    CHECK(f == Fields{{":method", "GET"}, {":scheme", "https"}, {":path", "/index.html"},
                      {":authority", "www.example.com"}, {"custom-key", "custom-value"}});
  }
  SUBCASE("C.6: responses with Huffman coding and eviction (a 256-byte table)") {
    HpackDecoder d;
    Fields f;
    // The peer sets a table of 256 bytes first (a size update, 6.3).
    REQUIRE(d.decode(unhex("3fe101") + unhex("488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29"
                                             "ad171863c78f0b97c8e9ae82ae43d3"),
                     f));
    CHECK(f == Fields{{":status", "302"}, {"cache-control", "private"}, {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                      {"location", "https://www.example.com"}});
    f.clear();
    REQUIRE(d.decode(unhex("4883640effc1c0bf"), f));
    CHECK(f == Fields{{":status", "307"}, {"cache-control", "private"}, {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                      {"location", "https://www.example.com"}});
    f.clear();
    REQUIRE(d.decode(unhex("88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b39"
                           "60d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007"),
                     f));
    CHECK(f == Fields{{":status", "200"}, {"cache-control", "private"}, {"date", "Mon, 21 Oct 2013 20:13:22 GMT"},
                      {"location", "https://www.example.com"}, {"content-encoding", "gzip"},
                      {"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"}});
  }
  SUBCASE("hostile blocks fail, and the decoder stays failed") {
    HpackDecoder d;
    Fields f;
    CHECK_FALSE(d.decode(unhex("be"), f));  // index 62: the dynamic table is empty
    CHECK_FALSE(d.decode(unhex("82"), f));  // broken for good: its table cannot be trusted
    HpackDecoder e;
    CHECK_FALSE(e.decode(unhex("ff"), f));                  // an integer cut short
    CHECK_FALSE(HpackDecoder().decode(unhex("0003616263" "7f"), f));  // a value's length runs past the block
    CHECK_FALSE(HpackDecoder().decode(unhex("ffffffffff7f"), f));     // an integer past 2^32
    CHECK_FALSE(HpackDecoder().decode(unhex("3fffffff0f"), f));       // a table larger than any peer asks for
    CHECK_FALSE(HpackDecoder().decode(unhex("0083ffffff0161"), f));   // Huffman with EOS inside
  }
  SUBCASE("a block that decodes past kMaxList is cut, not refused: the table stays right for the next") {
    // (a table of 1 MiB first, so the entry is kept)
    HpackDecoder big;
    Fields f;
    bool cut = false;
    std::string block = unhex("3fe1ff3f") + std::string(1, 0x40) + literal("x", std::string(60000, 'a')).substr(1);
    for (int i = 0; i < 8; ++i) block += char(0xbe);
    REQUIRE(big.decode(block, f, &cut));
    CHECK(cut);
    CHECK(f.size() == 4);  // 4 x (1 + 60000 + 32) fit in 256 KiB, a fifth does not
    f.clear();
    REQUIRE(big.decode(unhex("be"), f, &cut));
    CHECK_FALSE(cut);
    REQUIRE(f.size() == 1);
    CHECK(f[0].second.size() == 60000);
    // Tiny fields count 32 bytes each (RFC 7541 4.1): 64 KiB of one-byte
    // indexed fields ("age") is no 64k headers.
    HpackDecoder tiny;
    f.clear();
    REQUIRE(tiny.decode(std::string(65536, char(0x95)), f, &cut));
    CHECK(cut);
    CHECK(f.size() == HpackDecoder::kMaxList / (3 + 32));
  }
}

TEST_CASE("http2: a client's requests and a server's answers, split at every size, multiplexed, each with its chunks") {
  std::string body1 = R"({"model":"m","messages":[]})", body3 = std::string(40000, 'b');
  std::string client = kPreface + frame(kSettings, 0, 0, "") +
                       frame(kHeaders, kEndHeaders, 1,
                             literal(":method", "POST") + literal(":path", "/v1/messages") +
                                 literal(":authority", "api.example.com") + literal("Content-Type", "application/json")) +
                       frame(kHeaders, kEndHeaders, 3, literal(":method", "POST") + literal(":path", "/v1/responses")) +
                       frame(kData, 0, 1, body1.substr(0, 10)) +
                       frame(kData, kPadded, 3, std::string(1, char(5)) + body3.substr(0, 16000) + std::string(5, '\0')) +
                       frame(kData, kEndStream, 1, body1.substr(10)) + frame(kData, 0, 3, body3.substr(16000)) +
                       frame(kData, kEndStream, 3, "");
  for (size_t step : {size_t(1), size_t(7), size_t(9), size_t(100), size_t(4096), client.size()}) {
    INFO("step " << step);
    Http2Stream s(true);
    auto out = feed_all(s, client, step);
    REQUIRE(out.size() == 2);
    CHECK(out[0].request);
    CHECK(out[0].stream == 1);
    CHECK(out[0].method == "POST");
    CHECK(out[0].target == "/v1/messages");
    CHECK(out[0].header("host") == "api.example.com");      // :authority
    CHECK(out[0].header("content-type") == "application/json");  // names in lower case
    CHECK(out[0].body == body1);
    CHECK(out[0].problem.empty());
    CHECK(out[1].stream == 3);
    CHECK(out[1].target == "/v1/responses");
    CHECK(out[1].body == body3);  // padding taken off
    CHECK(out[1].problem.empty());
    CHECK(!out[0].seqs.empty());
    CHECK(out[0].seqs.front() == 100 + int64_t((kPreface.size() + 9) / step));  // its HEADERS frame's first chunk
    CHECK_FALSE(s.lost());
  }
  // The server's side: an interim 100, then the final head in two
  // fragments (HEADERS + CONTINUATION), then a body, and one answered in trailers.
  std::string server = frame(kSettings, 0, 0, "") + frame(kHeaders, kEndHeaders, 1, literal(":status", "100")) +
                       frame(kHeaders, 0, 1, literal(":status", "200")) +
                       frame(kContinuation, kEndHeaders, 1, literal("content-type", "text/event-stream")) +
                       frame(kHeaders, kEndHeaders | kEndStream, 3, literal(":status", "404")) +
                       frame(kData, 0, 1, "data: 1\n\n") + frame(kHeaders, kEndHeaders | kEndStream, 1, literal("x-trailer", "t"));
  for (size_t step : {size_t(1), size_t(5), server.size()}) {
    Http2Stream s(false);
    auto out = feed_all(s, server, step);
    REQUIRE(out.size() == 2);
    CHECK(out[0].stream == 3);
    CHECK(out[0].status == 404);
    CHECK(out[1].stream == 1);
    CHECK(out[1].status == 200);
    CHECK(out[1].header("content-type") == "text/event-stream");
    CHECK(out[1].header("x-trailer").empty());
    CHECK(out[1].body == "data: 1\n\n");
  }
}

TEST_CASE("http2: resets, gaps, cuts and hostile frames are said on the message, never guessed through") {
  std::string head = frame(kHeaders, kEndHeaders, 1, literal(":status", "200"));
  SUBCASE("a reset stream comes out with the reset said") {
    Http2Stream s(false);
    auto out = feed_all(s, head + frame(kData, 0, 1, "part") + frame(kRst, 0, 1, std::string("\0\0\0\x08", 4)), 3);
    REQUIRE(out.size() == 1);
    CHECK(out[0].body == "part");
    CHECK(out[0].problem == "the stream was reset (error 8)");
  }
  SUBCASE("a gap inside a DATA frame is said; the stream goes on") {
    std::string bytes = head + frame(kData, 0, 1, "0123456789") + frame(kData, kEndStream, 1, "end");
    Http2Stream s(false);
    std::vector<HttpMessage> out;
    size_t cut = head.size() + 9 + 2;
    s.feed(0, cut, bytes.substr(0, cut), 1, 0, out);
    s.feed(cut + 5, bytes.size() - cut - 5, bytes.substr(cut + 5), 2, 0, out);  // 5 body bytes never recorded
    REQUIRE(out.size() == 1);
    CHECK(out[0].body == "01789end");
    CHECK(out[0].problem == "bytes of the body are missing from the record");
    CHECK_FALSE(s.lost());
  }
  SUBCASE("a gap where a header block was loses the connection; open messages come out cut") {
    std::string bytes = head + frame(kData, 0, 1, "x") + frame(kHeaders, kEndHeaders, 3, literal(":status", "200"));
    Http2Stream s(false);
    std::vector<HttpMessage> out;
    size_t cut = head.size() + 10 + 3;
    s.feed(0, cut, bytes.substr(0, cut), 1, 0, out);
    s.feed(cut + 4, bytes.size() - cut - 4, bytes.substr(cut + 4), 2, 0, out);
    CHECK(s.lost());
    REQUIRE(out.size() == 1);
    CHECK(out[0].problem == "bytes of the connection are missing from the record");
  }
  SUBCASE("a connection joined after its start, or not HTTP/2, is not followed") {
    Http2Stream late(false), http1(true);
    std::vector<HttpMessage> out;
    late.feed(100, head.size(), head, 1, 0, out);
    http1.feed(0, 18, "POST / HTTP/1.1\r\n\r\n", 1, 0, out);
    CHECK(late.lost());
    CHECK(http1.lost());
    CHECK(out.empty());
  }
  SUBCASE("the messages open at the end come out cut short") {
    Http2Stream s(false);
    auto out = feed_all(s, head + frame(kData, 0, 1, "half"), 4);
    CHECK(out.empty());
    s.take_open(out);
    REQUIRE(out.size() == 1);
    CHECK(out[0].body == "half");
    CHECK(out[0].problem == "the message was cut short");
  }
  SUBCASE("hostile: header blocks too large, interrupted, or not HPACK; padding longer than its frame") {
    for (const std::string& bytes :
         {frame(kHeaders, kEndHeaders, 1, std::string(70000, 'a')),
          frame(kHeaders, 0, 1, literal(":status", "200")) + frame(kData, 0, 1, "x"),
          frame(kHeaders, kEndHeaders, 1, "\xff"),
          head + frame(kData, kPadded, 1, std::string(1, char(200)) + "short")}) {
      Http2Stream s(false);
      auto out = feed_all(s, bytes, 1000);
      CHECK(s.lost());
    }
  }
  SUBCASE("a CONTINUATION with no block open, or a stream the client opens twice, loses the connection") {
    Http2Stream stray(false), twice(true);
    auto out = feed_all(stray, head + frame(kContinuation, kEndHeaders, 1, literal("x", "y")), 1000);
    CHECK(stray.lost());
    std::string request = frame(kHeaders, kEndHeaders | kEndStream, 3, literal(":method", "POST") + literal(":path", "/a"));
    out = feed_all(twice, kPreface + request + request, 1000);
    CHECK(twice.lost());
    REQUIRE(out.size() == 1);  // the first one
    CHECK(out[0].target == "/a");
  }
  SUBCASE("a message keeps at most kMaxHeaders fields") {
    Http2Stream s(false);
    std::string fields = literal(":status", "200");
    for (int i = 0; i < 300; ++i) fields += literal("x-" + std::to_string(i), "v");
    auto out = feed_all(s, frame(kHeaders, kEndHeaders | kEndStream, 1, fields), 100000);
    REQUIRE(out.size() == 1);
    CHECK(out[0].headers.size() == Http2Stream::kMaxHeaders);
  }
  SUBCASE("bounds: streams open at once, and the body bytes they hold together") {
    Http2Stream s(false);
    std::string bytes;
    for (uint32_t id = 1; id <= 2 * Http2Stream::kMaxStreams + 1; id += 2)
      bytes += frame(kHeaders, kEndHeaders, id, literal(":status", "200"));
    auto out = feed_all(s, bytes, bytes.size());
    REQUIRE(out.size() == 1);  // the oldest was cut to make room
    CHECK(out[0].stream == 1);
    CHECK(out[0].problem.find("streams were open at once") != std::string::npos);
    Http2Stream t(false);
    std::string big(16000, 'z'), many = frame(kHeaders, kEndHeaders, 1, literal(":status", "200"));
    for (int i = 0; i < 1100; ++i) many += frame(kData, 0, 1, big);  // 17.6 MB on one stream
    many += frame(kData, kEndStream, 1, "");
    out = feed_all(t, many, 1 << 20);
    REQUIRE(out.size() == 1);
    CHECK(out[0].body.size() == Http2Stream::kMaxBodies);
    CHECK(out[0].problem.find("MiB open at once") != std::string::npos);
  }
}
