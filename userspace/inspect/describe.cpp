#include "inspect/describe.h"

#include <ctime>

#include "common/text.h"

namespace flightrec::inspect {

using nlohmann::json;

std::string format_wall_time(int64_t ns) {
  if (ns < 0) return "-";
  time_t secs = time_t(ns / 1'000'000'000);
  int millis = int((ns % 1'000'000'000) / 1'000'000);
  std::tm tm{};
  if (!localtime_r(&secs, &tm)) return "-";
  char buf[48];
  size_t n = strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  snprintf(buf + n, sizeof(buf) - n, ".%03d", millis);
  return buf;
}

namespace {

// A value as a person reads it, escaped: strings through printable()
// (control, bidi and invisible characters, and bytes that are not UTF-8,
// made visible), bare unless they need quotes to stay one word; lists
// element by element; numbers as they are.
std::string text(const json& v) {
  if (v.is_string()) {
    std::string p = printable(v.get_ref<const std::string&>());
    if (!p.empty() && p.find_first_of(" \"") == std::string::npos) return p;
    std::string quoted = "\"";
    for (char c : p) quoted += c == '"' ? std::string("\\\"") : std::string(1, c);
    return quoted + "\"";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (const auto& x : v) out += (out.size() > 1 ? "," : "") + text(x);
    return out + "]";
  }
  if (v.is_object()) return "{...}";
  return v.dump();
}

std::string member(const json& e, const char* key) { return e.contains(key) ? text(e[key]) : std::string(); }

// Free text that ends a line (a detail, a reason) needs no quotes.
std::string prose(const json& e, const char* key) {
  if (!e.contains(key)) return "";
  return e[key].is_string() ? printable(e[key].get<std::string>()) : text(e[key]);
}

// " key=value" for each member present.
std::string pairs(const json& e, std::initializer_list<const char*> keys) {
  std::string out;
  for (const char* k : keys)
    if (e.contains(k)) out += std::string(" ") + k + "=" + text(e[k]);
  return out;
}

std::string endpoint(const json& e, const char* addr, const char* port) {
  if (!e.contains(addr)) return "";
  std::string a = text(e[addr]);
  if (a.find(':') != std::string::npos && e.contains(port)) a = "[" + a + "]";  // IPv6
  return e.contains(port) ? a + ":" + text(e[port]) : a;
}

std::string describe_syscall(const json& e) {
  std::string s = member(e, "name");
  for (const char* k : {"path", "oldpath", "newpath", "target", "linkpath", "mount_source", "new_root", "put_old",
                        "from_path", "to_path", "fstype", "memfd_name", "xattr_name", "mq_name"})
    if (e.contains(k)) s += std::string(" ") + (std::string(k) == "path" ? "" : std::string(k) + "=") + text(e[k]);
  if (e.contains("kernel_path") && e["kernel_path"] != e.value("path", json())) s += " (opened " + member(e, "kernel_path") + ")";
  if (e.contains("family")) {
    s += " " + member(e, "family");
    std::string where = endpoint(e, "addr", "port");
    if (!where.empty()) s += " " + where;
    if (e.contains("host")) s += " (" + member(e, "host") + ")";  // the name the session's resolver answered
    if (e.contains("sockaddr_b64")) s += " sockaddr_b64=" + member(e, "sockaddr_b64");
  }
  if (e.value("blocked", 0) == 1) s += " (blocked before it ran)";
  if (e.value("noreturn", 0) == 1) return s + " (does not return)";
  if (e.contains("ret")) s += " = " + member(e, "ret");
  if (e.contains("err")) s += " " + member(e, "err");
  return s;
}

std::string describe_exec(const json& e) {
  std::string s = member(e, "filename");
  if (e.contains("argv") && e["argv"].is_array()) {
    s += " argv:";
    for (const auto& a : e["argv"]) s += " " + text(a);
  }
  if (e.value("argv_truncated", 0) == 1) s += " (argv continues: " + member(e, "argv_bytes") + " bytes)";
  return s;
}

std::string describe_tls(const json& e) {
  std::string s = member(e, "direction") + " " + member(e, "len") + " bytes";
  std::string local = endpoint(e, "local_addr", "local_port"), remote = endpoint(e, "remote_addr", "remote_port");
  if (!remote.empty()) s += (e.value("direction", "") == "send" ? " to " : " from ") + remote;
  if (e.contains("fd")) s += " fd " + member(e, "fd");
  if (e.contains("http_method"))
    s += " " + member(e, "http_method") + " " + member(e, "http_host") + member(e, "http_path");
  if (e.contains("http_status")) s += " HTTP " + member(e, "http_status") + pairs(e, {"http_content_type"});
  if (e.contains("redacted")) s += " redacted " + member(e, "redacted");
  if (e.contains("truncated_bytes")) s += " (" + member(e, "truncated_bytes") + " bytes of the call not kept)";
  return s;
}

std::string short_hash(const json& e, const char* key) {
  std::string h = e.contains(key) && e[key].is_string() ? e[key].get<std::string>() : std::string();
  return h.empty() ? "-" : printable(h.substr(0, 12));
}

std::string describe_file_change(const json& e) {
  std::string s = member(e, "change") + " " + member(e, "path") + " (" + member(e, "kind");
  if (e.contains("size")) s += ", " + member(e, "size") + " bytes";
  if (e.contains("mode") && e["mode"].is_number_integer()) {
    char mode[16];
    snprintf(mode, sizeof(mode), ", mode %04o", unsigned(e["mode"].get<int64_t>() & 07777));
    s += mode;
  }
  s += ")";
  if (e.contains("sha256_before") || e.contains("sha256_after"))
    s += " sha256 " + short_hash(e, "sha256_before") + " -> " + short_hash(e, "sha256_after");
  if (e.contains("link_target")) s += " -> " + member(e, "link_target");
  return s + " at " + member(e, "when");
}

std::string describe_exit(const json& e) {
  std::string s = e.value("signal", 0) ? "killed by signal " + member(e, "signal") : "exited with code " + member(e, "code");
  if (e.value("core_dumped", 0) == 1) s += " (core dumped)";
  return s + (e.value("process_exit", 0) == 1 ? "" : " (thread)");
}

// Members every entry has: not repeated in the description.
bool common_member(const std::string& k) {
  for (const char* c : {"session", "seq", "type", "pid", "tid", "ppid", "uid", "gid", "comm", "ts_mono_ns",
                        "ts_real_ns", "cpu", "cgroup_id", "source"})
    if (k == c) return true;
  return false;
}

std::string describe_members(const json& e) {
  std::string s;
  for (const auto& [k, v] : e.items())
    if (k != "detail" && !common_member(k) && !v.is_structured()) s += (s.empty() ? "" : " ") + printable(k) + "=" + text(v);
  if (e.contains("detail")) s += (s.empty() ? "" : ": ") + prose(e, "detail");
  return s;
}

// "openat=12 connect=1 in 60000 ms, /sys/fs/cgroup/..."
std::string describe_counts(const json& e) {
  std::string out;
  const json& names = e.at("syscalls");
  const json& calls = e.at("calls");
  for (size_t i = 0; i < names.size() && i < calls.size(); ++i)
    out += (out.empty() ? "" : " ") + text(names[i]) + "=" + text(calls[i]);
  return out + " in " + member(e, "interval_ms") + " ms" + pairs(e, {"cgroup"});
}

// The rest of a long argv, shown, not only placed: what follows the
// first 4096 bytes is as much the command as what precedes them (padding
// could push the real command out of sight). Arguments apart by spaces,
// each escaped.
std::string describe_argv_piece(const json& e) {
  std::string out = "argv continued at offset " + member(e, "offset");
  std::string bytes;
  if (e.contains("data") && e["data"].is_string()) bytes = e["data"].get<std::string>();
  else if (e.contains("data_b64") && e["data_b64"].is_string())
    bytes = base64_decode(e["data_b64"].get<std::string>()).value_or("");
  if (bytes.empty()) return out;
  out += ":";
  size_t start = 0;
  while (start <= bytes.size()) {
    size_t end = bytes.find('\0', start);
    if (end == std::string::npos) end = bytes.size();
    if (end > start) out += " " + text(json(bytes.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

std::string describe_known(const json& e) {
  const std::string type = e.value("type", "");
  if (e.contains("nr")) return describe_syscall(e);
  if (type == "exec") return describe_exec(e);
  if (type == "exec_argv") return describe_argv_piece(e);
  if (type == "fork") return (e.value("thread", 0) == 1 ? "thread " : "child ") + member(e, "child_pid") +
                             (e.value("thread", 0) == 1 ? "/" + member(e, "child_tid") : "");
  if (type == "exit") return describe_exit(e);
  if (type == "cgroup_move") return "moved " + member(e, "moved_pid") + " to " + member(e, "to_cgroup");
  if (type == "tls") return describe_tls(e);
  if (type == "tls_hello")
    return "handshake started" + std::string(e.contains("remote_addr") ? " to " + endpoint(e, "remote_addr", "remote_port") : "") +
           " fd " + member(e, "fd") + pairs(e, {"server_name", "alpn"});
  if (type == "dns_answer")
    return "answer to " + member(e, "name") + " " + member(e, "qtype") + " from " + member(e, "server") +
           pairs(e, {"rcode", "addresses", "cnames"});
  if (type == "connection_cut")
    return "connection to " + endpoint(e, "addr", "port") + " cut" + pairs(e, {"host", "protocol", "reason", "server_name"});
  if (type == "program_held")
    return "held pid " + member(e, "subject_pid") + " still for " + member(e, "held_ns") +
           " ns while its program was read for a TLS stack" + pairs(e, {"exe"});
  if (type == "tls_uncaptured" && e.contains("probes_late"))
    return "pid " + member(e, "subject_pid") + " fd " + member(e, "fd") + " (entry " + member(e, "of_seq") +
           ") began before its program's probes were attached: its first plaintext may be missing" +
           pairs(e, {"exe", "server_name"});
  if (type == "tls_uncaptured")
    return "no plaintext probe covers pid " + member(e, "subject_pid") + " fd " + member(e, "fd") + " (entry " +
           member(e, "of_seq") + ")" + pairs(e, {"exe", "library", "server_name"});
  if (type == "llm_call")
    return member(e, "api") + " " + member(e, "model") + " (call " + member(e, "call_number") + ")" +
           pairs(e, {"status", "stop_reason", "input_tokens", "output_tokens", "tool_call_names", "tool_result_ids", "problems"});
  if (type == "tool_call")
    return member(e, "name") + " " + member(e, "tool_call_id") + pairs(e, {"llm_call", "result_seen", "act_seqs", "act_links"}) +
           ": " + prose(e, "input");
  if (type == "acts_unexplained")
    return "acts no tool call explains:" + pairs(e, {"act_seqs", "not_listed"});
  if (type == "lsm")
    return member(e, "hook") + pairs(e, {"path", "new_path", "name", "family", "addr", "port", "target_pid", "signal",
                                         "bpf_cmd", "capability", "decision", "rule_id"});
  if (type == "dns")
    return member(e, "verdict") + " " + member(e, "qtype") + " " + member(e, "name") +
           pairs(e, {"rcode", "addresses", "cnames", "rule", "admitted_s", "ports", "cached", "transport", "took_us", "error",
                     "queries"});
  if (type == "violation")
    return "[" + member(e, "level") + "] " + member(e, "rule_id") + " " + member(e, "action") +
           (e.value("of_seq", int64_t(-1)) > 0 ? " (entry " + member(e, "of_seq") + ")" : "") + pairs(e, {"count"}) +
           ": " + prose(e, "detail") +
           (e.value("from_user_memory", 0) == 1 ? " (as read from the process's memory after the call: another thread "
                                                  "may have rewritten it)"
                                                : "");
  if (type == "lost") return member(e, "lost") + " events lost" + pairs(e, {"program_misses"});
  if (type == "file_change") return describe_file_change(e);
  if (type == "summary")
    return member(e, "summarised") + " plain calls summarised (" + member(e, "rule_id") + ", " +
           member(e, "limit_per_second") + "/s)";
  if (type == "snapshot") return "taken for " + member(e, "rule_id") + pairs(e, {"memory_current", "frozen"});
  if (type == "genesis")
    return member(e, "mode") + " " + (e.contains("command") ? text(e["command"]) : "") + " policy " +
           member(e, "policy_name") + pairs(e, {"host", "kernel", "on_loss"});
  if (type == "session_end") return prose(e, "reason") + ";" + pairs(e, {"exit_code", "exit_signal", "lost_total"});
  if (type == "cgroup_gone") return member(e, "cgroup");
  if (type == "recording_suspended") return prose(e, "reason") + ";" + pairs(e, {"free_bytes", "min_free_bytes"});
  if (type == "recording_resumed") return member(e, "records_left_out") + " records left out" + pairs(e, {"free_bytes"});
  if (type == "process_at_start")
    return "pid " + member(e, "process_pid") + " (" + member(e, "process_comm") + ") " +
           (e.contains("argv") ? text(e["argv"]) : member(e, "exe")) + pairs(e, {"process_ppid", "process_uid", "cwd"});
  if (type == "malformed") return member(e, "reason") + pairs(e, {"size"});
  if (type == "syscall_counts") return describe_counts(e);
  if (type == "syscall_counts_lost") return member(e, "calls") + " calls not counted (the kernel's table was full)";
  // freeze, thaw, error and the sandbox's notes say it in `detail`; a type
  // this version does not know shows its own members.
  return describe_members(e);
}

}  // namespace

std::string describe(const json& e) {
  if (!e.is_object()) return "(not an object)";
  try {
    return describe_known(e);
  } catch (const json::exception&) {
    return describe_members(e);  // a member of an unexpected kind: as it is
  }
}

std::string entry_line(int64_t session, int64_t seq, const json& e) {
  if (!e.is_object()) return std::to_string(session) + ":" + std::to_string(seq) + " (unparsable entry)";
  int64_t ts = e.contains("ts_real_ns") && e["ts_real_ns"].is_number_integer() ? e["ts_real_ns"].get<int64_t>() : -1;
  std::string type = e.contains("type") ? text(e["type"]) : "?";
  // Every part a recorded process could choose went through text() or prose().
  return format_wall_time(ts) + " " + std::to_string(session) + ":" + std::to_string(seq) + " " + member(e, "pid") +
         " " + member(e, "comm") + " " + type + " " + describe(e);
}

}  // namespace flightrec::inspect
