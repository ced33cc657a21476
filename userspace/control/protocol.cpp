#include "control/protocol.h"

#include <cmath>
#include <initializer_list>

namespace flightrec::control {
namespace {

using nlohmann::json;

// Reads one message's fields, each checked for its type and bounds; what
// is wrong is thrown as ProtocolError naming the message and the field.
class Fields {
 public:
  // max_text: what a text may hold (requests: kMaxText; answers, which
  // carry the daemon's messages and paths with reasons: kMaxAnswerText).
  Fields(const json& j, std::string what, size_t max_text = kMaxText) : j_(j), what_(std::move(what)), max_text_(max_text) {
    if (!j.is_object()) fail("", "is not a JSON object");
  }
  // Requests are read by the daemon: a key it does not know is refused.
  void only(std::initializer_list<const char*> known) const {
    for (const auto& [key, value] : j_.items()) {
      bool ok = false;
      for (const char* k : known) ok = ok || key == k;
      if (!ok) fail(key.size() <= 64 ? key : key.substr(0, 64) + "...", "is not a field of this message");
    }
  }
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  const json& need(const char* key) const {
    if (!has(key)) fail(key, "is missing");
    return j_[key];
  }
  std::string text(const char* key) const { return text_of(need(key), key); }
  std::string text_or(const char* key, std::string fallback) const { return has(key) ? text(key) : fallback; }
  uint64_t count(const char* key, uint64_t max = UINT64_MAX) const {
    const json& v = need(key);
    if (!v.is_number_unsigned() || v.get<uint64_t>() > max)
      fail(key, "is not a whole number from 0 to " + std::to_string(max));
    return v.get<uint64_t>();
  }
  uint64_t count_or(const char* key, uint64_t fallback) const { return has(key) ? count(key) : fallback; }
  int64_t integer_or(const char* key, int64_t fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_[key];
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
      fail(key, "is not a whole number");
    return v.get<int64_t>();
  }
  double number_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_[key];
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail(key, "is not a number");
    return v.get<double>();
  }
  bool flag_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) fail(key, "is not true or false");
    return j_[key].get<bool>();
  }
  const json& list(const char* key) const {
    const json& v = need(key);
    if (!v.is_array() || v.size() > kMaxList) fail(key, "is not a list of at most " + std::to_string(kMaxList));
    return v;
  }
  std::vector<std::string> texts_or_none(const char* key) const {
    std::vector<std::string> out;
    if (!has(key)) return out;
    for (const auto& v : list(key)) out.push_back(text_of(v, key));
    return out;
  }
  std::vector<uint64_t> counts_or_none(const char* key) const {
    std::vector<uint64_t> out;
    if (!has(key)) return out;
    for (const auto& v : list(key)) {
      if (!v.is_number_unsigned()) fail(key, "is not a list of whole numbers");
      out.push_back(v.get<uint64_t>());
    }
    return out;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw ProtocolError(what_ + (key.empty() ? "" : ": " + key) + " " + why);
  }

 private:
  std::string text_of(const json& v, const char* key) const {
    if (!v.is_string() || v.get_ref<const std::string&>().size() > max_text_)
      fail(key, "is not a text of at most " + std::to_string(max_text_) + " bytes");
    return v.get<std::string>();
  }
  const json& j_;
  std::string what_;
  size_t max_text_;
};

// The request's name, checked to be one of `known` (for the refusal).
std::string request_name(const json& j, const char* known) {
  Fields f(j, "the message");
  if (!f.has("request")) f.fail("", std::string("names no request (known: ") + known + ")");
  return f.text("request");
}

json traits_json(const probe::CaptureTraits& t) {
  return {{"attached", t.attached},
          {"refused", t.refused},
          {"path_rules", t.path_rules},
          {"unix_inbound", t.unix_inbound},
          {"entry_times", t.entry_times}};
}

probe::CaptureTraits parse_traits(const json& j) {
  Fields f(j, "the session's traits", kMaxAnswerText);
  probe::CaptureTraits t;
  t.attached = f.texts_or_none("attached");
  t.refused = f.texts_or_none("refused");
  t.path_rules = f.flag_or("path_rules", false);
  t.unix_inbound = f.flag_or("unix_inbound", false);
  t.entry_times = f.flag_or("entry_times", false);
  return t;
}

}  // namespace

json to_json(const Request& r) {
  if (std::holds_alternative<StatusRequest>(r)) return {{"request", "status"}};
  if (const auto* s = std::get_if<SessionRequest>(&r))
    return {{"request", "session"},
            {"cgroup", s->cgroup},
            {"ring_bytes", s->ring_bytes},
            {"tls", s->tls},
            {"entry_times", s->entry_times}};
  return {{"request", "forward"}, {"session", std::get<ForwardRequest>(r).session}};
}

json to_json(const RunRequest& r) {
  if (std::holds_alternative<EndRequest>(r)) return {{"request", "end"}};
  if (const auto* a = std::get_if<AttachTlsRequest>(&r)) return {{"request", "attach_tls"}, {"name", a->name}};
  return {{"request", "probes_file"}};
}

json to_json(const SessionAnswer& a) {
  json j = {{"session", a.session},
            {"ring_bytes", a.ring_bytes},
            {"program_misses", a.program_misses},
            {"traits", traits_json(a.traits)},
            {"tls_chunk", a.tls_chunk},
            {"tls_cap", a.tls_cap},
            {"tls_errors", a.tls_errors}};
  if (!a.ship.empty()) j["ship"] = a.ship;
  return j;
}

json to_json(const ForwardAnswer& a) { return {{"forward", a.forward}}; }
json to_json(const EndAnswer& a) { return {{"program_misses", a.program_misses}}; }
json to_json(const AttachTlsAnswer& a) {
  return {{"result", a.result}, {"tls_file", a.tls_file}, {"live_since_ns", a.live_since_ns}};
}
json to_json(const ProbesFileAnswer& a) { return {{"probes", a.probes}}; }

json to_json(const DaemonStatus& s) {
  json sessions = json::array(), runs = json::array(), outputs = json::array();
  for (const auto& e : s.sessions)
    sessions.push_back({{"cgroup", e.cgroup},
                        {"cgroup_gone", e.cgroup_gone},
                        {"suspended", e.suspended},
                        {"rule", e.rule},
                        {"mode", e.mode},
                        {"record", e.record},
                        {"started_real_ns", e.started_real_ns},
                        {"entries", e.entries},
                        {"entries_per_second", e.entries_per_second},
                        {"lost", e.lost},
                        {"record_bytes", e.record_bytes}});
  for (const auto& r : s.runs)
    runs.push_back({{"cgroup", r.cgroup}, {"client_pid", r.client_pid}, {"started_real_ns", r.started_real_ns},
                    {"ended", r.ended}});
  for (const auto& o : s.outputs)
    outputs.push_back({{"kind", o.kind}, {"name", o.name}, {"sent", o.sent}, {"dropped", o.dropped},
                       {"queued", o.queued}, {"spool_bytes", o.spool_bytes}, {"connected", o.connected},
                       {"last_error", o.last_error}});
  return {{"flightrecd_version", s.flightrecd_version},
          {"pid", s.pid},
          {"started_real_ns", s.started_real_ns},
          {"config", s.config},
          {"watch_rules", s.watch_rules},
          {"ring_bytes", s.ring_bytes},
          {"ring_fill", s.ring_fill},
          {"lost_total", s.lost_total},
          {"lost_per_cpu", s.lost_per_cpu},
          {"records_after_seal", s.records_after_seal},
          {"not_recorded", s.not_recorded},
          {"storage_full", s.storage_full},
          {"storage_dir", s.storage_dir},
          {"storage_bytes", s.storage_bytes},
          {"sessions", sessions},
          {"runs", runs},
          {"outputs", outputs}};
}

json refusal(const std::string& why) { return {{"error", why}}; }

Request parse_request(const json& j) {
  std::string name = request_name(j, "status, session, forward");
  Fields f(j, "the " + name + " request");
  if (name == "status") {
    f.only({"request"});
    return StatusRequest{};
  }
  if (name == "session") {
    f.only({"request", "cgroup", "ring_bytes", "tls", "entry_times"});
    SessionRequest s;
    s.cgroup = f.text("cgroup");
    s.ring_bytes = f.count("ring_bytes");
    s.tls = f.flag_or("tls", false);
    s.entry_times = f.flag_or("entry_times", true);
    return s;
  }
  if (name == "forward") {
    f.only({"request", "session"});
    return ForwardRequest{uint32_t(f.count("session", kMaxSessionNumber))};
  }
  throw ProtocolError("unknown request (known: status, session, forward)");
}

RunRequest parse_run_request(const json& j) {
  std::string name = request_name(j, "attach_tls, probes_file, end");
  Fields f(j, "the " + name + " request");
  if (name == "end") {
    f.only({"request"});
    return EndRequest{};
  }
  if (name == "attach_tls") {
    f.only({"request", "name"});
    return AttachTlsRequest{f.text_or("name", "")};
  }
  if (name == "probes_file") {
    f.only({"request"});
    return ProbesFileRequest{};
  }
  throw ProtocolError("unknown request (known on a run's connection: attach_tls, probes_file, end)");
}

// Answers come from a daemon of the same package; a field it added later
// is let be, a field with the wrong type is not.
SessionAnswer parse_session_answer(const json& j) {
  Fields f(j, "flightrecd's answer to a session request", kMaxAnswerText);
  SessionAnswer a;
  a.session = uint32_t(f.count("session", kMaxSessionNumber));
  a.ring_bytes = f.count("ring_bytes");
  a.program_misses = f.count_or("program_misses", 0);
  a.traits = parse_traits(f.need("traits"));
  a.tls_chunk = f.count_or("tls_chunk", 0);
  a.tls_cap = f.count_or("tls_cap", 0);
  a.tls_errors = f.texts_or_none("tls_errors");
  a.ship = f.texts_or_none("ship");
  return a;
}

ForwardAnswer parse_forward_answer(const json& j) {
  return {Fields(j, "flightrecd's answer to a forward request", kMaxAnswerText).flag_or("forward", false)};
}

EndAnswer parse_end_answer(const json& j) {
  return {Fields(j, "flightrecd's answer to an end request", kMaxAnswerText).count("program_misses")};
}

AttachTlsAnswer parse_attach_tls_answer(const json& j) {
  Fields f(j, "flightrecd's answer to attach_tls", kMaxAnswerText);
  return {f.text_or("result", ""), f.flag_or("tls_file", false), f.count_or("live_since_ns", 0)};
}

ProbesFileAnswer parse_probes_file_answer(const json& j) {
  return {Fields(j, "flightrecd's answer to probes_file", kMaxAnswerText).flag_or("probes", false)};
}

DaemonStatus parse_status(const json& j) {
  Fields f(j, "flightrecd's status", kMaxAnswerText);
  DaemonStatus s;
  s.flightrecd_version = f.text_or("flightrecd_version", "");
  s.pid = f.integer_or("pid", 0);
  s.started_real_ns = f.count_or("started_real_ns", 0);
  s.config = f.text_or("config", "");
  s.watch_rules = f.count_or("watch_rules", 0);
  s.ring_bytes = f.count_or("ring_bytes", 0);
  s.ring_fill = f.number_or("ring_fill", 0);
  s.lost_total = f.count_or("lost_total", 0);
  s.lost_per_cpu = f.counts_or_none("lost_per_cpu");
  s.records_after_seal = f.count_or("records_after_seal", 0);
  s.not_recorded = f.count_or("not_recorded", 0);
  s.storage_full = f.flag_or("storage_full", false);
  s.storage_dir = f.text_or("storage_dir", "");
  s.storage_bytes = f.count_or("storage_bytes", 0);
  if (f.has("sessions"))
    for (const auto& v : f.list("sessions")) {
      Fields e(v, "flightrecd's status: a session", kMaxAnswerText);
      s.sessions.push_back({e.text_or("cgroup", ""), e.text_or("rule", ""), e.text_or("mode", ""),
                            e.text_or("record", ""), e.flag_or("cgroup_gone", false), e.flag_or("suspended", false),
                            e.count_or("started_real_ns", 0), e.integer_or("entries", 0),
                            e.number_or("entries_per_second", 0), e.count_or("lost", 0),
                            e.count_or("record_bytes", 0)});
    }
  if (f.has("runs"))
    for (const auto& v : f.list("runs")) {
      Fields r(v, "flightrecd's status: a run", kMaxAnswerText);
      s.runs.push_back({r.text_or("cgroup", ""), r.integer_or("client_pid", 0), r.count_or("started_real_ns", 0),
                        r.flag_or("ended", false)});
    }
  if (f.has("outputs"))
    for (const auto& v : f.list("outputs")) {
      Fields o(v, "flightrecd's status: an output", kMaxAnswerText);
      s.outputs.push_back({o.text_or("kind", ""), o.text_or("name", ""), o.text_or("last_error", ""),
                           o.count_or("sent", 0), o.count_or("dropped", 0), o.count_or("queued", 0),
                           o.count_or("spool_bytes", 0), o.flag_or("connected", false)});
    }
  return s;
}

std::string line_of(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace flightrec::control
