// Fleet shipping to real engines: flightrecd's syslog outputs against real
// rsyslog daemons (one on TCP, one on TLS with a certificate made here),
// fed by runs handed to the daemon that attempt escapes, and by a
// daemon's own watch session.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "ledger/checkpoint.h"
#include "ledger/hash.h"
#include "ledger/keys.h"
#include "runtime/harness.h"
#include "ship/jetstream.h"
#include "ship/nats_lib.h"

using nlohmann::json;
using namespace rt;

namespace {

// rsyslogd on a port of its choosing, TCP or (with a cert) TLS, writing
// each message as "SEVERITY MSGID PROCID SD MSG" to a file.
struct Rsyslog {
  TempDir dir;
  Proc proc;
  int port = 0;
  std::string out = dir.file("out.log");
  explicit Rsyslog(const std::string& ca = "", const std::string& cert = "", const std::string& key = "") {
    std::filesystem::create_directory(dir.file("work"));
    std::ofstream conf(dir.file("rsyslog.conf"));
    conf << "global(workDirectory=\"" << dir.file("work") << "\" maxMessageSize=\"256k\"";
    if (!ca.empty())
      conf << " DefaultNetstreamDriver=\"ossl\" DefaultNetstreamDriverCAFile=\"" << ca
           << "\" DefaultNetstreamDriverCertFile=\"" << cert << "\" DefaultNetstreamDriverKeyFile=\"" << key << "\"";
    conf << ")\nmodule(load=\"imtcp\"" << (ca.empty() ? "" : " StreamDriver.Name=\"ossl\" StreamDriver.Mode=\"1\" StreamDriver.AuthMode=\"anon\"")
         << ")\ninput(type=\"imtcp\" port=\"0\" listenPortFileName=\"" << dir.file("port") << "\")\n"
         << "template(name=\"t\" type=\"string\" string=\"%syslogseverity% %msgid% %procid% %structured-data% %msg%\\n\")\n"
         << "*.* action(type=\"omfile\" file=\"" << out << "\" template=\"t\")\n";
    conf.close();
    proc = start({"rsyslogd", "-n", "-f", dir.file("rsyslog.conf"), "-i", dir.file("pid")});
    port = port_when_listening(dir.file("port"), "rsyslogd");
  }
  ~Rsyslog() {
    kill(proc.pid, SIGTERM);
    wait(proc);
  }
  // The messages so far: each line split into its fields.
  struct Line {
    int severity;
    std::string msgid, procid, sd, msg;
  };
  std::vector<Line> lines() const {
    std::vector<Line> got;
    std::ifstream in(out);
    std::string l;
    // SD values escape ']' as "\]", so the SD ends at the first "] " not after a backslash.
    static const std::regex shape(R"(^(\d) (\S+) (\S+) (\[(?:[^\]\\]|\\.)*\]) (.*)$)");
    while (std::getline(in, l)) {
      std::smatch m;
      if (std::regex_match(l, m, shape)) got.push_back({std::stoi(m[1]), m[2], m[3], m[4], m[5]});
      else got.push_back({-1, "", "", "", l});
    }
    return got;
  }
  // Waits (up to a minute) until at least n lines are in the file.
  std::vector<Line> await_lines(size_t n) const {
    std::vector<Line> got;
    for (int i = 0; i < 600; ++i) {
      got = lines();
      if (got.size() >= n) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return got;
  }
};

std::string sd_param(const std::string& sd, const std::string& name) {
  std::smatch m;
  std::regex re(" " + name + "=\"((?:[^\"\\\\]|\\\\.)*)\"");
  return std::regex_search(sd, m, re) ? m[1].str() : "";
}

// A CA and a server certificate for 127.0.0.1 signed by it.
struct TestCa {
  TempDir dir;
  std::string ca = dir.file("ca.pem"), cert = dir.file("cert.pem"), key = dir.file("key.pem");
  TestCa() {
    auto ok = [](const Result& r) { REQUIRE_MESSAGE(r.code == 0, r.err); };
    ok(run({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
            dir.file("ca.key"), "-out", ca, "-days", "2", "-subj", "/CN=flightrec test CA"}));
    ok(run({"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
            "-out", dir.file("req.csr"), "-subj", "/CN=localhost"}));
    std::ofstream(dir.file("ext")) << "subjectAltName=IP:127.0.0.1\n";
    ok(run({"openssl", "x509", "-req", "-in", dir.file("req.csr"), "-CA", ca, "-CAkey", dir.file("ca.key"),
            "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", dir.file("ext")}));
  }
};


// nats-server with JetStream on a store of its own, on a port that stays
// its own across restarts.
struct NatsServer {
  TempDir dir;
  Proc proc;
  int port = 0;
  NatsServer() {
    {
      Listener probe;
      port = probe.port;
    }
    start_server();
  }
  void start_server() {
    proc = start({"nats-server", "-js", "-sd", dir.file("js"), "-a", "127.0.0.1", "-p", std::to_string(port)});
    // Up once it takes connections (a minute at most: emulated kernels are slow).
    for (int i = 0; i < 600; ++i) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(uint16_t(port));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      bool up = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
      close(fd);
      if (up) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL("nats-server did not start");
  }
  void stop(int sig = SIGTERM) {
    kill(proc.pid, sig);
    wait(proc);
  }
  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port); }
  ~NatsServer() { stop(SIGKILL); }
};

// A JetStream client of the test's own (libnats, as flightrec loads it).
struct JetStreamClient {
  const flightrec::ship::NatsLib& n = flightrec::ship::nats_lib();
  natsOptions* o = nullptr;
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  explicit JetStreamClient(const std::string& url) {
    n.natsOptions_Create(&o);
    n.natsOptions_SetURL(o, url.c_str());
    REQUIRE(n.natsConnection_Connect(&nc, o) == NATS_OK);
    REQUIRE(n.natsConnection_JetStream(&js, nc, nullptr) == NATS_OK);
  }
  ~JetStreamClient() {
    if (js) n.jsCtx_Destroy(js);
    if (nc) n.natsConnection_Destroy(nc);
    if (o) n.natsOptions_Destroy(o);
  }
};

// Publishes one message with flightrec's headers (a forger's, in the tests).
void publish(const std::string& url, const std::string& subject, const std::map<std::string, std::string>& headers,
             const std::string& payload) {
  JetStreamClient c(url);
  natsMsg* m = nullptr;
  REQUIRE(c.n.natsMsg_Create(&m, subject.c_str(), nullptr, payload.data(), int(payload.size())) == NATS_OK);
  for (const auto& [k, v] : headers) c.n.natsMsgHeader_Set(m, k.c_str(), v.c_str());
  jsPubAck* pa = nullptr;
  jsErrCode err;
  CHECK(c.n.js_PublishMsg(&pa, c.js, m, nullptr, &err) == NATS_OK);
  if (pa) c.n.jsPubAck_Destroy(pa);
  c.n.natsMsg_Destroy(m);
}

// Waits (up to two minutes) until flightrecd's outputs hold nothing unacknowledged.
bool outputs_drained(const std::string& socket) {
  for (int i = 0; i < 1200; ++i) {
    Result st = rt::flightrec({"status", "--socket", socket, "--json"});
    if (st.code == 0) {
      bool empty = true;
      json status = json::parse(st.out);  // held: a range-for over a temporary's member dangles (C++20)
      for (const auto& o : status["outputs"]) empty = empty && o["queued"] == 0;
      if (empty) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

json collect(const std::string& config, const std::string& out, int expect_code = 0) {
  Result r = rt::flightrec({"collect", "--config", config, "--out", out, "--json", "--idle", "1s"});
  INFO(r.out << r.err);
  CHECK(r.code == expect_code);
  return json::parse(r.out);
}

int severity_of(const std::string& level) { return level == "CRITICAL" ? 2 : level == "ALERT" ? 1 : 6; }

}  // namespace

TEST_CASE("syslog: rsyslog receives every violation of escape attempts with its severity, and each line proves against the record") {
  REQUIRE(is_root());
  TestCa certs;
  Rsyslog tcp, tls(certs.ca, certs.cert, certs.key);
  TempDir dir;
  std::string config = dir.file("flightrecd.yaml");
  std::ofstream(config) << "version: 1\nstorage:\n  dir: " << dir.file("records") << "\nsocket:\n  path: "
                        << dir.file("control.sock") << "\nring: 8M\nwatch:\noutputs:\n  syslog:\n"
                        << "    - name: siem\n      address: 127.0.0.1:" << tcp.port << "\n"
                        << "    - name: archive\n      address: 127.0.0.1:" << tls.port << "\n      tls:\n        ca: "
                        << certs.ca << "\n      types: [genesis, exec, violation, session_end]\n      min_level: alert\n"
                        << "      facility: local3\n";
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("running"), d.err);
  std::string work = dir.file("work");
  std::filesystem::create_directory(work);
  // Escape programs, and a run longer than a checkpoint's interval (1 s):
  // checkpoints on time fall between the violations forwarded.
  const std::vector<std::string> attacks = {"escape_kexec", "escape_bpf", "escape_unshare_userns_mount",
                                            "escape_mount_tmpfs", "escape_init_module", "slow"};
  std::vector<std::vector<json>> records;
  for (const auto& name : attacks) {
    std::vector<std::string> command = {"sh", "-c", "cat /etc/shadow; sleep 1.2; /bin/true; sleep 1.2; exit 3"};
    if (name != "slow") {
      std::filesystem::copy_file(std::string(ESCAPE_DIR) + "/" + name, work + "/" + name);
      command = {work + "/" + name};
    }
    std::string db = dir.file(name + ".db");
    std::vector<std::string> argv = {FLIGHTREC_BIN, "run", "--daemon", "require", "--daemon-socket",
                                     dir.file("control.sock"), "--db", db, "--"};
    argv.insert(argv.end(), command.begin(), command.end());
    Result r = run_in(work, argv);
    INFO(name << ": " << r.out << r.err);
    CHECK(r.code != 0);
    CHECK(r.err.find("not shipped") == std::string::npos);
    CHECK(r.err.find("stopped taking") == std::string::npos);
    records.push_back(entries(db));
  }
  // What the record holds, by origin: violations and the rest.
  size_t violations = 0, events = 0, archived = 0;
  for (const auto& rec : records) {
    REQUIRE(!rec.empty());
    for (const auto& e : rec) {
      std::string type = e["type"];
      if (type == "violation") ++violations;
      if (type == "violation" || type == "genesis" || type == "session_end" || type == "lost") ++events;
      if (type == "genesis" || type == "exec" || type == "session_end" || (type == "violation" && e["level"] != "INFO"))
        ++archived;
    }
  }
  REQUIRE(violations >= attacks.size());
  auto siem = tcp.await_lines(events);
  auto archive = tls.await_lines(archived);
  CHECK(siem.size() == events);        // the default types, each once
  CHECK(archive.size() == archived);   // its types and levels, each once
  std::map<std::pair<std::string, int64_t>, const Rsyslog::Line*> by_seq;
  for (const auto& l : siem) by_seq[{sd_param(l.sd, "origin"), std::stoll("0" + sd_param(l.sd, "seq"))}] = &l;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& rec = records[i];
    std::string origin = rec[0]["origin"];
    std::string db = dir.file(attacks[i] + ".db");
    for (const auto& e : of_type(rec, "violation")) {
      int64_t seq = e["seq"];
      INFO(attacks[i] << " violation " << seq << " " << e.dump());
      auto it = by_seq.find({origin, seq});
      REQUIRE(it != by_seq.end());
      const auto& line = *it->second;
      CHECK(line.severity == severity_of(e["level"]));
      CHECK(line.msgid == "violation");
      CHECK(line.procid == std::to_string(e["subject_pid"].get<int64_t>()));
      CHECK(sd_param(line.sd, "rule_id") == e["rule_id"]);
      CHECK(sd_param(line.sd, "level") == e["level"]);
      // The line's message is the entry: its leaf hash is the SD's leaf and the record's.
      std::string leaf = sd_param(line.sd, "leaf");
      CHECK(sha256_hex(std::string(1, '\0') + line.msg) == leaf);
      CHECK(json::parse(line.msg) == e);
      Result proof = rt::flightrec({"prove", "--db", db, "--session", "1", "--entry", std::to_string(seq)});
      REQUIRE_MESSAGE(proof.code == 0, proof.err);
      CHECK(json::parse(proof.out)["leaf_hash"] == leaf);
    }
  }
  // Over TLS, its types, each message its leaf. (Forwarded runs send the
  // daemon only the types some output takes; checkpoints taken on time
  // cover entries not sent, as in the "slow" run.)
  for (const auto& l : archive) {
    INFO(l.msg.substr(0, 200));
    REQUIRE(l.severity >= 0);
    CHECK(sha256_hex(std::string(1, '\0') + l.msg) == sd_param(l.sd, "leaf"));
    CHECK((l.msgid == "genesis" || l.msgid == "exec" || l.msgid == "session_end" || l.msgid == "violation"));
  }
  // Counted once written, which the server may have seen a moment before.
  json outputs;
  for (int i = 0; i < 100; ++i) {
    Result st = rt::flightrec({"status", "--socket", dir.file("control.sock"), "--json"});
    REQUIRE(st.code == 0);
    outputs = json::parse(st.out)["outputs"];
    REQUIRE(outputs.size() == 2);
    if (outputs[0]["sent"] == events && outputs[1]["sent"] == archived) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (const auto& o : outputs) {
    CHECK(o["dropped"] == 0);
    CHECK(o["connected"] == true);
  }
  CHECK(outputs[0]["sent"] == events);
  CHECK(outputs[1]["sent"] == archived);
  CHECK(d.stop(SIGTERM).code == 0);
}

TEST_CASE("syslog: a daemon's own session is shipped, a server that comes late gets what was queued, and a restart is followed") {
  REQUIRE(is_root());
  // The server's port, before the server: the daemon's first tries fail.
  int port;
  {
    Listener probe;
    port = probe.port;
  }
  TempDir dir;
  std::string name = "flightrec-ship-" + std::to_string(getpid());
  std::string cg = cgroup2_root() + "/" + name;
  REQUIRE(mkdir(cg.c_str(), 0755) == 0);
  std::string config = dir.file("flightrecd.yaml");
  std::ofstream(config) << "version: 1\nstorage:\n  dir: " << dir.file("records") << "\nsocket:\n  path: "
                        << dir.file("control.sock") << "\nring: 8M\nwatch:\n  - name: jobs\n    cgroup: " << name
                        << "\noutputs:\n  syslog:\n    - name: late\n      address: 127.0.0.1:" << port << "\n";
  {
    Daemon d(config);
    REQUIRE_MESSAGE(d.await("running"), d.err);
    REQUIRE_MESSAGE(d.await("cannot connect"), d.err);  // said on stderr, retried
    // rsyslog on that port now, from a config of our own making.
    TempDir rs;
    std::filesystem::create_directory(rs.file("work"));
    std::ofstream(rs.file("rsyslog.conf"))
        << "global(workDirectory=\"" << rs.file("work") << "\")\nmodule(load=\"imtcp\")\ninput(type=\"imtcp\" port=\""
        << port << "\")\ntemplate(name=\"t\" type=\"string\" string=\"%syslogseverity% %msgid% %structured-data% %msg%\\n\")\n"
        << "*.* action(type=\"omfile\" file=\"" << rs.file("out.log") << "\" template=\"t\")\n";
    Proc server = start({"rsyslogd", "-n", "-f", rs.file("rsyslog.conf"), "-i", rs.file("pid")});
    auto lines_now = [&] {
      std::ifstream in(rs.file("out.log"));
      std::vector<std::string> v;
      for (std::string l; std::getline(in, l);) v.push_back(l);
      return v;
    };
    std::vector<std::string> got;
    for (int i = 0; i < 600 && got.empty(); ++i) {
      got = lines_now();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    REQUIRE(got.size() == 1);  // the genesis entry, queued while there was no server
    CHECK(got[0].starts_with("5 genesis [flightrec@32473 "));
    std::string origin = sd_param(got[0], "origin");
    // The server restarts: the daemon notices the closed connection and reconnects.
    kill(server.pid, SIGTERM);
    wait(server);
    server = start({"rsyslogd", "-n", "-f", rs.file("rsyslog.conf"), "-i", rs.file("pid")});
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    Result r = d.stop(SIGTERM);
    CHECK(r.code == 0);
    for (int i = 0; i < 600 && got.size() < 2; ++i) {
      got = lines_now();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    REQUIRE(got.size() == 2);
    CHECK(got[1].starts_with("5 session_end [flightrec@32473 origin=\"" + origin + "\""));
    kill(server.pid, SIGTERM);
    wait(server);
  }
  rmdir(cg.c_str());
}

namespace {

// This host's subject token (PREFIX.HOST), as flightrecd's outputs make it.
std::string host_token() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return flightrec::ship::jetstream_subject("x", buf).substr(2);
}

// A cgroup of the test's, and a paced getppid() storm in it.
struct StormCgroup {
  std::string name = "flightrec-js-" + std::to_string(getpid()), path = cgroup2_root() + "/" + name;
  StormCgroup() { REQUIRE(mkdir(path.c_str(), 0755) == 0); }
  Proc storm(int rate, int secs) {
    return start({"sh", "-c", "echo $$ > " + path + "/cgroup.procs && exec " + std::string(BENCH_SYSCALLS_BIN) + " rate " +
                                  std::to_string(rate) + " " + std::to_string(secs)});
  }
  ~StormCgroup() { rmdir(path.c_str()); }
};

std::string jetstream_config(const TempDir& dir, const NatsServer& ns, const std::string& keys, const std::string& cgroup) {
  std::string config = dir.file("flightrecd.yaml");
  std::ofstream(config) << "version: 1\nstorage:\n  dir: " << dir.file("records") << "\nsocket:\n  path: "
                        << dir.file("control.sock") << "\nkey: " << keys << "\nring: 8M\nwatch:\n"
                        << (cgroup.empty() ? "" : "  - name: jobs\n    cgroup: " + cgroup + "\n")
                        << "outputs:\n  jetstream:\n    - name: fleet\n      url: " << ns.url() << "\n";
  std::ofstream(dir.file("collect.yaml")) << "url: " << ns.url() << "\nhosts:\n  " << host_token() << ": " << keys
                                          << "/flightrec.pub\n";
  return config;
}

// The lines of a collected bundle: entries and checkpoints (its header left out).
std::pair<size_t, size_t> bundle_counts(const std::string& file) {
  std::ifstream in(file);
  std::string line;
  size_t entries = 0, checkpoints = 0;
  std::getline(in, line);
  while (std::getline(in, line)) (line.starts_with("{\"checkpoint\":") ? checkpoints : entries)++;
  return {entries, checkpoints};
}

}  // namespace

TEST_CASE("jetstream: nats-server killed for 30 s during a syscall storm; every entry arrives once, in order, and collect verifies the host") {
  REQUIRE(is_root());
  TempDir dir;
  REQUIRE(rt::flightrec({"keygen", "--out", dir.file("keys")}).code == 0);
  NatsServer ns;
  StormCgroup cg;
  std::string config = jetstream_config(dir, ns, dir.file("keys"), cg.name);
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("running"), d.err);
  Proc storm = cg.storm(5000, 36);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ns.stop(SIGKILL);
  REQUIRE_MESSAGE(d.await("retrying"), d.err);  // the output saw the server go
  std::this_thread::sleep_for(std::chrono::seconds(30));
  ns.start_server();
  CHECK(wait(storm).code == 0);
  rmdir(cg.path.c_str());  // the session ends with its cgroup
  REQUIRE_MESSAGE(d.await("sealed"), d.err);
  REQUIRE(outputs_drained(dir.file("control.sock")));
  CHECK(d.stop(SIGTERM).code == 0);
  auto dbs = records_in(dir.file("records"));
  REQUIRE(dbs.size() == 1);
  auto record = entries(dbs[0]);
  REQUIRE(record.size() > 100000);  // the storm's calls, at 5000/s for 36 s
  json report = collect(dir.file("collect.yaml"), dir.file("collected"));
  REQUIRE(report.size() == 1);
  CHECK(report[0]["host"] == host_token());
  CHECK(report[0]["ok"] == true);
  REQUIRE(report[0]["logs"].size() == 1);
  const json& log = report[0]["logs"][0];
  CHECK(log["ok"] == true);
  CHECK(log["terminated"] == true);
  CHECK(log["entries"] == record.size());
  CHECK(log["duplicates"] == 0);
  CHECK(log["missing_from"] == 0);
  // Exactly once: the consumer saw no entry twice (duplicates: 0, above), and the bundle is the record's.
  auto [bundle_entries, bundle_checkpoints] = bundle_counts(log["file"]);
  CHECK(bundle_entries == record.size());
  CHECK(bundle_checkpoints >= record.size() / 1000);
  // The collected log is the record: it verifies offline, against the host's key.
  Result v = rt::flightrec({"verify", log["file"].get<std::string>(), "--pubkey", dir.file("keys") + "/flightrec.pub"});
  INFO(v.out << v.err);
  CHECK(v.code == 0);
}

TEST_CASE("jetstream: flightrecd restarted mid-stream with messages unacknowledged; no gap, no duplicate") {
  REQUIRE(is_root());
  TempDir dir;
  REQUIRE(rt::flightrec({"keygen", "--out", dir.file("keys")}).code == 0);
  NatsServer ns;
  StormCgroup cg;
  std::string config = jetstream_config(dir, ns, dir.file("keys"), cg.name);
  Proc storm;
  {
    Daemon d(config);
    REQUIRE_MESSAGE(d.await("running"), d.err);
    storm = cg.storm(5000, 12);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    // The server stops answering: what the daemon publishes now waits, unacknowledged.
    kill(ns.proc.pid, SIGSTOP);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    CHECK(d.stop(SIGTERM).code == 0);
  }
  {
    Daemon d(config);  // the same spool: it goes on from the last acknowledged message
    REQUIRE_MESSAGE(d.await("running"), d.err);
    kill(ns.proc.pid, SIGCONT);
    CHECK(wait(storm).code == 0);
    rmdir(cg.path.c_str());
    REQUIRE_MESSAGE(d.await("sealed"), d.err);
    REQUIRE(outputs_drained(dir.file("control.sock")));
    CHECK(d.stop(SIGTERM).code == 0);
  }
  auto dbs = records_in(dir.file("records"));
  REQUIRE(dbs.size() == 2);  // a session per daemon
  json report = collect(dir.file("collect.yaml"), dir.file("collected"));
  REQUIRE(report.size() == 1);
  CHECK(report[0]["ok"] == true);
  REQUIRE(report[0]["logs"].size() == 2);
  size_t total = 0, recorded = 0;
  for (const auto& db : dbs) recorded += entries(db).size();
  for (const auto& log : report[0]["logs"]) {
    INFO(log.dump());
    CHECK(log["ok"] == true);
    CHECK(log["terminated"] == true);
    CHECK(log["duplicates"] == 0);
    total += log["entries"].get<size_t>();
  }
  CHECK(total == recorded);
}

TEST_CASE("flightrecd: a watch rule's policy (agent-pod) judges its cgroup: a key read, a reverse shell and a module load are violations with their rules, in the record and at rsyslog") {
  REQUIRE(is_root());
  TempDir dir;
  Rsyslog siem;
  std::string name = "flightrec-test-pod-" + std::to_string(getpid()), cg = cgroup2_root() + "/" + name;
  REQUIRE(mkdir(cg.c_str(), 0755) == 0);
  std::string config = dir.file("flightrecd.yaml");
  std::ofstream(config) << "version: 1\nstorage:\n  dir: " << dir.file("records") << "\nsocket:\n  path: "
                        << dir.file("control.sock") << "\nring: 8M\nwatch:\n  - name: pods\n    cgroup: " << name
                        << "\n    policy: agent-pod\noutputs:\n  syslog:\n    - name: siem\n      address: 127.0.0.1:"
                        << siem.port << "\n";
  Result check = run({FLIGHTRECD_BIN, "--config", config, "--check-config"});
  CHECK(check.out.find("judged by policy agent-pod (audit)") != std::string::npos);
  {
    Daemon d(config);
    REQUIRE_MESSAGE(d.await("recording " + cg), d.err);
    // What an agent pod turned against its node would try; nothing is refused.
    std::string acts = "cat /root/.ssh/id_ed25519; bash -c 'exec 3<>/dev/tcp/127.0.0.1/4444'; "
                       "/usr/bin/python3 -c 'import ctypes; ctypes.CDLL(None).syscall(313, -1, bytes(), 0)'; exit 0";
    Result r = run({"sh", "-c", "echo $$ > " + cg + "/cgroup.procs && exec sh -c \"" + acts + "\" 2>/dev/null"});
    CHECK(r.code == 0);
    rmdir(cg.c_str());
    REQUIRE_MESSAGE(d.await("flightrecd: sealed"), d.err);
    CHECK(d.err.find("flightrecd: ALERT seccomp.deny.finit_module would-deny") != std::string::npos);
    CHECK(d.stop(SIGTERM).code == 0);
  }
  auto dbs = records_in(dir.file("records"));
  REQUIRE(dbs.size() == 1);
  auto all = entries(dbs[0]);
  CHECK(all.front()["policy_name"] == "agent-pod");
  CHECK(all.front()["policy_mode"] == "shadow");
  std::map<std::string, json> by_rule;
  for (const auto& v : of_type(all, "violation")) by_rule.emplace(v["rule_id"], v);
  INFO(json(of_type(all, "violation")).dump(1));
  REQUIRE(by_rule.count("filesystem.hidden"));
  CHECK(by_rule["filesystem.hidden"]["path"] == "/root/.ssh/id_ed25519");
  CHECK(by_rule["filesystem.hidden"]["level"] == "ALERT");
  REQUIRE(by_rule.count("network.allow"));
  CHECK(by_rule["network.allow"]["detail"].get<std::string>().find("port 4444") != std::string::npos);
  REQUIRE(by_rule.count("seccomp.deny.finit_module"));
  for (const auto& [rule, v] : by_rule) CHECK(v["action"] == "would-deny");
  CHECK(rt::flightrec({"verify", "--db", dbs[0]}).code == 0);
  // Each at the SIEM, with its rule.
  std::set<std::string> shipped;
  for (const auto& l : siem.await_lines(of_type(all, "violation").size() + 2))
    if (l.msgid == "violation") shipped.insert(sd_param(l.sd, "rule_id"));
  for (const auto& [rule, v] : by_rule) CHECK(shipped.count(rule));
}

TEST_CASE("collect: runs handed to flightrecd verify at any length, their checkpoints in place however their commits were cut") {
  // Once, every handed run past 1000 entries failed: "checkpoint at size
  // 1001 came after entry 2174" (a commit forwarded in two lines had its
  // checkpoints on the last one).
  REQUIRE(is_root());
  TempDir dir;
  REQUIRE(rt::flightrec({"keygen", "--out", dir.file("keys")}).code == 0);
  NatsServer ns;
  std::string config = jetstream_config(dir, ns, dir.file("keys"), "");
  std::map<std::string, size_t> sizes;  // origin -> entries in the run's own record
  {
    Daemon d(config);
    REQUIRE_MESSAGE(d.await("running"), d.err);
    for (int calls : {500, 1001, 5000, 100000}) {
      std::string db = dir.file("r" + std::to_string(calls) + ".db");
      Result r = rt::flightrec({"run", "--policy", "observe", "--tls", "off", "--key", dir.file("keys"), "--daemon",
                                "require", "--daemon-socket", dir.file("control.sock"), "--db", db, "--",
                                BENCH_SYSCALLS_BIN, "getppid", std::to_string(calls)});
      REQUIRE_MESSAGE(r.code == 0, r.err);
      auto record = entries(db);
      REQUIRE(record.size() > size_t(calls));
      sizes[record[0]["origin"]] = record.size();
    }
    REQUIRE(outputs_drained(dir.file("control.sock")));
    CHECK(d.stop(SIGTERM).code == 0);
  }
  json report = collect(dir.file("collect.yaml"), dir.file("collected"));
  REQUIRE(report.size() == 1);
  INFO(report.dump(2));
  CHECK(report[0]["ok"] == true);
  REQUIRE(report[0]["logs"].size() == sizes.size());
  for (const auto& log : report[0]["logs"]) {
    CHECK(log["ok"] == true);
    CHECK(log["terminated"] == true);
    CHECK(log["entries"] == sizes[log["origin"]]);
    CHECK(log["missing_from"] == 0);
    Result v = rt::flightrec({"verify", log["file"].get<std::string>(), "--pubkey", dir.file("keys") + "/flightrec.pub"});
    CHECK(v.code == 0);
  }
}

TEST_CASE("collect: an edited entry, a forged signature, and a host without a pinned key are refused with the reason") {
  REQUIRE(is_root());
  TempDir dir;
  REQUIRE(rt::flightrec({"keygen", "--out", dir.file("keys")}).code == 0);
  NatsServer ns;
  std::string config = jetstream_config(dir, ns, dir.file("keys"), "");
  std::vector<std::string> dbs;
  {
    Daemon d(config);
    REQUIRE_MESSAGE(d.await("running"), d.err);
    for (const char* name : {"a", "b"}) {
      std::string db = dir.file(std::string(name) + ".db");
      Result r = rt::flightrec({"run", "--policy", "observe", "--key", dir.file("keys"), "--daemon", "require",
                                "--daemon-socket", dir.file("control.sock"), "--db", db, "--", "true"});
      REQUIRE_MESSAGE(r.code == 0, r.err);
      dbs.push_back(db);
    }
    REQUIRE(outputs_drained(dir.file("control.sock")));
    CHECK(d.stop(SIGTERM).code == 0);
  }
  auto a = entries(dbs[0]), b = entries(dbs[1]);
  std::string origin_a = a[0]["origin"], origin_b = b[0]["origin"];
  const std::string subject = "flightrec." + host_token();
  // 1. Entry 3 of a, edited, under a new message id (the server keeps both).
  json edited = a[2];
  edited["comm"] = "forged";
  publish(ns.url(), subject,
          {{"Nats-Msg-Id", "forger-1"}, {"Flightrec-Origin", origin_a}, {"Flightrec-Session", "1"},
           {"Flightrec-First", "3"}, {"Flightrec-Last", "3"}},
          edited.dump() + "\n");
  // 2. A log of its own whose genesis names the host's key, its checkpoint signed by another.
  json genesis = b[0];
  std::string forged_origin = origin_b.substr(0, origin_b.size() - 32) + std::string(32, 'f');
  genesis["origin"] = forged_origin;
  std::string body = genesis.dump();
  auto attacker = flightrec::ledger::SigningKey::generate("flightrec-attacker");
  flightrec::ledger::Hash leaf = flightrec::ledger::leaf_hash(body);
  flightrec::ledger::Checkpoint c{forged_origin, 1, leaf, flightrec::ledger::chain_next(flightrec::ledger::kChainStart, leaf)};
  publish(ns.url(), subject,
          {{"Nats-Msg-Id", "forger-2"}, {"Flightrec-Origin", forged_origin}, {"Flightrec-Session", "1"},
           {"Flightrec-First", "1"}, {"Flightrec-Last", "1"}},
          body + "\n" + json({{"checkpoint", flightrec::ledger::sign_checkpoint(c, &attacker)}}).dump() + "\n");
  // 3. A host the config pins no key for.
  publish(ns.url(), "flightrec.intruder",
          {{"Nats-Msg-Id", "forger-4"}, {"Flightrec-Origin", "flightrec/intruder/" + std::string(32, '0')},
           {"Flightrec-Session", "1"}, {"Flightrec-First", "1"}, {"Flightrec-Last", "1"}},
          body + "\n");
  json report = collect(dir.file("collect.yaml"), dir.file("collected"), 1);
  std::map<std::string, json> hosts, logs;
  for (const auto& host : report) hosts[host["host"]] = host;
  REQUIRE(hosts.count(host_token()));
  REQUIRE(hosts.count("intruder"));
  CHECK(hosts["intruder"]["rejected"] == 1);
  CHECK(hosts["intruder"]["rejected_reason"].get<std::string>().find("no key is pinned for host intruder") != std::string::npos);
  for (const auto& log : hosts[host_token()]["logs"]) logs[log["origin"]] = log;
  REQUIRE(logs.size() == 3);
  INFO(report.dump(2));
  CHECK(logs[origin_a]["ok"] == false);
  CHECK(logs[origin_a]["reason"].get<std::string>().find("entry 3 came twice with different contents") != std::string::npos);
  CHECK(logs[origin_b]["ok"] == true);
  CHECK(logs[origin_b]["terminated"] == true);
  CHECK(logs[forged_origin]["ok"] == false);
  CHECK(logs[forged_origin]["reason"].get<std::string>().find("checkpoint at size 1") != std::string::npos);
}

namespace {

// flightrecd with a WebSocket output on a TCP port (its token in a file) and a UNIX socket.
struct StreamDaemon {
  TempDir dir;
  std::string token = "t0ken-" + std::to_string(getpid()) + "-abcdefghijklmnop";
  int port = 0;
  std::unique_ptr<Daemon> d;
  explicit StreamDaemon(const std::string& client_queue = "8M", const std::string& more = "") {
    {
      Listener probe;
      port = probe.port;
    }
    std::string token_file = dir.file("ws.token");
    std::ofstream(token_file) << token << "\n";
    chmod(token_file.c_str(), 0600);
    write_config(client_queue, more);
    d = std::make_unique<Daemon>(dir.file("flightrecd.yaml"));
    REQUIRE_MESSAGE(d->await("running"), d->err);
  }
  // more: further outputs (YAML under outputs:).
  void write_config(const std::string& client_queue, const std::string& more) {
    std::ofstream(dir.file("flightrecd.yaml"))
        << "version: 1\nstorage:\n  dir: " << dir.file("records") << "\nsocket:\n  path: " << dir.file("control.sock")
        << "\nring: 8M\nwatch:\noutputs:\n  websocket:\n    - name: live\n      listen: 127.0.0.1:" << port
        << "\n      token_file: " << dir.file("ws.token") << "\n      unix: " << dir.file("stream.sock")
        << "\n      client_queue: " << client_queue << "\n" << more;
  }
  Proc client(const std::vector<std::string>& args, bool with_token = true) {
    std::vector<std::string> argv = {"python3", WS_CLIENT, "--port", std::to_string(port)};
    if (with_token) argv.insert(argv.end(), {"--token", token});
    argv.insert(argv.end(), args.begin(), args.end());
    return start(argv);
  }
  bool clients_connected(size_t n) {
    for (int i = 0; i < 600; ++i) {
      Result st = rt::flightrec({"status", "--socket", dir.file("control.sock"), "--json"});
      if (st.code == 0) {
        json status = json::parse(st.out);  // held: a range-for over a temporary's member dangles (C++20)
        for (const auto& o : status["outputs"])
          if (o["kind"] == "websocket" && o["connected"] == (n > 0)) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  Result run(const std::vector<std::string>& command, const std::string& db) {
    std::vector<std::string> argv = {"run", "--policy", "observe", "--daemon", "require", "--daemon-socket",
                                     dir.file("control.sock"), "--db", db, "--"};
    argv.insert(argv.end(), command.begin(), command.end());
    return rt::flightrec(argv);
  }
};

// A TCP connection to 127.0.0.1:port, made and left silent; -1 if refused.
int connect_loopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(uint16_t(port));
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof(at)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::vector<json> frames_of(const std::string& out) {
  std::vector<json> v;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) v.push_back(json::parse(l));
  return v;
}

}  // namespace

TEST_CASE("websocket: a client gets a run's entries live, disconnects, resumes from its last seq, and has each entry once") {
  REQUIRE(is_root());
  StreamDaemon sd;
  Proc a = sd.client({"--path", "/stream", "--count", "150"});
  REQUIRE(sd.clients_connected(1));
  std::string db = sd.dir.file("run.db");
  Result r = sd.run({"sh", "-c", "for i in 1 2 3 4 5 6 7 8; do ls / >/dev/null; done"}, db);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  Result got_a = wait(a);
  REQUIRE_MESSAGE(got_a.code == 0, got_a.err);
  auto first = frames_of(got_a.out);
  REQUIRE(first.size() == 150);
  auto record = entries(db);
  REQUIRE(record.size() > 300);
  std::string origin = record[0]["origin"];
  int64_t last = 0;
  for (const auto& f : first)
    if (f["kind"] == "entry") last = f["seq"];
  // Resumed after its last entry: the rest, from the daemon's replay buffer.
  Proc b = sd.client({"--path", "/stream?resume=" + origin + ":" + std::to_string(last), "--until-type", "session_end"});
  Result got_b = wait(b);
  if (got_b.code != 0) sd.d->await("(never said: reads the daemon's stderr so far)", 1, 500);
  REQUIRE_MESSAGE(got_b.code == 0, got_b.err << "flightrecd said:\n" << sd.d->err);
  auto rest = frames_of(got_b.out);
  std::vector<int64_t> seqs;
  for (const auto* part : {&first, &rest})
    for (const auto& f : *part) {
      if (f["kind"] != "entry") continue;
      CHECK(f["origin"] == origin);
      std::string e = f["entry"];
      CHECK(sha256_hex(std::string(1, '\0') + e) == f["leaf"]);
      CHECK(json::parse(e) == record[size_t(f["seq"].get<int64_t>() - 1)]);
      seqs.push_back(f["seq"]);
    }
  REQUIRE(seqs.size() == record.size());  // each entry once, in order
  for (size_t i = 0; i < seqs.size(); ++i) CHECK(seqs[i] == int64_t(i + 1));
  // Filters, over the UNIX socket (root, no token): one log, some types, the buffer first.
  Proc u = start({"python3", WS_CLIENT, "--unix", sd.dir.file("stream.sock"), "--path",
                  "/stream?from=buffer&types=exec,session_end&origin=" + origin, "--until-type", "session_end"});
  Result got_u = wait(u);
  REQUIRE_MESSAGE(got_u.code == 0, got_u.err);
  size_t execs = 0;
  for (const auto& f : frames_of(got_u.out)) {
    if (f["kind"] != "entry") continue;
    CHECK((f["type"] == "exec" || f["type"] == "session_end"));
    execs += f["type"] == "exec";
  }
  CHECK(execs == of_type(record, "exec").size());
  // No token, a wrong one: refused before the upgrade.
  Proc none = sd.client({"--path", "/stream"}, false);
  Result refused = wait(none);
  CHECK(refused.code == 3);
  CHECK(refused.err.find("401") != std::string::npos);
  Proc wrong = start({"python3", WS_CLIENT, "--port", std::to_string(sd.port), "--token", "wrong-token-0123456789", "--path", "/stream"});
  refused = wait(wrong);
  CHECK(refused.code == 3);
  CHECK(refused.err.find("401") != std::string::npos);
  CHECK(sd.d->stop(SIGTERM).code == 0);
}

TEST_CASE("websocket: after running out of descriptors for a while, the daemon goes on accepting clients") {
  REQUIRE(is_root());
  StreamDaemon sd;
  // A descriptor limit at the lowest free number: the next accept fails
  // with EMFILE (those open above it stay open).
  std::set<int> open_now;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(sd.d->proc.pid) + "/fd"))
    open_now.insert(std::stoi(fd.path().filename().string()));
  int lowest_free = 0;
  while (open_now.count(lowest_free)) ++lowest_free;
  rlimit was{};
  REQUIRE(prlimit(sd.d->proc.pid, RLIMIT_NOFILE, nullptr, &was) == 0);
  rlimit tight = was;
  tight.rlim_cur = rlim_t(lowest_free);
  REQUIRE(prlimit(sd.d->proc.pid, RLIMIT_NOFILE, &tight, nullptr) == 0);
  std::vector<int> knocking;
  for (int i = 0; i < 3; ++i) {
    int fd = connect_loopback(sd.port);
    REQUIRE(fd >= 0);  // the listen backlog takes it
    knocking.push_back(fd);
  }
  REQUIRE_MESSAGE(sd.d->await("accept: Too many open files"), sd.d->err);
  for (int fd : knocking) close(fd);
  REQUIRE(prlimit(sd.d->proc.pid, RLIMIT_NOFILE, &was, nullptr) == 0);
  // A client after that is served: before, the output stopped accepting at
  // the first error and this one waited in the backlog for good.
  Proc c = sd.client({"--path", "/stream", "--count", "3", "--timeout", "60"});
  REQUIRE_MESSAGE(sd.clients_connected(1), sd.d->err);
  Result r = sd.run({"true"}, sd.dir.file("run.db"));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  Result got = wait(c);
  sd.d->await("(never said: reads the daemon's stderr so far)", 1, 500);
  CHECK_MESSAGE(got.code == 0, got.err << "flightrecd said:\n" << sd.d->err);
  CHECK(frames_of(got.out).size() == 3);
  CHECK(sd.d->stop(SIGTERM).code == 0);
}

TEST_CASE("websocket: connections that never send a request cannot keep the token's holder out") {
  REQUIRE(is_root());
  StreamDaemon sd("8M", "      max_clients: 3\n");
  // As many idle connections as there are places: each would hold one for
  // its 10 s, and more would follow.
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) {
    int fd = connect_loopback(sd.port);
    REQUIRE(fd >= 0);
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // accepted, waiting for their requests
  Proc c = sd.client({"--path", "/stream", "--count", "3", "--timeout", "60"});
  REQUIRE_MESSAGE(sd.clients_connected(1), sd.d->err);
  Result r = sd.run({"true"}, sd.dir.file("run.db"));
  REQUIRE_MESSAGE(r.code == 0, r.err);
  Result got = wait(c);
  CHECK_MESSAGE(got.code == 0, got.err);
  CHECK(frames_of(got.out).size() == 3);
  // The oldest idle one made room: the daemon closed it.
  char byte;
  timeval quick{2, 0};
  setsockopt(idle[0], SOL_SOCKET, SO_RCVTIMEO, &quick, sizeof(quick));
  CHECK(read(idle[0], &byte, 1) == 0);
  for (int fd : idle) close(fd);
  CHECK(sd.d->stop(SIGTERM).code == 0);
}

TEST_CASE("websocket: a client too slow for the stream is cut off and told where to resume; the record never waits") {
  REQUIRE(is_root());
  StreamDaemon sd("64K");
  // Reads nothing for 4 s, through a small receive buffer.
  Proc slow = sd.client({"--path", "/stream", "--sleep", "4", "--rcvbuf", "4096"});
  REQUIRE(sd.clients_connected(1));
  std::string db = sd.dir.file("storm.db");
  Result r = sd.run({BENCH_SYSCALLS_BIN, "getppid", "30000"}, db);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  Result got = wait(slow);
  REQUIRE_MESSAGE(got.code == 0, got.err);
  auto frames = frames_of(got.out);
  REQUIRE(!frames.empty());
  const json& last = frames.back();
  INFO(last.dump());
  REQUIRE(last.contains("error"));
  CHECK(last["error"] == "too slow");
  auto record = entries(db);
  std::string origin = record[0]["origin"];
  REQUIRE(last["resume"].contains(origin));
  int64_t resume = last["resume"][origin];
  int64_t expect = 1;
  for (const auto& f : frames)
    if (f.value("kind", "") == "entry") CHECK(f["seq"].get<int64_t>() == expect++);
  CHECK(resume == expect - 1);                 // where it stopped
  CHECK(resume < int64_t(record.size()));      // cut off before the end
  CHECK(record.back()["type"] == "session_end");  // the record is whole
  // Resumed there, it gets the rest from the replay buffer, paced by its
  // reading (the rest is far more than its queue's bound): no gap.
  Proc again = sd.client({"--path", "/stream?resume=" + origin + ":" + std::to_string(resume), "--until-type", "session_end"});
  Result rest = wait(again);
  REQUIRE_MESSAGE(rest.code == 0, rest.err);
  for (const auto& f : frames_of(rest.out)) {
    REQUIRE(!f.contains("error"));
    if (f["kind"] == "entry") CHECK(f["seq"].get<int64_t>() == expect++);
  }
  CHECK(expect == int64_t(record.size()) + 1);
  CHECK(sd.d->stop(SIGTERM).code == 0);
}

TEST_CASE("outputs: a SIGHUP that changes them replaces them on the same port and spool") {
  REQUIRE(is_root());
  int nats_port;  // no server there: the JetStream output spools
  {
    Listener probe;
    nats_port = probe.port;
  }
  std::string js = "  jetstream:\n    - name: fleet\n      url: nats://127.0.0.1:" + std::to_string(nats_port) + "\n";
  StreamDaemon sd("8M", js);
  std::string db = sd.dir.file("before.db");
  REQUIRE(sd.run({"true"}, db).code == 0);
  sd.write_config("4M", js + "      spool: {max: 2G}\n");
  kill(sd.d->proc.pid, SIGHUP);
  REQUIRE_MESSAGE(sd.d->await("config reloaded"), sd.d->err);
  CHECK(sd.d->err.find("could not start") == std::string::npos);
  // The new stream listens on the same port; the new output has the old spool.
  Proc c = sd.client({"--path", "/stream", "--until-type", "session_end"});
  REQUIRE(sd.clients_connected(1));
  REQUIRE(sd.run({"true"}, sd.dir.file("after.db")).code == 0);
  Result got = wait(c);
  REQUIRE_MESSAGE(got.code == 0, got.err);
  CHECK(frames_of(got.out).back()["type"] == "session_end");
  Result st = rt::flightrec({"status", "--socket", sd.dir.file("control.sock"), "--json"});
  REQUIRE(st.code == 0);
  json outputs = json::parse(st.out)["outputs"];
  REQUIRE(outputs.size() == 2);
  json fleet = outputs[0]["kind"] == "jetstream" ? outputs[0] : outputs[1];
  // Both runs' entries wait in the spool: the first run's from before the reload too.
  CHECK(fleet["queued"].get<uint64_t>() >= 2);
  CHECK(sd.d->stop(SIGTERM).code == 0);
}
