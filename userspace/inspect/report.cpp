#include "inspect/report.h"

#include <functional>
#include <set>

#include "common/text.h"
#include "inspect/describe.h"
#include "inspect/filter.h"

namespace flightrec::inspect {

using nlohmann::json;

namespace {

// What a recorded process named, made safe for HTML: controls visible
// (printable), at most `max` bytes (cut on a character), then escaped.
std::string esc(const std::string& raw, size_t max = Report::kMaxText) {
  std::string s = printable(raw);
  if (s.size() > max) {
    size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    s = s.substr(0, cut) + "…";
  }
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string str(const json& e, const char* key) {
  return e.contains(key) && e[key].is_string() ? e[key].get<std::string>() : std::string();
}

int64_t num(const json& e, const char* key, int64_t fallback = 0) {
  return e.contains(key) && e[key].is_number_integer() ? e[key].get<int64_t>() : fallback;
}

const char* kStyle = R"css(
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1b1b;max-width:1400px}
h1{font-size:1.5em;margin:0 0 .3em}h2{font-size:1.15em;margin:1.6em 0 .4em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;width:100%;font-size:13px}td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#f3f3f3}code,.mono{font-family:ui-monospace,monospace;font-size:12px;word-break:break-all}
.ok{background:#e6f4ea;border:1px solid #8bc79a;padding:.6em}.bad{background:#fde8e8;border:1px solid #e09090;padding:.6em}
.warn{background:#fff6dd;border:1px solid #e0c060;padding:.6em}.note{color:#666;font-size:12px}
tr.violation td{background:#fdf0f0}tr.lost td{background:#fff3d6}tr.exec td{background:#f1f6ff}
ul.tree{list-style:none;padding-left:1.2em;margin:0}ul.tree li{margin:1px 0}
.CRITICAL{color:#a00;font-weight:bold}.ALERT{color:#c05000;font-weight:bold}.INFO{color:#555}
)css";

}  // namespace

Report::Process& Report::process(int64_t pid) {
  static Process overflow;  // past the cap: written to, never shown
  auto it = processes_.find(pid);
  if (it != processes_.end()) return it->second;
  if (processes_.size() >= kMaxProcesses) {
    ++processes_dropped_;
    overflow = Process{};
    return overflow;
  }
  Process& p = processes_[pid];
  p.pid = pid;
  return p;
}

void Report::timeline(const json& e, const std::string& css) {
  if (timeline_.size() >= kMaxRows) {
    ++timeline_dropped_;
    return;
  }
  timeline_.push_back({num(e, "seq"), num(e, "ts_real_ns"), num(e, "pid"), str(e, "comm"), str(e, "type"), describe(e), css});
}

bool Report::shows(std::string_view type) {
  for (const char* t : {"genesis", "exec", "fork", "exit", "violation", "file_change", "connect", "tls", "lost", "freeze",
                        "thaw", "error", "session_end", "snapshot", "malformed"})
    if (type == t) return true;
  return false;
}

void Report::add(const ledger::TopLevel& top, const json* entry) {
  summary_.add(top);
  if (!entry) return;
  const json& e = *entry;
  std::string type = str(e, "type");
  auto row = [&](std::vector<Row>& rows, size_t& dropped, const std::string& css = "") {
    if (rows.size() >= kMaxRows) {
      ++dropped;
      return;
    }
    rows.push_back({num(e, "seq"), num(e, "ts_real_ns"), num(e, "pid"), str(e, "comm"), type, describe(e), css});
  };
  if (type == "genesis") {
    genesis_command_ = e.contains("command") ? e["command"].dump(-1, ' ', false, json::error_handler_t::replace) : "";
    host_ = str(e, "host");
    policy_ = str(e, "policy_name");
    policy_sha256_ = str(e, "policy_sha256");
    kernel_ = str(e, "kernel");
    timeline(e, "");
  } else if (type == "exec") {
    Process& p = process(num(e, "pid"));
    p.exe = bytes_member(top, "filename").value_or("?");
    p.comm = str(e, "comm");
    std::string argv;
    if (e.contains("argv") && e["argv"].is_array())
      for (const auto& a : e["argv"]) argv += (argv.empty() ? "" : " ") + (a.is_string() ? a.get<std::string>() : a.dump());
    p.argv = argv;
    if (!p.start_ns) p.start_ns = num(e, "ts_real_ns");
    timeline(e, "exec");
  } else if (type == "fork" && num(e, "thread") == 0) {
    int64_t parent = num(e, "pid"), child = num(e, "child_pid");
    Process& c = process(child);
    c.parent = parent;
    c.start_ns = num(e, "ts_real_ns");
    if (auto it = processes_.find(parent); it != processes_.end()) {
      c.comm = it->second.comm.empty() ? str(e, "comm") : it->second.comm;
      c.exe = it->second.exe;
      c.argv = it->second.argv;
    } else {
      c.comm = str(e, "comm");
    }
    if (processes_.count(parent) || processes_.size() < kMaxProcesses) process(parent).children.push_back(child);
  } else if (type == "exit" && num(e, "process_exit") == 1) {
    if (auto it = processes_.find(num(e, "pid")); it != processes_.end())
      it->second.end = num(e, "signal") ? "killed by signal " + std::to_string(num(e, "signal"))
                                        : "exit " + std::to_string(num(e, "code"));
  } else if (type == "violation") {
    row(violations_, violations_dropped_, str(e, "level"));
    timeline(e, "violation");
  } else if (type == "file_change") {
    if (str(e, "when") == "end") row(files_, files_dropped_);
  } else if (type == "connect") {
    row(network_, network_dropped_);
    timeline(e, "");
  } else if (type == "tls") {
    if (e.contains("http_method") || e.contains("http_status")) {
      row(tls_, tls_dropped_);
      timeline(e, "");
    }
  } else if (type == "lost" || type == "freeze" || type == "thaw" || type == "error" || type == "session_end" ||
             type == "snapshot" || type == "malformed") {
    timeline(e, type == "lost" ? "lost" : "");
  }
}

std::string Report::html(const ledger::SessionVerdict& v, const std::string& record_name) const {
  json sum = summary_.to_json(50);
  std::string h;
  h.reserve(1 << 20);
  auto cut_note = [&](size_t dropped, const char* what) {
    if (dropped)
      h += "<p class=\"note\">" + std::to_string(dropped) + " more " + what + " are not shown (at most " +
           std::to_string(kMaxRows) + " rows per table): <code>flightrec query</code> lists them all.</p>\n";
  };
  auto table = [&](const char* id, const std::vector<Row>& rows, bool level_column) {
    h += std::string("<table id=\"") + id + "\"><tr><th>time</th><th>seq</th><th>pid</th><th>comm</th>" +
         (level_column ? "<th>level</th>" : "<th>type</th>") + "<th>what</th></tr>\n";
    for (const auto& r : rows)
      h += "<tr class=\"" + (level_column ? std::string("violation") : esc(r.css)) + "\"><td class=\"mono\">" + esc(format_wall_time(r.ts)) + "</td><td>" +
           std::to_string(r.seq) + "</td><td>" + std::to_string(r.pid) + "</td><td>" + esc(r.comm) + "</td><td" +
           (level_column ? " class=\"" + esc(r.css) + "\">" + esc(r.css) : ">" + esc(r.type)) + "</td><td class=\"mono\">" +
           esc(r.text) + "</td></tr>\n";
    h += "</table>\n";
  };
  auto counts = [&](const char* id, const json& rows, std::vector<std::pair<const char*, const char*>> cols) {
    if (rows.empty()) {
      h += "<p class=\"note\">none</p>\n";
      return;
    }
    h += std::string("<table id=\"") + id + "\"><tr>";
    for (const auto& [key, title] : cols) h += std::string("<th>") + title + "</th>";
    h += "<th>count</th></tr>\n";
    for (const auto& r : rows) {
      h += "<tr>";
      for (const auto& [key, title] : cols)
        h += "<td class=\"mono\">" + esc(r.contains(key) ? (r[key].is_string() ? r[key].get<std::string>() : r[key].dump()) : "") + "</td>";
      h += "<td>" + r["count"].dump() + "</td></tr>\n";
    }
    h += "</table>\n";
  };

  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
       "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
       "<title>flightrec session " + std::to_string(session_) + "</title><style>" + kStyle + "</style></head><body>\n";
  h += "<h1>flightrec report: session " + std::to_string(session_) + "</h1>\n";
  h += "<p class=\"mono\">record " + esc(record_name, 1000) + " · host " + esc(host_) + " · kernel " + esc(kernel_) +
       "<br>command " + esc(genesis_command_, 2000) + "<br>policy " + esc(policy_) + " (sha256 " + esc(policy_sha256_) +
       ")</p>\n";

  // Verification first: everything below is only as good as this.
  h += "<h2 id=\"verification\">Verification</h2>\n";
  if (!v.ok) {
    h += "<div class=\"bad\" id=\"verdict\"><b>FAILED</b>: " + esc(v.where) + ": " + esc(v.reason, 2000) +
         "<br>The record was altered or is damaged: what follows is what it says now, not evidence.</div>\n";
  } else {
    std::string signer = v.signed_checkpoints ? "signed by " + esc(v.key, 200) +
                                                     (v.key_from_record ? " (the key the record names: pin it with --pubkey)" : " (pinned)")
                                              : "<b>unsigned</b>";
    h += std::string("<div class=\"") + (v.terminated && !v.gaps ? "ok" : "warn") + "\" id=\"verdict\"><b>Intact</b>: " +
         std::to_string(v.entries) + " entries, " + std::to_string(v.checkpoints) + " checkpoints " + signer + "; " +
         (v.terminated ? "ended cleanly"
                       : "<b>unterminated</b> (no end checkpoint: " + std::to_string(v.entries - int64_t(v.last_checkpoint)) +
                             " entries after the last checkpoint)") +
         "; " + (v.gaps ? "<b>" + std::to_string(v.gaps) + " gaps, " + std::to_string(v.lost) + " events lost</b>" : "no gaps") +
         ".</div>\n";
  }

  h += "<h2 id=\"overview\">Overview</h2>\n<p>";
  h += esc(format_wall_time(sum["start_ns"].get<int64_t>())) + " to " + esc(format_wall_time(sum["end_ns"].get<int64_t>()));
  char secs[32];
  snprintf(secs, sizeof(secs), " (%.3f s)", double(sum["duration_ns"].get<int64_t>()) / 1e9);
  h += secs;
  if (sum.contains("end_reason")) h += "; " + esc(sum["end_reason"].get<std::string>());
  if (sum.contains("exit_code")) h += ", exit code " + sum["exit_code"].dump();
  if (sum.contains("exit_signal")) h += ", killed by signal " + sum["exit_signal"].dump();
  h += "</p>\n<table id=\"types\"><tr><th>entry type</th><th>count</th></tr>\n";
  for (const auto& [type, n] : sum["types"].items()) h += "<tr><td>" + esc(type) + "</td><td>" + n.dump() + "</td></tr>\n";
  h += "</table>\n";

  h += "<h2 id=\"violations\">Violations</h2>\n";
  counts("violations-by-rule", sum["violations"], {{"level", "level"}, {"rule_id", "rule"}, {"action", "action"}});
  if (!violations_.empty()) table("violation-list", violations_, true);
  cut_note(violations_dropped_, "violations");

  h += "<h2 id=\"loss\">Loss</h2>\n";
  h += sum["gaps"].get<int64_t>() ? "<div class=\"warn\">" + sum["lost"].dump() + " events lost in " + sum["gaps"].dump() +
                                        " gaps: the kernel could not deliver them; see the timeline's lost rows.</div>\n"
                                  : "<p id=\"no-loss\">Nothing was lost.</p>\n";

  h += "<h2 id=\"processes\">Process tree</h2>\n";
  std::set<int64_t> shown;
  std::function<void(int64_t, int)> node = [&](int64_t pid, int depth) {
    auto it = processes_.find(pid);
    if (it == processes_.end() || !shown.insert(pid).second) return;
    const Process& p = it->second;
    h += "<li><span class=\"mono\">" + std::to_string(p.pid) + " " + esc(p.comm) + "</span> " +
         (p.exe.empty() ? "<span class=\"note\">(no exec recorded)</span>" : esc(p.exe)) +
         (p.argv.empty() ? "" : " <code>" + esc(p.argv, 1000) + "</code>") +
         (p.end.empty() ? "" : " <span class=\"note\">(" + esc(p.end) + ")</span>");
    if (!p.children.empty() && depth < 64) {
      h += "\n<ul class=\"tree\">\n";
      for (int64_t c : p.children) node(c, depth + 1);
      h += "</ul>";
    }
    h += "</li>\n";
  };
  h += "<ul class=\"tree\" id=\"process-tree\">\n";
  for (const auto& [pid, p] : processes_)
    if (!processes_.count(p.parent) || p.parent == pid) node(pid, 0);
  h += "</ul>\n";
  if (processes_dropped_)
    h += "<p class=\"note\">" + std::to_string(processes_dropped_) + " more processes are not shown (at most " +
         std::to_string(kMaxProcesses) + ").</p>\n";
  h += "<h3>Programs run</h3>\n";
  counts("programs", sum["executables"], {{"path", "program"}});

  h += "<h2 id=\"files\">Files changed</h2>\n";
  h += "<p class=\"note\">The record holds each file's SHA-256 before and after, not its contents.</p>\n";
  if (!files_.empty()) table("file-changes", files_, false);
  else h += "<p class=\"note\">no changes recorded at the session's end</p>\n";
  cut_note(files_dropped_, "file changes");
  h += "<h3>Files opened for writing</h3>\n";
  counts("files-written", sum["files_written"], {{"path", "path"}});

  h += "<h2 id=\"network\">Network</h2>\n<h3>Connected to</h3>\n";
  counts("connected", sum["connected"], {{"family", "family"}, {"addr", "address"}, {"port", "port"}});
  h += "<h3>Connects that failed</h3>\n";
  counts("connect-failed", sum["connect_failed"], {{"family", "family"}, {"addr", "address"}, {"port", "port"}, {"err", "error"}});
  h += "<h3>TLS requests and responses</h3>\n";
  if (!tls_.empty()) table("tls", tls_, false);
  else h += "<p class=\"note\">none captured</p>\n";
  cut_note(tls_dropped_, "TLS messages");

  h += "<h2 id=\"timeline\">Timeline</h2>\n<p class=\"note\">Programs started, violations, connects, TLS requests, "
       "loss and the session's own notes, in record order; plain syscalls are in the record (flightrec query).</p>\n";
  table("timeline-table", timeline_, false);
  cut_note(timeline_dropped_, "timeline rows");
  h += "<p class=\"note\">flightrec " FLIGHTREC_VERSION "</p>\n</body></html>\n";
  return h;
}

}  // namespace flightrec::inspect
