#include "agent/llm_api.h"

#include <map>
#include <nlohmann/json.hpp>
#include <simdjson.h>

namespace flightrec::agent {
namespace {

using nlohmann::json;

constexpr size_t kMaxToolCalls = 1024;
constexpr size_t kMaxInput = 64 << 10;  // bytes of one tool call's input kept

std::string path_of(std::string_view target) { return std::string(target.substr(0, target.find('?'))); }

bool ends_with(std::string_view s, std::string_view tail) { return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail; }

std::string str(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

int64_t num(const json& j, const char* key) {
  if (!j.is_object()) return -1;
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : -1;
}

const json& member(const json& j, const char* key) {
  static const json none;
  if (!j.is_object()) return none;
  auto it = j.find(key);
  return it == j.end() ? none : *it;
}

std::string cut(std::string s) {
  if (s.size() > kMaxInput) s.resize(kMaxInput);
  return s;
}

std::string text_of(const json& j) { return j.is_string() ? j.get<std::string>() : j.is_null() ? "" : j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Ids and names are the model's (or a hostile server's): at most 256 bytes
// each, so a tool call waiting for its result holds little.
constexpr size_t kMaxId = 256;
std::string cut_id(std::string s) {
  if (s.size() > kMaxId) s.resize(kMaxId);
  return s;
}

void add_call(LlmExchange& x, std::string id, std::string name, std::string input) {
  if (x.tool_calls.size() >= kMaxToolCalls) return;
  x.tool_calls.push_back({cut_id(std::move(id)), cut_id(std::move(name)), cut(std::move(input))});
}

constexpr size_t kMaxExcerpt = 4096;

void excerpt(std::string& to, std::string_view text) {
  if (to.size() < kMaxExcerpt) to.append(text.substr(0, kMaxExcerpt - to.size()));
}

// The text of a message's content: a string, or its text parts joined.
std::string content_text(const json& c) {
  if (c.is_string()) return c.get<std::string>().substr(0, kMaxExcerpt);
  std::string out;
  if (c.is_array())
    for (const auto& part : c) {
      if (part.is_string()) excerpt(out, part.get<std::string>());
      else if (part.is_object() && part.contains("text") && part["text"].is_string()) excerpt(out, part["text"].get<std::string>());
    }
  return out;
}

void add_result(LlmExchange& x, std::string id, std::string text = "") {
  if (id.empty() || x.tool_results.size() >= kMaxToolCalls) return;
  x.tool_results.push_back(cut_id(std::move(id)));
  x.result_texts.push_back(text.substr(0, kMaxExcerpt));
}

// The text of the request's last user message ("" when tool results came after it).
void user_text(LlmExchange& x, const std::string& text) { x.prompt = text.substr(0, kMaxExcerpt); }

// Nested at most kMaxDepth deep: deeper values are dropped as they are
// parsed, so nothing recursive (dump()) ever meets a hostile depth.
constexpr int kMaxDepth = 64;
json parse(std::string_view text) {
  return json::parse(text.begin(), text.end(), [](int depth, json::parse_event_t, json&) { return depth <= kMaxDepth; }, false);
}

// Server-sent events: (event name, data) pairs, data lines joined.
std::vector<std::pair<std::string, std::string>> sse_events(std::string_view body) {
  std::vector<std::pair<std::string, std::string>> out;
  std::string event, data;
  bool any = false;
  auto flush = [&] {
    if (any) out.emplace_back(event, data);
    event.clear();
    data.clear();
    any = false;
  };
  while (!body.empty()) {
    size_t eol = body.find('\n');
    std::string_view line = body.substr(0, eol);
    body.remove_prefix(eol == std::string_view::npos ? body.size() : eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      flush();
      continue;
    }
    size_t colon = line.find(':');
    std::string_view field = line.substr(0, colon), value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (field == "event") event = std::string(value);
    if (field == "data") {
      if (any) data += '\n';
      data += value;
      any = true;
    }
  }
  flush();
  return out;
}

// Each event's data as a JSON object ("[DONE]" skipped); one that is not is said.
std::vector<json> json_events(std::string_view body, LlmExchange& x) {
  std::vector<json> out;
  for (const auto& [event, data] : sse_events(body)) {
    if (data == "[DONE]") continue;
    json d = parse(data);
    if (d.is_object()) out.push_back(std::move(d));
    else x.problems.push_back("an event that is not JSON");
  }
  return out;
}

// The members every API's answer carries under names of its own: the
// answer's id and model, and the tokens in and out of its usage.
void ids_and_usage(const json& r, LlmExchange& x, const char* id_key, const char* model_key, const json& usage,
                   const char* in_key, const char* out_key) {
  if (auto id = str(r, id_key); !id.empty()) x.response_id = id;
  if (auto model = str(r, model_key); !model.empty()) x.response_model = model;
  if (num(usage, in_key) >= 0) x.input_tokens = num(usage, in_key);
  if (num(usage, out_key) >= 0) x.output_tokens = num(usage, out_key);
}

// ---- Anthropic Messages

void anthropic_message(const json& m, LlmExchange& x) {
  ids_and_usage(m, x, "id", "model", member(m, "usage"), "input_tokens", "output_tokens");
  if (auto stop = str(m, "stop_reason"); !stop.empty()) x.stop_reason = stop;
  const json& content = member(m, "content");
  if (content.is_array())
    for (const auto& c : content) {
      if (str(c, "type") == "tool_use") add_call(x, str(c, "id"), str(c, "name"), text_of(member(c, "input")));
      if (str(c, "type") == "text") excerpt(x.answer, str(c, "text"));
    }
}

void anthropic_stream(std::string_view body, LlmExchange& x) {
  std::map<int64_t, size_t> block_call;  // content block index -> tool call
  std::map<size_t, std::string> partial;
  for (const json& d : json_events(body, x)) {
    std::string type = str(d, "type");
    if (type == "message_start") {
      anthropic_message(member(d, "message"), x);
    } else if (type == "content_block_start") {
      const json& block = member(d, "content_block");
      if (str(block, "type") == "tool_use" && x.tool_calls.size() < kMaxToolCalls) {
        block_call[num(d, "index")] = x.tool_calls.size();
        add_call(x, str(block, "id"), str(block, "name"), "");
      }
    } else if (type == "content_block_delta") {
      const json& delta = member(d, "delta");
      auto it = block_call.find(num(d, "index"));
      if (it != block_call.end() && str(delta, "type") == "input_json_delta") {
        std::string& p = partial[it->second];
        if (p.size() < kMaxInput) p += str(delta, "partial_json");
      }
      if (str(delta, "type") == "text_delta") excerpt(x.answer, str(delta, "text"));
    } else if (type == "message_delta") {
      if (auto stop = str(member(d, "delta"), "stop_reason"); !stop.empty()) x.stop_reason = stop;
      if (num(member(d, "usage"), "output_tokens") >= 0) x.output_tokens = num(member(d, "usage"), "output_tokens");
    } else if (type == "error") {
      x.error = text_of(member(d, "error"));
    }
  }
  for (auto& [i, p] : partial) x.tool_calls[i].input = cut(p.empty() ? "{}" : p);
  for (auto& [index, i] : block_call)
    if (!partial.count(i)) x.tool_calls[i].input = "{}";
}


// ---- OpenAI Chat Completions

// A completion's or a chunk's id, model, usage and finish reason; its first choice, or null.
const json* chat_common(const json& r, LlmExchange& x) {
  ids_and_usage(r, x, "id", "model", member(r, "usage"), "prompt_tokens", "completion_tokens");
  const json& choices = member(r, "choices");
  if (!choices.is_array() || choices.empty()) return nullptr;
  if (auto f = str(choices[0], "finish_reason"); !f.empty()) x.stop_reason = f;
  return &choices[0];
}

void chat_response(const json& r, LlmExchange& x) {
  const json* choice = chat_common(r, x);
  if (!choice) return;
  excerpt(x.answer, content_text(member(member(*choice, "message"), "content")));
  const json& calls = member(member(*choice, "message"), "tool_calls");
  if (calls.is_array())
    for (const auto& c : calls) add_call(x, str(c, "id"), str(member(c, "function"), "name"), text_of(member(member(c, "function"), "arguments")));
}

void chat_stream(std::string_view body, LlmExchange& x) {
  std::map<int64_t, size_t> by_index;
  for (const json& d : json_events(body, x)) {
    if (d.contains("error")) x.error = text_of(member(d, "error"));
    const json* choice = chat_common(d, x);
    if (!choice) continue;
    excerpt(x.answer, str(member(*choice, "delta"), "content"));
    const json& calls = member(member(*choice, "delta"), "tool_calls");
    if (!calls.is_array()) continue;
    for (const auto& c : calls) {
      int64_t index = num(c, "index");
      auto it = by_index.find(index);
      if (it == by_index.end()) {
        if (x.tool_calls.size() >= kMaxToolCalls) continue;
        it = by_index.emplace(index, x.tool_calls.size()).first;
        add_call(x, "", "", "");
      }
      ToolCall& t = x.tool_calls[it->second];
      if (auto id = str(c, "id"); !id.empty()) t.id = cut_id(id);
      const json& f = member(c, "function");
      if (auto name = str(f, "name"); !name.empty()) t.name = cut_id(t.name + name);
      if (t.input.size() < kMaxInput) t.input += str(f, "arguments");
    }
  }
}


// ---- OpenAI Responses

void responses_item(const json& item, LlmExchange& x) {
  std::string type = str(item, "type");
  if (type == "function_call") add_call(x, str(item, "call_id"), str(item, "name"), text_of(member(item, "arguments")));
  else if (type == "custom_tool_call") add_call(x, str(item, "call_id"), str(item, "name"), text_of(member(item, "input")));
  else if (type == "local_shell_call" || type == "shell_call")
    add_call(x, str(item, "call_id"), type == "local_shell_call" ? "local_shell" : "shell", text_of(member(item, "action")));
  else if (type == "message") excerpt(x.answer, content_text(member(item, "content")));
}

void responses_response(const json& r, LlmExchange& x) {
  ids_and_usage(r, x, "id", "model", member(r, "usage"), "input_tokens", "output_tokens");
  if (auto status = str(r, "status"); !status.empty()) x.stop_reason = status;
  if (auto why = str(member(r, "incomplete_details"), "reason"); !why.empty()) x.stop_reason = why;
  if (!member(r, "error").is_null()) x.error = text_of(member(r, "error"));
  const json& output = member(r, "output");
  if (output.is_array())
    for (const auto& item : output) responses_item(item, x);
}

void responses_stream(std::string_view body, LlmExchange& x) {
  // The final event carries the whole response; the items that were done
  // stand in when it never came.
  LlmExchange items;
  bool whole = false;
  for (const json& d : json_events(body, x)) {
    std::string type = str(d, "type");
    if (type == "response.created" || type == "response.in_progress") {
      responses_response(member(d, "response"), x);
      x.tool_calls.clear();
    } else if (type == "response.output_item.done") {
      responses_item(member(d, "item"), items);
    } else if (type == "response.completed" || type == "response.incomplete" || type == "response.failed") {
      x.tool_calls.clear();
      x.answer.clear();
      responses_response(member(d, "response"), x);
      whole = true;
    } else if (type == "error") {
      x.error = text_of(d);
    }
  }
  if (!whole) {
    x.tool_calls = std::move(items.tool_calls);
    x.answer = std::move(items.answer);
    x.problems.push_back("the stream ended before its response.completed event");
  }
}


// ---- Gemini generateContent

void gemini_chunk(const json& r, LlmExchange& x) {
  ids_and_usage(r, x, "responseId", "modelVersion", member(r, "usageMetadata"), "promptTokenCount", "candidatesTokenCount");
  if (!member(r, "error").is_null()) x.error = text_of(member(r, "error"));
  const json& candidates = member(r, "candidates");
  if (!candidates.is_array() || candidates.empty()) return;
  if (auto f = str(candidates[0], "finishReason"); !f.empty()) x.stop_reason = f;
  const json& parts = member(member(candidates[0], "content"), "parts");
  if (parts.is_array())
    for (const auto& p : parts) {
      const json& call = member(p, "functionCall");
      if (call.is_object()) add_call(x, str(call, "id"), str(call, "name"), text_of(member(call, "args")));
      excerpt(x.answer, str(p, "text"));
    }
}


// ---- Requests (simdjson On-Demand: one pass, the rest skipped)

simdjson::ondemand::parser& parser() {
  thread_local simdjson::ondemand::parser p;
  return p;
}

std::string text_value(simdjson::ondemand::value v) {
  if (v.type() != simdjson::ondemand::json_type::string) return "";
  std::string_view s = v.get_string();
  return std::string(s.substr(0, kMaxExcerpt));
}

// A message's content as text: a string, or its parts' strings and "text" members.
std::string content_value(simdjson::ondemand::value v) {
  auto type = v.type().value();
  if (type == simdjson::ondemand::json_type::string) return text_value(v);
  if (type == simdjson::ondemand::json_type::object) {  // e.g. a Gemini function's response: as JSON
    simdjson::ondemand::object o;
    std::string_view raw;
    if (v.get_object().get(o) || o.raw_json().get(raw)) return "";
    return std::string(raw.substr(0, kMaxExcerpt));
  }
  std::string out;
  if (type != simdjson::ondemand::json_type::array) return out;
  for (auto part : v.get_array()) {
    simdjson::ondemand::value p;
    if (part.get(p)) continue;
    auto pt = p.type().value();
    if (pt == simdjson::ondemand::json_type::string) excerpt(out, text_value(p));
    else if (pt == simdjson::ondemand::json_type::object)
      for (auto f : p.get_object())
        if (std::string_view(f.unescaped_key()) == "text") excerpt(out, text_value(f.value()));
  }
  return out;
}

// One message or item of a request's conversation, whatever the API: its
// members are read in the order they come, then judged together.
void request_message(simdjson::ondemand::value m, LlmExchange& x) {
  if (m.type() != simdjson::ondemand::json_type::object) return;
  std::string role, type, call_id, result, text;
  bool is_result = false;
  std::vector<std::pair<std::string, std::string>> results;  // (id, text) in an Anthropic or Gemini message
  for (auto f : m.get_object()) {
    std::string_view key = f.unescaped_key();
    simdjson::ondemand::value v = f.value();
    if (key == "role") role = text_value(v);
    else if (key == "type") type = text_value(v);
    else if (key == "call_id" || key == "tool_call_id") call_id = text_value(v);
    else if (key == "output") result = content_value(v);
    else if (key == "content" && v.type() == simdjson::ondemand::json_type::array && x.api == "anthropic.messages") {
      // Blocks: tool_result blocks, text blocks.
      for (auto block : v.get_array()) {
        simdjson::ondemand::value b;
        if (block.get(b) || b.type() != simdjson::ondemand::json_type::object) continue;
        std::string btype, id, btext, bcontent;
        for (auto bf : b.get_object()) {
          std::string_view bk = bf.unescaped_key();
          if (bk == "type") btype = text_value(bf.value());
          else if (bk == "tool_use_id") id = text_value(bf.value());
          else if (bk == "text") btext = text_value(bf.value());
          else if (bk == "content") bcontent = content_value(bf.value());
        }
        if (btype == "tool_result") results.emplace_back(id, bcontent);
        if (btype == "text") excerpt(text, btext);
      }
    } else if (key == "content") {
      result = text = content_value(v);
    } else if (key == "parts" && v.type() == simdjson::ondemand::json_type::array) {  // Gemini
      for (auto part : v.get_array()) {
        simdjson::ondemand::value p;
        if (part.get(p) || p.type() != simdjson::ondemand::json_type::object) continue;
        for (auto pf : p.get_object()) {
          std::string_view pk = pf.unescaped_key();
          simdjson::ondemand::value pv = pf.value();
          if (pk == "text") excerpt(text, text_value(pv));
          if (pk != "functionResponse" || pv.type() != simdjson::ondemand::json_type::object) continue;
          std::string id, name, response;
          for (auto rf : pv.get_object()) {
            std::string_view rk = rf.unescaped_key();
            if (rk == "id") id = text_value(rf.value());
            else if (rk == "name") name = text_value(rf.value());
            else if (rk == "response") response = content_value(rf.value());
          }
          results.emplace_back(id.empty() ? name : id, response);
        }
      }
    }
  }
  // Judged once all its members are read (their order is the sender's).
  if (x.api == "openai.responses" && ends_with(type, "_call_output")) is_result = true;
  if (x.api == "openai.chat_completions" && role == "tool") is_result = true;
  if (is_result) {
    add_result(x, call_id, result);
    x.prompt.clear();  // a tool result is the last thing said, not the user's text before it
    return;
  }
  for (auto& [id, t] : results) add_result(x, id, t);
  if (role == "user") user_text(x, results.empty() || !text.empty() ? text : "");
}

}  // namespace

std::string llm_api_of(std::string_view method, std::string_view target) {
  if (method != "POST") return "";
  std::string path = path_of(target);
  if (ends_with(path, "/v1/messages")) return "anthropic.messages";
  if (ends_with(path, "/chat/completions")) return "openai.chat_completions";
  if (ends_with(path, "/responses")) return "openai.responses";
  if (path.find("/models/") != std::string::npos &&
      (ends_with(path, ":generateContent") || ends_with(path, ":streamGenerateContent")))
    return "gemini.generate_content";
  return "";
}

void decode_llm_request(std::string_view target, std::string_view body, LlmExchange& x) {
  if (x.api == "gemini.generate_content") {
    std::string path = path_of(target);
    size_t at = path.find("/models/") + 8, colon = path.rfind(':');
    if (colon > at) x.model = path.substr(at, colon - at);
    x.stream = ends_with(path, ":streamGenerateContent");
  }
  if (body.empty()) {
    x.problems.push_back("the request has no body");
    return;
  }
  // Requests carry the whole conversation, its system prompt and tools
  // (tens of KiB, every turn): read on demand, what is not needed skipped.
  try {
    simdjson::padded_string padded(body);
    simdjson::ondemand::document doc = parser().iterate(padded);
    simdjson::ondemand::object top = doc.get_object();
    for (auto field : top) {
      std::string_view key = field.unescaped_key();
      simdjson::ondemand::value v = field.value();
      if (key == "model" && x.model.empty()) x.model = text_value(v);
      else if (key == "stream" && v.type() == simdjson::ondemand::json_type::boolean) x.stream = bool(v.get_bool());
      else if ((key == "messages" || key == "contents") && v.type() == simdjson::ondemand::json_type::array)
        for (auto m : v.get_array()) {
          simdjson::ondemand::value mv;
          if (!m.get(mv)) request_message(mv, x);
        }
      else if (key == "input" && x.api == "openai.responses") {
        if (v.type() == simdjson::ondemand::json_type::string) user_text(x, text_value(v));
        else if (v.type() == simdjson::ondemand::json_type::array)
          for (auto item : v.get_array()) {
            simdjson::ondemand::value iv;
            if (!item.get(iv)) request_message(iv, x);
          }
      }
    }
  } catch (const simdjson::simdjson_error& e) {
    x.problems.push_back(std::string("the request's body is not JSON (") + e.what() + "): compressed, cut, or not an API call");
  }
}

void decode_llm_response(std::string_view content_type, std::string_view body, LlmExchange& x) {
  bool sse = content_type.find("text/event-stream") != std::string_view::npos;
  if (sse) {
    if (x.api == "anthropic.messages") anthropic_stream(body, x);
    else if (x.api == "openai.chat_completions") chat_stream(body, x);
    else if (x.api == "openai.responses") responses_stream(body, x);
    else
      for (const json& d : json_events(body, x)) gemini_chunk(d, x);
    return;
  }
  json r = parse(body);
  if (r.is_array() && x.api == "gemini.generate_content") {  // streamGenerateContent without alt=sse
    for (const auto& chunk : r) gemini_chunk(chunk, x);
    return;
  }
  if (!r.is_object()) {
    x.problems.push_back(body.empty() ? "the response has no body" : "the response's body is not JSON (compressed, cut, or not an API answer)");
    return;
  }
  if (!member(r, "error").is_null() && x.api != "gemini.generate_content") x.error = text_of(member(r, "error"));
  if (x.api == "anthropic.messages") anthropic_message(r, x);
  else if (x.api == "openai.chat_completions") chat_response(r, x);
  else if (x.api == "openai.responses") responses_response(r, x);
  else gemini_chunk(r, x);
}

}  // namespace flightrec::agent
