#include "inspect/report.h"

#include "inspect/kept_diff.h"
#include "policy/judge.h"
#include "sandbox/kept.h"
#include "sandbox/layer.h"

#include <functional>
#include <set>

#include "common/text.h"
#include "inspect/describe.h"
#include "inspect/filter.h"

namespace flightrec::inspect {

using nlohmann::json;

namespace {

// What a recorded process named, made safe for HTML: controls visible
// (printable), escaped, and at most `max` bytes as escaped (cut between
// characters, never inside one or inside an entity).
std::string esc(const std::string& raw, size_t max = Report::kMaxText) {
  std::string s = printable(raw);  // valid UTF-8
  std::string out;
  out.reserve(std::min(s.size(), max) + 8);
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    std::string_view piece;
    switch (c) {
      case '&': piece = "&amp;"; break;
      case '<': piece = "&lt;"; break;
      case '>': piece = "&gt;"; break;
      case '"': piece = "&quot;"; break;
      case '\'': piece = "&#39;"; break;
      default: piece = std::string_view(s).substr(i, len);
    }
    if (out.size() + piece.size() > max) {
      out += "…";
      break;
    }
    out += piece;
    i += len;
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
tr.modified td{background:#fff8e6}tr.deleted td{background:#fdf0f0}details.folded{margin:.3em 0}details.folded summary{cursor:pointer;color:#444}
pre.diff{background:#f7f7f7;border:1px solid #ddd;padding:.4em;white-space:pre-wrap}
)css";

}  // namespace

void Report::Rows::add(Row r) {
  if (head.size() < head_max) {
    head.push_back(std::move(r));
    return;
  }
  if (tail_max == 0) {
    ++dropped;
    return;
  }
  if (tail.size() < tail_max) {
    tail.push_back(std::move(r));
    return;
  }
  tail[tail_next] = std::move(r);  // the oldest of the latest goes
  tail_next = (tail_next + 1) % tail_max;
  ++dropped;
}

std::vector<const Report::Row*> Report::Rows::in_order() const {
  std::vector<const Row*> out;
  for (const auto& r : head) out.push_back(&r);
  for (size_t i = 0; i < tail.size(); ++i) out.push_back(&tail[(tail_next + i) % tail.size()]);
  return out;
}

Report::Process* Report::process_of(int64_t pid) {
  auto it = running_.find(pid);
  return it == running_.end() ? nullptr : &processes_[size_t(it->second)];
}

Report::Process* Report::new_process(int64_t pid) {
  if (processes_.size() >= kMaxProcesses) {
    ++processes_dropped_;
    running_.erase(pid);  // whatever ran as pid before is not this one
    return nullptr;
  }
  running_[pid] = int64_t(processes_.size());
  processes_.push_back({});
  processes_.back().pid = pid;
  return &processes_.back();
}

namespace {

// A command line as the process tree shows it: runs of blanks longer than
// a few collapsed to their count, so padding cannot push what follows out
// of the shown part.
std::string squeezed(const std::string& argv) {
  std::string out;
  for (size_t i = 0; i < argv.size();) {
    size_t j = i;
    while (j < argv.size() && (argv[j] == ' ' || argv[j] == '\t' || argv[j] == '\n' || argv[j] == '\r')) ++j;
    if (j - i > 8) out += " [" + std::to_string(j - i) + " blanks] ";
    else if (j > i) out.append(argv, i, j - i);
    if (j == i) out += argv[j++];
    i = j;
  }
  return out;
}

}  // namespace

void Report::timeline(const json& e, const std::string& css) {
  timeline_.add({num(e, "seq"), num(e, "ts_real_ns"), num(e, "pid"), str(e, "comm"), str(e, "type"), describe(e), css});
}

bool Report::shows(std::string_view type) {
  for (const char* t : {"genesis", "exec", "exec_argv", "fork", "exit", "violation", "file_change", "changes_kept", "connect", "tls", "tls_uncaptured", "lost", "freeze",
                        "thaw", "error", "session_end", "snapshot", "malformed"})
    if (type == t) return true;
  return false;
}

void Report::add(const ledger::TopLevel& top, const json* entry) {
  summary_.add(top);
  if (!entry) return;
  const json& e = *entry;
  std::string type = str(e, "type");
  auto row = [&](Rows& rows, const std::string& css = "") {
    rows.add({num(e, "seq"), num(e, "ts_real_ns"), num(e, "pid"), str(e, "comm"), type, describe(e), css});
  };
  if (type == "genesis") {
    genesis_command_ = e.contains("command") ? e["command"].dump(-1, ' ', false, json::error_handler_t::replace) : "";
    host_ = str(e, "host");
    policy_ = str(e, "policy_name");
    policy_sha256_ = str(e, "policy_sha256");
    kernel_ = str(e, "kernel");
    changes_ = ChangeView(str(e, "work_dir"));
    // A watched session has no command: who it was is its workload.
    for (auto [key, label] : {std::pair{"watch_rule", "watch rule"}, {"pod_uid", "pod"}, {"container_id", "container"},
                              {"container_runtime", "runtime"}, {"qos_class", "QoS"}})
      if (!str(e, key).empty()) workload_ += std::string(workload_.empty() ? "" : " · ") + label + " " + str(e, key);
    bool no_command = !e.contains("command") || (e["command"].is_array() && e["command"].empty());
    if (no_command && e.contains("cgroups") && e["cgroups"].is_array() && !e["cgroups"].empty())
      workload_ += std::string(workload_.empty() ? "" : " · ") + "cgroups " + e["cgroups"].dump(-1, ' ', false, json::error_handler_t::replace);
    timeline(e, "");
  } else if (type == "exec") {
    int64_t pid = num(e, "pid");
    Process* p = process_of(pid);
    if (!p) p = new_process(pid);  // running since before its first entry
    if (p) {
      p->exe = bytes_member(top, "filename").value_or("?");
      p->comm = str(e, "comm");
      std::string argv;
      if (e.contains("argv") && e["argv"].is_array())
        for (const auto& a : e["argv"]) argv += (argv.empty() ? "" : " ") + (a.is_string() ? a.get<std::string>() : a.dump());
      p->argv = squeezed(argv);
    }
    timeline(e, "exec");
  } else if (type == "exec_argv") {
    // The rest of a long argv joins the command it continues (padding must
    // not push the real command out of the tree).
    if (Process* p = process_of(num(e, "pid")); p && p->argv.size() <= 4 * kMaxText) {
      std::string piece = bytes_member(top, "data").value_or("");
      for (char& c : piece)
        if (c == '\0') c = ' ';
      p->argv = squeezed(p->argv + piece);
    }
    timeline(e, "");
  } else if (type == "fork" && num(e, "thread") == 0) {
    int64_t parent_pid = num(e, "pid");
    Process* parent = process_of(parent_pid);
    if (!parent) parent = new_process(parent_pid);
    int64_t parent_id = parent ? int64_t(parent - processes_.data()) : -1;
    std::string comm = parent ? parent->comm : str(e, "comm"), exe = parent ? parent->exe : "", argv = parent ? parent->argv : "";
    if (Process* child = new_process(num(e, "child_pid"))) {  // may move processes_: parent is stale now
      child->parent = parent_id;
      child->comm = comm.empty() ? str(e, "comm") : comm;
      child->exe = exe;
      child->argv = argv;
      if (parent_id >= 0) processes_[size_t(parent_id)].children.push_back(int64_t(processes_.size() - 1));
    }
  } else if (type == "exit" && num(e, "process_exit") == 1) {
    if (Process* p = process_of(num(e, "pid"))) {
      p->end = num(e, "signal") ? "killed by signal " + std::to_string(num(e, "signal")) : "exit " + std::to_string(num(e, "code"));
      running_.erase(num(e, "pid"));  // the pid may be reused by another process
    }
  } else if (type == "violation") {
    std::string level = str(e, "level");
    row(level == "INFO" ? infos_ : alerts_, level);
    timeline(e, "violation");
  } else if (type == "file_change") {
    changes_.add(e);
  } else if (type == "changes_kept") {
    if (std::string dir = str(e, "work_dir_changes"); dir.starts_with(sandbox::kKeptChangesDir + "/")) kept_dir_ = dir;
  } else if (type == "connect") {
    row(network_);
    timeline(e, "");
  } else if (type == "tls") {
    if (e.contains("http_method") || e.contains("http_status")) {
      row(tls_);
      timeline(e, "");
    }
  } else if (type == "lost" || type == "tls_uncaptured" || type == "freeze" || type == "thaw" || type == "error" ||
             type == "session_end" || type == "snapshot" || type == "malformed") {
    timeline(e, type == "lost" || type == "tls_uncaptured" ? "lost" : "");  // what the record lacks
  }
}

void Report::what_changed(std::string& h) const {
  ChangeView::View v = changes_.view();
  h += "<h2 id=\"changes\">What changed</h2>\n";
  if (v.files == 0) {
    h += "<p class=\"note\" id=\"changes-none\">No files changed at the session's end.</p>\n";
    return;
  }
  size_t edits = 0;
  for (const auto& [dir, list] : v.edits) edits += list.size();
  h += "<p id=\"changes-summary\">" + std::to_string(v.files) + " files changed at the session's end: " +
       std::to_string(edits) + " shown by directory, " + std::to_string(v.files - edits - v.not_kept) + " in " +
       std::to_string(v.folded.size()) + " generated trees folded below them" +
       (v.not_kept ? ", " + std::to_string(v.not_kept) + " past the first " + std::to_string(ChangeView::kMaxFiles) + " counted only" : "") +
       ". The record holds each file's SHA-256 before and after, not its contents; a session that kept its changes "
       "aside (work_dir_mode: overlay) has their diffs below.</p>\n";
  size_t start = h.size(), shown = 0;
  auto size_text = [](const ChangedFile& f) { return f.size < 0 || f.kind == "dir" ? std::string() : std::to_string(f.size) + " B"; };
  auto short_sha = [](const std::string& sha) { return sha.empty() ? std::string("-") : esc(sha.substr(0, 12)); };
  auto file_row = [&](const ChangedFile& f) {
    h += "<tr class=\"" + esc(f.change) + "\"><td>" + esc(f.change) + "</td><td class=\"mono\">" + esc(changes_.shown(f.path), 1000) +
         (f.kind == "dir" ? "/" : f.kind == "symlink" ? " (symlink)" : "") + "</td><td>" + size_text(f) +
         "</td><td class=\"mono\">" + short_sha(f.sha256_before) + " &rarr; " + short_sha(f.sha256_after) + "</td><td>" +
         esc(f.outcome) + "</td><td>" + std::to_string(f.seq) + "</td></tr>\n";
  };
  const char* head = "<tr><th>change</th><th>path</th><th>size</th><th>sha256 before &rarr; after</th><th>written back</th><th>seq</th></tr>\n";
  h += "<div id=\"edits\">\n";
  // The whole section in about kSectionBytes (the old files table's share
  // of the page), counted from its start: the edits up to a half, the
  // folded trees up to three quarters, the diffs the rest.
  const size_t edit_bytes = kSectionBytes / 2;
  for (const auto& [dir, list] : v.edits) {
    if (h.size() - start > edit_bytes) break;
    h += "<h3 class=\"mono\">" + esc(dir, 1000) + "/</h3>\n<table class=\"edits\">" + head;
    for (const auto& f : list) {
      if (h.size() - start > edit_bytes) break;
      file_row(f);
      ++shown;
    }
    h += "</table>\n";
  }
  h += "</div>\n";
  if (shown < edits)
    h += "<p class=\"note\">" + std::to_string(edits - shown) + " more changed files are not shown: <code>flightrec query "
         "--type file_change</code> lists them all.</p>\n";
  size_t trees_shown = 0;
  for (const auto& t : v.folded) {
    if (h.size() - start > kSectionBytes / 4 * 3) break;
    ++trees_shown;
    int64_t n = 0;
    std::string counts;
    for (const auto& [change, k] : t.by_change) {
      n += k;
      counts += (counts.empty() ? "" : ", ") + std::to_string(k) + " " + esc(change);
    }
    h += "<details class=\"folded\"><summary class=\"mono\">" + esc(t.root, 1000) + "/ &mdash; " + esc(t.why) + ": " + counts +
         " (" + std::to_string(t.bytes) + " B)</summary>\n<table>" + head;
    size_t rows = 0;
    for (const auto& f : t.files) {
      if (h.size() - start > kSectionBytes / 4 * 3) break;
      file_row(f);
      ++rows;
    }
    h += "</table>\n";
    if (n > int64_t(rows)) h += "<p class=\"note\">and " + std::to_string(n - int64_t(rows)) + " more</p>\n";
    h += "</details>\n";
  }
  if (trees_shown < v.folded.size())
    h += "<p class=\"note\">" + std::to_string(v.folded.size() - trees_shown) + " more generated trees are not shown.</p>\n";
  diffs(h, v, start);
}

void Report::diffs(std::string& h, const ChangeView::View& v, size_t start) const {
  // Only a session that kept its changes aside has their contents, and only
  // in that copy (root's, under /var/lib/flightrec/changes), never in the record.
  if (kept_dir_.empty()) return;
  std::string why;
  auto meta = sandbox::read_kept(kept_dir_, &why);
  if (!meta || meta->work_dir != changes_.work_dir()) {
    h += "<p class=\"note\">The kept changes cannot be shown: " + esc(meta ? kept_dir_ + " belongs to another work directory" : why, 1000) + ".</p>\n";
    return;
  }
  sandbox::Layer host(changes_.work_dir()), kept(kept_dir_ + "/files");
  h += "<h3 id=\"diffs\">Diffs</h3>\n<p class=\"note\">From the copy the session kept aside (" + esc(kept_dir_, 1000) +
       "), against the host's files now: not part of the record, which holds their SHA-256. <code>flightrec apply</code> "
       "writes them.</p>\n";
  size_t left = 0;
  const std::string& work_dir = changes_.work_dir();
  for (const auto& [dir, list] : v.edits)
    for (const auto& f : list) {
      if (f.kind != "file" || f.change == "deleted" || f.path == work_dir || !policy::path_under(f.path, work_dir)) continue;
      if (h.size() - start > kSectionBytes) {
        ++left;
        continue;
      }
      sandbox::FileChange c{f.change, f.path, f.kind, uint64_t(std::max<int64_t>(f.size, 0)), f.mode, f.sha256_before, f.sha256_after, ""};
      // Line by line: esc shows a newline as \n, and a <pre> keeps real ones.
      std::string text = kept_change_text(c, work_dir, host, kept, 16 << 10);
      h += "<pre class=\"mono diff\">";
      for (size_t at = 0; at < text.size();) {
        size_t nl = text.find('\n', at);
        if (nl == std::string::npos) nl = text.size();
        h += esc(text.substr(at, nl - at), 4096) + "\n";
        at = nl + 1;
      }
      h += "</pre>\n";
    }
  if (left) h += "<p class=\"note\">" + std::to_string(left) + " more diffs are not shown: <code>flightrec changes</code> prints them all.</p>\n";
}

std::string Report::html(const ledger::SessionVerdict& v, const std::string& record_name) const {
  json sum = summary_.to_json(50);
  std::string h;
  h.reserve(1 << 20);
  auto cut_note = [&](size_t dropped, const char* what) {
    if (dropped)
      h += "<p class=\"note\">" + std::to_string(dropped) + " more " + what +
           " are not shown (the first and the latest are): <code>flightrec query</code> lists them all.</p>\n";
  };
  // One table of rows, in at most kSectionBytes of the page.
  auto table = [&](const char* id, const Rows& rows, bool level_column, const char* what) {
    size_t start = h.size(), shown = 0;
    auto list = rows.in_order();
    h += std::string("<table id=\"") + id + "\"><tr><th>time</th><th>seq</th><th>pid</th><th>comm</th>" +
         (level_column ? "<th>level</th>" : "<th>type</th>") + "<th>what</th></tr>\n";
    for (const Row* r : list) {
      if (h.size() - start > kSectionBytes) break;
      h += "<tr class=\"" + (level_column ? std::string("violation") : esc(r->css)) + "\"><td class=\"mono\">" +
           esc(format_wall_time(r->ts)) + "</td><td>" + std::to_string(r->seq) + "</td><td>" + std::to_string(r->pid) +
           "</td><td>" + esc(r->comm) + "</td><td" +
           (level_column ? " class=\"" + esc(r->css) + "\">" + esc(r->css) : ">" + esc(r->type)) +
           "</td><td class=\"mono\">" + esc(r->text) + "</td></tr>\n";
      ++shown;
    }
    h += "</table>\n";
    cut_note(rows.dropped + (list.size() - shown), what);
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
       "<br>command " + esc(genesis_command_, 2000) + (workload_.empty() ? "" : "<br>workload " + esc(workload_, 2000)) +
       "<br>policy " + esc(policy_) + " (sha256 " + esc(policy_sha256_) + ")</p>\n";

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

  // The reviewer's first question: what did it change?
  what_changed(h);

  // What the model was asked, what it decided, what that did: the agent's story first.
  if (turns_.is_object() && turns_.contains("turns") && !turns_["turns"].empty()) {
    h += "<h2 id=\"conversation\">Conversation</h2>\n<p class=\"note\">From the llm_call and tool_call entries and "
         "the TLS bytes they name; <code>flightrec agent</code> prints it whole.</p>\n";
    size_t start = h.size(), n = 0, shown = 0;
    auto text = [](const json& j, const char* k) { return j.contains(k) ? (j[k].is_string() ? j[k].get<std::string>() : j[k].dump()) : ""; };
    for (const auto& t : turns_["turns"]) {
      if (h.size() - start > kSectionBytes) break;
      ++shown;
      ++n;
      h += "<div class=\"turn\" id=\"turn-" + std::to_string(n) + "\"><h3>Turn " + std::to_string(n) + ": " +
           esc(text(t, "api")) + " " + esc(text(t, "model")) + " (entry " + text(t, "llm_call") + ")</h3>\n<p class=\"mono\">status " +
           esc(text(t, "status")) + " · tokens " + esc(text(t, "input_tokens")) + " in, " + esc(text(t, "output_tokens")) +
           " out · " + esc(text(t, "stop_reason")) + "</p>\n";
      if (!text(t, "prompt").empty()) h += "<p><b>asked</b> <span class=\"mono\">" + esc(text(t, "prompt"), 2000) + "</span></p>\n";
      if (!text(t, "answer").empty()) h += "<p><b>answered</b> <span class=\"mono\">" + esc(text(t, "answer"), 2000) + "</span></p>\n";
      for (const auto& c : t["tool_calls"]) {
        h += "<p><b>tool call</b> " + esc(text(c, "name")) + " <span class=\"mono\">" + esc(text(c, "id")) + "</span> (entry " +
             text(c, "tool_call") + "): <span class=\"mono\">" + esc(text(c, "input"), 1000) + "</span></p>\n<ul>\n";
        for (const auto& a : c["acts"])
          h += "<li class=\"mono\">" + esc(text(a, "kind")) + " " + esc(text(a, "what")) + " [" + esc(text(a, "link")) + ", entry " +
               text(a, "seq") + "]</li>\n";
        h += "</ul>\n";
        if (c.contains("result")) h += "<p><b>result</b> <span class=\"mono\">" + esc(text(c, "result"), 1000) + "</span></p>\n";
      }
      h += "</div>\n";
    }
    cut_note(turns_["turns"].size() - shown, "turns");
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
  // ALERT and CRITICAL first, in a table of their own: a flood of INFO
  // probes cannot push them off the page.
  if (!alerts_.head.empty()) table("violation-list", alerts_, true, "ALERT and CRITICAL violations");
  if (!infos_.head.empty()) {
    h += "<h3>INFO</h3>\n";
    table("info-list", infos_, true, "INFO violations");
  }

  h += "<h2 id=\"loss\">Loss</h2>\n";
  h += sum["gaps"].get<int64_t>() ? "<div class=\"warn\">" + sum["lost"].dump() + " events lost in " + sum["gaps"].dump() +
                                        " gaps: the kernel could not deliver them; see the timeline's lost rows.</div>\n"
                                  : "<p id=\"no-loss\">Nothing was lost.</p>\n";

  h += "<h2 id=\"processes\">Process tree</h2>\n";
  {
    size_t start = h.size();
    std::vector<bool> shown(processes_.size());
    size_t hidden_by_budget = 0;
    auto line = [&](const Process& p) {
      return "<span class=\"mono\">" + std::to_string(p.pid) + " " + esc(p.comm) + "</span> " +
             (p.exe.empty() ? "<span class=\"note\">(no exec recorded)</span>" : esc(p.exe)) +
             (p.argv.empty() ? "" : " <code>" + esc(p.argv, 4 * kMaxText) + "</code>") +
             (p.end.empty() ? "" : " <span class=\"note\">(" + esc(p.end) + ")</span>");
    };
    // Ids grow from parent to child, so the tree has no cycles; deeper
    // than 64 levels it goes on in the flat list below.
    std::function<void(size_t, int)> node = [&](size_t id, int depth) {
      if (h.size() - start > kSectionBytes) {
        ++hidden_by_budget;
        return;
      }
      shown[id] = true;
      const Process& p = processes_[id];
      h += "<li>" + line(p);
      if (!p.children.empty() && depth < 64) {
        h += "\n<ul class=\"tree\">\n";
        for (int64_t c : p.children) node(size_t(c), depth + 1);
        h += "</ul>";
      }
      h += "</li>\n";
    };
    h += "<ul class=\"tree\" id=\"process-tree\">\n";
    for (size_t id = 0; id < processes_.size(); ++id)
      if (processes_[id].parent < 0) node(id, 0);
    h += "</ul>\n";
    size_t rest = 0;
    for (size_t id = 0; id < processes_.size(); ++id) rest += !shown[id];
    if (rest) {
      h += "<p class=\"note\">Below, flat: the " + std::to_string(rest) +
           " processes more than 64 levels deep (or past this section's space).</p>\n<ul id=\"process-flat\">\n";
      for (size_t id = 0; id < processes_.size(); ++id)
        if (!shown[id] && h.size() - start <= 2 * kSectionBytes)
          h += "<li>" + line(processes_[id]) + " <span class=\"note\">(child of " +
               (processes_[id].parent >= 0 ? std::to_string(processes_[size_t(processes_[id].parent)].pid) : "?") +
               ")</span></li>\n";
        else if (!shown[id])
          ++hidden_by_budget;
      h += "</ul>\n";
    }
    if (processes_dropped_ || hidden_by_budget)
      h += "<p class=\"note\">" + std::to_string(processes_dropped_ + hidden_by_budget) + " more processes are not shown (at most " +
           std::to_string(kMaxProcesses) + ", in at most " + std::to_string(2 * kSectionBytes >> 20) + " MiB).</p>\n";
  }
  h += "<h3>Programs run</h3>\n";
  counts("programs", sum["executables"], {{"path", "program"}});

  h += "<h2 id=\"files\">Files opened for writing</h2>\n<p class=\"note\">What changed is at the top.</p>\n";
  counts("files-written", sum["files_written"], {{"path", "path"}});

  h += "<h2 id=\"network\">Network</h2>\n<h3>Connected to</h3>\n";
  counts("connected", sum["connected"], {{"family", "family"}, {"addr", "address"}, {"port", "port"}});
  h += "<h3>Connects that failed</h3>\n";
  counts("connect-failed", sum["connect_failed"], {{"family", "family"}, {"addr", "address"}, {"port", "port"}, {"err", "error"}});
  h += "<h3>TLS requests and responses</h3>\n";
  if (!tls_.head.empty()) table("tls", tls_, false, "TLS messages");
  else h += "<p class=\"note\">none captured</p>\n";

  h += "<h2 id=\"timeline\">Timeline</h2>\n<p class=\"note\">Programs started, violations, connects, TLS requests, "
       "loss and the session's own notes, in record order; plain syscalls are in the record (flightrec query).</p>\n";
  table("timeline-table", timeline_, false, "timeline rows");
  h += "<p class=\"note\">flightrec " FLIGHTREC_VERSION "</p>\n</body></html>\n";
  return h;
}

}  // namespace flightrec::inspect
