// Decoding ring-buffer records, including records a hostile or buggy
// kernel side could produce.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "events/decode.h"
#include "events/syscall_table.h"
#include "events/tls.h"
#include "unit/records.h"

using namespace flightrec::events;
using nlohmann::json;
using unit::header;
using unit::syscall_record;

namespace {

json decode(const std::vector<uint8_t>& rec) {
  DecodeContext ctx;
  ctx.real_minus_mono_ns = 5;
  return json::parse(decode_record(rec.data(), rec.size(), ctx).canonical());
}

}  // namespace

TEST_CASE("openat decodes to a file_open entry with path and flags") {
  auto rec = syscall_record(257, 3, {"/etc/hostname"});
  fr_syscall r;
  std::memcpy(&r, rec.data(), sizeof(r));
  r.args[2] = 0x80000;  // O_CLOEXEC
  std::memcpy(rec.data(), &r, sizeof(r));
  json j = decode(rec);
  CHECK(j["type"] == "file_open");
  CHECK(j["name"] == "openat");
  CHECK(j["path"] == "/etc/hostname");
  CHECK(j["flags"] == 0x80000);
  CHECK(j["ret"] == 3);
  CHECK(j["pid"] == 10);
  CHECK(j["tid"] == 11);
  CHECK(j["comm"] == "tool");
  CHECK(j["ts_real_ns"] == 1005);
}

TEST_CASE("renameat2 has both paths; failures carry the errno name") {
  json j = decode(syscall_record(316, -2, {"/a", "/b"}));
  CHECK(j["type"] == "syscall");
  CHECK(j["oldpath"] == "/a");
  CHECK(j["newpath"] == "/b");
  CHECK(j["ret"] == -2);
  CHECK(j["err"] == "ENOENT");
}

TEST_CASE("connect decodes IPv4 and IPv6 socket addresses") {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(8443);
  inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
  json j = decode(syscall_record(42, 0, {}, &in, sizeof(in)));
  CHECK(j["type"] == "connect");
  CHECK(j["family"] == "AF_INET");
  CHECK(j["addr"] == "127.0.0.1");
  CHECK(j["port"] == 8443);

  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(53);
  inet_pton(AF_INET6, "::1", &in6.sin6_addr);
  j = decode(syscall_record(42, -111, {}, &in6, sizeof(in6)));
  CHECK(j["addr"] == "::1");
  CHECK(j["port"] == 53);
  CHECK(j["err"] == "ECONNREFUSED");
}

TEST_CASE("a syscall record with every flag set decodes to an entry with each key once (found by the fuzzer)") {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  auto rec = syscall_record(42, 0, {}, &in, sizeof(in));
  fr_syscall r;
  std::memcpy(&r, rec.data(), sizeof(r));
  r.flags |= FR_SC_SOCKADDR_FAULT | FR_SC_SOCKADDR_UNREAD | FR_SC_KADDR | FR_SC_NORETURN | FR_SC_BLOCKED;
  std::memcpy(rec.data(), &r, sizeof(r));
  json j = decode(rec);  // canonical() throws on a key twice
  CHECK(j["sockaddr_error"] == "unreadable");
}

TEST_CASE("exec splits argv and keeps non-UTF-8 bytes as base64") {
  std::string filename = "/usr/bin/true", argv("true\0x\0", 7);
  std::vector<uint8_t> buf(sizeof(fr_exec) + filename.size() + argv.size());
  fr_exec r{};
  r.h = header(FR_REC_EXEC, uint32_t(buf.size()));
  r.filename_len = uint16_t(filename.size());
  r.argv_len = uint16_t(argv.size());
  r.argv_total = uint32_t(argv.size());
  std::memcpy(buf.data(), &r, sizeof(r));
  std::memcpy(buf.data() + sizeof(r), filename.data(), filename.size());
  std::memcpy(buf.data() + sizeof(r) + filename.size(), argv.data(), argv.size());
  json j = decode(buf);
  CHECK(j["type"] == "exec");
  CHECK(j["filename"] == "/usr/bin/true");
  CHECK(j["argv"] == json::array({"true", "x"}));

  buf[sizeof(r) + filename.size()] = 0xff;
  j = decode(buf);
  CHECK_FALSE(j.contains("argv"));
  CHECK(j.contains("argv_b64"));
}

TEST_CASE("tls chunks name the library's function and its direction; an unknown function is malformed") {
  auto chunk = [](uint32_t func) {
    std::string data = "GET / HTTP/1.1\r\n\r\n";
    std::vector<uint8_t> buf(sizeof(fr_tls) + data.size());
    fr_tls r{};
    r.h = header(FR_REC_TLS, uint32_t(buf.size()));
    r.ssl = 0x1000;
    r.fd = -1;
    r.func = func;
    r.call_bytes = r.len = uint32_t(data.size());
    std::memcpy(buf.data(), &r, sizeof(r));
    std::memcpy(buf.data() + sizeof(r), data.data(), data.size());
    return decode(buf);
  };
  struct Want {
    uint32_t func;
    const char *name, *direction;
  };
  for (Want w : {Want{FR_TLS_SSL_READ, "SSL_read", "recv"}, Want{FR_TLS_SSL_WRITE, "SSL_write", "send"},
                 Want{FR_TLS_SSL_READ_EX, "SSL_read_ex", "recv"}, Want{FR_TLS_SSL_WRITE_EX, "SSL_write_ex", "send"},
                 Want{FR_TLS_GNUTLS_RECV, "gnutls_record_recv", "recv"},
                 Want{FR_TLS_GNUTLS_SEND, "gnutls_record_send", "send"}, Want{FR_TLS_NSPR_READ, "PR_Read", "recv"},
                 Want{FR_TLS_NSPR_WRITE, "PR_Write", "send"}, Want{FR_TLS_GO_READ, "crypto/tls.(*Conn).Read", "recv"},
                 Want{FR_TLS_GO_WRITE, "crypto/tls.(*Conn).Write", "send"}}) {
    json j = chunk(w.func);
    CHECK(j["type"] == "tls");
    CHECK(j["func"] == w.name);
    CHECK(j["direction"] == w.direction);
  }
  CHECK(chunk(FR_TLS_FUNC_LAST + 1)["type"] == "malformed");
  CHECK(chunk(FR_TLS_HANDSHAKE)["type"] == "malformed");  // noted by the kernel, never recorded
}

namespace {

std::string u16(size_t n) { return {char(n >> 8), char(n)}; }

// A ClientHello record with these extensions (RFC 8446 4.1.2).
std::string client_hello(const std::string& extensions) {
  std::string body = std::string("\x03\x03", 2) + std::string(32, 'r') + std::string(1, '\0') + u16(2) +
                     "\x13\x01" + std::string("\x01\x00", 2) + u16(extensions.size()) + extensions;
  std::string hs = "\x01" + std::string(1, '\0') + u16(body.size()) + body;
  return "\x16\x03\x01" + u16(hs.size()) + hs;
}

std::string extension(size_t type, const std::string& body) { return u16(type) + u16(body.size()) + body; }
std::string sni(const std::string& name) {
  return extension(0, u16(name.size() + 3) + std::string(1, '\0') + u16(name.size()) + name);
}

}  // namespace

TEST_CASE("a ClientHello's server name and ALPN are read; cut or lying bytes never read past the end") {
  std::string alpn = extension(16, u16(12) + "\x02h2\x08http/1.1");
  std::string rec = client_hello(extension(23, "") + sni("api.example.com") + alpn);
  ClientHello h = parse_client_hello(rec);
  CHECK(h.ok);
  CHECK(h.server_name == "api.example.com");
  CHECK(h.alpn == std::vector<std::string>{"h2", "http/1.1"});
  // Cut anywhere: what is read is right or absent, never garbage.
  for (size_t n = 0; n < rec.size(); ++n) {
    ClientHello c = parse_client_hello(std::string_view(rec).substr(0, n));
    INFO("cut at " << n);
    CHECK((c.server_name.empty() || c.server_name == "api.example.com"));
    CHECK((c.alpn.empty() || c.alpn == h.alpn));
  }
  // A name longer than its extension, an ALPN entry running past its end,
  // a zero-length ALPN entry: skipped, the rest still read.
  std::string lying_name = extension(0, u16(20) + std::string(1, '\0') + u16(200) + "short");
  CHECK(parse_client_hello(client_hello(lying_name + alpn)).server_name.empty());
  CHECK(parse_client_hello(client_hello(lying_name + alpn)).alpn == h.alpn);
  CHECK(parse_client_hello(client_hello(extension(16, u16(5) + "\x09h2"))).alpn.empty());
  CHECK(parse_client_hello(client_hello(extension(16, u16(4) + std::string("\x00\x02h2", 4)))).alpn.empty());
  // The first server_name counts; a hello spread over two records is read
  // from the first alone (the next header is no hello byte), as cut.
  CHECK(parse_client_hello(client_hello(sni("first.test") + sni("second.test"))).server_name == "first.test");
  std::string split = rec;
  size_t first_len = 60;
  split[3] = char(first_len >> 8), split[4] = char(first_len);
  split.insert(5 + first_len, "\x16\x03\x03" + u16(rec.size() - 5 - first_len));
  ClientHello s = parse_client_hello(split);
  CHECK_FALSE(s.ok);
  CHECK(s.server_name.empty());
  // Not a handshake record, or not a ClientHello (a ServerHello is type 2).
  CHECK_FALSE(parse_client_hello("\x17\x03\x03\x00\x05hello").ok);
  std::string server = rec;
  server[5] = 2;
  CHECK_FALSE(parse_client_hello(server).ok);
  CHECK_FALSE(parse_client_hello("").ok);
}

TEST_CASE("tls_hello records of the wrong size or with lying lengths are malformed") {
  std::string rec = client_hello(sni("a.test"));
  // A record holds the bytes read, no more.
  std::vector<uint8_t> buf(FR_TLS_HELLO_HEAD + rec.size());
  fr_tls_hello r{};
  r.h = header(FR_REC_TLS_HELLO, uint32_t(buf.size()));
  r.fd = 3;
  r.len = uint32_t(rec.size());
  r.sent = r.len;
  std::memcpy(r.data, rec.data(), rec.size());
  std::memcpy(buf.data(), &r, buf.size());
  json j = decode(buf);
  CHECK(j["type"] == "tls_hello");
  CHECK(j["server_name"] == "a.test");
  CHECK(j["in_probed_call"] == 0);
  CHECK(j["probed_program"] == 0);
  CHECK_FALSE(j.contains("hello_cut"));
  // A length that says more than the record holds, or more than any record.
  for (uint32_t lie : {uint32_t(rec.size() + 1), uint32_t(FR_TLS_HELLO_MAX), uint32_t(FR_TLS_HELLO_MAX + 1)}) {
    r.len = lie;
    std::memcpy(buf.data(), &r, FR_TLS_HELLO_HEAD);
    CHECK(decode(buf)["type"] == "malformed");
  }
  // A record cut short of its header, and one past the largest.
  r.len = uint32_t(rec.size());
  std::vector<uint8_t> shorter(buf.begin(), buf.begin() + FR_TLS_HELLO_HEAD - 1);
  r.h.size = uint32_t(shorter.size());
  std::memcpy(shorter.data(), &r, sizeof(r.h));
  CHECK(decode(shorter)["type"] == "malformed");
  std::vector<uint8_t> longer(sizeof(fr_tls_hello) + 1);
  r.h.size = uint32_t(longer.size());
  std::memcpy(longer.data(), &r, sizeof(r));
  CHECK(decode(longer)["type"] == "malformed");
}

TEST_CASE("records with lying sizes become malformed entries, never crashes") {
  auto rec = syscall_record(257, 3, {"/etc/hostname"});
  // Header size disagrees with the record.
  auto bad = rec;
  bad[4] ^= 1;
  CHECK(decode(bad)["type"] == "malformed");
  // A string length past the end of the record.
  fr_syscall r;
  std::memcpy(&r, rec.data(), sizeof(r));
  r.str_len[0] = 4000;
  std::memcpy(rec.data(), &r, sizeof(r));
  CHECK(decode(rec)["type"] == "malformed");
  // Truncated below any header, and an unknown type.
  std::vector<uint8_t> tiny(10, 0);
  CHECK(decode(tiny)["type"] == "malformed");
  fr_header h = header(99, sizeof(fr_header));
  std::vector<uint8_t> unknown(sizeof(h));
  std::memcpy(unknown.data(), &h, sizeof(h));
  CHECK(decode(unknown)["reason"] == "unknown record type");
}

TEST_CASE("syscall table knows x86_64 numbers and path arguments") {
  CHECK(std::string(syscall_info(0)->name) == "read");
  CHECK(std::string(syscall_info(59)->name) == "execve");
  CHECK(std::string(syscall_info(257)->name) == "openat");
  CHECK(std::string(syscall_info(435)->name) == "clone3");
  CHECK(syscall_info(257)->spec.str_arg[0] == 1);
  CHECK(syscall_info(316)->spec.str_arg[1] == 3);
  CHECK(syscall_info(42)->spec.sockaddr_mode == FR_SA_IN);
  CHECK(syscall_info(288)->spec.sockaddr_mode == FR_SA_OUT);
  CHECK(syscall_info(0)->spec.str_arg[0] == FR_ARG_NONE);
  CHECK(syscall_number("getppid") == 110u);
  CHECK(syscall_info(FR_SYSCALL_TABLE_SIZE) == nullptr);
}

TEST_CASE("the syscall table reads the string parameters the kernel declares, by their record names") {
  using flightrec::events::syscall_info;
  using flightrec::events::syscall_number;
  struct Want {
    const char* name;
    uint8_t arg0, arg1;
    const char *field0, *field1;
  };
  const Want wants[] = {
      {"open", 0, FR_ARG_NONE, "path", nullptr},          {"stat", 0, FR_ARG_NONE, "path", nullptr},
      {"openat2", 1, FR_ARG_NONE, "path", nullptr},       {"symlinkat", 0, 2, "target", "linkpath"},
      {"renameat2", 1, 3, "oldpath", "newpath"},          {"mount", 0, 1, "mount_source", "target"},
      {"setxattrat", 1, 3, "path", "xattr_name"},         {"file_setattr", 1, FR_ARG_NONE, "path", nullptr},
      {"open_tree_attr", 1, FR_ARG_NONE, "path", nullptr}, {"memfd_create", 0, FR_ARG_NONE, "memfd_name", nullptr},
      {"sethostname", FR_ARG_NONE, FR_ARG_NONE, nullptr, nullptr},  // not NUL-terminated: not read
  };
  for (const auto& w : wants) {
    INFO(w.name);
    auto nr = syscall_number(w.name);
    REQUIRE(nr);
    const auto* info = syscall_info(*nr);
    REQUIRE(info);
    CHECK(std::string(info->name) == w.name);
    CHECK(info->spec.str_arg[0] == w.arg0);
    CHECK(info->spec.str_arg[1] == w.arg1);
    CHECK((info->str_name[0] ? std::string(info->str_name[0]) : "") == (w.field0 ? w.field0 : ""));
    CHECK((info->str_name[1] ? std::string(info->str_name[1]) : "") == (w.field1 ? w.field1 : ""));
  }
  CHECK(*syscall_number("uprobe") == 336);
  CHECK(syscall_info(*syscall_number("sendmsg"))->spec.sockaddr_mode == FR_SA_MSG);
  CHECK_FALSE(syscall_number("no_such_call"));
}

TEST_CASE("read at the return alone: no entry time; with the entry traced, the record carries it") {
  auto rec = syscall_record(161, -1, {});  // chroot, EPERM
  fr_syscall r;
  std::memcpy(&r, rec.data(), sizeof(r));
  r.enter_ns = 0;  // what sys_exit alone leaves
  std::memcpy(rec.data(), &r, sizeof(r));
  json alone = decode(rec);
  CHECK(alone["err"] == "EPERM");
  CHECK_FALSE(alone.contains("ts_enter_mono_ns"));
  CHECK_FALSE(alone.contains("blocked"));  // only the kernel says so (FR_SC_BLOCKED)
  r.enter_ns = 777;
  r.flags |= FR_SC_BLOCKED;
  std::memcpy(rec.data(), &r, sizeof(r));
  json traced = decode(rec);
  CHECK(traced["ts_enter_mono_ns"] == 777);
  CHECK(traced["blocked"] == 1);
}

TEST_CASE("an address the call returned that was not read says so") {
  const uint8_t none = 0;
  auto rec = syscall_record(51, 0, {}, &none, 0);  // getsockname, with the data block but no address
  fr_syscall r;
  std::memcpy(&r, rec.data(), sizeof(r));
  r.flags |= FR_SC_SOCKADDR_UNREAD;
  std::memcpy(rec.data(), &r, sizeof(r));
  json j = decode(rec);
  CHECK(j["name"] == "getsockname");
  CHECK(j["sockaddr_error"] == "not read (no entry time)");
  CHECK_FALSE(j.contains("family"));
  CHECK_FALSE(j.contains("sockaddr_b64"));
}
