// Fleet shipping without a remote engine: RFC 5424 messages byte for byte,
// which entries an output takes, the outputs section of flightrecd.yaml,
// the check of a handed run's forwarded entries (hostile lines included),
// and a syslog output against a real TCP listener of this test: octet
// counting, a server that is not there yet, a full queue.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <fstream>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "daemon/config.h"
#include "ledger/hash.h"
#include "ledger/bundle.h"
#include "ledger/keys.h"
#include "ledger/store.h"
#include "ledger/writer.h"
#include "files.h"
#include "ship/collect.h"
#include "ship/forward.h"
#include "ship/spool.h"
#include "ship/hub.h"
#include "ship/syslog.h"

using namespace flightrec;

namespace {

// A canonical violation entry (keys sorted, as docs/FORMAT.md §1 has them).
std::string violation(int64_t seq, const std::string& level, const std::string& detail = "denied \\\"x\\\"") {
  return R"({"action":"denied","comm":"flightrec","detail":")" + detail + R"(","level":")" + level +
         R"(","pid":10,"rule_id":"filesystem.hidden","seq":)" + std::to_string(seq) +
         R"(,"session":1,"subject_pid":42,"ts_real_ns":1764858874123456789,"type":"violation"})";
}
std::string plain(int64_t seq, const std::string& type) {
  return R"({"comm":"sh","pid":7,"seq":)" + std::to_string(seq) + R"(,"session":1,"ts_real_ns":5,"type":")" + type + R"("})";
}

// Views: type and body must outlive the entry.
ledger::SealedEntry sealed(int64_t seq, std::string_view type, const std::string& body) {
  return {seq, type, body, ledger::leaf_hash(body)};
}

const std::string kOrigin = "flightrec/vm/0123456789abcdef0123456789abcdef";

// An output that keeps what it is offered: what the hub hands on, seen from behind it.
struct Kept : ship::Output {
  ship::EntryFilter f;
  std::mutex mu;
  std::vector<std::string> bodies;
  std::vector<uint64_t> checkpoints;
  void offer(const std::string&, int64_t, std::span<const ledger::SealedEntry> entries,
             std::span<const ledger::SealedCheckpoint> cps) override {
    std::lock_guard lock(mu);
    for (const auto& e : entries) bodies.emplace_back(e.body);
    for (const auto& c : cps) checkpoints.push_back(c.tree_size);
  }
  const ship::EntryFilter& filter() const override { return f; }
  ship::OutputStats stats() const override { return {}; }
  void close(std::chrono::milliseconds) override {}
};

std::string config_error(const std::string& yaml) {
  try {
    daemon::parse_config(yaml, "t.yaml");
  } catch (const daemon::ConfigError& e) {
    return e.what();
  }
  return "";
}
const std::string kBase = "version: 1\nstorage:\n  dir: /r\noutputs:\n  syslog:\n";  // lines 1-5

// A TCP listener on 127.0.0.1; frames() reads octet-counted messages.
struct SyslogListener {
  int fd = -1, conn = -1;
  uint16_t port = 0;
  std::string in;
  explicit SyslogListener(uint16_t at = 0) {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(at);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    REQUIRE(listen(fd, 4) == 0);
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~SyslogListener() {
    if (conn >= 0) close(conn);
    close(fd);
  }
  // Messages until `count` have come (or 20 s pass: then fewer).
  std::vector<std::string> frames(size_t count) {
    std::vector<std::string> out;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (out.size() < count && std::chrono::steady_clock::now() < until) {
      if (conn < 0) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 100) == 1) conn = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        continue;
      }
      pollfd p{conn, POLLIN, 0};
      if (poll(&p, 1, 100) != 1) continue;
      char buf[65536];
      ssize_t n = read(conn, buf, sizeof(buf));
      if (n <= 0) break;
      in.append(buf, size_t(n));
      for (;;) {  // RFC 6587 octet counting: MSG-LEN SP SYSLOG-MSG
        size_t sp = in.find(' ');
        if (sp == std::string::npos) break;
        size_t len = std::stoul(in.substr(0, sp));
        if (in.size() < sp + 1 + len) break;
        out.push_back(in.substr(sp + 1, len));
        in.erase(0, sp + 1 + len);
      }
    }
    return out;
  }
};

ship::SyslogSettings settings_for(uint16_t port) {
  ship::SyslogSettings s;
  s.name = "t";
  s.host = "127.0.0.1";
  s.port = port;
  s.address = "127.0.0.1:" + std::to_string(port);
  s.hostname = "host-a";
  return s;
}

}  // namespace

TEST_CASE("syslog: an entry is one RFC 5424 message whose MSG is the entry and whose leaf proves it") {
  ship::SyslogSettings s;
  std::string body = violation(5, "ALERT");
  std::string m = ship::syslog_message(s, "my host", kOrigin, 1, sealed(5, "violation", body));
  std::string leaf = ledger::to_hex(ledger::leaf_hash(body));
  // authpriv (10) * 8 + alert (1) = 81; PROCID is the violation's subject.
  CHECK(m == "<81>1 2025-12-04T14:34:34.123456Z my_host flightrec 42 violation [flightrec@32473 origin=\"" + kOrigin +
                 "\" session=\"1\" seq=\"5\" type=\"violation\" leaf=\"" + leaf +
                 "\" level=\"ALERT\" rule_id=\"filesystem.hidden\" action=\"denied\"] " + body);
  CHECK(ship::syslog_severity("violation", violation(1, "CRITICAL")) == 2);
  CHECK(ship::syslog_severity("violation", violation(1, "INFO")) == 6);
  CHECK(ship::syslog_severity("lost", plain(1, "lost")) == 4);
  CHECK(ship::syslog_severity("error", plain(1, "error")) == 3);
  CHECK(ship::syslog_severity("genesis", plain(1, "genesis")) == 5);
  CHECK(ship::syslog_severity("session_end", plain(1, "session_end")) == 5);
  CHECK(ship::syslog_severity("syscall", plain(1, "syscall")) == 6);
  // Structured data values escape '"', '\' and ']' (RFC 5424 §6.3.3).
  std::string odd = "flightrec/a\"b]c\\d/0123456789abcdef0123456789abcdef";
  m = ship::syslog_message(s, "h", odd, 1, sealed(2, "exit", plain(2, "exit")));
  CHECK(m.find("origin=\"flightrec/a\\\"b\\]c\\\\d/") != std::string::npos);
  CHECK(m.starts_with("<86>1 1970-01-01T00:00:00.000000Z h flightrec 7 exit [flightrec@32473 "));
  CHECK(ship::syslog_facility("local3") == 19);
  CHECK(ship::syslog_facility("authpriv") == 10);
  CHECK(ship::syslog_facility("nope") == -1);
}

TEST_CASE("an output's filter: the default event types, every type, and violations from a level up") {
  ship::EntryFilter f;
  for (const char* t : {"genesis", "session_end", "violation", "lost"}) CHECK(f.accepts(t, violation(1, "INFO")));
  CHECK_FALSE(f.accepts("syscall", plain(1, "syscall")));
  f.min_level = ship::EntryFilter::Alert;
  CHECK_FALSE(f.accepts("violation", violation(1, "INFO")));
  CHECK(f.accepts("violation", violation(1, "ALERT")));
  CHECK(f.accepts("violation", violation(1, "CRITICAL")));
  f.min_level = ship::EntryFilter::Critical;
  CHECK_FALSE(f.accepts("violation", violation(1, "ALERT")));
  f.all_types = true;
  CHECK(f.accepts("syscall", plain(1, "syscall")));
}

TEST_CASE("flightrecd.yaml outputs.syslog: every field read, every mistake at its line") {
  daemon::Config c = daemon::parse_config(kBase +
                                              "    - name: siem\n"
                                              "      address: siem.example:6514\n"
                                              "      tls: {ca: /etc/ca.pem, cert: /etc/c.pem, key: /etc/k.pem, server_name: siem}\n"
                                              "      facility: local4\n"
                                              "      types: [violation, session_end]\n"
                                              "      min_level: alert\n"
                                              "      queue: 500\n"
                                              "    - name: plain\n"
                                              "      address: \"[::1]:514\"\n",
                                          "t.yaml");
  REQUIRE(c.syslog_outputs.size() == 2);
  const auto& a = c.syslog_outputs[0];
  CHECK(a.host == "siem.example");
  CHECK(a.port == 6514);
  CHECK(a.tls.on);
  CHECK(a.tls.ca_file == "/etc/ca.pem");
  CHECK(a.tls.key_file == "/etc/k.pem");
  CHECK(a.tls.server_name == "siem");
  CHECK(a.facility == 20);
  CHECK(a.filter.types == std::vector<std::string>{"session_end", "violation"});
  CHECK(a.filter.min_level == ship::EntryFilter::Alert);
  CHECK(a.queue_max == 500);
  const auto& b = c.syslog_outputs[1];
  CHECK(b.host == "::1");
  CHECK(b.port == 514);
  CHECK_FALSE(b.tls.on);
  CHECK(b.filter.types == ship::EntryFilter::default_types());

  CHECK(config_error(kBase + "    - name: a\n").find("t.yaml:6: outputs.syslog.address: missing") == 0);
  CHECK(config_error(kBase + "    - name: a\n      address: nohost\n").find("t.yaml:7: outputs.syslog.address") == 0);
  CHECK(config_error(kBase + "    - name: a\n      address: h:70000\n").find("t.yaml:7:") == 0);
  CHECK(config_error(kBase + "    - name: a\n      address: h:1\n      colour: red\n").find("colour") != std::string::npos);
  CHECK(config_error(kBase + "    - name: a\n      address: h:1\n      tls: {cert: /c}\n").find("outputs.syslog.tls.ca: missing") !=
        std::string::npos);
  CHECK(config_error(kBase + "    - name: a\n      address: h:1\n      tls: {ca: /a, cert: /c}\n").find("cert and key go together") !=
        std::string::npos);
  CHECK(config_error(kBase + "    - name: a\n      address: h:1\n      tls: {ca: relative}\n").find("absolute path") !=
        std::string::npos);
  CHECK(config_error(kBase + "    - name: a\n      address: h:1\n      facility: mail2\n").find("t.yaml:8: outputs.syslog.facility") == 0);
  CHECK(config_error(kBase + "    - name: a\n      address: h:1\n      types: [violations]\n").find("'violations' is not an entry type") !=
        std::string::npos);
  CHECK(config_error(kBase + "    - name: a\n      address: h:1\n      types: [all, exec]\n").find("'all' stands alone") !=
        std::string::npos);
  CHECK(config_error(kBase + "    - name: a\n      address: h:1\n      min_level: loud\n").find("outputs.syslog.min_level") !=
        std::string::npos);
  CHECK(config_error(kBase + "    - name: a\n      address: h:1\n      queue: 0\n").find("outputs.syslog.queue") != std::string::npos);
  CHECK(config_error(kBase + "    - name: a\n      address: h:1\n    - name: a\n      address: h:2\n")
            .find("t.yaml:8: outputs.syslog.name: 'a' is already the name of the output at line 6") == 0);
  CHECK(config_error(kBase + "    - name: A\n      address: h:1\n").find("is not a name") != std::string::npos);
  CHECK(config_error("version: 1\nstorage:\n  dir: /r\noutputs:\n  kafka: []\n").find("kafka") != std::string::npos);
}

TEST_CASE("a handed run's forwarded entries reach the outputs only as its record could hold them") {
  auto hub = std::make_shared<ship::Hub>();
  auto kept_owned = std::make_unique<Kept>();
  Kept& kept = *kept_owned;
  std::vector<std::unique_ptr<ship::Output>> outs;
  outs.push_back(std::move(kept_owned));
  hub->replace(std::move(outs), std::chrono::milliseconds(0));

  std::vector<std::string> bodies = {plain(1, "genesis"), plain(2, "syscall"), violation(3, "ALERT")};
  std::vector<ledger::SealedEntry> es;
  for (size_t i = 0; i < bodies.size(); ++i) es.push_back(sealed(int64_t(i + 1), i == 0 ? "genesis" : i == 1 ? "syscall" : "violation", bodies[i]));
  std::string note = kOrigin + "\n1\nAAAA\nchain 00\n";
  std::vector<ledger::SealedCheckpoint> cps = {{1, note}};
  // Only the types asked for go on the line; checkpoints always.
  std::vector<std::string> lines = ship::encode_forwarded(kOrigin, 1, es, cps, {"genesis", "violation"});
  REQUIRE(lines.size() == 1);
  REQUIRE(lines[0].ends_with("\n"));
  ship::ForwardedStream stream(hub);
  stream.take(std::string_view(lines[0]).substr(0, lines[0].size() - 1));
  REQUIRE(kept.bodies.size() == 2);
  CHECK(kept.bodies[0] == bodies[0]);
  CHECK(kept.bodies[1] == bodies[2]);
  CHECK(kept.checkpoints == std::vector<uint64_t>{1});
  CHECK(ship::encode_forwarded(kOrigin, 1, {}, {}, {"*"}).empty());
  // A checkpoint past the entries forwarded (the types left out) is taken;
  // a long commit is split into lines of about the bound, each taken in turn.
  std::vector<std::string> more;
  std::vector<ledger::SealedEntry> mes;
  for (int64_t seq = 4; seq <= 9; ++seq) more.push_back(plain(seq, "exec"));
  for (size_t i = 0; i < more.size(); ++i) mes.push_back(sealed(int64_t(i + 4), "exec", more[i]));
  std::string note9 = kOrigin + "\n9\nAAAA\nchain 00\n", note12 = kOrigin + "\n12\nAAAA\nchain 00\n";
  std::vector<ledger::SealedCheckpoint> cps2 = {{9, note9}, {12, note12}};
  lines = ship::encode_forwarded(kOrigin, 1, mes, cps2, {"*"}, 2 * more[0].size());
  CHECK(lines.size() >= 3);
  for (const auto& l : lines) stream.take(std::string_view(l).substr(0, l.size() - 1));
  CHECK(kept.bodies.size() == 8);
  CHECK(kept.bodies.back() == more.back());
  CHECK(kept.checkpoints == std::vector<uint64_t>{1, 9, 12});

  auto refused = [&](const std::string& text) {
    ship::ForwardedStream fresh(hub);
    try {
      fresh.take(text);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto one = [&](const std::string& body, const std::string& type, const std::string& leaf, int64_t seq = 1,
                 const std::string& origin = kOrigin) {
    nlohmann::json j = {{"origin", origin}, {"session", 1}, {"entries", {{seq, type, body, leaf}}}, {"checkpoints", nlohmann::json::array()}};
    return j.dump();
  };
  std::string good = plain(1, "exec");
  std::string good_leaf = ledger::to_hex(ledger::leaf_hash(good));
  CHECK(refused(one(good, "exec", good_leaf)).empty());
  CHECK(refused(one(good, "exec", std::string(64, '0'))).find("leaf hash is wrong") != std::string::npos);
  std::string spaced = R"({"comm": "sh","pid":7,"seq":1,"session":1,"ts_real_ns":5,"type":"exec"})";
  CHECK(refused(one(spaced, "exec", ledger::to_hex(ledger::leaf_hash(spaced)))).find("not canonical") != std::string::npos);
  CHECK(refused(one(good, "violation", good_leaf)).find("not the one it is sent as") != std::string::npos);
  CHECK(refused(one(good, "exec", good_leaf, 2)).find("not the one it is sent as") != std::string::npos);
  CHECK(refused(one(good, "exec", good_leaf, 1, "flightrec/vm/nothex")).find("not a flightrec one") != std::string::npos);
  CHECK(refused("[1,2]").find("not {origin") != std::string::npos);
  CHECK(refused("{\"origin\":").find("not {origin") != std::string::npos);
  // In order, one session per connection, checkpoints of this origin only.
  ship::ForwardedStream s2(hub);
  s2.take(one(good, "exec", good_leaf));
  CHECK_THROWS_WITH_AS(s2.take(one(good, "exec", good_leaf)), doctest::Contains("out of order"), Error);
  std::string other = "flightrec/vm/ffffffffffffffffffffffffffffffff";
  CHECK_THROWS_WITH_AS(s2.take(one(plain(2, "exec"), "exec", ledger::to_hex(ledger::leaf_hash(plain(2, "exec"))), 2, other)),
                       doctest::Contains("one session"), Error);
  nlohmann::json forged = {{"origin", kOrigin}, {"session", 1}, {"entries", nlohmann::json::array()},
                           {"checkpoints", {{1, other + "\n1\nAAAA\n"}}}};
  CHECK_THROWS_WITH_AS(s2.take(forged.dump()), doctest::Contains("not this session's"), Error);
  hub->close(std::chrono::milliseconds(0));
}

namespace {

// What an output is given, in the log's order as outputs write it
// (ship::in_log_order): "e5" for entry 5, "c5" for the checkpoint of size 5.
struct InOrder : ship::Output {
  ship::EntryFilter f;
  std::vector<std::string> log;
  void offer(const std::string&, int64_t, std::span<const ledger::SealedEntry> entries,
             std::span<const ledger::SealedCheckpoint> cps) override {
    ship::in_log_order(
        entries, cps, [&](const ledger::SealedEntry& e) { log.push_back("e" + std::to_string(e.seq)); },
        [&](const ledger::SealedCheckpoint& c) { log.push_back("c" + std::to_string(c.tree_size)); });
  }
  const ship::EntryFilter& filter() const override { return f; }
  ship::OutputStats stats() const override { return {}; }
  void close(std::chrono::milliseconds) override {}
};

}  // namespace

TEST_CASE("forwarded: every checkpoint reaches the outputs right after the entry that completes it, whatever the commits and lines") {
  // The class of `collect`'s "checkpoint at size 1001 came after entry
  // 2174": a commit longer than a line once put its checkpoints on its last line.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    int64_t n = 1 + int64_t(rng() % 80);
    std::vector<std::string> bodies;
    std::vector<ledger::SealedEntry> es;
    bodies.reserve(size_t(n));
    for (int64_t seq = 1; seq <= n; ++seq) {
      nlohmann::json j = {{"pid", 7}, {"seq", seq}, {"session", 1}, {"ts_real_ns", 5}, {"type", "exec"},
                          {"comm", std::string(rng() % 300, 'x')}};
      bodies.push_back(j.dump());
    }
    for (int64_t seq = 1; seq <= n; ++seq) es.push_back(sealed(seq, "exec", bodies[size_t(seq - 1)]));
    // Checkpoints at any cadence: sizes in order, some commits with several.
    std::vector<ledger::SealedCheckpoint> cps;
    std::vector<std::string> notes;
    notes.reserve(size_t(n));
    for (int64_t size = 1; size <= n; ++size)
      if (rng() % 4 == 0 || size == n) notes.push_back(kOrigin + "\n" + std::to_string(size) + "\nAAAA\nchain 00\n");
    for (const auto& note : notes) cps.push_back({uint64_t(std::stoll(note.substr(kOrigin.size() + 1))), note});
    auto out_owned = std::make_unique<InOrder>();
    InOrder& out = *out_owned;
    auto hub = std::make_shared<ship::Hub>();
    std::vector<std::unique_ptr<ship::Output>> outs;
    outs.push_back(std::move(out_owned));
    hub->replace(std::move(outs), std::chrono::milliseconds(0));
    ship::ForwardedStream stream(hub);
    // Commits of any length, each with the checkpoints the writer made in it.
    size_t at = 0, cp = 0;
    while (at < es.size()) {
      size_t len = 1 + rng() % 30;
      std::span<const ledger::SealedEntry> commit(es.data() + at, std::min(len, es.size() - at));
      at += commit.size();
      size_t first_cp = cp;
      while (cp < cps.size() && int64_t(cps[cp].tree_size) <= commit.back().seq) ++cp;
      std::span<const ledger::SealedCheckpoint> made(cps.data() + first_cp, cp - first_cp);
      size_t max_line = 1 + rng() % 2000;  // from one entry a line to the whole commit
      for (const auto& l : ship::encode_forwarded(kOrigin, 1, commit, made, {"*"}, max_line))
        stream.take(std::string_view(l).substr(0, l.size() - 1));
    }
    std::vector<std::string> want;
    size_t c = 0;
    for (int64_t seq = 1; seq <= n; ++seq) {
      want.push_back("e" + std::to_string(seq));
      if (c < cps.size() && int64_t(cps[c].tree_size) == seq) want.push_back("c" + std::to_string(cps[c++].tree_size));
    }
    INFO("trial " << trial << ", " << n << " entries");
    REQUIRE(out.log == want);
    hub->close(std::chrono::milliseconds(0));
  }
}

TEST_CASE("a syslog output frames by octet count, waits for a server that is not there yet, and counts what it drops") {
  // A port nobody listens on yet: taken, then let go.
  uint16_t port;
  { SyslogListener probe; port = probe.port; }
  ship::SyslogSettings s = settings_for(port);
  s.filter.all_types = true;
  s.queue_max = 3;
  ship::SyslogOutput out(s);
  std::vector<std::string> bodies;
  std::vector<ledger::SealedEntry> es;
  for (int i = 1; i <= 5; ++i) bodies.push_back(plain(i, "syscall"));
  for (int i = 1; i <= 5; ++i) es.push_back(sealed(i, "syscall", bodies[size_t(i - 1)]));
  out.offer(kOrigin, 1, es, {});
  // Three held (the queue's bound), two dropped and counted.
  CHECK(out.stats().dropped == 2);
  CHECK(out.stats().queued == 3);
  for (int i = 0; i < 200 && out.stats().last_error.empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(out.stats().last_error.find("cannot connect") != std::string::npos);
  SyslogListener server(port);
  std::vector<std::string> got = server.frames(3);
  REQUIRE(got.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(got[i].ends_with("] " + bodies[i]));
    CHECK(got[i].find(" seq=\"" + std::to_string(i + 1) + "\"") != std::string::npos);
  }
  // Taken off the queue once written, which may be just after the server has read them.
  for (int i = 0; i < 200 && out.stats().queued > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(out.stats().sent == 3);
  // A long message: one frame, whole.
  std::string big = R"({"comm":")" + std::string(100000, 'x') + R"(","pid":7,"seq":6,"session":1,"ts_real_ns":5,"type":"syscall"})";
  ledger::SealedEntry e6 = sealed(6, "syscall", big);
  out.offer(kOrigin, 1, std::span(&e6, 1), {});
  got = server.frames(1);
  REQUIRE(got.size() == 1);
  CHECK(got[0].ends_with(big));
  // Counted once written, which may be just after the server has read it.
  for (int i = 0; i < 200 && out.stats().sent < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto st = out.stats();
  CHECK(st.sent == 4);
  CHECK(st.connected);
  CHECK(st.connects == 1);
}

TEST_CASE("the spool: what is read but not acknowledged is read again, after a restart too; its bound; a torn tail") {
  unit::TempDir dir;
  std::string sd = dir.file("spool");
  {
    ship::Spool sp(sd, 8u << 20);
    REQUIRE(sp.append({"one", "two", "three"}));
    CHECK(sp.pending() == 3);
    std::vector<std::string_view> got;
    CHECK(sp.read(got, 2, 1 << 20) == 2);
    CHECK(got == std::vector<std::string_view>{"one", "two"});
    sp.rewind();  // not acknowledged: read again
    got.clear();
    CHECK(sp.read(got, 2, 1 << 20) == 2);
    CHECK(got[0] == "one");
    sp.ack();
    CHECK(sp.pending() == 1);
    got.clear();
    CHECK(sp.read(got, 10, 1 << 20) == 1);  // read, never acknowledged
  }
  {
    ship::Spool sp(sd, 8u << 20);  // a restart: from the last acknowledged on
    CHECK(sp.pending() == 1);
    std::vector<std::string_view> got;
    CHECK(sp.read(got, 10, 1 << 20) == 1);
    CHECK(got == std::vector<std::string_view>{"three"});
  }
  // A crash mid-write leaves a record cut short: dropped at the next open.
  {
    std::ofstream torn(sd + "/0000000000000001.spool", std::ios::app | std::ios::binary);
    uint32_t len = 100;
    torn.write(reinterpret_cast<const char*>(&len), 4);
    torn << "short";
  }
  {
    ship::Spool sp(sd, 8u << 20);
    CHECK(sp.pending() == 1);
    REQUIRE(sp.append({"four"}));
    std::vector<std::string_view> got;
    CHECK(sp.read(got, 10, 1 << 20) == 2);
    CHECK(got == std::vector<std::string_view>{"three", "four"});
    sp.ack();
    CHECK(sp.pending() == 0);
    CHECK(sp.bytes() == 0);
  }
  // The bound is on what is not acknowledged; spent segments are removed.
  std::string bd = dir.file("bounded");
  ship::Spool sp(bd, 4u << 20);  // segments of 1 MiB
  std::string big(300u << 10, 'x');
  size_t taken = 0;
  while (sp.append({big})) ++taken;
  CHECK(taken == 13);  // 13 * (300 KiB + 4) <= 4 MiB < 14 * ...
  std::vector<std::string_view> got;
  while (sp.read(got, 100, 64u << 20)) {}
  CHECK(got.size() == taken);
  sp.ack();
  CHECK(sp.bytes() == 0);
  CHECK(sp.append({big}));
  size_t segments = 0;
  for (const auto& e : std::filesystem::directory_iterator(bd)) segments += e.path().extension() == ".spool";
  CHECK(segments == 1);
}

TEST_CASE("the spool gives its disk back once everything is acknowledged, and a restart finds its place") {
  unit::TempDir dir;
  std::string sd = dir.file("spool");
  auto on_disk = [&] {
    uint64_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(sd))
      if (e.path().extension() == ".spool") n += e.file_size();
    return n;
  };
  {
    ship::Spool sp(sd, 64u << 20);  // segments of 8 MiB: 3 MiB stays in one
    std::string rec(64u << 10, 'r');
    for (int i = 0; i < 48; ++i) REQUIRE(sp.append({rec}));
    CHECK(on_disk() >= 3u << 20);
    std::vector<std::string_view> got;
    while (sp.read(got, 100, 64u << 20)) {}
    CHECK(got.size() == 48);
    sp.ack();
    CHECK(sp.bytes() == 0);
    CHECK(on_disk() == 0);  // acknowledged: given back, though the segment was not full
    REQUIRE(sp.append({"after"}));
  }
  ship::Spool again(sd, 64u << 20);
  CHECK(again.pending() == 1);
  std::vector<std::string_view> got;
  CHECK(again.read(got, 10, 1 << 20) == 1);
  CHECK(got == std::vector<std::string_view>{"after"});
  // Under the mark, an acknowledged tail stays: no new file per batch.
  again.ack();
  CHECK(on_disk() == 4 + 5);
}

TEST_CASE("flightrecd.yaml outputs.jetstream and the collector's config: read strictly") {
  daemon::Config c = daemon::parse_config(
      "version: 1\nstorage:\n  dir: /r\noutputs:\n  jetstream:\n    - name: fleet\n      url: nats://a:4222,tls://b:4443\n"
      "      stream: FLEET\n      subject_prefix: fr.audit\n      spool: {max: 2G}\n      tls: {ca: /ca.pem}\n",
      "t.yaml");
  REQUIRE(c.jetstream_outputs.size() == 1);
  const auto& j = c.jetstream_outputs[0];
  CHECK(j.url == "nats://a:4222,tls://b:4443");
  CHECK(j.stream == "FLEET");
  CHECK(j.subject_prefix == "fr.audit");
  CHECK(j.spool_dir == "/r/spool/fleet");
  CHECK(j.spool_max == 2ull << 30);
  CHECK(j.ca_file == "/ca.pem");
  const std::string js = "version: 1\nstorage:\n  dir: /r\noutputs:\n  jetstream:\n";  // lines 1-5
  CHECK(config_error(js + "    - name: f\n      url: http://a:1\n").find("t.yaml:7: outputs.jetstream.url") == 0);
  CHECK(config_error(js + "    - name: f\n      url: nats://a:1\n      subject_prefix: a.>\n").find("subject_prefix") != std::string::npos);
  CHECK(config_error(js + "    - name: f\n      url: nats://a:1\n      stream: a.b\n").find("outputs.jetstream.stream") != std::string::npos);
  CHECK(config_error(js + "    - name: f\n      url: nats://a:1\n      spool: {max: 10K}\n").find("at least 1M") != std::string::npos);
  CHECK(config_error(js + "    - name: f\n      url: nats://a:1\n      types: [exec]\n").find("unknown key") != std::string::npos);
  // One name per output, whatever its kind.
  CHECK(config_error("version: 1\nstorage:\n  dir: /r\noutputs:\n  syslog:\n    - name: x\n      address: h:1\n"
                     "  jetstream:\n    - name: x\n      url: nats://a:1\n")
            .find("t.yaml:9: outputs.jetstream.name: 'x' is already the name of the output at line 6") == 0);

  daemon::Config w = daemon::parse_config(
      "version: 1\nstorage:\n  dir: /r\noutputs:\n  websocket:\n    - name: live\n      listen: 127.0.0.1:8765\n"
      "      token_file: /etc/t\n      unix: /run/s.sock\n      buffer: 16M\n      client_queue: 1M\n",
      "t.yaml");
  REQUIRE(w.websocket_outputs.size() == 1);
  CHECK(w.websocket_outputs[0].listen == "127.0.0.1:8765");
  CHECK(w.websocket_outputs[0].token_file == "/etc/t");
  CHECK(w.websocket_outputs[0].unix_path == "/run/s.sock");
  CHECK(w.websocket_outputs[0].buffer_bytes == 16u << 20);
  CHECK(w.websocket_outputs[0].client_queue_bytes == 1u << 20);
  const std::string ws = "version: 1\nstorage:\n  dir: /r\noutputs:\n  websocket:\n";
  CHECK(config_error(ws + "    - name: l\n      listen: 127.0.0.1:1\n").find("token_file: missing") != std::string::npos);
  CHECK(config_error(ws + "    - name: l\n").find("needs listen") != std::string::npos);
  CHECK(config_error(ws + "    - name: l\n      listen: example.com:1\n      token_file: /t\n").find("outputs.websocket.listen") !=
        std::string::npos);

  unit::TempDir dir;
  std::string pub = dir.file("node.pub");
  auto key = ledger::SigningKey::generate("flightrec-node");
  std::ofstream(pub) << key.verifier().vkey() << "\n";
  ship::CollectSettings s = ship::parse_collect_config("url: nats://h:4222\nhosts:\n  node-1: node.pub\n", "c.yaml", dir.path.string());
  CHECK(s.url == "nats://h:4222");
  REQUIRE(s.hosts.count("node-1"));
  CHECK(s.hosts.at("node-1").vkey() == key.verifier().vkey());
  auto collect_error = [&](const std::string& yaml) {
    try {
      ship::parse_collect_config(yaml, "c.yaml", dir.path.string());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(collect_error("url: nats://h:1\n").find("hosts") != std::string::npos);
  CHECK(collect_error("url: nats://h:1\nhosts:\n  a.b: node.pub\n").find("c.yaml:3: hosts") == 0);
  CHECK(collect_error("url: nats://h:1\nhosts:\n  a: missing.pub\n").find("cannot read") != std::string::npos);
  std::ofstream(dir.file("bad.pub")) << "not a key\n";
  CHECK(collect_error("url: nats://h:1\nhosts:\n  a: bad.pub\n").find("is not a verifier key") != std::string::npos);
  CHECK(collect_error("url: nats://h:1\nhosts:\n  a: node.pub\ncolour: red\n").find("colour") != std::string::npos);
  CHECK(collect_error("url: http://h:1\nhosts:\n  a: node.pub\n").find("c.yaml:1: url") == 0);
}

TEST_CASE("collect: hostile messages are refused or fail their log, with the reason, and nothing is written past a failure") {
  unit::TempDir dir;
  ship::CollectSettings s;
  s.out_dir = dir.file("out");
  auto key = ledger::SigningKey::generate("flightrec-node");
  s.hosts.emplace("node", key.verifier());
  ship::Collector c(s);
  const std::string origin = "flightrec/node/" + std::string(32, 'a');
  auto headers = [&](const std::string& first, const std::string& last, const std::string& o) {
    return std::map<std::string, std::string>{
        {"Flightrec-Origin", o}, {"Flightrec-Session", "1"}, {"Flightrec-First", first}, {"Flightrec-Last", last}};
  };
  c.take("flightrec.stranger", headers("1", "1", "flightrec/stranger/" + std::string(32, 'b')), "x\n");
  c.take("flightrec.node", {{"Flightrec-Origin", origin}}, "x\n");
  c.take("flightrec.node", headers("2", "1", origin), "x\n");
  c.take("flightrec.node", headers("1", "1", "flightrec/other/" + std::string(32, 'c')), "x\n");
  c.take("flightrec.node", headers("1", "1", "../../etc/passwd"), "x\n");
  // A log: its first message's line lacks its newline.
  c.take("flightrec.node", headers("1", "1", origin), plain(1, "genesis"));
  const std::string second = "flightrec/node/" + std::string(32, 'd');
  // "Checkpoints alone" of a log never seen: nothing before it can verify it (and an entry in it).
  c.take("flightrec.node", headers("0", "0", second), plain(1, "genesis") + "\n");
  auto report = c.report();
  std::map<std::string, ship::HostReport> by;
  for (auto& h : report) by[h.host] = h;
  REQUIRE(by.count("stranger"));
  CHECK(by["stranger"].rejected == 1);
  CHECK(by["stranger"].rejected_reason.find("no key is pinned for host stranger") != std::string::npos);
  REQUIRE(by.count("node"));
  // No session or seq; first > last; another host's log; not an origin; not begun at its genesis.
  CHECK(by["node"].rejected == 5);
  CHECK(by["node"].rejected_reason.find("without its session") != std::string::npos);
  REQUIRE(by["node"].logs.size() == 1);
  std::map<std::string, ship::LogReport> logs;
  for (auto& l : by["node"].logs) logs[l.origin] = l;
  CHECK_FALSE(logs[origin].ok);
  CHECK(logs[origin].reason.find("lacks its newline") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(s.out_dir + "/etc"));
}

namespace {

// A real signed session of n entries for host `host`, as the JSON Lines a
// shipper publishes (the bundle's header line left out).
std::vector<std::string> shipped_lines(const std::string& host, int64_t tag, int n, const ledger::SigningKey& key,
                                       const std::string& dir) {
  std::string db = dir + "/" + host + "-" + std::to_string(tag) + ".db";
  ledger::Store store(db, ledger::Store::Mode::Write);
  ledger::SessionRow row;
  row.mode = "run";
  row.command = "[\"x\"]";
  row.host = host;
  row.start_real_ns = 1;
  int64_t id = store.begin_session(row);
  char tail[33];
  std::snprintf(tail, sizeof(tail), "%032llx", static_cast<unsigned long long>(tag));
  std::string origin = "flightrec/" + host + "/" + tail;
  {
    ledger::SessionWriter w(store, id);
    nlohmann::json g = {{"type", "genesis"}, {"seq", 1}, {"session", id}, {"origin", origin}, {"host", host},
                        {"policy", "p"}, {"policy_sha256", ledger::to_hex(ledger::sha256("p"))},
                        {"public_key", key.verifier().vkey()}, {"key_id", key.verifier().key_id_hex()}};
    w.append(g.dump(), "genesis", 0, 0);
    w.checkpoint(origin, &key);
    for (int i = 2; i <= n; ++i) {
      nlohmann::json j = {{"type", "syscall"}, {"seq", i}, {"session", id}, {"pid", 42}, {"nr", i}};
      w.append(j.dump(), "syscall", 42, 0);
      if (i % 5 == 0) w.checkpoint(origin, &key);
    }
    w.checkpoint(origin, &key);
    w.flush();
  }
  std::ostringstream out;
  ledger::export_bundle(store, id, out, ledger::BundleFormat::Lines);
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  lines.erase(lines.begin());
  return lines;
}

uint64_t rss_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string k; in >> k;) {
    if (k == "VmRSS:") {
      uint64_t v = 0;
      in >> v;
      return v;
    }
  }
  return 0;
}

// Messages of these lines, cut before each entry after every `per` entries.
struct Publisher {
  ship::Collector& c;
  std::string host, origin;
  void publish(const std::vector<std::string>& lines, size_t from, size_t to) {
    std::string payload;
    int64_t first = 0, last = 0;
    for (size_t i = from; i < to; ++i) {
      if (!lines[i].starts_with("{\"checkpoint\":")) {
        int64_t seq = nlohmann::json::parse(lines[i])["seq"].get<int64_t>();
        if (!first) first = seq;
        last = seq;
      }
      payload += lines[i] + "\n";
    }
    c.take("flightrec." + host, {{"Flightrec-Origin", origin}, {"Flightrec-Session", "1"},
                                 {"Flightrec-First", std::to_string(first)}, {"Flightrec-Last", std::to_string(last)}},
           payload);
  }
};

}  // namespace

TEST_CASE("collect: bounded in memory whatever publishers send; a log let go is read back and goes on") {
  unit::TempDir dir;
  ship::CollectSettings s;
  s.out_dir = dir.file("out");
  auto key = ledger::SigningKey::generate("flightrec-fleet");
  const int kHosts = 4, kLogs = 64;
  for (int h = 0; h < kHosts; ++h) s.hosts.emplace("node" + std::to_string(h), key.verifier());
  ship::Collector c(s);

  SUBCASE("entries ahead of a gap, in proven logs and in forged ones, cost at most the bounds") {
    // Each log begins as a real one (its genesis sealed by a signed
    // checkpoint), then 2 MiB of entries that come before one they follow:
    // 512 MiB offered in all. And 20000 logs without a key, each its genesis
    // and an entry far ahead.
    uint64_t before = rss_kib();
    std::string junk(4000, 'j');
    for (int h = 0; h < kHosts; ++h) {
      std::string host = "node" + std::to_string(h);
      for (int l = 0; l < kLogs; ++l) {
        auto lines = shipped_lines(host, l + 1, 2, key, dir.path.string());
        Publisher p{c, host, nlohmann::json::parse(lines[0])["origin"].get<std::string>()};
        p.publish(lines, 0, 2);  // the genesis entry and its checkpoint
        for (int m = 0; m < 8; ++m) {
          std::string payload;
          for (int e = 0; e < 64; ++e) payload += "{\"seq\":" + std::to_string(100 + m * 64 + e) + ",\"x\":\"" + junk + "\"}\n";
          c.take("flightrec." + host, {{"Flightrec-Origin", p.origin}, {"Flightrec-Session", "1"},
                                       {"Flightrec-First", std::to_string(100 + m * 64)},
                                       {"Flightrec-Last", std::to_string(100 + m * 64 + 63)}},
                 payload);
        }
      }
    }
    for (int f = 0; f < 20000; ++f) {
      char tail[33];
      std::snprintf(tail, sizeof(tail), "%032x", 900000 + f);
      std::string origin = std::string("flightrec/node0/") + tail;
      // A genesis entry anyone can write (the key it names is public), sealed by nothing.
      nlohmann::json g = {{"type", "genesis"}, {"seq", 1}, {"session", 1}, {"origin", origin}, {"host", "node0"},
                          {"policy", "p"}, {"policy_sha256", ledger::to_hex(ledger::sha256("p"))},
                          {"public_key", key.verifier().vkey()}, {"key_id", key.verifier().key_id_hex()}};
      std::string genesis = g.dump() + "\n";
      c.take("flightrec.node0", {{"Flightrec-Origin", origin}, {"Flightrec-Session", "1"}, {"Flightrec-First", "1"},
                                 {"Flightrec-Last", "1"}}, genesis);
      c.take("flightrec.node0", {{"Flightrec-Origin", origin}, {"Flightrec-Session", "1"}, {"Flightrec-First", "50"},
                                 {"Flightrec-Last", "50"}}, "{\"seq\":50,\"x\":\"" + junk + "\"}\n");
    }
    uint64_t grown = rss_kib() - before;
    MESSAGE("the collector grew by " << grown / 1024 << " MiB for 512 MiB of entries ahead of gaps and 20000 forged logs");
    if (!unit::kAsan) CHECK(grown < 200 * 1024);  // (ASan's quarantine keeps freed memory resident)
    auto report = c.report();
    size_t failed = 0, ok = 0;
    for (const auto& h : report)
      for (const auto& l : h.logs) (l.ok ? ok : failed) += 1;
    // Forged genesis entries fail (no signed checkpoint seals them) and write nothing.
    CHECK(failed >= 20000);
    size_t files = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(s.out_dir)) files += e.is_regular_file();
    CHECK(files <= size_t(kHosts * kLogs));
  }

  SUBCASE("300 live logs: those let go from memory are read back from their files and go on; all verify") {
    std::vector<std::pair<Publisher, std::vector<std::string>>> logs;
    for (int l = 0; l < 300; ++l) {
      auto lines = shipped_lines("node1", l + 1, 12, key, dir.path.string());
      logs.push_back({Publisher{c, "node1", nlohmann::json::parse(lines[0])["origin"].get<std::string>()}, lines});
    }
    // Each log's first half, then (once 300 logs were followed) its second.
    for (auto& [p, lines] : logs) p.publish(lines, 0, lines.size() / 2);
    for (auto& [p, lines] : logs) p.publish(lines, lines.size() / 2, lines.size());
    auto report = c.report();
    REQUIRE(report.size() == 1);
    CHECK(report[0].ok());
    CHECK(report[0].logs.size() == 300);
    for (const auto& l : report[0].logs) {
      CAPTURE(l.origin);
      CHECK(l.ok);
      CHECK(l.entries == 12);
      CHECK(l.missing_from == 0);
      auto v = ledger::verify_bundle(l.file, &key.verifier(), std::nullopt);
      CHECK(v.verdict.ok);
      CHECK(v.verdict.entries == 12);
    }
  }
}
