#include "ship/otlp.h"

#include <nlohmann/json.hpp>

#include "common/text.h"

namespace flightrec::ship {
namespace {

using nlohmann::json;

// Members as read: the body is canonical JSON flightrec wrote, but a
// record handed on may have been edited, so no member's type is trusted.
int64_t int_of(const json& e, const char* key, int64_t fallback = 0) {
  auto it = e.find(key);
  return it != e.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

std::string text(const json& e, const char* key) {
  auto it = e.find(key);
  if (it != e.end() && it->is_string()) return it->get<std::string>();
  it = e.find(std::string(key) + "_b64");
  if (it != e.end() && it->is_string()) return printable(base64_decode(it->get<std::string>()).value_or(""));
  return "";
}

std::vector<std::string> texts(const json& e, const char* key) {
  std::vector<std::string> out;
  auto it = e.find(key);
  if (it != e.end() && it->is_array())
    for (const auto& s : *it)
      if (s.is_string()) out.push_back(s.get<std::string>());
  return out;
}

std::vector<int64_t> ints(const json& e, const char* key) {
  std::vector<int64_t> out;
  auto it = e.find(key);
  if (it != e.end() && it->is_array())
    for (const auto& s : *it)
      if (s.is_number_integer()) out.push_back(s.get<int64_t>());
  return out;
}

// Valid UTF-8 of at most max bytes, cut on a character's start; bytes that
// are not UTF-8 escaped as printable() does.
std::string otel_text(std::string s, size_t max) {
  if (!is_valid_utf8(s)) s = printable(s);
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && (uint8_t(s[cut]) & 0xc0) == 0x80) --cut;
  s.resize(cut);
  return s;
}

std::string session_key(const std::string& origin, int64_t session) {
  std::string k = origin;
  k += '\0';
  return k + std::to_string(session);
}

std::array<uint8_t, 16> trace_id(const std::string& origin, int64_t session) {
  auto h = ledger::sha256("flightrec otlp trace\n" + session_key(origin, session));
  std::array<uint8_t, 16> id;
  std::copy_n(h.begin(), id.size(), id.begin());
  return id;
}

std::array<uint8_t, 8> span_id(const std::string& origin, int64_t session, int64_t seq) {
  auto h = ledger::sha256("flightrec otlp span\n" + session_key(origin, session) + '\0' + std::to_string(seq));
  std::array<uint8_t, 8> id;
  std::copy_n(h.begin(), id.size(), id.begin());
  return id;
}

// The GenAI provider of an llm_call's api ("anthropic.messages" -> "anthropic").
std::string provider_of(const std::string& api) {
  if (api.starts_with("gemini.")) return "gcp.gemini";
  return api.substr(0, api.find('.'));
}

// A span's times from an entry's monotonic members, made wall clock with
// the entry's own offset (ts_real_ns - ts_mono_ns); where one is absent,
// the entry's time.
void set_times(OtelSpan& s, const json& e, const char* start, const char* end) {
  int64_t real = int_of(e, "ts_real_ns"), offset = 0, at = 0;
  bool known = !__builtin_sub_overflow(real, int_of(e, "ts_mono_ns"), &offset);  // (an edited record may hold anything)
  auto wall = [&](const char* key) {
    int64_t mono = int_of(e, key, -1);
    bool ok = known && mono > 0 && !__builtin_add_overflow(mono, offset, &at);
    return uint64_t(std::max<int64_t>(0, ok ? at : real));
  };
  s.start_ns = wall(start);
  s.end_ns = std::max(s.start_ns, wall(end));
}

}  // namespace

size_t OtelSpan::bytes() const {
  size_t n = 64 + name.size() + status_message.size();
  for (const auto& [k, v] : attributes) {
    n += k.size() + 8;
    if (auto* s = std::get_if<std::string>(&v)) n += s->size();
    if (auto* l = std::get_if<std::vector<std::string>>(&v))
      for (const auto& x : *l) n += x.size() + 4;
    if (auto* l = std::get_if<std::vector<int64_t>>(&v)) n += l->size() * 10;
  }
  return n;
}

void OtelSpans::add(const std::string& origin, int64_t session, int64_t seq, std::string_view type, std::string_view body,
                    const ledger::Hash& leaf, std::vector<OtelSpan>& out, const OtelContent* extra) {
  if (type != "genesis" && type != "session_end" && type != "llm_call" && type != "tool_call") return;
  json e = json::parse(body, nullptr, false);
  if (!e.is_object()) return;
  auto key = std::make_pair(origin, session);
  if (type == "genesis") {
    Root& r = roots_[key];
    r.start_ns = uint64_t(std::max<int64_t>(0, int_of(e, "ts_real_ns")));
    r.mode = text(e, "mode");
    r.host = text(e, "host");
    r.command = texts(e, "command");
    r.leaf = leaf;
    std::vector<std::string> cgroups = texts(e, "cgroups");
    std::string named = !r.command.empty() ? r.command[0] : cgroups.empty() ? "" : cgroups[0];
    while (named.size() > 1 && named.back() == '/') named.pop_back();
    r.agent = named.substr(named.rfind('/') == std::string::npos ? 0 : named.rfind('/') + 1);
    if (roots_.size() > 4096) roots_.erase(roots_.begin());  // sessions never ended (a bound, not a rule)
    return;
  }
  OtelSpan s;
  s.trace_id = trace_id(origin, session);
  s.span_id = span_id(origin, session, seq);
  s.parent_id = span_id(origin, session, 1);  // the root: the genesis entry's span
  auto attr = [&](const char* k, OtelValue v) {
    // What a backend takes: valid UTF-8, 1 KiB a value (the content asked
    // for: 64 KiB), 256 values a list.
    std::string_view key = k;
    size_t max = key.starts_with("gen_ai.input.") || key.starts_with("gen_ai.output.") || key.starts_with("gen_ai.tool.call.")
                     ? 65536 : 1024;
    if (auto* str = std::get_if<std::string>(&v)) *str = otel_text(*str, max);
    if (auto* list = std::get_if<std::vector<std::string>>(&v)) {
      if (list->size() > 256) list->resize(256);
      for (auto& item : *list) item = otel_text(item, 1024);
    }
    if (auto* list = std::get_if<std::vector<int64_t>>(&v); list && list->size() > 4096) list->resize(4096);
    s.attributes.emplace_back(k, std::move(v));
  };
  auto attr_text = [&](const char* k, const char* member) {
    if (std::string v = text(e, member); !v.empty()) attr(k, v);
  };
  ledger::Hash named_leaf = leaf;
  if (type == "session_end") {
    Root r;
    if (auto it = roots_.find(key); it != roots_.end()) {
      r = std::move(it->second);
      roots_.erase(it);
    }
    s.span_id = s.parent_id;
    s.parent_id = {};
    s.end_ns = uint64_t(std::max<int64_t>(0, int_of(e, "ts_real_ns")));
    s.start_ns = r.start_ns && r.start_ns <= s.end_ns ? r.start_ns : s.end_ns;
    s.name = "invoke_agent" + (r.agent.empty() ? "" : " " + r.agent);
    attr("gen_ai.operation.name", std::string("invoke_agent"));
    if (!r.agent.empty()) attr("gen_ai.agent.name", r.agent);
    if (!r.mode.empty()) attr("flightrec.mode", r.mode);
    if (!r.command.empty()) attr("flightrec.command", r.command);
    attr_text("flightrec.end_reason", "reason");
    if (e.contains("exit_code")) attr("process.exit.code", int_of(e, "exit_code"));
    if (auto sig = e.find("exit_signal"); sig != e.end() && (sig->is_string() || sig->is_number_integer()))
      attr("flightrec.exit_signal", sig->is_string() ? OtelValue(sig->get<std::string>()) : OtelValue(sig->get<int64_t>()));
    attr("flightrec.end_seq", seq);
    attr("flightrec.end_leaf_hash", ledger::to_hex(leaf));
    seq = 1;  // the session's span names its genesis entry
    named_leaf = r.leaf;
  } else if (type == "llm_call") {
    // From the request's first byte to the response's last.
    set_times(s, e, "request_mono_ns", "response_mono_ns");
    std::string model = text(e, "model"), api = text(e, "api");
    s.name = "chat" + (model.empty() ? "" : " " + model);
    s.kind = 3;
    attr("gen_ai.operation.name", std::string("chat"));
    attr("gen_ai.provider.name", provider_of(api));
    attr("gen_ai.system", provider_of(api));
    if (!model.empty()) attr("gen_ai.request.model", model);
    std::string response_model = text(e, "response_model");
    if (!response_model.empty() || !model.empty()) attr("gen_ai.response.model", response_model.empty() ? model : response_model);
    attr_text("gen_ai.response.id", "response_id");
    if (e.contains("input_tokens")) attr("gen_ai.usage.input_tokens", int_of(e, "input_tokens"));
    if (e.contains("output_tokens")) attr("gen_ai.usage.output_tokens", int_of(e, "output_tokens"));
    if (std::string stop = text(e, "stop_reason"); !stop.empty()) attr("gen_ai.response.finish_reasons", std::vector<std::string>{stop});
    if (std::string host = text(e, "host"); !host.empty()) {
      size_t colon = host.rfind(':');
      bool port = colon != std::string::npos && host.find(']', colon) == std::string::npos && colon + 1 < host.size() &&
                  host.find_first_not_of("0123456789", colon + 1) == std::string::npos && host.size() - colon <= 6;
      attr("server.address", port ? host.substr(0, colon) : host);
      if (port) attr("server.port", int64_t(std::stol(host.substr(colon + 1))));
    }
    if (e.contains("status")) attr("http.response.status_code", int_of(e, "status"));
    attr("flightrec.api", api);
    attr_text("flightrec.target", "target");
    attr("flightrec.stream", int_of(e, "stream") == 1);
    if (e.contains("http2_stream")) attr("flightrec.http2_stream", int_of(e, "http2_stream"));
    attr_text("flightrec.request_id", "request_id");
    if (auto ids = texts(e, "tool_call_ids"); !ids.empty()) attr("flightrec.tool_call_ids", ids);
    if (auto ids = texts(e, "tool_result_ids"); !ids.empty()) attr("flightrec.tool_result_ids", ids);
    if (auto p = texts(e, "problems"); !p.empty()) attr("flightrec.problems", p);
    int64_t status = int_of(e, "status");
    std::string error = text(e, "error");
    if (status >= 400 || !error.empty()) {
      s.status = 2;
      s.status_message = otel_text(error, 1024);
      attr("error.type", status >= 400 ? std::to_string(status) : std::string("api_error"));
    }
    if (extra && content_) {
      if (!extra->input_messages.empty()) attr("gen_ai.input.messages", extra->input_messages);
      if (!extra->output_messages.empty()) attr("gen_ai.output.messages", extra->output_messages);
    }
  } else {  // tool_call
    // From the end of the answer that asked for it to the start of the
    // request that returned its result.
    set_times(s, e, "asked_mono_ns", "result_mono_ns");
    std::string name = text(e, "name");
    s.name = "execute_tool" + (name.empty() ? "" : " " + name);
    attr("gen_ai.operation.name", std::string("execute_tool"));
    if (!name.empty()) attr("gen_ai.tool.name", name);
    attr_text("gen_ai.tool.call.id", "tool_call_id");
    attr("gen_ai.tool.type", std::string("function"));
    if (e.contains("llm_call")) attr("flightrec.llm_call", int_of(e, "llm_call"));
    attr("flightrec.result_seen", int_of(e, "result_seen", 1) == 1);
    attr("flightrec.act_seqs", ints(e, "act_seqs"));
    attr("flightrec.act_kinds", texts(e, "act_kinds"));
    attr("flightrec.act_links", texts(e, "act_links"));
    if (content_) {
      attr_text("gen_ai.tool.call.arguments", "input");
      if (extra && !extra->tool_result.empty()) attr("gen_ai.tool.call.result", extra->tool_result);
    }
  }
  attr("flightrec.origin", origin);
  attr("flightrec.session", session);
  attr("flightrec.seq", seq);
  if (named_leaf != ledger::Hash{}) attr("flightrec.leaf_hash", ledger::to_hex(named_leaf));
  if (int64_t pid = int_of(e, "pid"); pid && type != "session_end") attr("process.pid", pid);
  out.push_back(std::move(s));
}

// ---------------------------------------------------------------- protobuf
// opentelemetry/proto/collector/trace/v1 and trace/v1, common/v1,
// resource/v1: only the fields written here.
namespace {

class Pb {
 public:
  void varint(uint64_t v) {
    while (v >= 0x80) {
      b_ += char(uint8_t(v) | 0x80);
      v >>= 7;
    }
    b_ += char(v);
  }
  void tag(int field, int wire) { varint(uint64_t(field) << 3 | uint64_t(wire)); }
  void bytes(int field, std::string_view s) {
    tag(field, 2);
    varint(s.size());
    b_ += s;
  }
  void message(int field, const Pb& m) { bytes(field, m.b_); }
  void number(int field, uint64_t v) {  // int64, enum, bool
    tag(field, 0);
    varint(v);
  }
  void fixed64(int field, uint64_t v) {
    tag(field, 1);
    for (int i = 0; i < 8; ++i) b_ += char(uint8_t(v >> (8 * i)));
  }
  const std::string& str() const { return b_; }

 private:
  std::string b_;
};

Pb any_value(const OtelValue& v) {
  Pb a;
  if (auto* s = std::get_if<std::string>(&v)) a.bytes(1, *s);
  else if (auto* b = std::get_if<bool>(&v)) a.number(2, *b);
  else if (auto* i = std::get_if<int64_t>(&v)) a.number(3, uint64_t(*i));
  else {
    Pb array;
    if (auto* ss = std::get_if<std::vector<std::string>>(&v))
      for (const auto& x : *ss) array.message(1, any_value(x));
    if (auto* is = std::get_if<std::vector<int64_t>>(&v))
      for (int64_t x : *is) array.message(1, any_value(x));
    a.message(5, array);
  }
  return a;
}

Pb key_value(const std::string& key, const OtelValue& v) {
  Pb kv;
  kv.bytes(1, key);
  kv.message(2, any_value(v));
  return kv;
}

std::string_view raw(const auto& id) { return {reinterpret_cast<const char*>(id.data()), id.size()}; }

bool is_root(const OtelSpan& s) {
  return std::all_of(s.parent_id.begin(), s.parent_id.end(), [](uint8_t b) { return b == 0; });
}

json json_value(const OtelValue& v) {
  if (auto* s = std::get_if<std::string>(&v)) return {{"stringValue", *s}};
  if (auto* b = std::get_if<bool>(&v)) return {{"boolValue", *b}};
  if (auto* i = std::get_if<int64_t>(&v)) return {{"intValue", std::to_string(*i)}};  // int64 as a string (proto3 JSON)
  json values = json::array();
  if (auto* ss = std::get_if<std::vector<std::string>>(&v))
    for (const auto& x : *ss) values.push_back(json_value(x));
  if (auto* is = std::get_if<std::vector<int64_t>>(&v))
    for (int64_t x : *is) values.push_back(json_value(x));
  return {{"arrayValue", {{"values", values}}}};
}

json json_attributes(const std::vector<std::pair<std::string, OtelValue>>& attrs) {
  json out = json::array();
  for (const auto& [k, v] : attrs) out.push_back({{"key", k}, {"value", json_value(v)}});
  return out;
}

std::vector<std::pair<std::string, OtelValue>> resource_attributes(const std::string& host) {
  return {{"service.name", std::string("flightrec")}, {"service.version", std::string(FLIGHTREC_VERSION)},
          {"host.name", host}};
}

}  // namespace

std::string otlp_protobuf(const std::vector<OtelSpan>& spans, const std::string& host) {
  Pb resource, scope, scope_spans, resource_spans, request;
  for (const auto& [k, v] : resource_attributes(host)) resource.message(1, key_value(k, v));
  scope.bytes(1, "flightrec");
  scope.bytes(2, FLIGHTREC_VERSION);
  scope_spans.message(1, scope);
  for (const auto& s : spans) {
    Pb span;
    span.bytes(1, raw(s.trace_id));
    span.bytes(2, raw(s.span_id));
    if (!is_root(s)) span.bytes(4, raw(s.parent_id));
    span.bytes(5, s.name);
    span.number(6, uint64_t(s.kind));
    span.fixed64(7, s.start_ns);
    span.fixed64(8, s.end_ns);
    for (const auto& [k, v] : s.attributes) span.message(9, key_value(k, v));
    Pb status;
    if (!s.status_message.empty()) status.bytes(2, s.status_message);
    if (s.status) status.number(3, uint64_t(s.status));
    span.message(15, status);
    scope_spans.message(2, span);
  }
  resource_spans.message(1, resource);
  resource_spans.message(2, scope_spans);
  request.message(1, resource_spans);
  return request.str();
}

std::string otlp_json(const std::vector<OtelSpan>& spans, const std::string& host) {
  json list = json::array();
  for (const auto& s : spans) {
    json span = {{"traceId", hex_encode(raw(s.trace_id))},
                 {"spanId", hex_encode(raw(s.span_id))},
                 {"name", s.name},
                 {"kind", s.kind},
                 {"startTimeUnixNano", std::to_string(s.start_ns)},
                 {"endTimeUnixNano", std::to_string(s.end_ns)},
                 {"attributes", json_attributes(s.attributes)},
                 {"status", json::object()}};
    if (!is_root(s)) span["parentSpanId"] = hex_encode(raw(s.parent_id));
    if (s.status) span["status"]["code"] = s.status;
    if (!s.status_message.empty()) span["status"]["message"] = s.status_message;
    list.push_back(std::move(span));
  }
  json request = {{"resourceSpans",
                   {{{"resource", {{"attributes", json_attributes(resource_attributes(host))}}},
                     {"scopeSpans", {{{"scope", {{"name", "flightrec"}, {"version", FLIGHTREC_VERSION}}}, {"spans", list}}}}}}}};
  return request.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace flightrec::ship
