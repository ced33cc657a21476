#include "session/grant_log.h"

#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

namespace flightrec::session {
namespace {

using nlohmann::json;

// Supervisor event -> entry type (docs/FORMAT.md, "Runtime grants").
const char* entry_type(const std::string& event) {
  static const std::pair<const char*, const char*> types[] = {
      {"ask", "grant_ask"},         {"grant", "grant"},           {"use", "grant_use"},
      {"expired", "grant_expired"}, {"revoked", "grant_revoked"}, {"denied", "grant_denied"},
      {"refused", "grant_refused"}, {"ask_ended", "grant_ask_ended"}, {"stopped", "grants_stopped"}};
  for (const auto& [e, t] : types)
    if (event == e) return t;
  return nullptr;
}

std::string unhex(const std::string& h) {
  std::string out;
  auto val = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += char(val(h[i]) << 4 | val(h[i + 1]));
  return out;
}

}  // namespace

GrantLog::~GrantLog() { close(); }

void GrantLog::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool GrantLog::read(Emitted& out, std::string* notes) {
  char buf[65536];
  ssize_t n = ::read(fd_, buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (n <= 0) {
    if (!pending_.empty()) entry(pending_, out, notes);
    pending_.clear();
    return false;
  }
  pending_.append(buf, size_t(n));
  size_t nl;
  while ((nl = pending_.find('\n')) != std::string::npos) {
    entry(pending_.substr(0, nl), out, notes);
    pending_.erase(0, nl + 1);
  }
  return true;
}

void GrantLog::entry(const std::string& line, Emitted& out, std::string* notes) {
  json j = json::parse(line, nullptr, false);
  const char* type = j.is_object() && j.contains("event") && j["event"].is_string()
                         ? entry_type(j["event"].get<std::string>()) : nullptr;
  if (!type) {
    events::Entry& e = out.add("grants_unreadable");
    e.set_bytes("line", line.substr(0, 4096));
    return;
  }
  events::Entry& e = out.add(type);
  // The supervisor's keys, as the record names them.
  static const std::pair<const char*, const char*> ints[] = {
      {"id", "grant_id"},       {"ask", "ask_id"},         {"pid", "subject_pid"}, {"result", "result"},
      {"errno", "errno"},       {"duration_ms", "duration_ms"}, {"uses", "uses"},  {"timeout_ms", "timeout_ms"},
      {"client_uid", "client_uid"}, {"client_pid", "client_pid"}, {"port", "port"}};
  static const std::pair<const char*, const char*> texts[] = {
      {"kind", "kind"}, {"path", "path"}, {"syscall", "syscall"}, {"address", "address"}, {"name", "name"},
      {"reason", "reason"}, {"why", "why"}, {"qtype", "qtype"}, {"client", "client"}};
  for (const auto& [from, to] : ints)
    if (j.contains(from) && j[from].is_number_integer()) e.set(to, j[from].get<int64_t>());
  const std::string event = j["event"].get<std::string>();
  if (on_name_grant_ && j.contains("id") && j["id"].is_number_unsigned()) {
    uint64_t id = j["id"].get<uint64_t>();
    bool name_grant = j.contains("kind") && j["kind"].is_string() && j["kind"] == "name";
    if (event == "grant" && name_grant && j.contains("name") && j["name"].is_string() &&
        j.contains("port") && j["port"].is_number_unsigned() && j["port"].get<uint64_t>() <= 65535)
      on_name_grant_({id, j["name"].get<std::string>(), uint16_t(j["port"].get<uint64_t>()),
                      j.contains("duration_ms") && j["duration_ms"].is_number_unsigned() ? j["duration_ms"].get<uint64_t>() : 0,
                      false});
    else if (event == "expired" || event == "revoked")
      on_name_grant_({id, "", 0, 0, true});
  }
  for (const auto& [from, to] : texts)
    if (j.contains(from) && j[from].is_string()) e.set(to, j[from].get<std::string>());
  if (j.contains("paths_hex") && j["paths_hex"].is_array()) {
    const auto& p = j["paths_hex"];
    if (p.size() > 0 && p[0].is_string()) e.set_bytes("path", unhex(p[0].get<std::string>()));
    if (p.size() > 1 && p[1].is_string()) e.set_bytes("path2", unhex(p[1].get<std::string>()));
  }
  auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : ""; };
  auto num = [&](const char* k) { return j.contains(k) && j[k].is_number_integer() ? std::to_string(j[k].get<int64_t>()) : "?"; };
  std::string what = str("syscall");
  if (!str("address").empty()) what += " " + str("address") + " port " + num("port");
  if (event != "grant" && !str("name").empty()) what += "name " + str("name");  // a lookup that waits (ask.connect)
  std::string who = j.contains("pid") ? "pid " + num("pid") : "from " + str("client");
  if (j.contains("paths_hex") && j["paths_hex"].is_array() && !j["paths_hex"].empty() && j["paths_hex"][0].is_string())
    what += " " + unhex(j["paths_hex"][0].get<std::string>());
  // A sandbox can make a name ask every time one is denied: after the
  // first ones, those lines are in the record (and list) only.
  bool name_note = str("kind") == "name" && (event == "ask" || event == "denied");
  if (name_note && ++name_notes_ > kMaxNameNotes) {
    if (name_notes_ == kMaxNameNotes + 1)
      *notes += "flightrec: further asks for names are in the record only (flightrec query --type grant_ask); "
                "list on the grant socket shows those waiting\n";
    return;
  }
  if (event == "ask")
    *notes += "flightrec: ASK " + num("ask") + ": " + what + " (" + who + ") waits up to " +
              num("timeout_ms") + " ms for a grant\n";
  else if (event == "denied")
    *notes += "flightrec: ALERT grant.denied: ask " + num("ask") + " " + what + " (" + who + "): " + str("why") + "\n";
  else if (event == "grant")
    *notes += "flightrec: GRANT " + num("id") + ": " + str("kind") + " " + str("path") + str("syscall") +
              (str("address").empty() ? "" : str("address") + " port " + num("port")) +
              (str("name").empty() ? "" : str("name") + " port " + num("port")) +
              (str("reason").empty() ? "" : " (" + str("reason") + ")") + "\n";
  else if (event == "refused")
    *notes += "flightrec: ALERT grant.refused: " + str("why") + "\n";
  else if (event == "revoked")
    *notes += "flightrec: REVOKED " + num("id") + (str("reason").empty() ? "" : " (" + str("reason") + ")") + "\n";
  else if (event == "stopped")
    *notes += "flightrec: the grant supervisor stopped: " + str("why") + "\n";
}

}  // namespace flightrec::session
