#include "sandbox/dns_upstream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "common/system.h"
#include "policy/network.h"

namespace flightrec::sandbox {
namespace {

constexpr int kUpstreamWaitMs = 1500;  // per upstream tried

// "ADDR", "ADDR:PORT", "[V6]:PORT" or a bare IPv6 address (policy::upstream_resolvers).
bool upstream_sockaddr(const std::string& text, sockaddr_storage& out, socklen_t& len) {
  auto up = policy::parse_upstream(text);
  if (!up) return false;
  std::memset(&out, 0, sizeof(out));
  if (up->family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&out);
    in->sin_family = AF_INET;
    in->sin_port = htons(up->port);
    std::memcpy(&in->sin_addr, up->addr, 4);
    len = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(up->port);
    std::memcpy(&in6->sin6_addr, up->addr, 16);
    len = sizeof(sockaddr_in6);
  }
  return true;
}

// Waits for fd (events) or the stop signal; false on stop, timeout or error.
}  // namespace

bool wait_for(int fd, short events, int stop_fd, int ms) {
  pollfd fds[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
  int n;
  while ((n = poll(fds, 2, ms)) < 0 && errno == EINTR) {
  }
  return n > 0 && !fds[1].revents && (fds[0].revents & (events | POLLHUP | POLLERR));
}

bool read_full(int fd, void* buf, size_t n, int stop_fd, int ms) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n) {
    if (!wait_for(fd, POLLIN, stop_fd, ms)) return false;
    ssize_t got = read(fd, p, n);
    if (got <= 0) return false;
    p += got;
    n -= size_t(got);
  }
  return true;
}

bool write_full(int fd, const void* buf, size_t n, int stop_fd, int ms) {
  auto* p = static_cast<const uint8_t*>(buf);
  while (n) {
    if (!wait_for(fd, POLLOUT, stop_fd, ms)) return false;
    ssize_t put = send(fd, p, n, MSG_NOSIGNAL);
    if (put <= 0) return false;
    p += put;
    n -= size_t(put);
  }
  return true;
}

// One exchange with one upstream resolver; the reply, or why none came.
std::optional<std::string> exchange(const std::string& server, const std::string& query, bool tcp, int stop_fd,
                                    std::string* error) {
  sockaddr_storage to{};
  socklen_t len = 0;
  if (!upstream_sockaddr(server, to, len)) {
    *error = server + ": not an address";
    return std::nullopt;
  }
  int s = socket(to.ss_family, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) {
    *error = errno_message("socket", errno);
    return std::nullopt;
  }
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{s};
  if (connect(s, reinterpret_cast<sockaddr*>(&to), len) != 0 && errno != EINPROGRESS) {
    *error = errno_message(server, errno);
    return std::nullopt;
  }
  std::string reply(65535, '\0');
  if (tcp) {
    uint8_t head[2] = {uint8_t(query.size() >> 8), uint8_t(query.size())};
    if (!write_full(s, head, 2, stop_fd, kUpstreamWaitMs) || !write_full(s, query.data(), query.size(), stop_fd, kUpstreamWaitMs) ||
        !read_full(s, head, 2, stop_fd, kUpstreamWaitMs)) {
      *error = server + " (tcp): no answer";
      return std::nullopt;
    }
    reply.resize(size_t(head[0]) << 8 | head[1]);
    if (!read_full(s, reply.data(), reply.size(), stop_fd, kUpstreamWaitMs)) {
      *error = server + " (tcp): a short answer";
      return std::nullopt;
    }
    return reply;
  }
  if (send(s, query.data(), query.size(), 0) != ssize_t(query.size())) {
    *error = errno_message(server, errno);
    return std::nullopt;
  }
  // Datagrams that are not the answer (another id) are skipped, not taken.
  for (uint64_t deadline = mono_ns() + uint64_t(kUpstreamWaitMs) * 1'000'000;;) {
    uint64_t now = mono_ns();
    if (now >= deadline || !wait_for(s, POLLIN, stop_fd, int((deadline - now) / 1'000'000) + 1)) {
      *error = server + ": no answer in " + std::to_string(kUpstreamWaitMs) + " ms";
      return std::nullopt;
    }
    ssize_t n = recv(s, reply.data(), reply.size(), 0);
    if (n < 0) {
      *error = errno_message(server, errno);
      return std::nullopt;
    }
    if (n >= 2 && std::memcmp(reply.data(), query.data(), 2) == 0) {
      reply.resize(size_t(n));
      return reply;
    }
  }
}

}  // namespace flightrec::sandbox
