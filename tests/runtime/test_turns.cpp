// The agent's turns in the record: a real agent loop (tests/programs/
// llm_agent.py: Python, OpenAI's libssl) against the mock model API over
// HTTPS. Each model call is an llm_call entry whose ids are the mock's, and
// each tool call a tool_call entry linked to the llm_call that asked for it,
// the request that returned its result, and the exec or file write it caused.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

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
  MockApi mock(http2 ? std::vector<std::string>{"--http2"} : std::vector<std::string>{});
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

TEST_CASE("model calls: exported as OTLP and read by OpenTelemetry's own decoder: the session's span, a chat span per call, an execute_tool span per tool call, each proven against the record") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  MockApi mock;
  TempDir dir;
  std::string work = dir.file("work"), db = dir.file("t.db");
  mkdir(work.c_str(), 0755);
  Result r = run_in(work, {FLIGHTREC_BIN, "run", "--policy", "observe", "--db", db, "--", "/usr/bin/python3",
                           std::string(SOURCE_DIR) + "/tests/programs/llm_agent.py", "--port", std::to_string(mock.port),
                           "--ca", mock.ca, "--api", "anthropic", "--stream"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  std::vector<json> asked;
  for (const auto& q : mock.requests())
    if (q.contains("reply_id")) asked.push_back(q);
  REQUIRE(asked.size() == 3);
  auto all = entries(db);
  auto calls = of_type(all, "llm_call"), tools = of_type(all, "tool_call");
  REQUIRE(calls.size() == 3);
  REQUIRE(tools.size() == 2);
  std::string pb = dir.file("t.pb"), js = dir.file("t.json"), with_content = dir.file("c.pb");
  for (const auto& [format, out, content] : {std::tuple{"otlp", pb, false}, std::tuple{"otlp-json", js, false},
                                             std::tuple{"otlp", with_content, true}}) {
    std::vector<std::string> argv = {"export", "--db", db, "--session", "1", "--format", format, "--out", out};
    if (content) argv.push_back("--otel-content");
    Result x = rt::flightrec(argv);
    REQUIRE_MESSAGE(x.code == 0, x.err);
  }
  json decoded = rt::otlp_decoded(pb);
  // The JSON encoding says the same, member for member (an empty status is no member in protobuf).
  std::function<json(json)> plain = [&](json j) {
    if (j.is_object()) {
      json o = json::object();
      for (auto& [k, v] : j.items())
        if (!(k == "status" && v.empty())) o[k] = plain(v);
      return o;
    }
    if (j.is_array())
      for (auto& v : j) v = plain(v);
    return j;
  };
  CHECK(plain(decoded) == plain(json::parse(slurp(js))));

  auto spans = rt::otlp_spans(decoded);
  REQUIRE(spans.size() == 6);
  auto text = [](const json& span, const char* key) {
    json v = rt::span_attribute(span, key);
    return v.is_object() ? v.value("stringValue", v.value("intValue", "")) : std::string();
  };
  const json* root = nullptr;
  std::vector<json> chats, runs;
  for (const auto& s : spans) {
    if (!s.contains("parentSpanId")) root = &s;
    else if (s["name"].get<std::string>().starts_with("chat ")) chats.push_back(s);
    else runs.push_back(s);
  }
  REQUIRE(root);
  CHECK((*root)["name"] == "invoke_agent python3");
  CHECK(text(*root, "flightrec.seq") == "1");
  REQUIRE(chats.size() == 3);
  REQUIRE(runs.size() == 2);
  for (const auto& s : spans) {
    CAPTURE(s.dump());
    CHECK(s["traceId"] == (*root)["traceId"]);
    if (&s != root) CHECK(s["parentSpanId"] == (*root)["spanId"]);
    CHECK(std::stoull(s["startTimeUnixNano"].get<std::string>()) <= std::stoull(s["endTimeUnixNano"].get<std::string>()));
    // Proven against the record: the span's entry and leaf hash are the record's.
    Result proof = rt::flightrec({"prove", "--db", db, "--session", "1", "--entry", text(s, "flightrec.seq")});
    REQUIRE_MESSAGE(proof.code == 0, proof.err);
    CHECK(json::parse(proof.out)["leaf_hash"] == text(s, "flightrec.leaf_hash"));
    CHECK(text(s, "flightrec.origin") == all.front()["origin"]);
    CHECK(rt::span_attribute(s, "gen_ai.input.messages").is_null());  // no content unless asked
    CHECK(rt::span_attribute(s, "gen_ai.tool.call.arguments").is_null());
  }
  for (size_t i = 0; i < 3; ++i) {
    const json& c = chats[i];
    CAPTURE(c.dump());
    CHECK(c["name"] == "chat claude-mock-1");
    CHECK(c["kind"] == 3);  // CLIENT
    CHECK(text(c, "gen_ai.operation.name") == "chat");
    CHECK(text(c, "gen_ai.provider.name") == "anthropic");
    CHECK(text(c, "gen_ai.response.id") == asked[i]["reply_id"]);
    CHECK(text(c, "gen_ai.usage.input_tokens") == "100");
    CHECK(text(c, "gen_ai.usage.output_tokens") == "20");
    CHECK(text(c, "flightrec.seq") == std::to_string(calls[i]["seq"].get<int64_t>()));
  }
  for (size_t i = 0; i < 2; ++i) {
    const json& t = runs[i];
    CAPTURE(t.dump());
    CHECK(t["name"] == (i == 0 ? "execute_tool Bash" : "execute_tool Write"));
    CHECK(text(t, "gen_ai.operation.name") == "execute_tool");
    CHECK(text(t, "gen_ai.tool.call.id") == asked[i]["tool_ids"][0]);
    CHECK(text(t, "flightrec.seq") == std::to_string(tools[i]["seq"].get<int64_t>()));
    // It ran from the end of the answer that asked for it to the start of the request that returned its result.
    CHECK(t["startTimeUnixNano"] == chats[i]["endTimeUnixNano"]);
    CHECK(t["endTimeUnixNano"] == chats[i + 1]["startTimeUnixNano"]);
  }
  // Asked for: the content, read from the recorded bytes.
  auto content = rt::otlp_spans(rt::otlp_decoded(with_content));
  REQUIRE(content.size() == 6);
  bool prompt = false, arguments = false, result = false;
  for (const auto& s : content) {
    prompt |= text(s, "gen_ai.input.messages").find("Run the command, then write the file.") != std::string::npos;
    arguments |= text(s, "gen_ai.tool.call.arguments").find("echo flightrec-tool-ran > tool_ran.txt") != std::string::npos;
    result |= text(s, "gen_ai.tool.call.result") == "written";
  }
  CHECK(prompt);
  CHECK(arguments);
  CHECK(result);
  // Bad input is refused with a reason, never a partial file.
  Result bad = rt::flightrec({"export", "--db", db, "--session", "1", "--format", "json", "--otel-content", "--out", dir.file("x")});
  CHECK(bad.code != 0);
  CHECK(bad.err.find("--otel-content goes with") != std::string::npos);
  CHECK(access(dir.file("x").c_str(), F_OK) != 0);
  Result none = rt::flightrec({"export", "--db", db, "--session", "7", "--format", "otlp", "--out", dir.file("y")});
  CHECK(none.code != 0);
  CHECK(access(dir.file("y").c_str(), F_OK) != 0);
}

TEST_CASE("model calls: two tool calls in one answer are told apart by their commands; a tool call never answered links no acts by time") {
  REQUIRE_MESSAGE(is_root(), "runtime tests need root");
  auto agent = [](MockApi& mock, const std::string& work, const std::string& db, std::vector<std::string> extra) {
    std::vector<std::string> argv = {FLIGHTREC_BIN, "run", "--policy", "observe", "--db", db, "--", "/usr/bin/python3",
                                     std::string(SOURCE_DIR) + "/tests/programs/llm_agent.py", "--port",
                                     std::to_string(mock.port), "--ca", mock.ca, "--api", "anthropic"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_in(work, argv);
  };
  TempDir dir;
  {
    MockApi mock({"--parallel"});
    std::string work = dir.file("parallel"), db = dir.file("p.db");
    mkdir(work.c_str(), 0755);
    Result r = agent(mock, work, db, {});
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    CHECK(slurp(work + "/second_ran.txt") == "flightrec-second-ran\n");
    auto all = entries(db);
    std::map<int64_t, const json*> by_seq;
    for (const auto& e : all) by_seq[e["seq"].get<int64_t>()] = &e;
    auto tools = of_type(all, "tool_call");
    REQUIRE(tools.size() == 2);
    CHECK(tools[0]["llm_call"] == tools[1]["llm_call"]);  // one answer asked for both
    for (const auto& t : tools) {
      CAPTURE(t.dump());
      std::string mine = t["input"].get<std::string>().find("second") != std::string::npos ? "flightrec-second-ran" : "flightrec-tool-ran";
      std::string theirs = mine == "flightrec-tool-ran" ? "flightrec-second-ran" : "flightrec-tool-ran";
      bool own_exec = false;
      for (size_t k = 0; k < t["act_seqs"].size(); ++k) {
        const json& act = *by_seq.at(t["act_seqs"][k].get<int64_t>());
        std::string argv = act.contains("argv") ? act["argv"].dump() : "";
        CHECK_MESSAGE(argv.find(theirs) == std::string::npos, "the other call's exec is linked: " << act.dump());
        own_exec |= t["act_links"][k] == "argv" && argv.find(mine) != std::string::npos;
      }
      CHECK(own_exec);
    }
  }
  {
    MockApi mock;
    std::string work = dir.file("abandon"), db = dir.file("a.db");
    mkdir(work.c_str(), 0755);
    Result r = agent(mock, work, db, {"--abandon"});
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    auto all = entries(db);
    auto tools = of_type(all, "tool_call");
    REQUIRE(tools.size() == 1);
    CHECK(tools[0]["result_seen"] == 0);
    CHECK(tools[0]["act_seqs"].empty());  // nothing named its command, and it has no window's end
    auto unexplained = of_type(all, "acts_unexplained");
    REQUIRE(unexplained.size() == 1);
    bool listed = false;
    for (const auto& s : unexplained[0]["act_seqs"])
      for (const auto& e : of_type(all, "exec"))
        if (e["seq"] == s && e["argv"].dump().find("echo own-after > after.txt") != std::string::npos) listed = true;
    CHECK_MESSAGE(listed, "the agent's own act after the unanswered call is not listed as unexplained");
  }
}
