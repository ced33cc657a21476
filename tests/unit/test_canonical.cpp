// The one-pass canonical checker agrees with a full JSON parser's canonical
// round trip, on entries the recorder writes and on near misses.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "events/entry.h"
#include "ledger/canonical.h"

using namespace flightrec;
using flightrec::ledger::check_canonical;

namespace {

bool reference_canonical(const std::string& s) {
  auto j = nlohmann::json::parse(s, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  std::function<bool(const nlohmann::json&)> ok = [&](const nlohmann::json& v) {
    if (v.is_number_float() || v.is_boolean() || v.is_null()) return false;
    if (v.is_structured())
      for (const auto& x : v)
        if (!ok(x)) return false;
    return true;
  };
  try {
    return ok(j) && j.dump() == s;
  } catch (...) {
    return false;
  }
}

}  // namespace

TEST_CASE("agrees with the reference on generated entries and their mutations") {
  std::mt19937 rng(6962);
  const std::string alphabet = std::string("ab\"\\/\n\x01\x7f") + "\xc3\xa9" + "{}[],:0-9 e.";
  int checked = 0;
  for (int round = 0; round < 3000; ++round) {
    events::Entry e;
    e.set("type", "syscall");
    e.set("seq", int64_t(rng() % 100000));
    e.set("args", std::vector<int64_t>{-1, int64_t(rng()), 0});
    std::string text;
    for (int k = 0; k < int(rng() % 12); ++k) text += alphabet[rng() % alphabet.size()];
    e.set_bytes("path", text);
    e.set("big", uint64_t(18446744073709551615ull));
    std::string body = e.canonical();
    REQUIRE(check_canonical(body, nullptr).empty());
    REQUIRE(reference_canonical(body));
    // Flip, drop or insert one byte: both must agree on every mutation.
    std::string m = body;
    size_t at = rng() % m.size();
    switch (rng() % 3) {
      case 0: m[at] = alphabet[rng() % alphabet.size()]; break;
      case 1: m.erase(at, 1); break;
      case 2: m.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
    }
    INFO(m);
    CHECK(check_canonical(m, nullptr).empty() == reference_canonical(m));
    ++checked;
  }
  CHECK(checked == 3000);
}

TEST_CASE("hands back the top-level members") {
  ledger::TopLevel top;
  REQUIRE(check_canonical(R"({"a":[1,2],"n":-5,"s":"x\ny","type":"genesis"})", &top).empty());
  CHECK(top.integer("n") == -5);
  CHECK(top.string("s") == "x\ny");
  CHECK(top.string("type") == "genesis");
  CHECK(top.raw("a") == "[1,2]");
  CHECK_FALSE(top.integer("missing"));
  CHECK_FALSE(check_canonical(R"({"a":1} )", nullptr).empty());
  CHECK_FALSE(check_canonical(R"({"a":01})", nullptr).empty());
  CHECK_FALSE(check_canonical(R"({"a":-0})", nullptr).empty());
  CHECK_FALSE(check_canonical(R"({"a":18446744073709551616})", nullptr).empty());
  CHECK_FALSE(check_canonical(R"({"a":true})", nullptr).empty());
}

TEST_CASE("members are found by key whatever the keys' escapes") {
  // Raw key text sorts otherwise than the keys it encodes when a key has
  // an escape: lookups must not trust the raw order then.
  ledger::TopLevel top;
  std::string body = "{\"sha2\\u0001\":\"x\",\"sha256_before\":\"abc\"}";
  REQUIRE(check_canonical(body, &top).empty());
  CHECK(top.string("sha256_before") == "abc");
  CHECK(top.escaped_keys);
  REQUIRE(check_canonical(R"({"a":"\u0001","b":2})", &top).empty());
  CHECK_FALSE(top.escaped_keys);  // the value's escape is not the key's
  CHECK(top.integer("b") == 2);
}
