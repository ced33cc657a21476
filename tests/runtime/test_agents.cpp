// The coding agents people run, installed from npm by tools/install-deps.sh
// at pinned versions, each driven through a task (a shell command, then a
// file edit) by a local HTTPS mock of its model API (tests/programs/
// mock_llm_api.py, with a test CA made here), under flightrec run with the
// shipped policy for that agent: the task is done, the edit is on the host,
// the record holds the tool command's exec and the file change, and
// stderr holds no ALERT. Codex runs with its own sandbox on. Each agent's
// model traffic is in the record in plaintext, and decoded into its turns:
// Claude Code's (BoringSSL linked into Bun, stripped) and Codex's (rustls
// on aws-lc, linked in and stripped), at two releases each, under run and
// under watch; a build the matchers do not know is not probed.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "common/text.h"
#include "probe/tls_finder.h"
#include "runtime/harness.h"

using nlohmann::json;
using namespace rt;

namespace {

const std::string kAgents = "/opt/flightrec-test-agents/node_modules/.bin/";

// A git work tree with the mock's CA in it (where the sandbox can read it).
std::string git_work(const TempDir& dir, const MockApi& api) {
  std::string work = dir.file("work");
  mkdir(work.c_str(), 0755);
  REQUIRE(run_in(work, {"git", "init", "-q", "."}).code == 0);
  REQUIRE(run({"cp", api.ca, work + "/.test-ca.pem"}).code == 0);
  return work;
}

// The agent's run: stdin at end of file (both read it when it is a pipe).
Result run_agent(const std::string& work, const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  Proc p = start_in(work, argv, env, true);
  close(p.in_fd);
  p.in_fd = -1;
  return wait(p);
}

// Codex's config.toml for the mock at `port` (Codex reads it from $CODEX_HOME).
std::string codex_config(const std::string& port) {
  return "model = \"gpt-5.5\"\nmodel_provider = \"mock\"\n[model_providers.mock]\nname = \"mock\"\n"
         "base_url = \"https://127.0.0.1:" + port + "/v1\"\nwire_api = \"responses\"\nenv_key = \"MOCK_API_KEY\"\n"
         "[analytics]\nenabled = false\n[features]\nplugins = false\n";
}

// Codex run on the host (watched, or in a pod flightrecd records) on the
// test's task, against a mock of its own: its work tree, its $CODEX_HOME.
struct CodexOnHost {
  MockApi api;
  TempDir dir;
  std::string work, home;
  explicit CodexOnHost(const std::vector<std::string>& mock_options = {}) : api(mock_options) {
    REQUIRE_MESSAGE(is_root(), "runtime tests need root");
    REQUIRE_MESSAGE(access((kAgents + "codex").c_str(), X_OK) == 0, "Codex is not installed: run tools/install-deps.sh");
    REQUIRE(!cgroup2_root().empty());
    work = git_work(dir, api);
    home = dir.file("codex-home");
    mkdir(home.c_str(), 0700);
    std::ofstream(home + "/config.toml") << codex_config(std::to_string(api.port));
  }
  std::vector<std::string> argv() const {
    return {kAgents + "codex", "exec", "--skip-git-repo-check", "-s", "workspace-write", "Run a shell command, then write hello.txt"};
  }
  std::vector<std::string> env() const {
    return {"MOCK_API_KEY=sk-flightrec-test-key-0123456789", "CODEX_HOME=" + home, "SSL_CERT_FILE=" + api.ca};
  }
};

// flightrec run of Codex (`program`: npm's launcher or the binary) on the
// test's task with its own sandbox on, against the mock at `port`, its
// config and the mock's CA in the work tree.
std::vector<std::string> codex_run(const std::string& program, const std::string& db, const std::string& work,
                                   const std::string& port) {
  std::ofstream(work + "/.codex-config.toml") << codex_config(port);
  return {FLIGHTREC_BIN, "run", "--policy", "codex", "--db", db, "--allow", "127.0.0.1:" + port, "--env", "MOCK_API_KEY",
          "--env", "SSL_CERT_FILE=" + work + "/.test-ca.pem", "--env", "CODEX_HOME=/tmp/home/.codex", "--", "sh", "-c",
          "mkdir -p \"$CODEX_HOME\" && cp .codex-config.toml \"$CODEX_HOME/config.toml\" && exec " + program +
              " exec --skip-git-repo-check -s workspace-write 'Run a shell command, then write hello.txt'"};
}

// How run_watched starts the agent.
struct Watched {
  // Run first in the cgroup (e.g. `codex --version`), until the watch has
  // read its exit: the agent's program is probed before the agent starts,
  // as it is once a pod's agent has run there.
  std::vector<std::string> warm;
  // The watch stopped (SIGSTOP) from before the agent starts until this
  // mock has its first request: the agent's exec is read after its first
  // handshake, as under a recorder running behind.
  const MockApi* stopped_until_request = nullptr;
};

// Runs argv in a new cgroup that `flightrec watch` records into db; the
// watch's own result in *watched.
Result run_watched(const std::string& work, const std::string& db, const std::vector<std::string>& argv,
                   const std::vector<std::string>& env, Result* watched, const Watched& how = {}) {
  std::string cg = cgroup2_root() + "/flightrec-test-agent-" + std::to_string(getpid());
  REQUIRE(mkdir(cg.c_str(), 0755) == 0);
  Proc watch = start({FLIGHTREC_BIN, "watch", "--cgroup", cg, "--db", db});
  std::string said = await_said(watch, "watching");  // its programs attached
  REQUIRE_MESSAGE(said.find("watching") != std::string::npos, said);
  // Started in the cgroup: probed at its exec, as a pod's agent would be.
  auto in_cgroup = [&](const std::vector<std::string>& command) {
    std::vector<std::string> argv = {"sh", "-c", "echo $$ > " + cg + "/cgroup.procs && exec \"$0\" \"$@\""};
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  };
  if (!how.warm.empty()) {
    Proc warm = start_in(work, in_cgroup(how.warm), env);
    pid_t warm_pid = warm.pid;
    REQUIRE(wait(warm).code == 0);
    // Observers see an entry once it is sealed, in record order: the exit
    // of the warm run in the record means its programs' execs were seen.
    bool seen = eventually([&] {
      Result exits = rt::flightrec({"query", "--db", db, "--type", "exit", "--pid", std::to_string(warm_pid)});
      return exits.code == 0 && !exits.out.empty();
    }, 60000);
    REQUIRE_MESSAGE(seen, "the watch did not record the warm run's exit");
  }
  Result r;
  if (how.stopped_until_request) {
    REQUIRE(kill(watch.pid, SIGSTOP) == 0);
    Proc agent = start_in(work, in_cgroup(argv), env, true);
    close(agent.in_fd);
    agent.in_fd = -1;
    bool asked = eventually([&] { return !how.stopped_until_request->requests().empty(); }, 60000);
    kill(watch.pid, SIGCONT);
    r = wait(agent);
    CHECK_MESSAGE(asked, "the agent made no request");
  } else {
    r = run_agent(work, in_cgroup(argv), env);
  }
  kill(watch.pid, SIGINT);
  *watched = wait(watch);
  rmdir(cg.c_str());
  return r;
}

std::string data_of(const json& e) { return *flightrec::base64_decode(e["data_b64"].get<std::string>()); }

// Each TLS connection's plaintext in one direction, in stream order.
std::map<std::string, std::string> tls_streams(const std::vector<json>& all, const std::string& direction) {
  std::map<std::string, std::vector<json>> by_conn;
  for (const auto& e : of_type(all, "tls"))
    if (e["direction"] == direction)
      by_conn[std::to_string(e["pid"].get<int64_t>()) + "/" + std::to_string(e["ssl"].get<uint64_t>())].push_back(e);
  std::map<std::string, std::string> out;
  for (auto& [conn, es] : by_conn) {
    std::stable_sort(es.begin(), es.end(), [](const json& a, const json& b) {
      return a["stream_offset"].get<uint64_t>() < b["stream_offset"].get<uint64_t>();
    });
    for (const auto& e : es) out[conn] += data_of(e);
  }
  // An HTTP/2 connection's bodies are cut in DATA frames: each stream's
  // DATA put together is one more "stream" to look in (conn#id).
  std::map<std::string, std::string> bodies;
  for (const auto& [conn, bytes] : out) {
    const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    size_t at = bytes.starts_with(preface) ? preface.size() : 0;
    if (!at && (bytes.size() < 9 || bytes[3] != 4)) continue;  // neither the client's preface nor a server's SETTINGS
    while (at + 9 <= bytes.size()) {
      auto b = [&](size_t i) { return uint32_t(uint8_t(bytes[at + i])); };
      uint32_t len = b(0) << 16 | b(1) << 8 | b(2), id = (b(5) << 24 | b(6) << 16 | b(7) << 8 | b(8)) & 0x7fffffff;
      if (at + 9 + len > bytes.size()) break;
      if (b(3) == 0) {  // DATA, its padding taken off
        std::string payload = bytes.substr(at + 9, len);
        if ((b(4) & 8) && !payload.empty()) payload = payload.substr(1, payload.size() - 1 - std::min<size_t>(uint8_t(payload[0]), payload.size() - 1));
        bodies[conn + "#" + std::to_string(id)] += payload;
      }
      at += 9 + len;
    }
  }
  out.insert(bodies.begin(), bodies.end());
  return out;
}

bool in_any(const std::map<std::string, std::string>& streams, const std::string& bytes) {
  for (const auto& [conn, s] : streams)
    if (s.find(bytes) != std::string::npos) return true;
  return false;
}

// The agent's model traffic is in the record in plaintext: every request
// body byte for byte as the mock received it, the prompt, the model's tool
// call and its last answer; no hello went uncaptured; the turns decoded.
void check_model_traffic(const std::string& db, const MockApi& api, const std::string& prompt,
                         const std::string& tool_command, const std::string& answer) {
  auto all = entries(db);
  auto sent = tls_streams(all, "send"), received = tls_streams(all, "recv");
  CHECK_MESSAGE(!sent.empty(), "no tls entries: the agent's TLS was not captured");
  size_t bodies = 0;
  for (const auto& req : api.requests()) {
    if (!req.contains("wire_b64") || req["chunked"] == true) continue;
    std::string wire = *flightrec::base64_decode(req["wire_b64"].get<std::string>());
    if (wire.empty()) continue;
    ++bodies;
    CHECK_MESSAGE(in_any(sent, wire), "a request body (" << wire.size() << " bytes, " << req["path"]
                                                          << ") is not in the captured plaintext");
  }
  CHECK(bodies > 0);
  CHECK_MESSAGE(in_any(sent, prompt), "the prompt is not in what the agent sent");
  // The model's tool calls, by the ids the mock gave them (their input
  // comes in pieces: the tool_call entries below put it together).
  size_t tool_ids = 0;
  for (const auto& req : api.requests())
    for (const auto& id : req.value("tool_ids", json::array())) {
      ++tool_ids;
      CHECK_MESSAGE(in_any(received, id.get<std::string>()), "tool call " << id << " is not in what the agent received");
    }
  CHECK(tool_ids >= 2);
  CHECK_MESSAGE(in_any(received, answer), "the model's answer is not in what the agent received");
  for (const auto& e : of_type(all, "tls_uncaptured")) CHECK_MESSAGE(false, "uncaptured: " << e.dump());
  // What the turns decoder made of it (issue: the agent's turns).
  CHECK(!of_type(all, "llm_call").empty());
  bool tool_linked = false;
  for (const auto& t : of_type(all, "tool_call")) {
    if (t.value("input", "").find(tool_command) == std::string::npos) continue;
    for (size_t i = 0; i < t["act_kinds"].size(); ++i)
      tool_linked |= t["act_kinds"][i] == "exec" && t["act_links"][i] == "argv";
  }
  CHECK_MESSAGE(tool_linked, "no tool_call entry names the shell command and links its exec");
}

// flightrec run of Claude Code (the program `claude`) on the test's task,
// against the mock at `port`, its CA in the work tree.
std::vector<std::string> claude_run(const std::string& claude, const std::string& db, const std::string& work,
                                    const std::string& port) {
  return {FLIGHTREC_BIN, "run", "--policy", "claude-code", "--db", db, "--allow", "127.0.0.1:" + port, "--env",
          "ANTHROPIC_API_KEY", "--env", "ANTHROPIC_BASE_URL=https://127.0.0.1:" + port, "--env",
          "NODE_EXTRA_CA_CERTS=" + work + "/.test-ca.pem", "--env", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
          "--env", "IS_SANDBOX=1", "--", claude, "-p", "Run a shell command, then write hello.txt",
          "--dangerously-skip-permissions"};
}

void check_record(const std::string& db, const std::string& work) {
  auto all = entries(db);
  bool tool_exec = false;
  for (const auto& e : of_type(all, "exec"))
    if (e.contains("argv") && e["argv"].dump().find("echo flightrec-tool-ran > tool_ran.txt") != std::string::npos)
      tool_exec = true;
  CHECK_MESSAGE(tool_exec, "no exec entry runs the model's tool command");
  bool edit = false;
  for (const auto& e : of_type(all, "file_change"))
    if (e["path"] == work + "/hello.txt" && e["when"] == "end") {
      edit = true;
      CHECK(e["change"] == "created");
      CHECK(e["applied"] == 1);
    }
  CHECK_MESSAGE(edit, "no file_change entry for hello.txt");
  for (const auto& v : of_type(all, "violation")) CHECK_MESSAGE(v["level"] != "ALERT", v.dump());
  CHECK(rt::flightrec({"verify", "--db", db}).code == 0);
}

}  // namespace

TEST_CASE("coding agents: Claude Code (two releases, the mock offering h2 as the real API does) under its shipped policy runs a command and edits a file; its model traffic is in the record, no ALERT") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  // The newest pinned release, and one 3.5 months older (tools/install-deps.sh).
  for (const std::string& claude : {kAgents + "claude", std::string("/opt/flightrec-test-agents/older/node_modules/.bin/claude")}) {
    INFO(claude);
    REQUIRE_MESSAGE(access(claude.c_str(), X_OK) == 0, "Claude Code is not installed: run tools/install-deps.sh");
    MockApi api({"--http2"});
    TempDir dir;
    std::string work = git_work(dir, api), db = dir.file("s.db"), port = std::to_string(api.port);
    Result r = run_agent(work, claude_run(claude, db, work, port), {"ANTHROPIC_API_KEY=sk-ant-flightrec-test-key-0123456789"});
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    CHECK(slurp(work + "/tool_ran.txt") == "flightrec-tool-ran\n");
    CHECK(slurp(work + "/hello.txt") == "edited by agent\n");
    CHECK(r.err.find("ALERT") == std::string::npos);
    check_record(db, work);
    // The API key reached the agent (the mock answered) but not the record.
    for (const auto& e : entries(db)) CHECK(e.dump().find("sk-ant-flightrec-test-key") == std::string::npos);
    check_model_traffic(db, api, "Run a shell command, then write hello.txt", "echo flightrec-tool-ran > tool_ran.txt",
                        "Done: ran the command and wrote hello.txt.");
  }
}

TEST_CASE("coding agents: Claude Code run in a watched cgroup; its model traffic is in the watch's record") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  REQUIRE_MESSAGE(access((kAgents + "claude").c_str(), X_OK) == 0, "Claude Code is not installed: run tools/install-deps.sh");
  REQUIRE(!cgroup2_root().empty());
  MockApi api;
  TempDir dir;
  std::string work = git_work(dir, api), db = dir.file("w.db"), home = dir.file("home"), port = std::to_string(api.port);
  mkdir(home.c_str(), 0700);
  Result w;
  Result r = run_watched(work, db,
                         {kAgents + "claude", "-p", "Run a shell command, then write hello.txt", "--dangerously-skip-permissions"},
                         {"ANTHROPIC_API_KEY=sk-ant-flightrec-test-key-0123456789",
                          "ANTHROPIC_BASE_URL=https://127.0.0.1:" + port, "NODE_EXTRA_CA_CERTS=" + api.ca,
                          "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "IS_SANDBOX=1", "HOME=" + home},
                         &w);
  INFO(r.out << r.err << w.err);
  CHECK(r.code == 0);
  CHECK(w.code == 0);
  CHECK(slurp(work + "/hello.txt") == "edited by agent\n");
  for (const auto& e : entries(db)) CHECK(e.dump().find("sk-ant-flightrec-test-key") == std::string::npos);
  check_model_traffic(db, api, "Run a shell command, then write hello.txt", "echo flightrec-tool-ran > tool_ran.txt",
                      "Done: ran the command and wrote hello.txt.");
}

TEST_CASE("coding agents: a Claude Code build whose SSL_write is not told apart is not probed; tls_uncaptured says what was tried") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  std::string claude = std::filesystem::canonical(kAgents + "claude");
  MockApi api;
  TempDir dir;
  std::string work = git_work(dir, api), db = dir.file("s.db"), port = std::to_string(api.port);
  // A copy whose SSL_write reports another reason than BAD_LENGTH (111):
  // in the function flightrec finds, "mov edi, 16; xor esi, esi; mov edx,
  // 111" (its ERR_put_error(SSL, 0, BAD_LENGTH, ...)) made "mov edx, 112".
  Result found = rt::flightrec({"probe", "--tls", claude, "--json"});
  REQUIRE(found.code == 0);
  json functions = json::parse(found.out)["functions"];
  REQUIRE(functions[0]["name"] == "SSL_write");
  size_t write_at = functions[0]["file_offset"].get<size_t>();
  std::string bytes = slurp(claude), copy = work + "/claude-unknown";  // where the sandbox sees it
  const std::string site("\xbf\x10\x00\x00\x00\x31\xf6\xba\x6f\x00\x00\x00", 12);
  size_t at = bytes.find(site, write_at);
  REQUIRE(at < write_at + 2048);
  bytes[at + 8] = 0x70;
  { std::ofstream(copy, std::ios::binary) << bytes; }
  bytes.clear();
  chmod(copy.c_str(), 0755);
  Result probe = rt::flightrec({"probe", "--tls", copy});
  CHECK(probe.code == 1);
  CHECK(probe.out.find("BoringSSL, linked in, not captured") != std::string::npos);
  CHECK(probe.out.find("SSL_write not told apart (0 functions match), SSL_read found") != std::string::npos);
  // Run: the agent does its task all the same; nothing of its TLS is
  // taken for plaintext; its hellos say what was tried.
  Result r = run_agent(work, claude_run(copy, db, work, port), {"ANTHROPIC_API_KEY=sk-ant-flightrec-test-key-0123456789"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(slurp(work + "/hello.txt") == "edited by agent\n");
  auto all = entries(db);
  CHECK(of_type(all, "tls").empty());
  auto uncaptured = of_type(all, "tls_uncaptured");
  REQUIRE(!uncaptured.empty());
  for (const auto& u : uncaptured) CHECK(u.value("tried", "").find("SSL_write not told apart") != std::string::npos);
}

TEST_CASE("coding agents: Codex (two releases) with its own sandbox (-s workspace-write) under its shipped policy; its model traffic is in the record, no ALERT") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  // The newest pinned release, and one 4 months older (tools/install-deps.sh).
  for (const std::string& codex : {kAgents + "codex", std::string("/opt/flightrec-test-agents/older/node_modules/.bin/codex")}) {
    INFO(codex);
    REQUIRE_MESSAGE(access(codex.c_str(), X_OK) == 0, "Codex is not installed: run tools/install-deps.sh");
    MockApi api;
    TempDir dir;
    std::string work = git_work(dir, api), db = dir.file("s.db"), port = std::to_string(api.port);
    // Its program read the first time (nothing kept of it from before):
    // Codex handshakes about as soon as that read ends, so it is held still
    // meanwhile, and its first request is in the record all the same.
    std::error_code ec;
    for (const auto& kept : std::filesystem::directory_iterator(flightrec::probe::kTlsFindCache, ec))
      std::filesystem::remove(kept.path(), ec);
    Result r = run_agent(work, codex_run(codex, db, work, port), {"MOCK_API_KEY=sk-flightrec-test-key-0123456789"});
    INFO(r.out << r.err);
    CHECK(r.code == 0);
    bool held = false;
    for (const auto& h : of_type(entries(db), "program_held"))
      held |= h.value("exe", "").ends_with("/bin/codex") && h.value("held_ns", 0) > 0;
    CHECK_MESSAGE(held, "no program_held entry for Codex's binary");
    CHECK(slurp(work + "/tool_ran.txt") == "flightrec-tool-ran\n");
    CHECK(slurp(work + "/hello.txt") == "edited by agent\n");
    CHECK(r.err.find("ALERT") == std::string::npos);
    CHECK(r.err.find("bwrap:") == std::string::npos);
    check_record(db, work);
    // Its sandbox's namespaces are in the record.
    bool nested = false;
    for (const auto& f : of_type(entries(db), "fork")) nested = nested || f.value("new_namespaces", 0) == 1;
    CHECK(nested);
    // Its model traffic (rustls on aws-lc, linked in and stripped) too, each
    // record on its connection: the socket to the mock, in both directions.
    for (const auto& e : entries(db)) CHECK(e.dump().find("sk-flightrec-test-key") == std::string::npos);
    std::set<std::string> directions;
    for (const auto& e : of_type(entries(db), "tls")) {
      INFO(e.dump());
      CHECK(!e.contains("connection_unknown"));
      CHECK(e["func"].get<std::string>().starts_with("EVP_AEAD_CTX_"));
      CHECK(e["fd"].get<int64_t>() >= 0);
      CHECK(e.value("remote_port", 0) == api.port);
      directions.insert(e["direction"].get<std::string>());
    }
    CHECK(directions == std::set<std::string>{"recv", "send"});
    check_model_traffic(db, api, "Run a shell command, then write hello.txt", "echo flightrec-tool-ran > tool_ran.txt",
                        "Done: ran the command and wrote hello.txt.");
  }
}

TEST_CASE("coding agents: Codex run in a watched cgroup, over HTTP/2 (the mock offers h2, as the real API does); its model traffic is in the watch's record") {
  CodexOnHost codex({"--http2"});
  const MockApi& api = codex.api;
  std::string work = codex.work, db = codex.dir.file("w.db");
  Result w;
  // Warmed: its probes on before it starts (a watch running behind has it
  // held, or reads its exec after its first handshake: the next tests);
  // this one checks what is captured once they are on.
  Result r = run_watched(work, db, codex.argv(), codex.env(), &w, {.warm = {kAgents + "codex", "--version"}});
  INFO(r.out << r.err << w.err);
  CHECK(r.code == 0);
  CHECK(w.code == 0);
  CHECK(slurp(work + "/hello.txt") == "edited by agent\n");
  for (const auto& e : entries(db)) CHECK(e.dump().find("sk-flightrec-test-key") == std::string::npos);
  check_model_traffic(db, api, "Run a shell command, then write hello.txt", "echo flightrec-tool-ran > tool_ran.txt",
                      "Done: ran the command and wrote hello.txt.");
  // It took h2: every model call names its stream, and `flightrec agent` reads the turns back from the frames.
  auto calls = of_type(entries(db), "llm_call");
  for (const auto& c : calls) CHECK(c.value("http2_stream", 0) > 0);
  Result view = rt::flightrec({"agent", "--db", db, "--json"});
  REQUIRE(view.code == 0);
  json turns = json::parse(view.out)["turns"];
  REQUIRE(turns.size() == calls.size());
  CHECK(turns.back()["answer"] == "Done: ran the command and wrote hello.txt.");
}

TEST_CASE("coding agents: Codex in a cgroup flightrecd records (a watch rule with tls); its model traffic is in the record") {
  CodexOnHost codex;
  const MockApi& api = codex.api;
  const TempDir& dir = codex.dir;
  std::string work = codex.work;
  std::string name = "flightrec-test-pod-" + std::to_string(getpid()), cg = cgroup2_root() + "/" + name;
  REQUIRE(mkdir(cg.c_str(), 0755) == 0);
  std::string config = dir.file("flightrecd.yaml");
  std::ofstream(config) << "version: 1\nstorage:\n  dir: " << dir.file("records") << "\nsocket:\n  path: "
                        << dir.file("control.sock") << "\nwatch:\n  - name: agents\n    cgroup: \"" << name
                        << "\"\n    tls: true\n";
  Daemon d(config);
  REQUIRE_MESSAGE(d.await("flightrecd: recording"), d.err);
  // Codex's program is first exec'd here, in the pod: probed as it starts.
  std::vector<std::string> in_pod = {"sh", "-c", "echo $$ > " + cg + "/cgroup.procs && exec \"$0\" \"$@\""};
  for (const auto& arg : codex.argv()) in_pod.push_back(arg);
  Result r = run_agent(work, in_pod, codex.env());
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(eventually([&] { return rmdir(cg.c_str()) == 0; }, 10000));  // once the last of its processes is gone
  REQUIRE_MESSAGE(d.await("flightrecd: sealed"), d.err);
  d.stop(SIGTERM);
  CHECK(slurp(work + "/hello.txt") == "edited by agent\n");
  auto dbs = records_in(dir.file("records"));
  REQUIRE(dbs.size() == 1);
  check_model_traffic(dbs[0], api, "Run a shell command, then write hello.txt", "echo flightrec-tool-ran > tool_ran.txt",
                      "Done: ran the command and wrote hello.txt.");
}

TEST_CASE("coding agents: Codex exec'd while its watch runs behind: its handshake came before its probes, and the record says so at once") {
  CodexOnHost codex;
  const MockApi& api = codex.api;
  std::string db = codex.dir.file("w.db");
  Result w;
  Result r = run_watched(codex.work, db, codex.argv(), codex.env(), &w, {.warm = {}, .stopped_until_request = &api});
  INFO(r.out << r.err << w.err);
  CHECK(r.code == 0);
  CHECK(w.code == 0);
  auto all = entries(db);
  std::map<int64_t, json> hellos;
  for (const auto& h : of_type(all, "tls_hello")) hellos[h["seq"].get<int64_t>()] = h;
  // The first handshake to the mock: not in a probed call, its program
  // probed only later, so said at once (before the session's end), and
  // marked late.
  int late = 0;
  for (const auto& u : of_type(all, "tls_uncaptured")) {
    if (u.value("probes_late", 0) != 1) continue;
    ++late;
    REQUIRE(hellos.count(u["of_seq"].get<int64_t>()));
    const json& hello = hellos[u["of_seq"].get<int64_t>()];
    INFO(hello.dump());
    bool to_mock = false;  // its process connected to the mock
    for (const auto& c : of_type(all, "connect"))
      to_mock |= c["pid"] == hello["pid"] && c.value("port", 0) == api.port;
    CHECK(to_mock);
    CHECK(hello["in_probed_call"] == 0);
    CHECK(u["subject_pid"] == hello["pid"]);
    CHECK(u.value("exe", "").find("/codex") != std::string::npos);
    bool said_before_exit = false;  // not held to the session's end
    for (const auto& x : of_type(all, "exit"))
      if (x["pid"] == hello["pid"]) said_before_exit = u["seq"].get<int64_t>() < x["seq"].get<int64_t>();
    CHECK(said_before_exit);
  }
  CHECK(late >= 1);
  // The human view says what it means.
  Result q = rt::flightrec({"query", "--db", db, "--type", "tls_uncaptured"});
  CHECK(q.out.find("began before its program's probes were attached") != std::string::npos);
}

TEST_CASE("coding agents: a Codex build whose AEAD opens are not told apart is not probed; tls_uncaptured says what was tried") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  // The program itself, not npm's launcher script.
  std::string codex = "/opt/flightrec-test-agents/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
  REQUIRE_MESSAGE(access(codex.c_str(), X_OK) == 0, "Codex is not installed: run tools/install-deps.sh");
  MockApi api;
  TempDir dir;
  std::string work = git_work(dir, api), db = dir.file("s.db"), port = std::to_string(api.port);
  // A copy whose EVP_AEAD_CTX_open and _open_gather report another reason
  // than OUTPUT_ALIASES_INPUT (115): "mov edi, 30; xor esi, esi; mov edx,
  // 115" (ERR_put_error(CIPHER, 0, 115, ...)) made "mov edx, 116" in both.
  Result found = rt::flightrec({"probe", "--tls", codex, "--json"});
  REQUIRE(found.code == 0);
  // Where the sandbox sees it, as npm lays it out: bin/codex beside its
  // resources (its bubblewrap), which it finds from its own path.
  std::string bytes = slurp(codex), copy = work + "/unknown/bin/codex";
  std::string vendor = std::filesystem::path(codex).parent_path().parent_path();
  std::filesystem::create_directories(work + "/unknown/bin");
  for (const char* sub : {"codex-resources", "codex-path"})
    std::filesystem::create_symlink(vendor + "/" + sub, work + "/unknown/" + sub);
  const std::string site("\xbf\x1e\x00\x00\x00\x31\xf6\xba\x73\x00\x00\x00", 12);
  size_t patched = 0;
  json functions = json::parse(found.out)["functions"];
  for (const auto& f : functions) {
    if (!f["name"].get<std::string>().starts_with("EVP_AEAD_CTX_open")) continue;
    size_t from = f["file_offset"].get<size_t>();
    for (size_t at = bytes.find(site, from); at != std::string::npos && at < from + 1024; at = bytes.find(site, at + 1)) {
      bytes[at + 8] = 0x74;
      ++patched;
    }
  }
  REQUIRE(patched >= 2);
  { std::ofstream(copy, std::ios::binary) << bytes; }
  bytes.clear();
  chmod(copy.c_str(), 0755);
  Result probe = rt::flightrec({"probe", "--tls", copy});
  CHECK(probe.code == 1);
  CHECK(probe.out.find("not captured") != std::string::npos);
  CHECK(probe.out.find("EVP_AEAD_CTX_open not found") != std::string::npos);
  CHECK(probe.out.find("EVP_AEAD_CTX_open_gather not found") != std::string::npos);
  // Run: the agent does its task all the same; nothing of its TLS is taken
  // for plaintext; its hellos say what was tried.
  Result r = run_agent(work, codex_run("./unknown/bin/codex", db, work, port), {"MOCK_API_KEY=sk-flightrec-test-key-0123456789"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(slurp(work + "/hello.txt") == "edited by agent\n");
  auto all = entries(db);
  CHECK(of_type(all, "tls").empty());
  auto uncaptured = of_type(all, "tls_uncaptured");
  REQUIRE(!uncaptured.empty());
  for (const auto& u : uncaptured) CHECK(u.value("tried", "").find("EVP_AEAD_CTX_open not found") != std::string::npos);
}

TEST_CASE("tls finder: what was found in an agent's binary is kept per file; a changed file, or a bad entry, is read again") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  std::string codex = "/opt/flightrec-test-agents/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
  REQUIRE_MESSAGE(access(codex.c_str(), X_OK) == 0, "Codex is not installed: run tools/install-deps.sh");
  struct stat st {};
  REQUIRE(stat(codex.c_str(), &st) == 0);
  auto probe = [&](bool cache) {
    std::vector<std::string> argv = {"probe", "--tls", codex, "--json"};
    if (!cache) argv.push_back("--no-cache");
    Result r = rt::flightrec(argv);
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    return json::parse(r.out);
  };
  REQUIRE(chmod(codex.c_str(), st.st_mode & 07777) == 0);  // its ctime moves: an entry made before is not this file's
  json first = probe(true), second = probe(true);
  CHECK(first["cached"] == false);
  CHECK(second["cached"] == true);
  CHECK(second["functions"] == first["functions"]);
  CHECK(first["functions"].size() == 4);
  CHECK(probe(false)["cached"] == false);
  // A bad entry (cut short, or offsets outside the file) is not used.
  char prefix[64];
  std::snprintf(prefix, sizeof(prefix), "%lx-%lx-", (unsigned long)st.st_ino, (unsigned long)st.st_size);
  size_t spoiled = 0;
  for (const auto& e : std::filesystem::directory_iterator("/var/cache/flightrec/tls"))
    if (e.path().filename().string().starts_with(prefix)) {
      std::string text = slurp(e.path());
      size_t at = text.find("\"offsets\":[");
      REQUIRE(at != std::string::npos);
      text.insert(at + 11, "99999999999,");
      std::ofstream(e.path()) << text;
      ++spoiled;
    }
  CHECK(spoiled >= 1);
  json again = probe(true);
  CHECK(again["cached"] == false);
  CHECK(again["functions"] == first["functions"]);
  CHECK(probe(true)["cached"] == true);
  // Through a sandbox's overlay (a device of its own, new each run) the
  // file is the host's: the entry serves there too, so its first exec there
  // is not held while it is read.
  TempDir scratch;
  std::string db = scratch.file("r.db");
  Result run = rt::flightrec({"run", "--db", db, "--", codex, "--version"});
  INFO(run.err);
  CHECK(run.code == 0);
  CHECK(run.out.find("codex-cli") != std::string::npos);
  CHECK(of_type(entries(db), "program_held").empty());
  struct stat dir {};
  REQUIRE(stat("/var/cache/flightrec/tls", &dir) == 0);
  CHECK((dir.st_mode & 0777) == 0700);
}
