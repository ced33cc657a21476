#include "inspect/turns.h"

#include <map>
#include <set>
#include <tuple>

#include "agent/content_coding.h"
#include "agent/http1.h"
#include "agent/http2.h"
#include "agent/llm_api.h"
#include "common/error.h"
#include "common/text.h"

namespace flightrec::inspect {
namespace {

using nlohmann::json;


// Members of entries as read: a canonical record may still hold any type where
// flightrec writes another (an edited record), so nothing is taken on trust.
int64_t int_of(const json& e, const char* key, int64_t fallback = 0) {
  auto it = e.is_object() ? e.find(key) : e.end();
  return e.is_object() && it != e.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

const json& array_of(const json& e, const char* key) {
  static const json empty = json::array();
  auto it = e.is_object() ? e.find(key) : e.end();
  return e.is_object() && it != e.end() && it->is_array() ? *it : empty;
}

std::vector<int64_t> seq_list(const json& e, const char* key) {
  std::vector<int64_t> out;
  for (const auto& s : array_of(e, key))
    if (s.is_number_integer()) out.push_back(s.get<int64_t>());
  return out;
}

std::string text(const json& e, const char* key) {
  if (!e.is_object()) return "";
  if (e.contains(key) && e[key].is_string()) return e[key].get<std::string>();
  std::string b64 = std::string(key) + "_b64";
  if (e.contains(b64) && e[b64].is_string()) return base64_decode(e[b64].get<std::string>()).value_or("");
  return "";
}

// One HTTP message from the tls entries that held it, in order.
std::optional<agent::HttpMessage> message_of(const std::vector<int64_t>& seqs, const std::map<int64_t, json>& tls) {
  agent::Http1Stream stream;
  std::vector<agent::HttpMessage> out;
  for (int64_t s : seqs) {
    auto it = tls.find(s);
    if (it == tls.end()) return std::nullopt;
    const json& t = it->second;
    auto bytes = base64_decode(text(t, "data_b64"));
    if (!bytes) return std::nullopt;
    stream.feed(uint64_t(int_of(t, "stream_offset")), uint64_t(int_of(t, "len")), *bytes, s, 0, out);
    if (!out.empty()) return std::move(out.front());
  }
  agent::HttpMessage open;
  if (stream.take_open(open)) return open;
  return std::nullopt;
}

// One direction of an HTTP/2 connection decoded once, from its start (a
// header block may refer to any earlier one: HPACK's table): the messages
// of the streams asked for.
std::map<uint64_t, agent::HttpMessage> h2_messages(const std::vector<const json*>& direction, bool client,
                                                   const std::set<uint64_t>& streams) {
  std::map<uint64_t, agent::HttpMessage> found;
  agent::Http2Stream h2(client);
  std::vector<agent::HttpMessage> out;
  auto keep = [&] {
    for (auto& m : out)
      if (streams.count(m.stream) && !found.count(m.stream)) found.emplace(m.stream, std::move(m));
    out.clear();
  };
  for (const json* t : direction) {
    auto bytes = base64_decode(text(*t, "data_b64"));
    if (!bytes) break;
    h2.feed(uint64_t(int_of(*t, "stream_offset")), uint64_t(int_of(*t, "len")), *bytes, int_of(*t, "seq"), 0, out);
    keep();
    if (found.size() == streams.size() || h2.lost()) break;
  }
  h2.take_open(out);
  keep();
  return found;
}

std::string act_text(const json& e) {
  std::string type = text(e, "type");
  if (type == "exec") {
    std::string argv;
    for (const auto& a : array_of(e, "argv"))
      if (a.is_string()) argv += (argv.empty() ? "" : " ") + a.get<std::string>();
    return argv;
  }
  if (type == "file_open") return text(e, "kernel_path").empty() ? text(e, "path") : text(e, "kernel_path");
  if (type == "connect") return text(e, "addr") + ":" + std::to_string(int_of(e, "port"));
  return type;
}

}  // namespace

json agent_turns(ledger::Store& store, int64_t session) {
  ledger::EntryFilter f;
  f.session = session;
  f.types = {"genesis", "llm_call", "tool_call"};
  std::vector<json> calls, tools;
  std::set<int64_t> wanted;
  bool found = false;
  store.for_each_entry(f, [&](const ledger::EntryRow& row) {
    json e = json::parse(row.body, nullptr, false);
    if (!e.is_object()) return true;
    if (row.type == "genesis") found = true;
    if (row.type == "llm_call") {
      for (const char* k : {"request_seqs", "response_seqs"})
        for (int64_t s : seq_list(e, k)) wanted.insert(s);
      calls.push_back(std::move(e));
    } else if (row.type == "tool_call") {
      for (int64_t s : seq_list(e, "act_seqs")) wanted.insert(s);
      tools.push_back(std::move(e));
    }
    return true;
  });
  if (!found) throw Error("no session " + std::to_string(session) + " in " + store.path());
  // HTTP/2 calls need every tls entry of their connection (process, ssl).
  std::set<std::pair<int64_t, int64_t>> h2_conns;
  for (const auto& c : calls)
    if (int_of(c, "http2_stream")) h2_conns.insert({int_of(c, "pid"), int_of(c, "ssl")});
  std::map<int64_t, json> held;  // the tls entries and acts named above
  if (!wanted.empty()) {
    f.types = {"tls", "exec", "file_open", "connect"};
    store.for_each_entry(f, [&](const ledger::EntryRow& row) {
      if (wanted.count(row.seq)) {
        held[row.seq] = json::parse(row.body, nullptr, false);
      } else if (row.type == "tls" && !h2_conns.empty()) {
        json t = json::parse(row.body, nullptr, false);
        if (h2_conns.count({int_of(t, "pid"), int_of(t, "ssl")})) held[row.seq] = std::move(t);
      }
      return true;
    });
  }
  // Each HTTP/2 connection's directions, in stream order, decoded once.
  using Direction = std::tuple<int64_t, int64_t, bool>;  // pid, ssl, sent
  std::map<Direction, std::vector<const json*>> h2_directions;
  std::map<Direction, std::set<uint64_t>> h2_wanted;
  std::map<Direction, std::map<uint64_t, agent::HttpMessage>> h2_found;
  if (!h2_conns.empty()) {
    for (const auto& c : calls)
      if (uint64_t stream = uint64_t(int_of(c, "http2_stream")))
        for (bool sent : {true, false}) h2_wanted[{int_of(c, "pid"), int_of(c, "ssl"), sent}].insert(stream);
    for (const auto& [seq, t] : held)
      if (text(t, "type") == "tls" && h2_conns.count({int_of(t, "pid"), int_of(t, "ssl")}))
        h2_directions[{int_of(t, "pid"), int_of(t, "ssl"), text(t, "direction") == "send"}].push_back(&t);
    for (auto& [key, list] : h2_directions) {
      std::stable_sort(list.begin(), list.end(), [](const json* a, const json* b) {
        return int_of(*a, "stream_offset") < int_of(*b, "stream_offset");
      });
      h2_found[key] = h2_messages(list, std::get<2>(key), h2_wanted[key]);
    }
  }
  json turns = json::array();
  std::map<std::vector<int64_t>, const agent::LlmExchange*> by_request;  // request seqs -> what it carried
  std::vector<agent::LlmExchange> decoded(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    agent::LlmExchange& x = decoded[i];
    x.api = text(c, "api");
    std::optional<agent::HttpMessage> request, response;
    if (uint64_t stream = uint64_t(int_of(c, "http2_stream"))) {
      for (bool sent : {true, false}) {
        auto& found = h2_found[{int_of(c, "pid"), int_of(c, "ssl"), sent}];
        // The message the entry names: the stream, and the seqs it gives.
        auto m = found.find(stream);
        if (m != found.end() && m->second.seqs == seq_list(c, sent ? "request_seqs" : "response_seqs"))
          (sent ? request : response) = m->second;
      }
    } else {
      request = message_of(seq_list(c, "request_seqs"), held);
      response = message_of(seq_list(c, "response_seqs"), held);
    }
    std::string why;
    if (request) agent::decode_llm_request(request->target, agent::body_of(*request, &why), x);
    if (response) agent::decode_llm_response(response->header("content-type"), agent::body_of(*response, &why), x);
    by_request[seq_list(c, "request_seqs")] = &x;
  }
  std::map<int64_t, std::vector<const json*>> tools_of;  // llm_call seq -> its tool_call entries
  for (const auto& t : tools) tools_of[int_of(t, "llm_call")].push_back(&t);
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    const agent::LlmExchange& x = decoded[i];
    json turn = {{"llm_call", int_of(c, "seq")}, {"api", text(c, "api")}, {"model", text(c, "model")},
                 {"status", int_of(c, "status")}, {"stream", int_of(c, "stream")}, {"prompt", x.prompt},
                 {"answer", x.answer}, {"tool_calls", json::array()}};
    for (const char* k : {"input_tokens", "output_tokens"})
      if (int_of(c, k, -1) >= 0) turn[k] = int_of(c, k);
    if (!text(c, "stop_reason").empty()) turn["stop_reason"] = text(c, "stop_reason");
    if (!array_of(c, "problems").empty()) turn["problems"] = array_of(c, "problems");
    for (const json* t : tools_of[int_of(c, "seq")]) {
      json tool = {{"tool_call", int_of(*t, "seq")}, {"id", text(*t, "tool_call_id")}, {"name", text(*t, "name")},
                   {"input", text(*t, "input")}, {"result_seen", int_of(*t, "result_seen", 1)}, {"acts", json::array()}};
      if (int_of(*t, "duration_ns", -1) >= 0) tool["duration_ns"] = int_of(*t, "duration_ns");
      // The result, as the request that returned it carried it.
      if (auto r = by_request.find(seq_list(*t, "result_request_seqs")); r != by_request.end()) {
        const auto& ids = r->second->tool_results;
        for (size_t k = 0; k < ids.size(); ++k)
          if (ids[k] == tool["id"]) tool["result"] = r->second->result_texts[k];
      }
      std::vector<int64_t> acts = seq_list(*t, "act_seqs");
      const json &kinds = array_of(*t, "act_kinds"), &links = array_of(*t, "act_links");
      for (size_t k = 0; k < acts.size(); ++k) {
        auto a = held.find(acts[k]);
        json act = {{"seq", acts[k]},
                    {"kind", kinds.size() > k && kinds[k].is_string() ? kinds[k] : json("")},
                    {"link", links.size() > k && links[k].is_string() ? links[k] : json("")},
                    {"what", a == held.end() ? "" : act_text(a->second)}};
        tool["acts"].push_back(std::move(act));
      }
      turn["tool_calls"].push_back(std::move(tool));
    }
    turns.push_back(std::move(turn));
  }
  return {{"session", session}, {"turns", std::move(turns)}};
}

}  // namespace flightrec::inspect
