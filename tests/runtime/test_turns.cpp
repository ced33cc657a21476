// The agent's turns in the record: a real agent loop (tests/programs/
// llm_agent.py: Python, OpenAI's libssl) against the mock model API over
// HTTPS. Each model call is an llm_call entry whose ids are the mock's, and
// each tool call a tool_call entry linked to the llm_call that asked for it,
// the request that returned its result, and the exec or file write it caused.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <map>
#include <set>
#include <sstream>

#include "common/text.h"
#include "runtime/harness.h"

using nlohmann::json;
using namespace rt;

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

std::vector<std::string> strings(const json& e, const char* key) {
  std::vector<std::string> out;
  if (e.contains(key))
    for (const auto& s : e[key]) out.push_back(s.get<std::string>());
  return out;
}

// http2: the agent takes h2 (python3-h2), and asks for the model list on
// another stream beside each model call, so two streams' answers interleave.
void check_turns(const std::string& api, bool stream, bool http2 = false) {
  CAPTURE(api);
  CAPTURE(stream);
  CAPTURE(http2);
  MockApi mock(http2);
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("t.db");
  mkdir(work.c_str(), 0755);
  std::vector<std::string> argv = {FLIGHTREC_BIN, "run", "--policy", "observe", "--db", db, "--",
                                   "/usr/bin/python3", std::string(SOURCE_DIR) + "/tests/programs/llm_agent.py",
                                   "--port", std::to_string(mock.port), "--ca", mock.ca, "--api", api, "--own-act"};
  if (stream) argv.push_back("--stream");
  if (http2) argv.push_back("--http2");
  Result r = run_in(work, argv);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  REQUIRE(slurp(work + "/tool_ran.txt") == "flightrec-tool-ran\n");

  // What the mock answered: three model calls, a shell tool call, then an edit.
  std::vector<json> asked;
  for (const auto& q : mock.requests())
    if (q.contains("reply_id")) asked.push_back(q);
  REQUIRE(asked.size() == 3);

  auto all = entries(db);
  std::map<int64_t, const json*> by_seq;
  for (const auto& e : all) by_seq[e["seq"].get<int64_t>()] = &e;
  auto calls = of_type(all, "llm_call");
  auto tools = of_type(all, "tool_call");
  REQUIRE(calls.size() == 3);
  REQUIRE(tools.size() == 2);
  for (size_t i = 0; i < 3; ++i) {
    const json& c = calls[i];
    CAPTURE(c.dump());
    CHECK(c["api"] == (api == "anthropic" ? "anthropic.messages" : "openai.responses"));
    CHECK(c["model"] == (api == "anthropic" ? "claude-mock-1" : "gpt-mock-1"));
    CHECK(c["stream"] == (stream ? 1 : 0));
    CHECK(c["status"] == 200);
    CHECK(c["response_id"] == asked[i]["reply_id"]);
    CHECK(c["input_tokens"] == 100);
    CHECK(c["output_tokens"] == 20);
    CHECK(c["comm"] == "python3");
    CHECK_FALSE(c.contains("problems"));
    CHECK(strings(c, "tool_call_ids") == asked[i]["tool_ids"].get<std::vector<std::string>>());
    // Its bytes are in tls entries of the same connection, sent then received.
    for (const char* key : {"request_seqs", "response_seqs"})
      for (const auto& s : c[key]) {
        const json& t = *by_seq.at(s.get<int64_t>());
        CHECK(t["type"] == "tls");
        CHECK(t["direction"] == (std::string(key) == "request_seqs" ? "send" : "recv"));
        CHECK(t["ssl"] == c["ssl"]);
      }
  }
  // Over HTTP/2 each call names its stream; the side requests beside them
  // (the model list) are no model calls. Their streams differ.
  std::set<int64_t> streams;
  for (const auto& c : calls) {
    CHECK(c.contains("http2_stream") == http2);
    if (http2) streams.insert(c["http2_stream"].get<int64_t>());
  }
  if (http2) CHECK(streams.size() == 3);
  // Non-streamed answers came gzip-compressed (the client asked, as httpx does): decoded all the same.
  if (!stream && !http2) {
    const json& first = *by_seq.at(calls[0]["response_seqs"][0].get<int64_t>());
    std::string head = flightrec::base64_decode(first["data_b64"].get<std::string>()).value_or("");
    CHECK(head.find("Content-Encoding: gzip") != std::string::npos);
  }
  // The second call returns the first tool call's result, the third both.
  std::string shell_id = asked[0]["tool_ids"][0], edit_id = asked[1]["tool_ids"][0];
  CHECK(strings(calls[1], "tool_result_ids") == std::vector<std::string>{shell_id});
  CHECK(strings(calls[2], "tool_result_ids") == std::vector<std::string>{shell_id, edit_id});
  // The API key never reaches an llm_call; in the tls entries it is redacted.
  for (const auto& c : calls) CHECK(c.dump().find("secret") == std::string::npos);

  for (size_t i = 0; i < 2; ++i) {
    const json& t = tools[i];
    CAPTURE(t.dump());
    CHECK(t["tool_call_id"] == (i == 0 ? shell_id : edit_id));
    CHECK(t["llm_call"] == calls[i]["seq"]);
    // Written when the request carrying its result was seen: before the llm_call of that exchange.
    CHECK(t["seq"].get<int64_t>() < calls[i + 1]["seq"].get<int64_t>());
    CHECK(t["result_request_seqs"] == calls[i + 1]["request_seqs"]);
    CHECK(t["duration_ns"].get<int64_t>() > 0);
    std::vector<std::string> links = strings(t, "act_links"), kinds = strings(t, "act_kinds");
    REQUIRE(links.size() == t["act_seqs"].size());
    bool linked = false;
    for (size_t k = 0; k < links.size(); ++k) {
      const json& act = *by_seq.at(t["act_seqs"][k].get<int64_t>());
      if (i == 0 && links[k] == "argv") {
        CHECK(act["type"] == "exec");
        std::string joined;
        for (const auto& a : act["argv"]) joined += a.get<std::string>() + " ";
        CHECK(joined.find("echo flightrec-tool-ran > tool_ran.txt") != std::string::npos);
        linked = true;
      }
      if (i == 1 && links[k] == "path") {
        CHECK(act["type"] == "file_open");
        CHECK(act["kernel_path"] == work + "/hello.txt");
        linked = true;
      }
    }
    CHECK_MESSAGE(linked, "the tool call's own act is not linked to it");
  }
  // What the agent did of its own accord is listed as unexplained; what its tools did is not.
  auto unexplained = of_type(all, "acts_unexplained");
  REQUIRE(unexplained.size() == 1);
  std::set<int64_t> listed;
  for (const auto& s : unexplained[0]["act_seqs"]) listed.insert(s.get<int64_t>());
  bool own_listed = false;
  for (int64_t s : listed) {
    const json& act = *by_seq.at(s);
    if (act["type"] == "exec" && act["argv"].dump().find("echo own > own.txt") != std::string::npos) own_listed = true;
    if (act["type"] == "connect") CHECK(act["port"] != mock.port);  // the model calls' own connects are not acts to explain
  }
  CHECK(own_listed);
  for (const auto& t : tools)
    for (const auto& s : t["act_seqs"]) CHECK(listed.count(s.get<int64_t>()) == 0);
  // The shell's write of tool_ran.txt is the shell tool's (its subtree), not the edit's.
  CHECK(tools[1].dump().find("tool_ran.txt") == std::string::npos);
  CHECK(rt::flightrec({"verify", "--db", db}).code == 0);

  // For people: turn by turn, from the same entries and the bytes they name.
  Result view = rt::flightrec({"agent", "--db", db, "--json"});
  REQUIRE(view.code == 0);
  json turns = json::parse(view.out)["turns"];
  REQUIRE(turns.size() == 3);
  CHECK(turns[0]["prompt"].get<std::string>().find("Run the command") != std::string::npos);
  CHECK(turns[1]["prompt"] == "");  // its last user message carries only the tool result
  CHECK(turns[2]["answer"] == "Done: ran the command and wrote hello.txt.");
  REQUIRE(turns[0]["tool_calls"].size() == 1);
  CHECK(turns[0]["tool_calls"][0]["id"] == shell_id);
  CHECK(turns[0]["tool_calls"][0]["acts"][0]["link"] == "argv");
  CHECK(turns[0]["tool_calls"][0]["acts"][0]["what"].get<std::string>().find("echo flightrec-tool-ran") != std::string::npos);
  REQUIRE(turns[1]["tool_calls"].size() == 1);
  CHECK(turns[1]["tool_calls"][0]["result"] == "written");
  Result text = rt::flightrec({"agent", "--db", db});
  CHECK(text.out.find("did:    exec") != std::string::npos);
  // One tool call's entries: itself, the llm_call that asked, its acts, its result's request.
  Result one = rt::flightrec({"query", "--db", db, "--tool-call", shell_id, "--json"});
  std::set<int64_t> shown;
  for (const auto& l : split_lines(one.out)) shown.insert(json::parse(l)["seq"].get<int64_t>());
  std::set<int64_t> named = {tools[0]["seq"].get<int64_t>(), calls[0]["seq"].get<int64_t>()};
  for (const char* key : {"act_seqs", "result_request_seqs"})
    for (const auto& s : tools[0][key]) named.insert(s.get<int64_t>());
  CHECK(shown == named);
  // The report opens with the conversation.
  REQUIRE(rt::flightrec({"report", "--db", db, "--session", "1", "--out", dir.file("r.html")}).code == 0);
  std::string page = slurp(dir.file("r.html"));
  // The report and the record hold the session's plaintext: their owner's alone.
  struct stat st {};
  REQUIRE(stat(dir.file("r.html").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(stat(db.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  size_t conversation = page.find("<h2 id=\"conversation\">"), overview = page.find("<h2 id=\"overview\">");
  REQUIRE(conversation != std::string::npos);
  CHECK(conversation < overview);
  CHECK(page.find("id=\"turn-3\"") != std::string::npos);
  CHECK(page.find("echo flightrec-tool-ran &gt; tool_ran.txt [argv, entry ") != std::string::npos);
  json sum = json::parse(rt::flightrec({"summary", "--db", db, "--json"}).out);
  REQUIRE(sum["model_calls"].size() == 1);
  CHECK(sum["model_calls"][0]["count"] == 3);
  CHECK(sum["input_tokens"] == 300);
  CHECK(sum["output_tokens"] == 60);
  CHECK(sum["tool_calls"].size() == 2);
  CHECK(sum["tool_calls_unanswered"] == 0);
}

}  // namespace

TEST_CASE("model calls: a Python agent on the Anthropic Messages API, streamed and not: llm_call and tool_call entries") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  check_turns("anthropic", true);
  check_turns("anthropic", false);
}

TEST_CASE("model calls: a Python agent on the OpenAI Responses API, streamed and not: llm_call and tool_call entries") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  check_turns("openai", true);
  check_turns("openai", false);
}

TEST_CASE("model calls: a Python agent over HTTP/2, two streams at once, both APIs, streamed and not: llm_call and tool_call entries") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  check_turns("anthropic", true, true);
  check_turns("anthropic", false, true);
  check_turns("openai", true, true);
  check_turns("openai", false, true);
}

TEST_CASE("model calls: --agent-turns off keeps the tls entries alone, and the genesis entry says so") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  MockApi mock;
  TempDir dir;
  std::string work = dir.file("work");
  mkdir(work.c_str(), 0755);
  for (std::string mode : {"off", "on"}) {
    std::string db = dir.file(mode + ".db");
    Result r = run_in(work, {FLIGHTREC_BIN, "run", "--policy", "observe", "--agent-turns", mode, "--db", db, "--", "python3",
                             std::string(SOURCE_DIR) + "/tests/programs/llm_agent.py", "--port", std::to_string(mock.port),
                             "--ca", mock.ca, "--api", "anthropic"});
    REQUIRE(r.code == 0);
    auto all = entries(db);
    CHECK(all.front()["agent_turns"] == (mode == "on" ? 1 : 0));
    CHECK(of_type(all, "llm_call").size() == (mode == "on" ? 3u : 0u));
    CHECK(of_type(all, "tls").size() > 0);
  }
  Result bad = rt::flightrec({"run", "--agent-turns", "maybe", "--", "true"});
  CHECK(bad.code == 2);
}
