// flightrecd's control protocol as data (userspace/control/protocol.h):
// every message goes out and comes back whole, and what is not a message
// is refused with the field at fault named.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "control/protocol.h"

using namespace flightrec::control;
using nlohmann::json;

namespace {

// What parse refuses j with ("" when it takes it).
template <class Parse>
std::string refusal_of(Parse parse, const std::string& text) {
  try {
    parse(json::parse(text));
  } catch (const ProtocolError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("control protocol: every request goes out and comes back as it was") {
  SessionRequest s{"/sys/fs/cgroup/a b/\xff", 1u << 20, true, false};
  Request back = parse_request(json::parse(line_of(to_json(Request{s}))));
  REQUIRE(std::holds_alternative<SessionRequest>(back));
  const auto& got = std::get<SessionRequest>(back);
  // Not UTF-8: the wire carries it replaced, never refused.
  CHECK(got.cgroup == "/sys/fs/cgroup/a b/\xef\xbf\xbd");
  CHECK(got.ring_bytes == 1u << 20);
  CHECK(got.tls);
  CHECK_FALSE(got.entry_times);
  CHECK(std::holds_alternative<StatusRequest>(parse_request(to_json(Request{StatusRequest{}}))));
  CHECK(std::get<ForwardRequest>(parse_request(to_json(Request{ForwardRequest{77}}))).session == 77);
  CHECK(std::get<AttachTlsRequest>(parse_run_request(to_json(RunRequest{AttachTlsRequest{"/lib/x.so"}}))).name ==
        "/lib/x.so");
  CHECK(std::holds_alternative<EndRequest>(parse_run_request(to_json(RunRequest{EndRequest{}}))));
  CHECK(std::holds_alternative<ProbesFileRequest>(parse_run_request(to_json(RunRequest{ProbesFileRequest{}}))));
  // What older clients leave out takes its default: TLS off, entry times on.
  auto minimal = std::get<SessionRequest>(parse_request(json::parse(R"({"request":"session","cgroup":"c","ring_bytes":65536})")));
  CHECK_FALSE(minimal.tls);
  CHECK(minimal.entry_times);
}

TEST_CASE("control protocol: a request that is not one is refused, naming the field") {
  CHECK(refusal_of(parse_request, "[1]").find("not a JSON object") != std::string::npos);
  CHECK(refusal_of(parse_request, "{}").find("names no request") != std::string::npos);
  CHECK(refusal_of(parse_request, R"({"request":5})").find("request is not a text") != std::string::npos);
  CHECK(refusal_of(parse_request, R"({"request":"reboot"})") == "unknown request (known: status, session, forward)");
  CHECK(refusal_of(parse_request, R"({"request":"session","ring_bytes":65536})") ==
        "the session request: cgroup is missing");
  CHECK(refusal_of(parse_request, R"({"request":"session","cgroup":"c","ring_bytes":-1})") ==
        "the session request: ring_bytes is not a whole number from 0 to 18446744073709551615");
  CHECK(refusal_of(parse_request, R"({"request":"session","cgroup":"c","ring_bytes":1.5})").find("ring_bytes") !=
        std::string::npos);
  CHECK(refusal_of(parse_request, R"({"request":"session","cgroup":"c","ring_bytes":65536,"tls":"yes"})") ==
        "the session request: tls is not true or false");
  CHECK(refusal_of(parse_request, R"({"request":"session","cgroup":"c","ring_bytes":65536,"uid":0})") ==
        "the session request: uid is not a field of this message");
  CHECK(refusal_of(parse_request, R"({"request":"session","cgroup":")" + std::string(5000, 'a') + R"(","ring_bytes":65536})")
            .find("cgroup is not a text of at most 4096 bytes") != std::string::npos);
  CHECK(refusal_of(parse_request, R"({"request":"forward","session":4294967296})").find("session") != std::string::npos);
  CHECK(refusal_of(parse_request, R"({"request":"status","x":1})").find("x is not a field") != std::string::npos);
  CHECK(refusal_of(parse_run_request, R"({"request":"attach_tls","name":["a"]})") ==
        "the attach_tls request: name is not a text of at most 4096 bytes");
  CHECK(refusal_of(parse_run_request, R"({"request":"status"})") ==
        "unknown request (known on a run's connection: attach_tls, probes_file, end)");
}

TEST_CASE("control protocol: answers come back whole, and a daemon's wrong types are refused") {
  SessionAnswer a;
  a.session = 9;
  a.ring_bytes = 1u << 16;
  a.program_misses = 4;
  a.traits = {{"tp_btf/sys_exit", "tp_btf/sys_enter"}, {"lsm/file_open"}, true, false, true};
  a.tls_chunk = 16384;
  a.tls_cap = 1u << 18;
  a.tls_errors = {"libssl: no symbols"};
  a.ship = {"violation", "session_end"};
  SessionAnswer b = parse_session_answer(json::parse(line_of(to_json(a))));
  CHECK(b.session == 9);
  CHECK(b.ring_bytes == 1u << 16);
  CHECK(b.program_misses == 4);
  CHECK(b.traits.attached == a.traits.attached);
  CHECK(b.traits.refused == a.traits.refused);
  CHECK(b.traits.path_rules);
  CHECK_FALSE(b.traits.unix_inbound);
  CHECK(b.traits.entry_times);
  CHECK(b.tls_chunk == 16384);
  CHECK(b.tls_cap == 1u << 18);
  CHECK(b.tls_errors == a.tls_errors);
  CHECK(b.ship == a.ship);
  // No outputs: no "ship" key, as the daemon has always sent it.
  a.ship.clear();
  CHECK_FALSE(to_json(a).contains("ship"));
  CHECK(parse_session_answer(to_json(a)).ship.empty());

  json bad = to_json(a);
  bad["session"] = "9";
  CHECK(refusal_of(parse_session_answer, bad.dump()).find("session is not a whole number") != std::string::npos);
  bad = to_json(a);
  bad["traits"]["attached"] = {1, 2};
  CHECK(refusal_of(parse_session_answer, bad.dump()) ==
        "the session's traits: attached is not a text of at most 1048576 bytes");
  bad = to_json(a);
  bad.erase("traits");
  CHECK(refusal_of(parse_session_answer, bad.dump()).find("traits is missing") != std::string::npos);
  // A field a newer daemon adds is let be.
  bad = to_json(a);
  bad["something_new"] = true;
  CHECK(refusal_of(parse_session_answer, bad.dump()) == "");

  // The daemon's messages may be long (a path and a reason): an answer's
  // texts are bounded at 1 MiB, a request's at 4 KiB.
  std::string long_reason(100000, 'r');
  CHECK(parse_attach_tls_answer(to_json(AttachTlsAnswer{long_reason, false})).result == long_reason);
  CHECK(parse_end_answer(to_json(EndAnswer{12})).program_misses == 12);
  CHECK(refusal_of(parse_end_answer, "{}").find("program_misses is missing") != std::string::npos);
  AttachTlsAnswer t = parse_attach_tls_answer(to_json(AttachTlsAnswer{"no symbols", true}));
  CHECK(t.result == "no symbols");
  CHECK(t.tls_file);
  CHECK(t.live_since_ns == 0);
  CHECK(parse_attach_tls_answer(to_json(AttachTlsAnswer{"", true, 123456789012345})).live_since_ns == 123456789012345);
  CHECK(refusal_of(parse_attach_tls_answer, R"({"result":"","live_since_ns":-1})").find("live_since_ns") !=
        std::string::npos);
  CHECK(parse_probes_file_answer(to_json(ProbesFileAnswer{true})).probes);
  CHECK(parse_forward_answer(to_json(ForwardAnswer{true})).forward);
  CHECK(refusal_of(parse_forward_answer, R"({"forward":"yes"})").find("forward is not true or false") !=
        std::string::npos);
}

TEST_CASE("control protocol: the daemon's status comes back whole") {
  DaemonStatus s;
  s.flightrecd_version = "0.9";
  s.config = "/etc/flightrec/flightrecd.yaml";
  s.storage_dir = "/var/lib/flightrec";
  s.pid = 123;
  s.started_real_ns = 5;
  s.watch_rules = 2;
  s.ring_bytes = 1u << 23;
  s.ring_fill = 0.25;
  s.lost_total = 7;
  s.lost_per_cpu = {3, 4};
  s.records_after_seal = 1;
  s.not_recorded = 2;
  s.storage_bytes = 4096;
  s.storage_full = true;
  s.sessions.push_back({"/sys/fs/cgroup/pod", "pods", "lite", "/var/lib/flightrec/a.db", true, false, 6, 1000, 12.5, 3, 8192});
  s.runs.push_back({"/sys/fs/cgroup/run", 44, 9, true});
  s.outputs.push_back({"syslog", "siem", "connection refused", 10, 1, 2, 0, false});
  json j = to_json(s);
  DaemonStatus t = parse_status(json::parse(line_of(j)));
  CHECK(to_json(t) == j);
  CHECK(t.sessions.at(0).entries_per_second == 12.5);
  CHECK(t.sessions.at(0).mode == "lite");
  CHECK(t.runs.at(0).client_pid == 44);
  CHECK(t.outputs.at(0).last_error == "connection refused");
  j["ring_fill"] = "full";
  CHECK(refusal_of(parse_status, j.dump()) == "flightrecd's status: ring_fill is not a number");
  j = to_json(s);
  j["sessions"][0]["entries"] = "many";
  CHECK(refusal_of(parse_status, j.dump()) == "flightrecd's status: a session: entries is not a whole number");
}
