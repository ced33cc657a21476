#include "events/decode.h"
#include "events/dns_message.h"
#include "events/host_names.h"

#include "events/secrets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <string>
#include <string_view>

#include "common/text.h"
#include "events/syscall_table.h"
#include "events/tls.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::events {
namespace {

std::string_view bounded(const char* p, size_t max) { return {p, strnlen(p, max)}; }

// Which kind of hook saw it: syscall arguments read from user memory at a
// tracepoint can race other threads; lsm entries are the kernel's own view.
const char* source_of(uint32_t type) {
  switch (type) {
    case FR_REC_TLS: return "uprobe";
    case FR_REC_LSM: return "lsm";
    default: return "tracepoint";
  }
}

void add_header(Entry& e, const fr_header& h, const DecodeContext& ctx) {
  e.set("source", source_of(h.type));
  e.set("pid", h.pid);
  e.set("tid", h.tid);
  e.set("ppid", h.ppid);
  e.set("uid", h.uid);
  e.set("gid", h.gid);
  e.set("cpu", h.cpu);
  e.set("cgroup_id", uint64_t(h.cgroup_id));
  e.set_bytes("comm", bounded(h.comm, sizeof(h.comm)));
  e.set("ts_mono_ns", uint64_t(h.ts_mono_ns));
  e.set("ts_real_ns", int64_t(h.ts_mono_ns) + ctx.real_minus_mono_ns);
}

// Whatever was decoded of the record is dropped: the entry says only why.
void malformed(Entry& e, const char* why, size_t size) {
  e.clear();
  e.set("type", "malformed");
  e.set("reason", why);
  e.set("size", uint64_t(size));
}

void add_sockaddr(Entry& e, const uint8_t* sa, size_t len) {
  if (len < sizeof(sa_family_t)) return;
  sa_family_t family;
  std::memcpy(&family, sa, sizeof(family));
  char text[INET6_ADDRSTRLEN] = {};
  e.set("family", family == AF_INET    ? std::string("AF_INET")
                  : family == AF_INET6 ? std::string("AF_INET6")
                  : family == AF_UNIX  ? std::string("AF_UNIX")
                                       : "AF_" + std::to_string(family));
  if (family == AF_INET && len >= sizeof(sockaddr_in)) {
    sockaddr_in in;
    std::memcpy(&in, sa, sizeof(in));
    inet_ntop(AF_INET, &in.sin_addr, text, sizeof(text));
    e.set("addr", text);
    e.set("port", int(ntohs(in.sin_port)));
  } else if (family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    sockaddr_in6 in6;
    std::memcpy(&in6, sa, sizeof(in6));
    inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof(text));
    e.set("addr", text);
    e.set("port", int(ntohs(in6.sin6_port)));
  } else if (family == AF_UNIX) {
    const char* path = reinterpret_cast<const char*>(sa) + sizeof(sa_family_t);
    size_t max = len - sizeof(sa_family_t);
    if (max > 0 && path[0] == '\0')  // abstract socket: name is all bytes after the NUL
      e.set_bytes("addr", "@" + std::string(path + 1, max - 1));
    else if (max > 0)
      e.set_bytes("addr", bounded(path, max));
  } else {
    // Another family, or an address shorter than its family's: the bytes as they are.
    e.set("sockaddr_b64", base64_encode({reinterpret_cast<const char*>(sa), len}));
  }
}

// The name the session's resolver last answered with this address.
void add_host_name(Entry& e, const HostNames& names) {
  const Value* addr = e.get("addr");
  if (!addr || !std::holds_alternative<std::string>(*addr)) return;
  std::string_view a = std::get<std::string>(*addr);
  if (a.starts_with("::ffff:") && a.find('.') != std::string_view::npos) a.remove_prefix(7);  // IPv4-mapped
  if (auto name = names.name_of(std::string(a))) e.set("host", *name);
}

bool is_open(uint32_t nr) { return nr == 2 || nr == 85 || nr == 257 || nr == 437; }

void decode_syscall(Entry& e, const uint8_t* p, size_t size, const DecodeContext& ctx) {
  if (size < sizeof(fr_syscall)) return malformed(e, "short syscall record", size);
  fr_syscall r;
  std::memcpy(&r, p, sizeof(r));
  const SyscallInfo* info = syscall_info(r.nr);
  const char* name = info && info->name ? info->name : nullptr;

  e.set("type", is_open(r.nr) ? "file_open" : r.nr == 42 ? "connect" : "syscall");
  add_header(e, r.h, ctx);
  e.set("nr", r.nr);
  e.set("name", name ? std::string(name) : "syscall_" + std::to_string(r.nr));
  e.set("args", std::vector<int64_t>(r.args, r.args + 6));
  if (r.enter_ns) e.set("ts_enter_mono_ns", uint64_t(r.enter_ns));  // 0: read at sys_exit alone
  // Stopped before it ran (seccomp): the policy judge names the rule.
  if (r.flags & FR_SC_BLOCKED) e.set("blocked", 1);
  if (r.flags & FR_SC_NORETURN) {
    e.set("noreturn", 1);
  } else {
    e.set("ret", int64_t(r.ret));
    if (r.ret < 0 && r.ret >= -4095) {
      std::string err = errno_name(-r.ret);
      if (!err.empty()) e.set("err", err);
    }
  }

  if (r.flags & FR_SC_HAS_DATA) {
    size_t need = sizeof(fr_syscall) + sizeof(fr_syscall_data) + size_t(r.str_len[0]) +
                  size_t(r.str_len[1]) + size_t(r.kpath_len);
    if (size < need || r.sockaddr_len > FR_SOCKADDR_MAX || r.str_len[0] >= FR_STR_MAX ||
        r.str_len[1] >= FR_STR_MAX || r.kpath_len >= FR_STR_MAX)
      return malformed(e, "syscall record lengths out of bounds", size);
    const uint8_t* sa = p + sizeof(fr_syscall);
    const char* strings = reinterpret_cast<const char*>(sa + sizeof(fr_syscall_data));
    const char* names[2] = {info ? info->str_name[0] : nullptr, info ? info->str_name[1] : nullptr};
    if (r.flags & FR_SC_EXEC_PATH) names[0] = "path";
    const uint32_t trunc[2] = {FR_SC_STR0_TRUNC, FR_SC_STR1_TRUNC};
    const uint32_t fault[2] = {FR_SC_STR0_FAULT, FR_SC_STR1_FAULT};
    size_t off = 0;
    for (int i = 0; i < 2; ++i) {
      std::string_view key = names[i] ? names[i] : i == 0 ? "str0" : "str1";
      if (r.flags & fault[i]) {
        e.set(e.key(key, "_error"), "unreadable");
      } else if (r.str_len[i] || (names[i] && info && info->spec.str_arg[i] < 6)) {
        e.set_bytes(key, {strings + off, r.str_len[i]});
        if (r.flags & trunc[i]) e.set(e.key(key, "_truncated"), 1);
      }
      off += r.str_len[i];
    }
    // The file the kernel opened, from its own objects: the path argument
    // above is user memory, which another thread can rewrite meanwhile.
    if (r.flags & FR_SC_KPATH) {
      e.set_bytes("kernel_path", {strings + off, r.kpath_len});
      if (r.flags & FR_SC_KPATH_TRUNC) e.set("kernel_path_truncated", 1);
    }
    // One reason at most (a record with both flags, which the programs
    // never make, must not give the entry a key twice).
    if (r.flags & FR_SC_SOCKADDR_FAULT) e.set("sockaddr_error", "unreadable");
    else if (r.flags & FR_SC_SOCKADDR_UNREAD) e.set("sockaddr_error", "not read (no entry time)");
    add_sockaddr(e, sa, r.sockaddr_len);
    if (r.flags & FR_SC_KADDR) e.set("addr_from_kernel", 1);
    if (ctx.names) add_host_name(e, *ctx.names);
  }

  // Remember socket endpoints for TLS entries of the same connection.
  if (ctx.tls && (r.flags & FR_SC_HAS_DATA) && r.ret >= 0) {
    const Value* addr = e.get("addr");
    const Value* port = e.get("port");
    if (addr && port && std::holds_alternative<std::string>(*addr)) {
      int p = int(std::get<int64_t>(*port));
      const std::string& a = std::get<std::string>(*addr);
      if (r.nr == 42 || r.nr == 52) ctx.tls->note_socket(r.h.pid, int(r.args[0]), false, a, p);
      else if (r.nr == 51) ctx.tls->note_socket(r.h.pid, int(r.args[0]), true, a, p);
      else if (r.nr == 43 || r.nr == 288) ctx.tls->note_socket(r.h.pid, int(r.ret), false, a, p);
    }
  }

  if (r.nr == 2) e.set("flags", int64_t(r.args[1]));
  else if (r.nr == 257) e.set("flags", int64_t(r.args[2]));
  else if (r.nr == 85) e.set("flags", int64_t(O_CREAT | O_WRONLY | O_TRUNC));
}

// argv bytes with credentials redacted (in `storage`, when any was), the
// kinds redacted named in the entry.
std::string_view without_secrets(Entry& e, std::string_view bytes, std::string& storage, const DecodeContext& ctx) {
  if (!ctx.secrets) return bytes;
  storage.assign(bytes);
  std::vector<std::string> kinds = ctx.secrets->scrub(storage);
  if (kinds.empty()) return bytes;
  e.set("redacted", std::move(kinds));
  return storage;
}

}  // namespace

void set_argv(Entry& e, std::string_view block, const DecodeContext& ctx) {
  std::string scrubbed;
  block = without_secrets(e, block, scrubbed, ctx);
  std::vector<std::string> argv;
  const std::string_view whole = block;
  bool utf8 = is_valid_utf8(block);
  while (!block.empty()) {
    size_t nul = block.find('\0');
    argv.emplace_back(block.substr(0, nul));
    if (nul == std::string_view::npos) break;
    block.remove_prefix(nul + 1);
  }
  if (utf8)
    e.set("argv", std::move(argv));
  else
    e.set("argv_b64", base64_encode(whole));
}

namespace {

void decode_exec(Entry& e, const uint8_t* p, size_t size, const DecodeContext& ctx) {
  if (size < sizeof(fr_exec)) return malformed(e, "short exec record", size);
  fr_exec r;
  std::memcpy(&r, p, sizeof(r));
  if (size < sizeof(fr_exec) + size_t(r.filename_len) + size_t(r.argv_len))
    return malformed(e, "exec record lengths out of bounds", size);
  const char* data = reinterpret_cast<const char*>(p + sizeof(fr_exec));
  e.set("type", "exec");
  add_header(e, r.h, ctx);
  e.set_bytes("filename", {data, r.filename_len});
  if (r.flags & FR_EXEC_FILENAME_TRUNC) e.set("filename_truncated", 1);
  e.set("old_pid", r.old_pid);

  if (r.flags & FR_EXEC_ARGV_FAULT) e.set("argv_error", "unreadable");
  set_argv(e, std::string_view(data + r.filename_len, r.argv_len), ctx);
  e.set("argv_bytes", r.argv_total);
  if (r.flags & FR_EXEC_ARGV_TRUNC) e.set("argv_truncated", 1);
}

// The rest of a long argv: raw bytes of the NUL-separated block from
// `offset` on; a reader joins the pieces to the exec entry's argv.
void decode_argv(Entry& e, const uint8_t* p, size_t size, const DecodeContext& ctx) {
  if (size < sizeof(fr_argv)) return malformed(e, "short argv record", size);
  fr_argv r;
  std::memcpy(&r, p, sizeof(r));
  if (r.len > FR_ARGV_MAX || size != sizeof(fr_argv) + r.len || r.offset < FR_ARGV_MAX)
    return malformed(e, "argv record lengths out of bounds", size);
  e.set("type", "exec_argv");
  add_header(e, r.h, ctx);
  e.set("offset", r.offset);
  std::string_view piece(reinterpret_cast<const char*>(p + sizeof(fr_argv)), r.len);
  std::string scrubbed;
  piece = without_secrets(e, piece, scrubbed, ctx);
  e.set_bytes("data", piece);
}

void decode_fork(Entry& e, const uint8_t* p, size_t size, const DecodeContext& ctx) {
  if (size < sizeof(fr_fork)) return malformed(e, "short fork record", size);
  fr_fork r;
  std::memcpy(&r, p, sizeof(r));
  e.set("type", "fork");
  add_header(e, r.h, ctx);
  e.set("child_pid", r.child_pid);
  e.set("child_tid", r.child_tid);
  e.set("thread", (r.flags & FR_FORK_THREAD) ? 1 : 0);
  if (r.flags & FR_FORK_NEW_NS) e.set("new_namespaces", 1);
}

void decode_exit(Entry& e, const uint8_t* p, size_t size, const DecodeContext& ctx) {
  if (size < sizeof(fr_exit)) return malformed(e, "short exit record", size);
  fr_exit r;
  std::memcpy(&r, p, sizeof(r));
  e.set("type", "exit");
  add_header(e, r.h, ctx);
  e.set("code", int((r.exit_code >> 8) & 0xff));
  e.set("signal", int(r.exit_code & 0x7f));
  if (r.exit_code & 0x80) e.set("core_dumped", 1);
  e.set("process_exit", (r.flags & FR_EXIT_GROUP_DEAD) ? 1 : 0);
}

void decode_tls_hello(Entry& e, const uint8_t* p, size_t size, const DecodeContext& ctx) {
  static_assert(offsetof(fr_tls_hello, data) == FR_TLS_HELLO_HEAD);
  if (size < FR_TLS_HELLO_HEAD || size > sizeof(fr_tls_hello))
    return malformed(e, "tls_hello record of the wrong size", size);
  fr_tls_hello r;
  std::memcpy(&r, p, size);
  if (r.len >= FR_TLS_HELLO_MAX || size != FR_TLS_HELLO_HEAD + size_t(r.len))
    return malformed(e, "tls_hello record lengths out of bounds", size);
  e.set("type", "tls_hello");
  add_header(e, r.h, ctx);
  e.set("fd", int64_t(r.fd));
  e.set("sent_bytes", uint64_t(r.sent));
  e.set("in_probed_call", (r.flags & FR_HELLO_IN_PROBED_CALL) ? 1 : 0);
  e.set("probed_program", (r.flags & FR_HELLO_PROBED_PROGRAM) ? 1 : 0);
  ClientHello hello = parse_client_hello(std::string_view(reinterpret_cast<const char*>(r.data), r.len));
  if (!hello.server_name.empty()) e.set_bytes("server_name", hello.server_name);
  if (!hello.alpn.empty()) {
    std::vector<std::string> alpn;
    for (const auto& a : hello.alpn) alpn.push_back(printable(a));
    e.set("alpn", std::move(alpn));
  }
  if (!hello.ok) e.set("hello_cut", 1);  // the extensions were not in the first bytes read
  if (ctx.tls) ctx.tls->add_endpoints(e, r.h.pid, r.fd);
}

// A DNS answer a process received (from port 53): what it says, and its
// addresses noted under the name asked, for the session's later connects.
void decode_dns_answer(Entry& e, const uint8_t* p, size_t size, const DecodeContext& ctx) {
  static_assert(offsetof(fr_dns_answer, data) == FR_DNS_ANSWER_HEAD);
  if (size < FR_DNS_ANSWER_HEAD || size > sizeof(fr_dns_answer))
    return malformed(e, "dns_answer record of the wrong size", size);
  fr_dns_answer r;
  std::memcpy(&r, p, size);
  if (r.len >= FR_DNS_ANSWER_MAX || size != FR_DNS_ANSWER_HEAD + size_t(r.len) ||
      (r.family != AF_INET && r.family != AF_INET6))
    return malformed(e, "dns_answer record out of bounds", size);
  e.set("type", "dns_answer");
  add_header(e, r.h, ctx);
  e.set("fd", int64_t(r.fd));
  char server[INET6_ADDRSTRLEN] = {};
  inet_ntop(r.family, r.server, server, sizeof(server));
  e.set("server", std::string(server));
  e.set("port", uint64_t(r.port));
  e.set("received_bytes", uint64_t(r.received));
  auto response = dns::parse_response(r.data, r.len);
  if (!response) {
    e.set("unread", "not a DNS response with one question (or cut short)");
    return;
  }
  e.set("name", response->question.name);
  e.set("qtype", dns::type_name(response->question.type));
  e.set("rcode", dns::rcode_name(response->rcode));
  dns::Resolution res = dns::resolve(*response, response->question.name);
  if (!res.addresses.empty()) {
    e.set("addresses", res.addresses);
    e.set("ttl", uint64_t(res.ttl));
  }
  if (!res.cnames.empty()) e.set("cnames", res.cnames);
  if (r.received > r.len) e.set("cut_bytes", uint64_t(r.received - r.len));
  if (ctx.names && response->question.name.size() <= 253)
    for (const auto& a : res.addresses) ctx.names->note(a, response->question.name);
}

void decode_tls(Entry& e, const uint8_t* p, size_t size, const DecodeContext& ctx) {
  if (size < sizeof(fr_tls)) return malformed(e, "short tls record", size);
  fr_tls r;
  std::memcpy(&r, p, sizeof(r));
  if (r.len > FR_TLS_CHUNK_MAX || size < sizeof(fr_tls) + size_t(r.len) || r.func > FR_TLS_FUNC_LAST ||
      r.func == FR_TLS_HANDSHAKE)
    return malformed(e, "tls record lengths out of bounds", size);
  e.set("type", "tls");
  add_header(e, r.h, ctx);
  std::string_view data(reinterpret_cast<const char*>(p + sizeof(fr_tls)), r.len);
  TlsStreams fallback;
  (ctx.tls ? *ctx.tls : fallback).complete(e, r, data);
}

void decode_cgroup_move(Entry& e, const uint8_t* p, size_t size, const DecodeContext& ctx) {
  if (size < sizeof(fr_cgroup_move)) return malformed(e, "short cgroup move record", size);
  fr_cgroup_move r;
  std::memcpy(&r, p, sizeof(r));
  if (r.path_len >= FR_CGROUP_PATH_MAX) return malformed(e, "cgroup move record path out of bounds", size);
  e.set("type", "cgroup_move");
  add_header(e, r.h, ctx);
  e.set("moved_pid", r.pid);
  e.set("moved_tid", r.tid);
  e.set("whole_process", r.threadgroup ? 1 : 0);
  e.set("to_cgroup_id", uint64_t(r.dst_cgroup_id));
  e.set_bytes("to_cgroup", {r.path, r.path_len});
  if (r.flags & FR_MOVE_PATH_TRUNC) e.set("to_cgroup_truncated", 1);
  if (r.flags & FR_MOVE_INTO_SESSION) e.set("into_session", 1);
}

void decode_lsm(Entry& e, const uint8_t* p, size_t size, const DecodeContext& ctx) {
  if (size < sizeof(fr_lsm)) return malformed(e, "short lsm record", size);
  fr_lsm r;
  std::memcpy(&r, p, sizeof(r));
  if (size < sizeof(fr_lsm) + size_t(r.path_len) || r.sockaddr_len > FR_SOCKADDR_MAX)
    return malformed(e, "lsm record lengths out of bounds", size);
  e.set("type", "lsm");
  add_header(e, r.h, ctx);
  if (r.hook == FR_LSM_PATH_RENAME &&
      (r.path_len >= FR_RENAME_NEW || r.target >= FR_RENAME_NEW || size < sizeof(fr_lsm) + FR_RENAME_NEW + r.target))
    return malformed(e, "lsm rename record lengths out of bounds", size);
  std::string_view path(reinterpret_cast<const char*>(p + sizeof(fr_lsm)), r.path_len);
  switch (r.hook) {
    case FR_LSM_FILE_OPEN:
      e.set("hook", "file_open");
      e.set_bytes("path", path);
      e.set("flags", r.flags);
      e.set("decision", r.denied_by ? "deny" : "allow");
      if (r.denied_by == FR_DENY_EXEC) {
        e.set("rule_id", "filesystem.exec");
      } else if (r.denied_by) {
        e.set("rule_id", "filesystem.hidden");
        e.set("rule", r.denied_by);  // the genesis entry's lsm_hidden[rule - 1]
      }
      break;
    case FR_LSM_BPRM_CHECK:
      e.set("hook", "bprm_check_security");
      e.set_bytes("path", path);
      break;
    case FR_LSM_SOCKET_CONNECT:
      e.set("hook", "socket_connect");
      add_sockaddr(e, r.sockaddr, r.sockaddr_len);
      e.set("decision", r.denied_by ? "deny" : "allow");
      if (r.denied_by == FR_DENY_EGRESS) e.set("rule_id", "network.allow");
      break;
    case FR_LSM_UNIX_INBOUND:
      e.set("hook", "unix_inbound");
      e.set("socket_type", r.target == 1 ? "stream" : "datagram");
      add_sockaddr(e, r.sockaddr, r.sockaddr_len);
      e.set("decision", "deny");
      e.set("rule_id", "network.inbound");
      break;
    case FR_LSM_TASK_KILL:
      e.set("hook", "task_kill");
      e.set("target_pid", r.target);
      e.set("signal", r.flags);
      break;
    case FR_LSM_BPF:
      e.set("hook", "bpf");
      e.set("bpf_cmd", r.flags);
      break;
    case FR_LSM_CAPABLE:
      e.set("hook", "capable");
      e.set("capability", r.flags);
      break;
    case FR_LSM_PATH_UNLINK:
      e.set("hook", "path_unlink");
      e.set_bytes("path", path);
      break;
    case FR_LSM_PATH_RENAME:
      e.set("hook", "path_rename");
      e.set_bytes("path", path);
      e.set_bytes("new_path", {reinterpret_cast<const char*>(p + sizeof(fr_lsm) + FR_RENAME_NEW), r.target});
      e.set("rename_flags", r.flags);
      break;
    case FR_LSM_USERNS_CREATE:
    case FR_LSM_SB_MOUNT:
    case FR_LSM_MOVE_MOUNT:
    case FR_LSM_PATH_CHROOT:
      e.set("hook", r.hook == FR_LSM_USERNS_CREATE ? "userns_create"
                    : r.hook == FR_LSM_SB_MOUNT    ? "sb_mount"
                    : r.hook == FR_LSM_MOVE_MOUNT  ? "move_mount"
                                                   : "path_chroot");
      e.set("decision", r.denied_by ? "deny" : "allow");
      if (r.denied_by == FR_DENY_VIEW) e.set("rule_id", "filesystem.view");
      break;
    case FR_LSM_INODE_SETATTR:
      e.set("hook", "inode_setattr");
      e.set_bytes("name", path);
      e.set("ia_valid", r.flags);
      if (r.flags & 1) e.set("mode", r.target & 07777);  // ATTR_MODE
      break;
    default:
      return malformed(e, "unknown lsm hook", size);
  }
}

}  // namespace

std::string errno_name(int64_t err) {
  if (err <= 0 || err > 4095) return {};
  const char* n = strerrorname_np(int(err));
  return n ? n : "";
}

void decode_record(const void* data, size_t size, const DecodeContext& ctx, Entry& e) {
  e.clear();
  auto p = static_cast<const uint8_t*>(data);
  if (size < sizeof(fr_header)) return malformed(e, "record shorter than its header", size);
  fr_header h;
  std::memcpy(&h, p, sizeof(h));
  if (h.size != size) return malformed(e, "record size disagrees with its header", size);
  switch (h.type) {
    case FR_REC_SYSCALL: return decode_syscall(e, p, size, ctx);
    case FR_REC_EXEC: return decode_exec(e, p, size, ctx);
    case FR_REC_FORK: return decode_fork(e, p, size, ctx);
    case FR_REC_EXIT: return decode_exit(e, p, size, ctx);
    case FR_REC_TLS: return decode_tls(e, p, size, ctx);
    case FR_REC_LSM: return decode_lsm(e, p, size, ctx);
    case FR_REC_CGROUP_MOVE: return decode_cgroup_move(e, p, size, ctx);
    case FR_REC_ARGV: return decode_argv(e, p, size, ctx);
    case FR_REC_TLS_HELLO: return decode_tls_hello(e, p, size, ctx);
    case FR_REC_DNS_ANSWER: return decode_dns_answer(e, p, size, ctx);
    default: return malformed(e, "unknown record type", size);
  }
}

Entry decode_record(const void* data, size_t size, const DecodeContext& ctx) {
  Entry e;
  decode_record(data, size, ctx, e);
  return e;
}

}  // namespace flightrec::events
