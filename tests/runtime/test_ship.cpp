// Fleet shipping to real engines: flightrecd's syslog outputs against real
// rsyslog daemons (one on TCP, one on TLS with a certificate made here),
// fed by runs handed to the daemon that attempt escapes, and by a
// daemon's own watch session.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "runtime/harness.h"

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
