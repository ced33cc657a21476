// The coding agents people run, installed from npm by tools/install-deps.sh
// at pinned versions, each driven through a task (a shell command, then a
// file edit) by a local HTTPS mock of its model API (tests/programs/
// mock_llm_api.py, with a test CA made here), under flightrec run with the
// shipped policy for that agent: the task is done, the edit is on the host,
// the record holds the tool command's exec and the file change, and
// stderr holds no ALERT. Codex runs with its own sandbox on.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

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
  CHECK(flightrec({"verify", "--db", db}).code == 0);
}

}  // namespace

TEST_CASE("coding agents: Claude Code under its shipped policy runs a command and edits a file; the record says so, no ALERT") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  REQUIRE_MESSAGE(access((kAgents + "claude").c_str(), X_OK) == 0, "Claude Code is not installed: run tools/install-deps.sh");
  MockApi api;
  TempDir dir;
  std::string work = git_work(dir, api), db = dir.file("s.db"), port = std::to_string(api.port);
  Result r = run_agent(work,
                       {FLIGHTREC_BIN, "run", "--policy", "claude-code", "--db", db, "--allow", "127.0.0.1:" + port,
                        "--env", "ANTHROPIC_API_KEY", "--env", "ANTHROPIC_BASE_URL=https://127.0.0.1:" + port, "--env",
                        "NODE_EXTRA_CA_CERTS=" + work + "/.test-ca.pem", "--env", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
                        "--env", "IS_SANDBOX=1", "--", kAgents + "claude", "-p", "Run a shell command, then write hello.txt",
                        "--dangerously-skip-permissions"},
                       {"ANTHROPIC_API_KEY=sk-ant-flightrec-test-key-0123456789"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(slurp(work + "/tool_ran.txt") == "flightrec-tool-ran\n");
  CHECK(slurp(work + "/hello.txt") == "edited by agent\n");
  CHECK(r.err.find("ALERT") == std::string::npos);
  check_record(db, work);
  // The API key reached the agent (the mock answered) but not the record.
  for (const auto& e : entries(db)) CHECK(e.dump().find("sk-ant-flightrec-test-key") == std::string::npos);
}

TEST_CASE("coding agents: Codex with its own sandbox (-s workspace-write) under its shipped policy; the record says so, no ALERT") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  REQUIRE_MESSAGE(access((kAgents + "codex").c_str(), X_OK) == 0, "Codex is not installed: run tools/install-deps.sh");
  MockApi api;
  TempDir dir;
  std::string work = git_work(dir, api), db = dir.file("s.db"), port = std::to_string(api.port);
  // Codex reads its provider from CODEX_HOME: made in the sandbox's home.
  std::ofstream(work + "/.codex-config.toml")
      << "model = \"gpt-5.5\"\nmodel_provider = \"mock\"\n[model_providers.mock]\nname = \"mock\"\n"
      << "base_url = \"https://127.0.0.1:" << port << "/v1\"\nwire_api = \"responses\"\nenv_key = \"MOCK_API_KEY\"\n"
      << "[analytics]\nenabled = false\n[features]\nplugins = false\n";
  Result r = run_agent(
      work,
      {FLIGHTREC_BIN, "run", "--policy", "codex", "--db", db, "--allow", "127.0.0.1:" + port, "--env", "MOCK_API_KEY",
       "--env", "SSL_CERT_FILE=" + work + "/.test-ca.pem", "--env", "CODEX_HOME=/tmp/home/.codex", "--", "sh", "-c",
       "mkdir -p \"$CODEX_HOME\" && cp .codex-config.toml \"$CODEX_HOME/config.toml\" && exec " + kAgents +
           "codex exec --skip-git-repo-check -s workspace-write 'Run a shell command, then write hello.txt'"},
      {"MOCK_API_KEY=sk-flightrec-test-key-0123456789"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(slurp(work + "/tool_ran.txt") == "flightrec-tool-ran\n");
  CHECK(slurp(work + "/hello.txt") == "edited by agent\n");
  CHECK(r.err.find("ALERT") == std::string::npos);
  CHECK(r.err.find("bwrap:") == std::string::npos);
  check_record(db, work);
  // Its sandbox's namespaces are in the record.
  bool nested = false;
  for (const auto& f : of_type(entries(db), "fork")) nested = nested || f.value("new_namespaces", 0) == 1;
  CHECK(nested);
}
