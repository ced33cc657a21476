#include "inspect/replay.h"

#include "common/text.h"
#include "inspect/describe.h"
#include "ledger/hash.h"

namespace flightrec::inspect {

using nlohmann::json;

namespace {

std::vector<std::string> strings_of(const json& e, const char* key) {
  std::vector<std::string> out;
  if (e.contains(key) && e[key].is_array())
    for (const auto& v : e[key])
      if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

}  // namespace

std::vector<std::string> recorded_overrides(const json& genesis) {
  std::vector<std::string> out;
  for (const auto& line : strings_of(genesis, "sandbox"))
    if (line.starts_with("override: ")) out.push_back(line.substr(10));
  return out;
}

policy::Policy recorded_policy(const json& genesis) {
  if (!genesis.is_object() || !genesis.contains("policy") || !genesis["policy"].is_string())
    throw policy::PolicyError("the session does not hold its policy's text");
  std::vector<std::string> sources = strings_of(genesis, "policy_bases"), texts = strings_of(genesis, "policy_base_texts");
  if (sources.size() != texts.size()) throw policy::PolicyError("policy_bases and policy_base_texts differ in length");
  size_t next = 0;
  // The chain in the order it was resolved when the session began.
  auto recorded_base = [&](const std::string& name, const std::string&) -> policy::PolicyBase {
    if (next >= sources.size()) throw policy::PolicyError("the record holds no base '" + name + "'");
    ++next;
    return {sources[next - 1], texts[next - 1]};
  };
  std::string source = "as recorded";
  for (const auto& line : strings_of(genesis, "sandbox"))
    if (line.starts_with("policy source: ")) source += ", " + line.substr(15);
  // A record from before bases were recorded names shipped ones only; a
  // file it names is not read (the record may be anyone's).
  auto shipped_base = [](const std::string& name, const std::string& from) -> policy::PolicyBase {
    if (name.find('/') != std::string::npos || name.ends_with(".yaml") || name.ends_with(".yml"))
      throw policy::PolicyError("the record does not hold the base '" + name + "'");
    return policy::find_base(name, from);
  };
  policy::Policy p = policy::parse(genesis["policy"].get<std::string>(), source,
                                   sources.empty() ? policy::BaseResolver(shipped_base) : recorded_base);
  for (const auto& o : recorded_overrides(genesis)) policy::reapply_override(p, o);
  return p;
}

bool enforced_under(const json& genesis, const policy::Policy& p) {
  if (!genesis.is_object() || !genesis.contains("policy_mode") || genesis["policy_mode"] != "enforce") return false;
  if (!genesis.contains("policy_sha256") || genesis["policy_sha256"] != ledger::to_hex(ledger::sha256(p.text))) return false;
  if (p.overrides != recorded_overrides(genesis)) return false;
  // The whole chain, byte for byte: a base changed since is another policy.
  std::vector<std::string> sources = strings_of(genesis, "policy_bases"), texts = strings_of(genesis, "policy_base_texts");
  if (sources.size() != p.bases.size() || texts.size() != p.bases.size()) return false;
  for (size_t i = 0; i < p.bases.size(); ++i)
    if (sources[i] != p.bases[i].source || texts[i] != p.bases[i].text) return false;
  return true;
}

events::Entry entry_from_json(const json& entry) {
  events::Entry e;
  if (!entry.is_object()) return e;
  for (const auto& [key, v] : entry.items()) {
    std::string_view k = key;  // items() keys refer into `entry`
    if (v.is_number_unsigned()) {
      e.set(k, v.get<uint64_t>());
    } else if (v.is_number_integer()) {
      e.set(k, v.get<int64_t>());
    } else if (v.is_string()) {
      e.set(k, v.get<std::string>());
    } else if (v.is_array() && !v.empty() && v[0].is_number_integer()) {
      std::vector<int64_t> ints;
      for (const auto& x : v)
        if (x.is_number_integer()) ints.push_back(x.get<int64_t>());
      e.set(k, std::move(ints));
    } else if (v.is_array() && !v.empty() && v[0].is_string()) {
      std::vector<std::string> strs;
      for (const auto& x : v)
        if (x.is_string()) strs.push_back(x.get<std::string>());
      e.set(k, std::move(strs));
    }
  }
  return e;
}

namespace {

policy::Policy judged_as(policy::Policy p, bool enforced_here) {
  if (!enforced_here) p.mode = policy::Mode::Shadow;
  return p;
}

std::string string_of(const json& e, const char* key) {
  return e.contains(key) && e[key].is_string() ? e[key].get<std::string>() : std::string();
}

}  // namespace

Replay::Replay(policy::Policy policy, const std::string& work_dir, bool enforced_here)
    : policy_(judged_as(std::move(policy), enforced_here)), judge_(policy_, work_dir), enforced_here_(enforced_here) {
  judge_.set_host_checks(false);  // this host's files say nothing of the session's
}

void Replay::add(const json& e) {
  if (!e.is_object()) return;
  ++entries_;
  std::string type = string_of(e, "type");
  int64_t seq = e.contains("seq") && e["seq"].is_number_integer() ? e["seq"].get<int64_t>() : 0;
  if (type == "genesis") {
    session_ = e.value("session", int64_t(0));
    recorded_name_ = string_of(e, "policy_name");
    recorded_sha256_ = string_of(e, "policy_sha256");
    in_setup_ = e.contains("sandbox");
    return;
  }
  if (type == "violation") {
    int64_t of = e.contains("of_seq") && e["of_seq"].is_number_integer() ? e["of_seq"].get<int64_t>() : -1;
    if (of < 1) {
      ++not_replayed_;  // limits, packet batches: not tied to one entry
      return;
    }
    if (by_recorded_.size() >= kMaxRows) {
      ++dropped_rows_;
      return;
    }
    by_recorded_.emplace(of, Decision{string_of(e, "rule_id"), string_of(e, "level"), string_of(e, "action"),
                                      string_of(e, "detail")});
    return;
  }
  if (!e.contains("source")) return;  // flightrec's own entries: nothing the session did
  // A sandbox is set up by flightrec's processes (the namespace's init and
  // the child that becomes the command): they are not the session's until
  // the command's exec, and the init never is.
  int64_t pid = e.contains("pid") && e["pid"].is_number_integer() ? e["pid"].get<int64_t>() : 0;
  if (in_setup_ && string_of(e, "comm") == "flightrec") setup_pids_.insert(pid);
  if (type == "exec") {  // the command: nothing after it is flightrec's set-up but its init
    setup_pids_.erase(pid);
    in_setup_ = false;
  }
  if (setup_pids_.count(pid)) {
    ++setup_entries_;
    return;
  }
  events::Entry entry = entry_from_json(e);
  std::optional<policy::Violation> v;
  try {
    v = judge_.judge(entry);
  } catch (const std::exception&) {
    return;  // an entry the judge cannot read (malformed members) is no decision
  }
  if (!v) return;
  if (by_new_.size() >= kMaxRows) {
    ++dropped_rows_;
    return;
  }
  by_new_.emplace(seq, Decision{v->rule, v->level, v->action, v->detail});
  if (lines_.size() < kMaxRows) lines_.emplace(seq, entry_line(session_, seq, e));
}

json Replay::to_json(size_t limit) const {
  json new_only = json::array(), recorded_only = json::array();
  json by_rule = json::object(), recorded_only_by_rule = json::object();
  int64_t both = 0, n_new_only = 0, n_recorded_only = 0;
  for (const auto& [seq, d] : by_new_) {
    by_rule[d.rule] = by_rule.value(d.rule, 0) + 1;
    auto rec = by_recorded_.find(seq);
    if (rec != by_recorded_.end()) {
      ++both;
      continue;
    }
    if (size_t(n_new_only++) < limit)
      new_only.push_back({{"seq", seq}, {"rule_id", d.rule}, {"level", d.level}, {"detail", d.detail}});
  }
  for (const auto& [seq, d] : by_recorded_) {
    if (by_new_.count(seq)) continue;
    recorded_only_by_rule[d.rule] = recorded_only_by_rule.value(d.rule, 0) + 1;
    if (size_t(n_recorded_only++) < limit)
      recorded_only.push_back(
          {{"seq", seq}, {"rule_id", d.rule}, {"level", d.level}, {"action", d.action}, {"detail", d.detail}});
  }
  return {{"session", session_},
          {"entries", entries_},
          {"recorded_policy", {{"name", recorded_name_}, {"sha256", recorded_sha256_}}},
          {"policy", {{"name", policy_.name}, {"source", policy_.source}, {"sha256", ledger::to_hex(ledger::sha256(policy_.text))}}},
          {"would_deny", by_new_.size()},
          {"would_deny_by_rule", by_rule},
          {"both_deny", both},
          {"new_only_count", n_new_only},
          {"new_only", new_only},
          {"recorded_only_count", n_recorded_only},
          {"recorded_only", recorded_only},
          {"recorded_only_by_rule", recorded_only_by_rule},
          {"not_replayed", not_replayed_},
          {"setup_entries", setup_entries_},
          {"judged_by", enforced_here_ ? "the kernel's answers (it enforced this policy)" : "the policy's rules (shadow)"},
          {"rows_not_kept", dropped_rows_}};
}

std::string Replay::to_text(size_t limit) const {
  json j = to_json(limit);
  std::string out;
  auto line = [&](const std::string& s) { out += printable(s) + "\n"; };
  std::string name = policy_.name, recorded = recorded_name_.empty() ? "none" : recorded_name_;
  line("replay of session " + std::to_string(session_) + " (" + std::to_string(entries_) + " entries, recorded under " +
       recorded + ") against " + name + " (" + policy_.source + ")");
  if (enforced_here_)
    line("  the session was enforced under this very policy: its decisions are the kernel's answers");
  line("  " + name + " would deny " + std::to_string(by_new_.size()) + " entries; " +
       std::to_string(j["both_deny"].get<int64_t>()) + " of them the recorded policy objected to as well");
  std::string rules;
  for (const auto& [rule, n] : j["would_deny_by_rule"].items())
    rules += (rules.empty() ? "" : ", ") + std::to_string(n.get<int64_t>()) + " " + rule;
  if (!rules.empty()) line("  by rule: " + rules);
  line("  " + std::to_string(j["new_only_count"].get<int64_t>()) + " that the recorded policy allowed:");
  for (const auto& row : j["new_only"]) {
    int64_t seq = row["seq"];
    auto l = lines_.find(seq);
    out += "    [" + printable(row["level"].get<std::string>()) + "] " + printable(row["rule_id"].get<std::string>()) +
           ": " + printable(row["detail"].get<std::string>()) + "\n";
    if (l != lines_.end()) out += "      " + l->second + "\n";
  }
  line("  " + std::to_string(j["recorded_only_count"].get<int64_t>()) + " that the recorded policy objected to and " +
       name + " would allow:");
  for (const auto& row : j["recorded_only"])
    line("    " + std::to_string(session_) + ":" + row["seq"].dump() + " [" + row["level"].get<std::string>() + "] " +
         row["rule_id"].get<std::string>() + " " + row["action"].get<std::string>() + ": " +
         row["detail"].get<std::string>());
  size_t listed = std::max(j["new_only_count"].get<size_t>(), j["recorded_only_count"].get<size_t>());
  if (listed > limit) line("  (" + std::to_string(limit) + " listed per list; --limit N shows more)");
  if (not_replayed_)
    line("  not replayed: " + std::to_string(not_replayed_) +
         " recorded violations tied to no entry (limits, packet batches, circuit breakers)");
  if (setup_entries_)
    line("  not judged: " + std::to_string(setup_entries_) + " entries of flightrec's set-up of the sandbox");
  if (dropped_rows_) line("  " + std::to_string(dropped_rows_) + " decisions past the first " + std::to_string(kMaxRows) + " were not kept");
  return out;
}

}  // namespace flightrec::inspect
