#include "sandbox/dns_stub.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace flightrec::sandbox {
namespace {

int bind_port53(const std::string& address, int type) {
  int s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (s < 0) return -errno;
  // In a namespace of its own the sandbox's init may not have brought its
  // loopback up yet: the address is bound now and served once it is.
  int on = 1;
  setsockopt(s, IPPROTO_IP, IP_FREEBIND, &on, sizeof(on));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(53);
  inet_pton(AF_INET, address.c_str(), &a.sin_addr);
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    int err = errno;
    close(s);
    return -err;
  }
  return s;
}

// The reply to one query: its header and first question, QR set, REFUSED
// (or FORMERR for what does not parse as a query). 0: nothing to answer.
size_t refusal(const uint8_t* q, size_t n, uint8_t* out) {
  if (n < 12 || (q[2] & 0x80)) return 0;  // too short, or itself a response
  size_t end = 12;
  bool question = q[4] == 0 && q[5] >= 1;
  while (question && end < n && q[end] != 0) {
    if (q[end] & 0xc0) question = false;  // no compression in a question
    else end += 1 + q[end];
  }
  question = question && end + 5 <= n;
  size_t size = question ? end + 5 : 12;
  std::memcpy(out, q, size);
  out[2] = uint8_t(0x80 | (q[2] & 0x79));  // QR, the opcode and RD kept
  out[3] = question ? 3 : 1;               // NXDOMAIN, or FORMERR
  out[4] = 0;
  out[5] = question ? 1 : 0;
  std::memset(out + 6, 0, 6);  // no answers, authorities or additionals
  return size;
}

}  // namespace

std::string stub_resolv_conf(const std::string& address) {
  return "# flightrec: names are not resolved in this sandbox (policy network.dns: false);\n"
         "# this stub answers every query at once with REFUSED.\n"
         "nameserver " + address + "\noptions attempts:1\n";
}

DnsStub::DnsStub(int netns_fd, const std::string& address) {
  int home = -1;
  if (netns_fd >= 0) {
    home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home < 0 || setns(netns_fd, CLONE_NEWNET) != 0) {
      int err = errno;
      if (home >= 0) close(home);
      throw Error(errno_message("cannot enter the sandbox's network namespace for its DNS stub", err));
    }
  }
  int err = 0;
  for (int attempt = 0; attempt < 32 && sock_ < 0; ++attempt) {
    std::string a = address;
    if (a.empty()) {
      uint8_t r[2] = {};
      (void)!getrandom(r, sizeof(r), 0);
      a = "127.53." + std::to_string(r[0]) + "." + std::to_string(r[1] | 1);
    }
    // TCP too, on the same address, listening: a connection there reaches
    // the stub (which closes it), never a host resolver bound to every address.
    int s = bind_port53(a, SOCK_DGRAM), t = s >= 0 ? bind_port53(a, SOCK_STREAM) : -1;
    if (t >= 0 && listen(t, 8) != 0) {
      close(t);
      t = -errno;
    }
    if (s >= 0 && t >= 0) {
      sock_ = s;
      tcp_ = t;
      address_ = a;
    } else {
      err = s < 0 ? -s : -t;
      if (s >= 0) close(s);
      if (!address.empty()) break;
    }
  }
  if (home >= 0) {
    // Back, or this thread would go on in the sandbox's namespace.
    if (setns(home, CLONE_NEWNET) != 0) throw Error(errno_message("cannot return from the sandbox's network namespace", errno));
    close(home);
  }
  if (sock_ < 0) throw Error(errno_message("cannot bind the sandbox's DNS stub on 127.53.x.y port 53", err));
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) {
    close(sock_);
    close(tcp_);
    throw Error(errno_message("eventfd", errno));
  }
}

void DnsStub::start() { thread_ = std::thread([this] { serve(); }); }

DnsStub::~DnsStub() {
  uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  close(sock_);
  close(tcp_);
  close(stop_fd_);
}

void DnsStub::serve() {
  uint8_t query[4096], reply[4096];
  for (;;) {
    pollfd fds[3] = {{sock_, POLLIN, 0}, {stop_fd_, POLLIN, 0}, {tcp_, POLLIN, 0}};
    if (poll(fds, 3, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    if (fds[2].revents & POLLIN)
      if (int c = accept4(tcp_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK); c >= 0) close(c);
    if (!(fds[0].revents & POLLIN)) continue;
    sockaddr_storage from{};
    socklen_t len = sizeof(from);
    ssize_t n = recvfrom(sock_, query, sizeof(query), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &len);
    if (n <= 0) continue;
    if (size_t size = refusal(query, size_t(n), reply)) {
      sendto(sock_, reply, size, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), len);
      refused_.fetch_add(1);
    }
  }
}

}  // namespace flightrec::sandbox
