// The plan compiler (session/plan.h): what the kernel is given and what the
// genesis entry says follow from the settings and the policy, and input a
// user could get wrong is refused with the option's name, before anything
// is created.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "probe/features.h"
#include "session/plan.h"

using flightrec::session::compile;
using flightrec::session::PlanError;
using flightrec::session::PolicyChoice;
using flightrec::session::Settings;

namespace {

// The PlanError message for s, or "" when it compiles.
std::string refusal(const Settings& s) {
  try {
    compile(s);
    return "";
  } catch (const PlanError& e) {
    return e.what();
  }
}

std::string refusal(const Settings& s, const PolicyChoice& c) {
  try {
    compile(s, c);
    return "";
  } catch (const PlanError& e) {
    return e.what();
  }
}

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

TEST_CASE("plan: the defaults reach the kernel and the genesis entry") {
  auto plan = compile(Settings{});
  CHECK(plan.capture.ring_bytes == (8u << 20));
  CHECK(plan.capture.tls);
  CHECK(plan.capture.tls_chunk == 16384);
  CHECK(plan.capture.tls_cap == 262144);
  CHECK(plan.capture.hidden.empty());
  CHECK(plan.capture.exec.empty());
  CHECK_FALSE(plan.capture.require_lsm);
  CHECK(plan.capture.egress.empty());
  CHECK(plan.capture.highwater_bytes == (4u << 20));  // backpressure pauses at half full
  CHECK(plan.capture.entry_times);
  CHECK(plan.capture.session_cgroups.empty());  // the session's own, added when it exists
  CHECK(plan.on_loss == "backpressure");
  CHECK(plan.meta.on_loss == "backpressure");
  CHECK(plan.meta.ring_bytes == (8u << 20));
  CHECK(plan.meta.tls);
  CHECK(plan.meta.tls_redact);
  CHECK(has(plan.meta.tls_redact_headers, "authorization"));
  CHECK_FALSE(plan.policy.has_value());
  CHECK_FALSE(plan.sandboxed);
}

TEST_CASE("plan: settings are carried through") {
  Settings s;
  s.ring_bytes = 1u << 20;
  s.on_loss = "continue";
  s.checkpoint_entries = 7;
  s.checkpoint_ms = 0;
  s.tls = false;
  s.entry_times = false;
  s.tls_chunk = 4096;
  s.tls_cap = 4096 * 16;
  s.tls_redact_headers = {"X-Team-Secret", "AUTHORIZATION"};
  auto plan = compile(s);
  CHECK(plan.capture.ring_bytes == (1u << 20));
  CHECK(plan.capture.highwater_bytes == 0);  // continue: nothing to wake for
  CHECK_FALSE(plan.capture.entry_times);
  CHECK(plan.meta.ring_bytes == (1u << 20));
  CHECK(plan.on_loss == "continue");
  CHECK(plan.meta.checkpoint_entries == 7);
  CHECK(plan.meta.checkpoint_ms == 0);
  CHECK_FALSE(plan.capture.tls);
  CHECK_FALSE(plan.meta.tls);
  CHECK(plan.capture.tls_cap == 65536);
  CHECK(plan.meta.tls_chunk == 4096);
  // Lower case, as compared; a default one is not listed twice.
  CHECK(has(plan.meta.tls_redact_headers, "x-team-secret"));
  CHECK(std::count(plan.meta.tls_redact_headers.begin(), plan.meta.tls_redact_headers.end(), "authorization") == 1);
}

TEST_CASE("plan: bad settings are refused with the option's name") {
  auto refused = [](auto change, const char* option) {
    Settings s;
    change(s);
    auto why = refusal(s);
    CAPTURE(option);
    CHECK(why.find(option) != std::string::npos);
  };
  refused([](Settings& s) { s.ring_bytes = 3000; }, "--ring-size");
  refused([](Settings& s) { s.ring_bytes = 2u << 30; }, "--ring-size");
  refused([](Settings& s) { s.on_loss = "ignore"; }, "--on-loss");
  refused([](Settings& s) { s.checkpoint_entries = 0; }, "--checkpoint-entries");
  refused([](Settings& s) { s.tls_chunk = 0; }, "--tls-chunk");
  refused([](Settings& s) { s.tls_chunk = 16385; }, "--tls-chunk");
  refused([](Settings& s) { s.tls_cap = s.tls_chunk - 1; }, "--tls-cap");
  refused([](Settings& s) { s.tls_cap = s.tls_chunk * 17; }, "--tls-cap");
  refused([](Settings& s) { s.tls_redact_headers = {"Bad Header"}; }, "--tls-redact-header");
  refused([](Settings& s) { s.tls_redact_headers = {""}; }, "--tls-redact-header");
  for (const std::string& bad : std::vector<std::string>{"relative/path", "/a/../b", "/a//b", "/a/./b", "/a/..", "", "/\xff\xfe",
                          "/" + std::string(300, 'x')}) {
    CAPTURE(bad);
    refused([&](Settings& s) { s.deny_paths = {bad}; }, "--deny-path");
    refused([&](Settings& s) { s.allow_exec = {bad}; }, "--allow-exec");
  }
  refused([](Settings& s) { s.deny_paths.assign(65, "/srv"); }, "--deny-path");
  CHECK(refusal(Settings{}).empty());
  Settings freeze;
  freeze.on_loss = "freeze";  // backpressure's old name
  CHECK(refusal(freeze).empty());
}

TEST_CASE("plan: path rules go to BPF-LSM, or the plan is refused where it cannot load") {
  Settings s;
  s.deny_paths = {"/srv/secret/"};
  s.allow_exec = {"/usr"};
  if (!flightrec::probe::bpf_lsm_available()) {
    try {
      compile(s);
      FAIL("path rules compiled on a kernel without BPF-LSM");
    } catch (const PlanError&) {
      FAIL("a kernel fact reported as a usage error");
    } catch (const flightrec::Error& e) {
      CHECK(std::string(e.what()).find("BPF-LSM") != std::string::npos);
    }
    return;
  }
  auto plan = compile(s);
  CHECK(plan.capture.require_lsm);
  REQUIRE_FALSE(plan.capture.hidden.match.empty());
  CHECK(plan.capture.hidden.match.front().first == "/srv/secret");  // the trailing slash is gone
  CHECK(plan.capture.hidden.listed == std::vector<std::string>{"/srv/secret"});
  CHECK(plan.capture.exec.listed == std::vector<std::string>{"/usr"});
}

TEST_CASE("plan: a run's policy, with its command-line overrides") {
  SUBCASE("observe: nothing confined") {
    auto plan = compile(Settings{}, PolicyChoice{"observe", {}, {}, false, {}});
    REQUIRE(plan.policy);
    CHECK(plan.policy->name == "observe");
    CHECK_FALSE(plan.sandboxed);
    CHECK(plan.capture.egress.empty());
  }
  SUBCASE("--entry-times off: refused where a seccomp filter would make stops look like failures") {
    Settings off;
    off.entry_times = false;
    CHECK(refusal(off, PolicyChoice{"agent", {}, {}, false, {}}) ==
          "--entry-times off cannot record a sandbox with a seccomp filter (policy agent): without the entry "
          "trace, a call the filter stopped cannot be told from one that failed");
    CHECK(refusal(off, PolicyChoice{"strict", {}, {}, false, {}}).find("(policy strict)") != std::string::npos);
    CHECK(refusal(off, PolicyChoice{"observe", {}, {}, false, {}}).empty());
    CHECK(refusal(off, PolicyChoice{"agent", {}, {}, true, {}}).empty());  // shadow: no sandbox, the judge decides
    CHECK_FALSE(compile(off, PolicyChoice{"observe", {}, {}, false, {}}).capture.entry_times);
  }
  SUBCASE("agent with --allow: the allowlist is what the egress programs get") {
    auto plan = compile(Settings{}, PolicyChoice{"agent", {"10.1.2.3:443", "192.168.0.0/16:*"}, {"pids=64"}, false, {}});
    REQUIRE(plan.policy);
    CHECK(plan.sandboxed);
    CHECK(plan.policy->limits.pids == 64);
    REQUIRE(plan.capture.egress.size() == 2);
    const auto& first = plan.capture.egress[0];
    CHECK(first.family == AF_INET);
    CHECK(first.port == 443);
    CHECK(first.prefix == 32);
    in_addr want{};
    inet_pton(AF_INET, "10.1.2.3", &want);
    CHECK(std::memcmp(first.addr, &want, 4) == 0);
    CHECK(plan.capture.egress[1].prefix == 16);
    CHECK(plan.capture.egress[1].port == 0);
  }
  SUBCASE("agent in shadow mode: no sandbox, nothing enforced by the egress programs") {
    auto plan = compile(Settings{}, PolicyChoice{"agent", {"10.1.2.3:443"}, {}, true, {}});
    CHECK_FALSE(plan.sandboxed);
    CHECK(plan.capture.egress.empty());
    CHECK(plan.policy->mode == flightrec::policy::Mode::Shadow);
  }
  SUBCASE("refused") {
    CHECK(refusal(Settings{}, PolicyChoice{"no-such-policy", {}, {}, false, {}}) != "");
    CHECK(refusal(Settings{}, PolicyChoice{"agent", {"not an endpoint"}, {}, false, {}}) != "");
    CHECK(refusal(Settings{}, PolicyChoice{"agent", {}, {"pids=lots"}, false, {}}) != "");
    Settings s;
    s.allow_exec = {"/usr"};
    CHECK(refusal(s, PolicyChoice{"agent", {}, {}, false, {}}).find("--allow-exec") != std::string::npos);
  }
}
