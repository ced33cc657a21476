#include "session/llm_calls.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <nlohmann/json.hpp>

#include "agent/content_coding.h"
#include "common/text.h"
#include "events/body_redact.h"
#include "events/http2.h"

namespace flightrec::session {
namespace {

constexpr size_t kMaxConns = 4096;   // connections followed at once (the least used goes)
constexpr size_t kMaxAsked = 256;    // tool calls waiting for their result (an answer's parallel calls are a few)
constexpr size_t kMaxActs = 65536;   // recent acts kept for attribution
constexpr size_t kMaxLinks = 4096;   // acts linked to one tool call
// Acts remembered for acts_unexplained, and listed in it, per kind (exec,
// file_write, connect): cheap writes cannot crowd out the execs and
// connects (~24 MiB at most); the rest counted.
constexpr size_t kMaxAllActs = 350000;
constexpr size_t kMaxUnexplained = 4096;
constexpr size_t kMaxCallSeqs = 4096;    // llm_call numbers remembered for the tool calls they asked

uint64_t ts_of(const events::Entry& e) { return uint64_t(e.int_or("ts_mono_ns")); }

size_t kind_index(std::string_view kind) { return kind == "exec" ? 0 : kind == "file_write" ? 1 : 2; }

// A syscall entry's first argument (a connect's socket), or -1.
int64_t args_fd(const events::Entry& e) {
  const events::Value* v = e.get("args");
  auto* list = v ? std::get_if<std::vector<int64_t>>(v) : nullptr;
  return list && !list->empty() ? (*list)[0] : -1;
}

std::vector<std::string> strings_of(const events::Entry& e, std::string_view key) {
  const events::Value* v = e.get(key);
  if (auto* list = v ? std::get_if<std::vector<std::string>>(v) : nullptr) return *list;
  return {};
}


// The shell command a tool call runs, from its input ("" when it is no shell tool).
std::string command_of(const agent::ToolCall& c) {
  auto j = nlohmann::json::parse(c.input, nullptr, false);
  if (!j.is_object()) return "";
  for (const char* key : {"command", "cmd"}) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_array()) {
      // ["bash", "-lc", "make test"]: the script is the last word
      if (!it->empty() && it->back().is_string()) return it->back().get<std::string>();
    }
  }
  return "";
}

// The files an edit tool writes: a path member of its input, or the files
// an apply_patch text adds or updates.
std::vector<std::string> paths_of(const agent::ToolCall& c) {
  auto j = nlohmann::json::parse(c.input, nullptr, false);
  std::vector<std::string> out;
  std::string patch = j.is_object() ? "" : c.input;
  if (j.is_object()) {
    for (const char* key : {"file_path", "path", "filename", "notebook_path"}) {
      auto it = j.find(key);
      if (it != j.end() && it->is_string()) out.push_back(it->get<std::string>());
    }
    if (auto it = j.find("input"); it != j.end() && it->is_string()) patch = it->get<std::string>();
  }
  for (size_t pos = 0; (pos = patch.find("*** ", pos)) != std::string::npos && out.size() < 64; pos += 4)
    for (const char* verb : {"*** Add File: ", "*** Update File: ", "*** Move to: "})
      if (patch.compare(pos, std::strlen(verb), verb) == 0) {
        size_t start = pos + std::strlen(verb), end = patch.find('\n', start);
        out.push_back(patch.substr(start, end == std::string::npos ? std::string::npos : end - start));
      }
  return out;
}

// Whether an exec runs the tool's shell command: its last argument (what a
// shell is given with -c) is the command, or holds it between word or
// quoting boundaries (an agent's wrapper: eval 'CMD' < /dev/null). Not a
// bare substring: a tool `ls` is no link to an exec of `false`.
bool runs_command(const std::string& last, const std::string& command) {
  if (command.empty()) return false;
  auto boundary = [](char c) { return std::string_view(" \t\n'\";&|()`<>").find(c) != std::string_view::npos; };
  for (size_t at = last.find(command); at != std::string::npos; at = last.find(command, at + 1)) {
    size_t end = at + command.size();
    if ((at == 0 || boundary(last[at - 1])) && (end == last.size() || boundary(last[end]))) return true;
  }
  return false;
}

bool path_matches(const std::string& written, const std::string& named) {
  if (named.empty() || written.empty()) return false;
  if (written == named) return true;
  std::string tail = named.starts_with("/") ? named : "/" + named;
  return written.size() > tail.size() && written.compare(written.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

LlmCalls::Who LlmCalls::Who::of(const events::Entry& e) {
  return Who{e.int_or("pid"), e.int_or("tid"), e.int_or("ppid"), e.int_or("uid"), e.int_or("gid"), e.string_or("comm")};
}

void LlmCalls::Who::fill(events::Entry& about, uint64_t ts) const {
  about.clear();
  about.set("pid", pid);
  about.set("tid", tid);
  about.set("ppid", ppid);
  about.set("uid", uid);
  about.set("gid", gid);
  about.set("comm", comm);
  about.set("ts_mono_ns", ts);
}

bool LlmCalls::descends(uint32_t pid, uint32_t ancestor) const {
  for (int i = 0; i < 64 && pid; ++i) {
    if (pid == ancestor) return true;
    auto it = parents_.find(pid);
    if (it == parents_.end() || it->second == pid) return false;
    pid = it->second;
  }
  return false;
}

void LlmCalls::note_act(const events::Entry& e) {
  std::string type = e.type();
  uint32_t pid = uint32_t(e.int_or("pid"));
  if (parents_.size() > 65536) parents_.clear();
  if (type == "fork") {
    if (!e.int_or("thread")) parents_[uint32_t(e.int_or("child_pid"))] = pid;
    return;
  }
  if (uint32_t ppid = uint32_t(e.int_or("ppid")); ppid && !parents_.count(pid)) parents_[pid] = ppid;
  Act a{e.int_or("seq"), pid, ts_of(e), nullptr, {}, {}};
  if (type == "exec") {
    a.kind = "exec";
    std::vector<std::string> argv = strings_of(e, "argv");
    for (const auto& arg : argv) a.what += (a.what.empty() ? "" : " ") + arg;
    if (!argv.empty()) a.last = argv.back();
  } else if (type == "file_open" && e.int_or("ret", -1) >= 0) {
    int64_t flags = e.int_or("flags", -1);
    if (flags < 0 || (flags & 3) == 0) return;  // read-only, or openat2 (flags unknown)
    a.kind = "file_write";
    a.what = e.string_or("kernel_path", e.string_or("path"));
  } else if (type == "connect" && (e.int_or("ret", -1) == 0 || e.string_or("errno") == "EINPROGRESS")) {
    a.kind = "connect";
    a.what = e.string_or("addr") + ":" + std::to_string(e.int_or("port"));
  } else {
    return;
  }
  size_t& kept = seen_of_kind_[kind_index(a.kind)];
  if (kept < kMaxAllActs) {
    ++kept;
    seen_.push_back({a.seq, pid, a.kind == std::string_view("connect") ? args_fd(e) : -1, a.kind});
  } else {
    ++seen_beyond_;
  }
  if (asked_.empty()) return;  // no tool call is waiting: nothing to attribute it to
  acts_.push_back(std::move(a));
  if (acts_.size() > kMaxActs) acts_.pop_front();
}

void LlmCalls::observe(const events::Entry& e, Emitted& out) {
  std::string type = e.type();
  if (type == "tls") on_tls(e, out);
  else if (type == "exec" || type == "fork" || type == "file_open" || type == "connect") note_act(e);
}

void LlmCalls::written(const events::Entry& own) {
  if (own.type() != "llm_call") return;
  // Only the last calls: a tool call waits for its result a turn or two.
  if (call_seqs_.size() >= kMaxCallSeqs) call_seqs_.erase(call_seqs_.begin());
  call_seqs_[uint64_t(own.int_or("call_number"))] = own.int_or("seq");
}

void LlmCalls::on_tls(const events::Entry& e, Emitted& out) {
  // The plaintext as the entry holds it (kept beside data_b64 when the
  // entry was made; decoded again only for an entry made elsewhere).
  std::optional<std::string> decoded;
  const std::string* data = &e.payload();
  if (data->empty()) {
    decoded = base64_decode(e.string_or("data_b64"));
    if (!decoded || decoded->empty()) return;
    data = &*decoded;
  }
  uint32_t pid = uint32_t(e.int_or("pid"));
  auto key = std::make_pair(pid, uint64_t(e.int_or("ssl")));
  auto it = conns_.find(key);
  if (it == conns_.end()) {
    if (conns_.size() >= kMaxConns) {
      auto least = std::min_element(conns_.begin(), conns_.end(), [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
      conns_.erase(least);
    }
    it = conns_.emplace(key, Conn{}).first;
    it->second.pid = pid;
  }
  Conn& c = it->second;
  c.used = ++uses_;
  c.who = Who::of(e);
  c.fd = e.int_or("fd", -1);
  bool send = e.string_or("direction") == "send";
  uint64_t at = uint64_t(e.int_or("stream_offset"));
  using Protocol = Conn::Protocol;
  if (c.protocol == Protocol::Unknown) {
    // HTTP/2 shows in its first bytes: the client's preface, or the server's SETTINGS.
    bool h2 = at == 0 && (send ? events::starts_http2_client(*data) : events::starts_http2_server(*data));
    c.protocol = h2 ? Protocol::Http2 : Protocol::Http1;
    if (h2) {
      c.sent2 = std::make_unique<agent::Http2Stream>(true);
      c.received2 = std::make_unique<agent::Http2Stream>(false);
    }
  }
  bool h2 = c.protocol == Protocol::Http2;
  std::vector<agent::HttpMessage> done;
  uint64_t length = uint64_t(e.int_or("len"));
  if (h2) (send ? *c.sent2 : *c.received2).feed(at, length, *data, e.int_or("seq"), ts_of(e), done);
  else (send ? c.sent : c.received).feed(at, length, *data, e.int_or("seq"), ts_of(e), done);
  for (auto& m : done) {
    if (send && m.request) {
      Exchange ex{std::move(m), {}};
      ex.x.api = agent::llm_api_of(ex.request.method, ex.request.target);
      if (!ex.x.api.empty()) on_request(ex, e, out);
      // Read: only its host, target and seqs wait for the answer.
      std::string host = ex.request.header("host");
      std::string().swap(ex.request.body);
      decltype(ex.request.headers)().swap(ex.request.headers);
      if (!host.empty()) ex.request.headers.emplace_back("host", host.substr(0, 1024));
      if (!h2 && c.waiting.size() < 64) {
        c.waiting.push_back(std::move(ex));
      } else if (h2) {
        // A request never answered (reset, refused) must not keep later
        // ones out: past the bound, the oldest is written unanswered.
        if (c.streams.size() >= agent::Http2Stream::kMaxStreams) {
          auto oldest = c.streams.begin();
          if (!oldest->second.x.api.empty()) write_call(c, oldest->second, nullptr, e, out);
          c.streams.erase(oldest);
        }
        c.streams.insert_or_assign(ex.request.stream, std::move(ex));
      }
    } else if (!send && !m.request) {
      if (m.status / 100 == 1) continue;  // an interim response: the final one follows
      if (h2) {  // answers come in any order, each on its request's stream
        auto it = c.streams.find(m.stream);
        if (it == c.streams.end()) continue;
        Exchange ex = std::move(it->second);
        c.streams.erase(it);
        if (!ex.x.api.empty()) write_call(c, ex, &m, e, out);
      } else if (!c.waiting.empty()) {
        Exchange ex = std::move(c.waiting.front());
        c.waiting.pop_front();
        if (!ex.x.api.empty()) write_call(c, ex, &m, e, out);
      }
    }
  }
}

void LlmCalls::on_request(Exchange& ex, const events::Entry& e, Emitted& out) {
  const agent::HttpMessage& r = ex.request;
  std::string why;
  std::string body = agent::body_of(r, &why);
  if (!why.empty()) ex.x.problems.push_back("request: " + why);
  else agent::decode_llm_request(r.target, body, ex.x);
  if (!r.problem.empty()) ex.x.problems.push_back("request: " + r.problem);
  // The results this request returns: their tool calls are complete now
  // (the agent's own: another process cannot answer or hide them).
  // All are written before any leaves the waiting list, so an act of one
  // is never given to another by time.
  uint32_t pid = uint32_t(e.int_or("pid"));
  std::vector<std::map<std::pair<uint32_t, std::string>, Asked>::iterator> answered;
  for (const auto& id : ex.x.tool_results) {
    auto a = asked_.find({pid, id});
    if (a == asked_.end() || std::find(answered.begin(), answered.end(), a) != answered.end()) continue;
    write_tool_call(a->second, &ex, e, out);
    answered.push_back(a);
  }
  for (auto a : answered) asked_.erase(a);
}

void LlmCalls::write_call(Conn& c, Exchange& ex, const agent::HttpMessage* resp, const events::Entry& about,
                          Emitted& out) {
  agent::LlmExchange& x = ex.x;
  if (resp) {
    std::string why;
    std::string body = agent::body_of(*resp, &why);
    if (!why.empty()) x.problems.push_back("response: " + why);
    else agent::decode_llm_response(resp->header("content-type"), body, x);
    if (!resp->problem.empty()) x.problems.push_back("response: " + resp->problem);
  } else {
    x.problems.push_back("no response was recorded");
  }
  uint64_t number = ++calls_;
  // The socket carried a model call: the connect that opened it is the agent's own.
  if (!ex.request.seqs.empty() && (model_uses_.size() < 65536 || model_uses_.count({c.pid, c.fd}))) {
    auto& uses = model_uses_[{c.pid, c.fd}];
    if (uses.size() < 64) uses.push_back(ex.request.seqs.front());
  }
  events::Entry& e = out.add_about("llm_call", about);
  e.set("call_number", number);
  e.set("api", x.api);
  e.set("ssl", uint64_t(about.int_or("ssl")));
  e.set("fd", c.fd);
  if (auto host = ex.request.header("host"); !host.empty()) e.set_bytes("host", host);
  e.set_bytes("target", ex.request.target);
  if (ex.request.stream) e.set("http2_stream", uint64_t(ex.request.stream));
  // Names and ids the model API gave (a hostile server's): 1 KiB at most.
  auto cut = [](const std::string& v) { return std::string_view(v).substr(0, 1024); };
  if (!x.model.empty()) e.set_bytes("model", cut(x.model));
  if (!x.response_model.empty() && x.response_model != x.model) e.set_bytes("response_model", cut(x.response_model));
  e.set("stream", x.stream ? 1 : 0);
  e.set("request_seqs", ex.request.seqs);
  e.set("request_mono_ns", ex.request.first_ts);
  if (resp) {
    e.set("response_mono_ns", resp->last_ts);
    e.set("status", resp->status);
    e.set("response_seqs", resp->seqs);
    e.set("duration_ns", resp->last_ts >= ex.request.first_ts ? resp->last_ts - ex.request.first_ts : 0);
    for (const char* h : {"request-id", "x-request-id"})
      if (auto id = resp->header(h); !id.empty()) {
        e.set_bytes("request_id", id);
        break;
      }
  }
  if (!x.response_id.empty()) e.set_bytes("response_id", cut(x.response_id));
  if (x.input_tokens >= 0) e.set("input_tokens", x.input_tokens);
  if (x.output_tokens >= 0) e.set("output_tokens", x.output_tokens);
  if (!x.stop_reason.empty()) e.set_bytes("stop_reason", cut(x.stop_reason));
  if (!x.error.empty()) e.set_bytes("error", x.error.substr(0, 4096));
  std::vector<std::string> ids, names;
  for (const auto& t : x.tool_calls) {
    ids.push_back(printable(t.id));
    names.push_back(printable(t.name));
  }
  if (!ids.empty()) {
    e.set("tool_call_ids", std::move(ids));
    e.set("tool_call_names", std::move(names));
  }
  if (!x.tool_results.empty()) {
    std::vector<std::string> results;
    for (const auto& id : x.tool_results) results.push_back(printable(id));
    e.set("tool_result_ids", std::move(results));
  }
  if (!x.problems.empty()) {
    std::vector<std::string> problems;  // they may quote the traced program's bytes (a content coding)
    for (size_t i = 0; i < x.problems.size() && i < 16; ++i) problems.push_back(printable(x.problems[i].substr(0, 512)));
    e.set("problems", std::move(problems));
  }
  // Its tool calls wait for their results.
  for (const auto& t : x.tool_calls) {
    if (t.id.empty() || asked_.size() >= kMaxAsked) continue;
    asked_[{c.pid, t.id}] = Asked{t, number, resp ? resp->last_ts : ex.request.last_ts, c.pid, c.who, command_of(t), paths_of(t)};
  }
}

void LlmCalls::write_tool_call(const Asked& a, const Exchange* result, const events::Entry& about, Emitted& out) {
  // A call never answered has no window's end: only what names it is
  // linked, so later acts stay listed as unexplained.
  bool windowed = result != nullptr;
  uint64_t end = result ? result->request.first_ts : ts_of(about);
  const std::string& command = a.command;
  const std::vector<std::string>& paths = a.paths;
  auto writes_named = [](const Act& act, const std::vector<std::string>& named) {
    return std::string_view(act.kind) == "file_write" &&
           std::any_of(named.begin(), named.end(), [&](const std::string& p) { return path_matches(act.what, p); });
  };
  // Acts of the agent's processes while the tool ran, each linked by the
  // most specific method that holds: its argv has the tool's command
  // ("argv"), it descends from such a process ("subtree"), it writes the
  // file the tool names ("path"), or it only fell in the window ("window").
  std::vector<uint32_t> matched;
  std::vector<int64_t> act_seqs;
  std::vector<std::string> kinds, links;
  auto in_window = [&](const Act& act) {
    return act.ts >= a.asked_ts && act.ts <= end && (act.pid == a.agent || descends(act.pid, a.agent));
  };
  for (const auto& act : acts_)
    if (in_window(act) && std::string_view(act.kind) == "exec" && runs_command(act.last, command) && matched.size() < 64 &&
        std::find(matched.begin(), matched.end(), act.pid) == matched.end())
      matched.push_back(act.pid);
  // Another waiting tool call that explains an act better takes it.
  auto claimed_elsewhere = [&](const Act& act) {
    for (const auto& [key, other] : asked_) {
      if (&other == &a) continue;
      if (std::string_view(act.kind) == "exec" && runs_command(act.last, other.command)) return true;
      if (writes_named(act, other.paths)) return true;
    }
    return false;
  };
  for (const auto& act : acts_) {
    if (act_seqs.size() >= kMaxLinks) break;
    if (!in_window(act)) continue;
    std::string link;
    if (std::string_view(act.kind) == "exec" && runs_command(act.last, command)) link = "argv";
    else if (std::any_of(matched.begin(), matched.end(), [&](uint32_t m) { return act.pid == m || descends(act.pid, m); }))
      link = "subtree";
    else if (writes_named(act, paths)) link = "path";
    else if (windowed && !claimed_elsewhere(act)) link = "window";
    if (link.empty()) continue;
    // Remembered only for acts acts_unexplained would list.
    if (!seen_.empty() && act.seq <= seen_.back().seq) linked_.insert(act.seq);
    act_seqs.push_back(act.seq);
    kinds.push_back(act.kind);
    links.push_back(link);
  }
  events::Entry& e = out.add_about("tool_call", about);
  e.set_bytes("tool_call_id", a.call.id);
  e.set_bytes("name", a.call.name);
  if (redact_) {
    // Masked here too: a compressed body reached the scanner unread.
    std::vector<std::string> masked;
    e.set_bytes("input", events::masked_json_text(a.call.input, masked));
    if (!masked.empty()) e.set("redacted", masked);
  } else {
    e.set_bytes("input", a.call.input);
  }
  if (auto seq = call_seqs_.find(a.call_number); seq != call_seqs_.end()) e.set("llm_call", seq->second);
  e.set("agent_pid", a.agent);
  e.set("asked_mono_ns", a.asked_ts);
  if (result) {
    e.set("result_request_seqs", result->request.seqs);
    e.set("result_mono_ns", end);
    e.set("duration_ns", end >= a.asked_ts ? end - a.asked_ts : 0);
  } else {
    e.set("result_seen", 0);
  }
  e.set("act_seqs", std::move(act_seqs));
  e.set("act_kinds", std::move(kinds));
  e.set("act_links", std::move(links));
}

void LlmCalls::finish(Emitted& out) {
  uint64_t last = acts_.empty() ? 0 : acts_.back().ts;
  events::Entry about;
  for (auto& [key, c] : conns_) {
    c.who.fill(about, last);
    about.set("ssl", key.second);
    if (c.protocol == Conn::Protocol::Http2) {
      // Requests still open (never ended) are calls too, without an answer.
      std::vector<agent::HttpMessage> open, requests;
      c.sent2->take_open(requests);
      for (auto& m : requests) {
        Exchange ex{std::move(m), {}};
        ex.x.api = agent::llm_api_of(ex.request.method, ex.request.target);
        if (ex.x.api.empty() || c.streams.count(ex.request.stream)) continue;
        on_request(ex, about, out);
        c.streams.emplace(ex.request.stream, std::move(ex));
      }
      c.received2->take_open(open);
      for (auto& [stream, ex] : c.streams) {
        if (ex.x.api.empty()) continue;
        auto r = std::find_if(open.begin(), open.end(), [s = stream](const agent::HttpMessage& m) { return m.stream == s; });
        write_call(c, ex, r != open.end() ? &*r : nullptr, about, out);
      }
      continue;
    }
    if (c.waiting.empty() || c.waiting.front().x.api.empty()) continue;
    agent::HttpMessage open;
    write_call(c, c.waiting.front(), c.received.take_open(open) ? &open : nullptr, about, out);
  }
  conns_.clear();
  for (const auto& [key, a] : asked_) {
    a.who.fill(about, std::max(a.asked_ts, last));
    write_tool_call(a, nullptr, about, out);
  }
  asked_.clear();
  if (!calls_) return;  // no model was called: there is no agent's turn to explain anything
  // What the session did that no tool call explains: the agent's own acts
  // (start-up, its own git or telemetry), or tools it ran unasked. The
  // connects that carried its model calls are not listed.
  // A model call's connect is the last connect on its (process, fd) before
  // the call's first byte: a later connect on the reused fd number is not.
  std::set<int64_t> model_connects;
  std::map<std::pair<uint32_t, int64_t>, std::vector<int64_t>> connects;  // seen_ is in seq order
  for (const auto& s : seen_)
    if (std::string_view(s.kind) == "connect" && model_uses_.count({s.pid, s.fd})) connects[{s.pid, s.fd}].push_back(s.seq);
  for (const auto& [key, uses] : model_uses_) {
    const auto& on = connects[key];
    for (int64_t use : uses) {
      auto after = std::lower_bound(on.begin(), on.end(), use);
      if (after != on.begin()) model_connects.insert(*std::prev(after));
    }
  }
  std::vector<int64_t> seqs;
  std::vector<std::string> kinds;
  uint64_t more = seen_beyond_;
  size_t listed[3] = {};
  for (const auto& s : seen_) {
    if (linked_.count(s.seq) || model_connects.count(s.seq)) continue;
    if (listed[kind_index(s.kind)]++ >= kMaxUnexplained) {
      ++more;
      continue;
    }
    seqs.push_back(s.seq);
    kinds.push_back(s.kind);
  }
  events::Entry& e = out.add("acts_unexplained");
  e.set("act_seqs", std::move(seqs));
  e.set("act_kinds", std::move(kinds));
  e.set("not_listed", more);
}

}  // namespace flightrec::session
