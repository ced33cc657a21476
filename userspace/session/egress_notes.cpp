#include "session/egress_notes.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "common/error.h"
#include "common/system.h"
#include "common/text.h"

namespace flightrec::session {
namespace {

std::string address_text(uint32_t family, const uint8_t* addr) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(family == AF_INET6 ? AF_INET6 : AF_INET, addr, text, sizeof(text));
  return text;
}

const char* protocol_name(uint8_t proto) {
  return proto == FR_SNI_TLS ? "tls" : proto == FR_SNI_HTTP ? "http" : "other";
}

// The process as the record names processes (host pid namespace): what a
// connection_cut entry is about.
events::Entry process_subject(uint32_t tgid) {
  events::Entry p;
  std::string base = "/proc/" + std::to_string(tgid);
  p.set("pid", tgid);
  p.set("tid", tgid);
  // Read only while a pidfd shows it is the same process (its pid not yet another's).
  UniqueFd pidfd(int(syscall(SYS_pidfd_open, pid_t(tgid), 0)));
  auto alive = [&] { return pidfd.get() >= 0 && syscall(SYS_pidfd_send_signal, pidfd.get(), 0, nullptr, 0) == 0; };
  if (!alive()) {
    p.set("comm", "?");  // gone before it could be looked at
    return p;
  }
  std::istringstream status(try_read_file(base + "/status").value_or(""));
  for (std::string line; std::getline(status, line);) {
    std::istringstream words(line.substr(line.find(':') + 1));
    uint32_t first = 0;
    if (!(words >> first)) continue;
    if (line.starts_with("PPid:")) p.set("ppid", first);
    else if (line.starts_with("Uid:")) p.set("uid", first);
    else if (line.starts_with("Gid:")) p.set("gid", first);
  }
  auto comm = try_read_file(base + "/comm");
  p.set_bytes("comm", comm && alive() ? comm->substr(0, comm->find('\n')) : "?");
  return p;
}

}  // namespace

policy::Violation packet_drop_violation(uint32_t kind, uint64_t fresh, const fr_net_drop& d) {
  bool in = kind == FR_NET_DROP_IN;
  std::string detail = std::to_string(fresh) + (in ? " packet(s) from " : " packet(s) to ") +
                       "hosts outside loopback and the allowlist dropped (last: " + address_text(d.family, d.addr) +
                       " port " + std::to_string(d.port) + ")";
  return {in ? "network.inbound" : "network.allow", "ALERT", "denied", detail};
}

std::string destroy_socket(const fr_sni_cut& cut) {
  UniqueFd nl(socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (nl.get() < 0) return errno_message("sock_diag", errno);
  struct {
    nlmsghdr h;
    inet_diag_req_v2 r;
  } req{};
  req.h.nlmsg_len = sizeof(req);
  req.h.nlmsg_type = SOCK_DESTROY;
  req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  req.r.sdiag_family = uint8_t(cut.family == AF_INET6 ? AF_INET6 : AF_INET);
  req.r.sdiag_protocol = IPPROTO_TCP;
  req.r.idiag_states = ~0u;
  req.r.id.idiag_sport = htons(cut.local_port);
  req.r.id.idiag_dport = htons(cut.port);
  std::memcpy(req.r.id.idiag_src, cut.local_addr, sizeof(req.r.id.idiag_src));
  std::memcpy(req.r.id.idiag_dst, cut.addr, sizeof(req.r.id.idiag_dst));
  req.r.id.idiag_cookie[0] = uint32_t(cut.cookie);
  req.r.id.idiag_cookie[1] = uint32_t(cut.cookie >> 32);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(nl.get(), &req, sizeof(req), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) < 0)
    return errno_message("sock_diag", errno);
  struct {
    nlmsghdr h;
    nlmsgerr e;
  } ack{};
  timeval wait{1, 0};
  setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  ssize_t got = recv(nl.get(), &ack, sizeof(ack), 0);
  if (got < ssize_t(sizeof(nlmsghdr) + sizeof(int)) || ack.h.nlmsg_type != NLMSG_ERROR)
    return got < 0 ? errno_message("sock_diag", errno) : "sock_diag: no answer";
  return ack.e.error == 0 ? "" : errno_message("sock_diag's SOCK_DESTROY", -ack.e.error);
}

std::string shut_socket(uint32_t tgid, uint64_t cookie) {
  UniqueFd pidfd(int(syscall(SYS_pidfd_open, pid_t(tgid), 0)));
  if (pidfd.get() < 0) return errno_message("process " + std::to_string(tgid), errno);
  std::string fds = "/proc/" + std::to_string(tgid) + "/fd";
  DIR* dir = opendir(fds.c_str());
  if (!dir) return errno_message("cannot list " + fds, errno);
  std::string why = "the process no longer holds the socket";
  int looked = 0;
  while (dirent* d = readdir(dir)) {
    if (d->d_name[0] == '.') continue;
    if (++looked > 4096) {  // a process of many descriptors does not hold the recording up
      why = "not among the process's first 4096 descriptors";
      break;
    }
    char link[32] = {};  // "socket:[INODE]": read off the link, never following it (a FUSE file could hang)
    if (readlinkat(dirfd(dir), d->d_name, link, sizeof(link) - 1) < 8 || std::strncmp(link, "socket:[", 8) != 0) continue;
    UniqueFd fd(int(syscall(SYS_pidfd_getfd, pidfd.get(), atoi(d->d_name), 0)));
    uint64_t c = 0;
    socklen_t len = sizeof(c);
    if (fd.get() < 0 || getsockopt(fd.get(), SOL_SOCKET, SO_COOKIE, &c, &len) != 0 || c != cookie) continue;
    // Disconnected (connect to AF_UNSPEC: tcp_disconnect): what it queued
    // is thrown away, not sent once the egress programs are gone, and the
    // process's reads and writes fail with ECONNRESET.
    sockaddr unspec{};
    unspec.sa_family = AF_UNSPEC;
    why = connect(fd.get(), &unspec, sizeof(unspec)) == 0 ? "" : errno_message("disconnecting it", errno);
    break;
  }
  closedir(dir);
  return why;
}

CutNote record_cut(const fr_sni_cut& cut, const events::HostNames* names, Emitted& out) {
  CutNote note;
  std::string addr = address_text(cut.family, cut.addr);
  std::string name(reinterpret_cast<const char*>(cut.name), std::min<size_t>(cut.name_len, sizeof(cut.name)));
  std::optional<std::string> host = names ? names->name_of(addr) : std::nullopt;
  // Aborted, so its queued payload is never sent (the programs drop it
  // only while they are attached): by sock_diag where the kernel can, else
  // in the process that holds it.
  std::string shut = destroy_socket(cut);
  if (!shut.empty()) {
    std::string held = shut_socket(cut.tgid, cut.cookie);
    shut = held.empty() ? "" : shut + "; " + held;
  }

  events::Entry& e = out.add_about("connection_cut", process_subject(cut.tgid));
  e.set("addr", addr);
  e.set("port", uint64_t(cut.port));
  if (host) e.set("host", *host);
  e.set("protocol", protocol_name(cut.proto));
  const char* reason = cut.reason == FR_SNI_MISMATCH  ? "mismatch"
                       : cut.reason == FR_SNI_MISSING ? "missing"
                                                      : "unreadable";
  e.set("reason", reason);
  if (!name.empty()) e.set_bytes("server_name", name);
  e.set("shut", shut.empty() ? 1 : 0);
  if (!shut.empty()) e.set("not_shut", shut);
  note.entry = &e;

  std::string where = addr + " port " + std::to_string(cut.port) + (host ? " (" + *host + ")" : "");
  std::string what = cut.reason == FR_SNI_MISMATCH
                         ? std::string(cut.proto == FR_SNI_HTTP ? "its HTTP Host " : "its TLS server name ") +
                               printable(name) + " was not answered with that address by the session's resolver"
                     : cut.reason == FR_SNI_MISSING ? "it named no server (TLS server name or HTTP Host) and network.sni is required"
                                                    : "its server name could not be read from its first segment";
  note.violation = {"network.sni", "ALERT", "denied", "connection to " + where + " cut before its payload left: " + what,
                    where};
  note.explained = "connection to " + where + " cut (rule network.sni): " + what +
                   (cut.reason == FR_SNI_MISMATCH ? "; look the name up first, and the policy must allow it: flightrec run --allow " +
                                                        printable(name) + ":" + std::to_string(cut.port)
                                                  : "");
  return note;
}

}  // namespace flightrec::session
