#include "inspect/filter.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>

#include "common/text.h"
#include "ledger/path_index.h"
#include "policy/judge.h"

namespace flightrec::inspect {

std::optional<Level> parse_level(const std::string& text) {
  std::string up;
  for (char c : text) up += char(toupper(static_cast<unsigned char>(c)));
  if (up == "INFO") return Level::Info;
  if (up == "ALERT") return Level::Alert;
  if (up == "CRITICAL") return Level::Critical;
  return std::nullopt;
}

namespace {

// Reads exactly `width` digits at text[*at].
bool digits(const std::string& text, size_t* at, size_t width, int* out) {
  if (*at + width > text.size()) return false;
  for (size_t i = 0; i < width; ++i)
    if (!isdigit(static_cast<unsigned char>(text[*at + i]))) return false;
  std::from_chars(text.data() + *at, text.data() + *at + width, *out);
  *at += width;
  return true;
}

bool expect(const std::string& text, size_t* at, char c) {
  if (*at >= text.size() || text[*at] != c) return false;
  ++*at;
  return true;
}

}  // namespace

std::optional<int64_t> parse_wall_time(const std::string& text) {
  // Relative to now: -30s, -10m, -2h, -7d.
  if (text.size() >= 3 && text[0] == '-') {
    int64_t n = 0;
    auto [p, ec] = std::from_chars(text.data() + 1, text.data() + text.size() - 1, n);
    if (ec != std::errc() || p != text.data() + text.size() - 1 || n < 0 || n > 100'000'000) return std::nullopt;
    int64_t unit = 0;
    switch (text.back()) {
      case 's': unit = 1; break;
      case 'm': unit = 60; break;
      case 'h': unit = 3600; break;
      case 'd': unit = 86400; break;
      default: return std::nullopt;
    }
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t at = int64_t(now.tv_sec) - n * unit;
    if (at < 0) return std::nullopt;
    return at * 1'000'000'000 + now.tv_nsec;
  }
  if (!text.empty() && text[0] == '@') {
    int64_t secs = 0;
    auto [p, ec] = std::from_chars(text.data() + 1, text.data() + text.size(), secs);
    if (ec != std::errc() || p != text.data() + text.size() || text.size() == 1) return std::nullopt;
    if (secs < 0 || secs > 9'000'000'000) return std::nullopt;
    return secs * 1'000'000'000;
  }
  std::tm tm{};
  size_t at = 0;
  int year, month, day, hour = 0, minute = 0, second = 0;
  if (!digits(text, &at, 4, &year) || !expect(text, &at, '-') || !digits(text, &at, 2, &month) ||
      !expect(text, &at, '-') || !digits(text, &at, 2, &day))
    return std::nullopt;
  int64_t frac_ns = 0;
  if (at < text.size() && (text[at] == ' ' || text[at] == 'T')) {
    ++at;
    if (!digits(text, &at, 2, &hour) || !expect(text, &at, ':') || !digits(text, &at, 2, &minute)) return std::nullopt;
    if (at < text.size() && text[at] == ':') {
      ++at;
      if (!digits(text, &at, 2, &second)) return std::nullopt;
      if (at < text.size() && text[at] == '.') {
        ++at;
        int64_t scale = 100'000'000;
        size_t start = at;
        for (; at < text.size() && isdigit(static_cast<unsigned char>(text[at])); ++at, scale /= 10)
          if (scale) frac_ns += (text[at] - '0') * scale;
        if (at == start) return std::nullopt;
      }
    }
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  // mktime and timegm move a 31 February to March: such a date is not one.
  auto same_date = [&](const std::tm& out) { return out.tm_mday == day && out.tm_mon == month - 1 && out.tm_year == year - 1900; };
  time_t t;
  if (at == text.size()) {
    tm.tm_isdst = -1;  // local time, with its daylight saving rule at that date
    t = mktime(&tm);
    if (t == time_t(-1) || !same_date(tm)) return std::nullopt;
  } else if (text[at] == 'Z' && at + 1 == text.size()) {
    t = timegm(&tm);
    if (!same_date(tm)) return std::nullopt;
  } else if ((text[at] == '+' || text[at] == '-') && at + 6 == text.size()) {
    int sign = text[at] == '+' ? 1 : -1, oh, om;
    ++at;
    if (!digits(text, &at, 2, &oh) || !expect(text, &at, ':') || !digits(text, &at, 2, &om) || oh > 23 || om > 59)
      return std::nullopt;
    t = timegm(&tm) - sign * (oh * 3600 + om * 60);
    if (!same_date(tm)) return std::nullopt;
  } else {
    return std::nullopt;
  }
  // Nanoseconds since 1970 fit an int64 until 2262.
  if (t < 0 || t > 9'000'000'000) return std::nullopt;
  return int64_t(t) * 1'000'000'000 + frac_ns;
}

const std::vector<std::string>& entry_types() {
  static const std::vector<std::string> types = {
      "syscall", "file_open", "connect", "exec", "exec_argv", "fork", "exit", "cgroup_move", "tls", "tls_hello", "tls_uncaptured", "program_held", "llm_call", "tool_call", "acts_unexplained", "lsm", "lost",
      "violation", "file_change", "snapshot", "summary", "genesis", "session_end", "cgroup_gone", "process_at_start", "recording_suspended", "recording_resumed", "freeze", "thaw",
      "syscall_counts", "syscall_counts_lost",
      "grant_ask", "grant", "grant_use", "grant_expired", "grant_revoked", "grant_denied", "grant_refused",
      "grant_ask_ended", "grants_stopped", "grants_unreadable", "dns", "dns_answer", "connection_cut",
      "error", "malformed", "changes_kept", "file_changes_truncated", "file_changes_at_close_skipped"};
  return types;
}

const std::vector<std::string>& path_members() {
  // The record's own list: the blocks' path index holds what it names.
  static const std::vector<std::string> members(ledger::path_members().begin(), ledger::path_members().end());
  return members;
}

std::optional<std::string> bytes_member(const ledger::TopLevel& top, const std::string& key) {
  if (auto s = top.string(key)) return s;
  if (auto b64 = top.string(key + "_b64")) return base64_decode(*b64);
  return std::nullopt;
}

bool Criteria::empty() const {
  return types.empty() && !pid && !since_ns && !until_ns && rules.empty() && !min_level && !path && !comm && !exec;
}

Matcher::Matcher(Criteria c) : c_(std::move(c)) {
  if (std::find(c_.types.begin(), c_.types.end(), "syscall") != c_.types.end())
    for (const char* t : {"file_open", "connect"})
      if (std::find(c_.types.begin(), c_.types.end(), t) == c_.types.end()) c_.types.push_back(t);
}

ledger::EntryFilter Matcher::store_filter(std::optional<int64_t> session) const {
  ledger::EntryFilter f;
  f.session = session;
  // --exec must see every exec and fork to know who runs what: no skipping then.
  if (c_.exec) return f;
  f.types = c_.types;
  f.pid = c_.pid;
  f.since_ns = c_.since_ns;
  f.until_ns = c_.until_ns;
  f.path = c_.path;
  return f;
}

namespace {

bool rule_matches(const std::string& rule, const std::vector<std::string>& wanted) {
  for (const auto& w : wanted)
    if (rule == w || (rule.size() > w.size() && rule.compare(0, w.size(), w) == 0 && rule[w.size()] == '.')) return true;
  return false;
}

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

bool Matcher::matches(int64_t session, const ledger::TopLevel& top) {
  if (session != session_) {  // pids of another session are other processes
    exe_.clear();
    session_ = session;
  }
  exe_.settle();
  auto type = top.string("type");
  auto pid = top.integer("pid");
  if (c_.exec && type && pid) {
    // Follow who runs what, whether or not this entry is wanted.
    if (*type == "exec") {
      exe_.exec(*pid, bytes_member(top, "filename"));
    } else if (*type == "fork" && top.integer("thread").value_or(0) == 0) {
      if (auto child = top.integer("child_pid")) exe_.fork(*pid, *child);
    } else if (*type == "exit" && top.integer("process_exit").value_or(0) == 1) {
      exe_.exit(*pid);
    }
  }
  if (!c_.types.empty() && (!type || std::find(c_.types.begin(), c_.types.end(), *type) == c_.types.end()))
    return false;
  if (c_.pid && pid != c_.pid) return false;
  if (c_.since_ns || c_.until_ns) {
    // 0 is no time, as in the blocks' index (docs/FORMAT.md §7).
    auto ts = top.integer("ts_real_ns");
    if (!ts || *ts == 0 || (c_.since_ns && *ts < *c_.since_ns) || (c_.until_ns && *ts > *c_.until_ns)) return false;
  }
  if (!c_.rules.empty()) {
    auto rule = top.string("rule_id");
    if (!rule || !rule_matches(*rule, c_.rules)) return false;
  }
  if (c_.min_level) {
    auto text = top.string("level");
    auto level = text ? parse_level(*text) : std::nullopt;
    if (!level || *level < *c_.min_level) return false;
  }
  if (c_.path) {
    bool any = false;
    for (const auto& m : path_members())
      if (auto p = bytes_member(top, m); p && policy::path_under(*p, *c_.path)) any = true;
    if (!any) return false;
  }
  if (c_.comm && top.string("comm") != c_.comm) return false;
  if (c_.exec) {
    const std::string* exe = pid ? exe_.find(*pid) : nullptr;
    if (!exe) return false;
    bool by_name = c_.exec->find('/') == std::string::npos;
    if (by_name ? base_name(*exe) != *c_.exec : *exe != *c_.exec) return false;
  }
  return true;
}

}  // namespace flightrec::inspect
