#include "inspect/summary.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <vector>

#include "common/text.h"
#include "inspect/describe.h"
#include "inspect/filter.h"
#include "policy/judge.h"

namespace flightrec::inspect {

using nlohmann::json;

void SessionSummary::Table::add(Key key, int64_t n) {
  auto it = counts.find(key);
  if (it != counts.end()) it->second += n;
  else if (counts.size() < kMaxDistinct) counts.emplace(std::move(key), n);
  else other += n;
}

namespace {

// A table's rows, most frequent first (ties by key), at most `top`.
template <typename K>
std::vector<std::pair<K, int64_t>> ranked(const std::map<K, int64_t>& counts, size_t top) {
  std::vector<std::pair<K, int64_t>> rows(counts.begin(), counts.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (rows.size() > top) rows.resize(top);
  return rows;
}

bool opens_for_writing(const ledger::TopLevel& e) {
  if (e.integer("nr") == 85) return true;  // creat
  auto flags = e.integer("flags");
  return flags && policy::opens_for_writing(*flags);
}

}  // namespace

void SessionSummary::add(const ledger::TopLevel& e) {
  ++entries_;
  std::string type = e.string("type").value_or("?");
  types_.add({type});
  if (auto ts = e.integer("ts_real_ns"); ts && *ts > 0) {
    if (!first_ts_) first_ts_ = *ts;
    last_ts_ = std::max(last_ts_, *ts);
  }
  auto text = [&](const char* key) { return e.string(key).value_or("?"); };
  auto bytes = [&](const char* key) { return bytes_member(e, key).value_or("?"); };  // paths: any bytes
  if (type == "genesis") {
    host_ = e.string("host").value_or("");
    policy_ = e.string("policy_name").value_or("");
    command_ = std::string(e.raw("command").value_or(e.raw("cgroups").value_or(e.raw("cgroups_b64").value_or(""))));
  } else if (type == "exec") {
    executables_.add({bytes("filename")});
  } else if (type == "file_open") {
    if (opens_for_writing(e) && e.integer("ret").value_or(-1) >= 0)
      written_.add({bytes_member(e, "kernel_path").value_or(bytes("path"))});
  } else if (type == "file_change") {
    if (e.string("when") == "end") changed_.add({text("change"), bytes("path")});  // the session's final word
  } else if (type == "connect") {
    std::string family = text("family");
    if (family == "AF_INET" || family == "AF_INET6") {
      Key key = {family, text("addr"), std::to_string(e.integer("port").value_or(0))};
      int64_t ret = e.integer("ret").value_or(0);
      if (ret == 0 || ret == -115) {  // EINPROGRESS: a non-blocking connect under way
        reached_.add(std::move(key));
      } else {
        key.push_back(e.string("err").value_or(std::to_string(ret)));
        refused_.add(std::move(key));
      }
    }
  } else if (type == "tls") {
    if (auto host = e.string("http_host")) tls_hosts_.add({*host});
  } else if (type == "llm_call") {
    models_.add({text("api"), bytes("model")});
    input_tokens_ += std::max<int64_t>(0, e.integer("input_tokens").value_or(0));
    output_tokens_ += std::max<int64_t>(0, e.integer("output_tokens").value_or(0));
  } else if (type == "tool_call") {
    tools_.add({bytes("name")});
    if (e.integer("result_seen").value_or(1) == 0) ++unanswered_tools_;
  } else if (type == "violation") {
    violations_.add({text("level"), text("rule_id"), text("action")});
  } else if (type == "lost") {
    ++gaps_;
    lost_ += e.unsigned_integer("lost").value_or(0);
  } else if (type == "session_end") {
    ended_ = true;
    end_reason_ = e.string("reason").value_or("");
    exit_code_ = e.integer("exit_code");
    exit_signal_ = e.integer("exit_signal");
  }
}

json SessionSummary::to_json(size_t top) const {
  auto rows = [&](const Table& t, const std::vector<std::string>& names) {
    json out = json::array();
    for (const auto& [parts, n] : ranked(t.counts, top)) {
      json row;
      for (size_t i = 0; i < names.size() && i < parts.size(); ++i) {
        if (names[i] == "port") row[names[i]] = std::strtoll(parts[i].c_str(), nullptr, 10);
        else row[names[i]] = parts[i];
      }
      row["count"] = n;
      out.push_back(row);
    }
    return out;
  };
  json type_counts = json::object();
  for (const auto& [key, n] : types_.counts) type_counts[key[0]] = n;
  json beyond = json::object();
  for (const auto& [name, t] : {std::pair<const char*, const Table*>{"executables", &executables_}, {"files_written", &written_},
                                {"files_changed", &changed_}, {"connected", &reached_}, {"connect_failed", &refused_},
                                {"tls_hosts", &tls_hosts_}})
    if (t->other) beyond[name] = t->other;
  json j = {{"session", session_},
            {"entries", entries_},
            {"host", host_},
            {"policy", policy_},
            {"start_ns", first_ts_},
            {"end_ns", last_ts_},
            {"duration_ns", last_ts_ - first_ts_},
            {"terminated", ended_},
            {"types", type_counts},
            {"executables", rows(executables_, {"path"})},
            {"executables_distinct", executables_.counts.size()},
            {"files_written", rows(written_, {"path"})},
            {"files_written_distinct", written_.counts.size()},
            {"files_changed", rows(changed_, {"change", "path"})},
            {"files_changed_distinct", changed_.counts.size()},
            {"connected", rows(reached_, {"family", "addr", "port"})},
            {"connect_failed", rows(refused_, {"family", "addr", "port", "err"})},
            {"tls_hosts", rows(tls_hosts_, {"host"})},
            {"violations", rows(violations_, {"level", "rule_id", "action"})},
            {"model_calls", rows(models_, {"api", "model"})},
            {"input_tokens", input_tokens_},
            {"output_tokens", output_tokens_},
            {"tool_calls", rows(tools_, {"name"})},
            {"tool_calls_unanswered", unanswered_tools_},
            {"gaps", gaps_},
            {"lost", lost_},
            {"not_listed", beyond}};  // per table: counted past its first 10000 distinct rows
  j["command"] = json::parse(command_, nullptr, false);
  if (j["command"].is_discarded()) j["command"] = nullptr;
  if (ended_) j["end_reason"] = end_reason_;
  if (exit_code_) j["exit_code"] = *exit_code_;
  if (exit_signal_) j["exit_signal"] = *exit_signal_;
  return j;
}

std::string SessionSummary::to_text(size_t top) const {
  json j = to_json(top);
  std::string out;
  auto line = [&](const std::string& s) { out += printable(s) + "\n"; };
  line("session " + std::to_string(session_) + " on " + host_ + ": " + j["command"].dump() + ", policy " + policy_);
  std::string how = ended_ ? end_reason_ : "unterminated (no session_end entry)";
  if (exit_code_) how += ", exit code " + std::to_string(*exit_code_);
  if (exit_signal_) how += ", killed by signal " + std::to_string(*exit_signal_);
  char secs[32];
  snprintf(secs, sizeof(secs), "%.3f s", double(last_ts_ - first_ts_) / 1e9);
  line("  " + format_wall_time(first_ts_) + " to " + format_wall_time(last_ts_) + " (" + secs + "), " + how);
  std::string counts;
  for (const auto& [type, n] : ranked(types_.counts, types_.counts.size()))
    counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + type[0];
  line("  " + std::to_string(entries_) + " entries: " + counts);
  line(gaps_ ? "  LOST: " + std::to_string(lost_) + " events in " + std::to_string(gaps_) + " gaps"
             : "  nothing lost");
  auto words = [](const std::vector<std::string>& p) {
    std::string s;
    for (const auto& w : p) s += (s.empty() ? "" : " ") + w;
    return s;
  };
  // family, addr, port[, err] as addr:port ([addr]:port for IPv6) (err)
  auto endpoint = [](const std::vector<std::string>& p) {
    if (p.size() < 3) return std::string("?");
    std::string s = (p[0] == "AF_INET6" ? "[" + p[1] + "]" : p[1]) + ":" + p[2];
    return p.size() > 3 ? s + " (" + p[3] + ")" : s;
  };
  auto section = [&](const char* title, const Table& t, const std::function<std::string(const std::vector<std::string>&)>& show) {
    if (t.counts.empty()) return;
    line(std::string("  ") + title + " (" + std::to_string(t.counts.size()) + "):");
    for (const auto& [key, n] : ranked(t.counts, top)) line("    " + std::to_string(n) + "  " + show(key));
    if (t.counts.size() > top) line("    ... " + std::to_string(t.counts.size() - top) + " more");
    if (t.other) line("    ... and " + std::to_string(t.other) + " more past the first " + std::to_string(kMaxDistinct) + " distinct ones");
  };
  section("violations (level, rule, action)", violations_, words);
  section("programs run", executables_, words);
  section("files opened for writing", written_, words);
  section("files changed at the end", changed_, words);
  section("connected to", reached_, endpoint);
  section("connects that failed", refused_, endpoint);
  section("TLS requests to", tls_hosts_, words);
  if (!models_.counts.empty())
    line("  model calls: " + std::to_string(input_tokens_) + " tokens in, " + std::to_string(output_tokens_) + " out");
  section("model calls (api, model)", models_, words);
  section("tool calls", tools_, words);
  if (unanswered_tools_) line("  " + std::to_string(unanswered_tools_) + " tool call(s) whose result the model never got");
  return out;
}

}  // namespace flightrec::inspect
