#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "events/entry.h"
#include "ledger/verify.h"

using flightrec::events::Entry;

TEST_CASE("canonical form sorts keys by bytes and has no whitespace") {
  Entry e;
  e.set("type", "exec");
  e.set("b", int64_t(-5));
  e.set("a", uint64_t(18446744073709551615ull));
  e.set("args", std::vector<int64_t>{1, -2, 3});
  e.set("Z", std::vector<std::string>{"x", "y"});
  CHECK(e.canonical() ==
        R"({"Z":["x","y"],"a":18446744073709551615,"args":[1,-2,3],"b":-5,"type":"exec"})");
}

TEST_CASE("canonical strings escape exactly as RFC 8785") {
  Entry e;
  e.set("s", std::string("q\"b\\s/\b\f\n\r\t\x01\x1f\x7f\xc3\xa9", 16));
  CHECK(e.canonical() == "{\"s\":\"q\\\"b\\\\s/\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\xc3\xa9\"}");
  // Our verifier's canonical check agrees with the writer.
  CHECK(flightrec::ledger::canonical_problem(e.canonical()).empty());
}

TEST_CASE("long strings escape like a JSON library, at every offset of the fast scan") {
  // Strings of 0-40 bytes put every escape at every position of the
  // eight-byte scan, and the scan's tail at every length.
  const std::string plain = "abcdefgh/ijklmnop\xc3\xa9qrstuvwxyz0123456789ABCDE";
  const std::string specials = std::string("\"\\\b\f\n\r\t\x01\x1f\x7f\x00", 11);
  for (size_t len = 0; len <= 40; ++len)
    for (size_t at = 0; at <= len; ++at)
      for (char special : specials) {
        std::string s = plain.substr(0, len);
        if (at < len) s[at] = special;
        if (!flightrec::is_valid_utf8(s)) continue;  // a cut through é
        Entry e;
        e.set("s", s);
        INFO("len " << len << " at " << at << " byte " << int(special));
        REQUIRE(e.canonical() == nlohmann::json({{"s", s}}).dump());
      }
}

TEST_CASE("the key order of one entry never leaks into the next of the same size") {
  // Entries of equal field counts reuse the last order found for that count
  // only after checking it; different keys, a reversed insertion order and
  // a duplicate must each still come out right.
  auto make = [](std::vector<std::string_view> keys) {
    Entry e;
    int64_t v = 0;
    for (auto k : keys) e.set(k, v++);
    return e;
  };
  CHECK(make({"c", "b", "a"}).canonical() == R"({"a":2,"b":1,"c":0})");
  CHECK(make({"c", "b", "a"}).canonical() == R"({"a":2,"b":1,"c":0})");
  CHECK(make({"a", "b", "c"}).canonical() == R"({"a":0,"b":1,"c":2})");
  CHECK(make({"z", "y", "x"}).canonical() == R"({"x":2,"y":1,"z":0})");
  CHECK_THROWS_AS(make({"z", "z", "x"}).canonical(), std::logic_error);
  CHECK_THROWS_AS(make({"x", "y", "y"}).canonical(), std::logic_error);
  CHECK(make({"x", "y", "z"}).canonical() == R"({"x":0,"y":1,"z":2})");
  // A failed entry leaves the output as it was.
  std::string out = "kept";
  CHECK_THROWS_AS(make({"q", "q"}).append_canonical(out), std::logic_error);
  CHECK(out == "kept");
}

TEST_CASE("bytes that are not UTF-8 go to a _b64 field") {
  Entry e;
  e.set_bytes("path", std::string("/tmp/\xff\xfe", 7));
  e.set_bytes("ok", "/tmp/é");
  CHECK(e.canonical() == R"({"ok":"/tmp/é","path_b64":"L3RtcC///g=="})");
}

TEST_CASE("duplicate keys are a bug, not a record") {
  Entry e;
  e.set("a", 1);
  e.set("a", 2);
  CHECK_THROWS_AS(e.canonical(), std::logic_error);
}

TEST_CASE("a key that JSON would need to escape is a bug, not a record") {
  for (std::string key : {std::string("a\"b"), std::string("a\\b"), std::string("tab\there"), std::string("nul\0x", 5),
                          std::string("caf\xc3\xa9"), std::string("\x7f\x80")}) {
    Entry e;
    e.set("fine", 1);
    e.set(e.key(key, ""), 2);
    std::string out = "kept";
    CHECK_THROWS_AS(e.append_canonical(out), std::logic_error);
    CHECK(out == "kept");
  }
  Entry ok;
  ok.set(ok.key("~ all printable ASCII: !#$%&'()*+,-./09:;<=>?@AZ[]^_`az{|}", ""), 1);
  CHECK(ok.canonical() == R"({"~ all printable ASCII: !#$%&'()*+,-./09:;<=>?@AZ[]^_`az{|}":1})");
}

TEST_CASE("UTF-8 validation rejects overlong, surrogate and truncated forms") {
  using flightrec::is_valid_utf8;
  CHECK(is_valid_utf8("plain"));
  CHECK(is_valid_utf8("\xe2\x82\xac"));           // euro sign
  CHECK(is_valid_utf8("\xf0\x9f\x98\x80"));       // emoji
  CHECK_FALSE(is_valid_utf8("\xc0\xaf"));         // overlong '/'
  CHECK_FALSE(is_valid_utf8("\xed\xa0\x80"));     // surrogate
  CHECK_FALSE(is_valid_utf8("\xe2\x82"));         // truncated
  CHECK_FALSE(is_valid_utf8("\xf4\x90\x80\x80")); // > U+10FFFF
  // After ASCII runs of every length around the eight-byte steps.
  for (size_t ascii = 0; ascii <= 17; ++ascii) {
    std::string run(ascii, 'a');
    CHECK(is_valid_utf8(run));
    CHECK(is_valid_utf8(run + "\xe2\x82\xac" + run));
    CHECK_FALSE(is_valid_utf8(run + "\xc0\xaf"));
    CHECK_FALSE(is_valid_utf8(run + "\xe2\x82"));
    CHECK_FALSE(is_valid_utf8(run + "\xff" + run));
  }
}

TEST_CASE("UTF-8 validation judges every byte of long ASCII runs, at every offset") {
  // The check skips ASCII eight bytes at a time: a bad byte or a sequence
  // that crosses a word boundary is found wherever it sits.
  using flightrec::is_valid_utf8;
  const std::string ascii(40, 'a');
  for (size_t at = 0; at <= ascii.size(); ++at) {
    CAPTURE(at);
    std::string s = ascii;
    CHECK(is_valid_utf8(s.insert(at, "\xe2\x82\xac")));           // euro sign
    s = ascii;
    CHECK(is_valid_utf8(s.insert(at, "\xf0\x9f\x98\x80")));       // emoji
    s = ascii;
    CHECK_FALSE(is_valid_utf8(s.insert(at, "\xff")));
    s = ascii;
    CHECK_FALSE(is_valid_utf8(s.insert(at, "\xc0\xaf")));         // overlong '/'
    s = ascii;
    CHECK_FALSE(is_valid_utf8(s.insert(at, "\xed\xa0\x80")));     // surrogate
    CHECK_FALSE(is_valid_utf8(ascii.substr(0, at) + "\xe2\x82"));  // truncated at the end
  }
}

TEST_CASE("canonical order of keys that share a prefix") {
  Entry e;
  for (const char* k : {"path_truncated", "path", "pa", "path_b64", "p", "pid", "ppid", "path_error"})
    e.set(k, 1);
  CHECK(e.canonical() ==
        R"({"p":1,"pa":1,"path":1,"path_b64":1,"path_error":1,"path_truncated":1,"pid":1,"ppid":1})");
  // Appended after what the buffer already holds, as the recorder reuses it.
  std::string out = "x";
  e.append_canonical(out);
  CHECK(out == "x" + e.canonical());
}

TEST_CASE("base64 matches RFC 4648 test vectors") {
  using flightrec::base64_encode;
  CHECK(base64_encode("") == "");
  CHECK(base64_encode("f") == "Zg==");
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("foo") == "Zm9v");
  CHECK(base64_encode("foob") == "Zm9vYg==");
  CHECK(base64_encode("fooba") == "Zm9vYmE=");
  CHECK(base64_encode("foobar") == "Zm9vYmFy");
}

TEST_CASE("base64 decodes what it encodes, and refuses what is not canonical base64") {
  using flightrec::base64_decode;
  using flightrec::base64_encode;
  CHECK(base64_decode("Zm9vYmFy") == "foobar");
  CHECK(base64_decode("Zm9vYg==") == "foob");
  CHECK(base64_decode("Zm9vYmE=") == "fooba");
  CHECK(base64_decode("") == "");
  std::string bytes;
  for (int n = 0; n < 600; ++n) {
    CAPTURE(n);
    REQUIRE(base64_decode(base64_encode(bytes)) == bytes);
    bytes += char((n * 131 + 7) & 0xff);
  }
  for (const char* bad : {"Zg=", "x=x=", "Zh==", "Zm9=", "Zm9v!A==", "Zm9\nYmFy", "====", "Zm=v", "Zg==Zg=="})
    CHECK_MESSAGE(!base64_decode(bad), bad);
}

TEST_CASE("canonical check rejects non-canonical bodies") {
  using flightrec::ledger::canonical_problem;
  CHECK(canonical_problem(R"({"a":1,"b":2})").empty());
  CHECK_FALSE(canonical_problem(R"({"b":2,"a":1})").empty());
  CHECK_FALSE(canonical_problem(R"({"a": 1})").empty());
  CHECK_FALSE(canonical_problem(R"({"a":1.5})").empty());
  CHECK_FALSE(canonical_problem(R"({"a":1,"a":1})").empty());
  CHECK_FALSE(canonical_problem(R"([1])").empty());
  CHECK_FALSE(canonical_problem("{\"a\":\"\\u0041\"}").empty());
}
