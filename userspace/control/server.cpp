#include "control/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/system.h"
#include "control/client.h"

namespace flightrec::control {
namespace {

constexpr size_t kMaxRequest = 4096;
constexpr size_t kMaxClients = 16;
constexpr uint64_t kClientNs = 2'000'000'000;  // a client that takes longer is dropped

}  // namespace

OneShotServer::OneShotServer(int listener, Answer answer, Admit admit, size_t max_request, std::string busy)
    : answer_(std::move(answer)), admit_(std::move(admit)), busy_(std::move(busy)), max_request_(max_request), listener_(listener) {
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener_;
  if (epoll_ < 0 || epoll_ctl(epoll_, EPOLL_CTL_ADD, listener_, &ev) != 0) {
    int err = errno;
    close(listener_);
    if (epoll_ >= 0) close(epoll_);
    throw Error(errno_message("epoll", err));
  }
}

OneShotServer::~OneShotServer() {
  for (auto& [fd, c] : clients_) {
    if (c.out)
      for (int passed : c.out->fds) close(passed);
    close(fd);
    if (c.out && c.out->hold) c.out->hold(-1);
  }
  close(listener_);
  close(epoll_);
}

void OneShotServer::drop(int fd) {
  epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  std::function<void(int)> hold;
  if (it->second.out) {
    for (int passed : it->second.out->fds) close(passed);
    hold = std::move(it->second.out->hold);
  }
  clients_.erase(it);
  if (hold) hold(-1);  // the answer never got there
}

void OneShotServer::accept_clients() {
  for (;;) {
    int fd = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: all taken
    std::string refusal;
    if (clients_.size() >= kMaxClients) refusal = busy_;
    if (refusal.empty() && admit_(fd, refusal)) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = fd;
      if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) == 0) {
        clients_[fd].deadline_ns = mono_ns() + kClientNs;
        continue;
      }
    }
    (void)!write(fd, refusal.data(), refusal.size());  // best effort: it is non-blocking
    close(fd);
  }
}

void OneShotServer::serve(int fd, Client& c, uint32_t events) {
  if (!c.out && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
    char buf[1024];
    bool closed = false;
    for (;;) {
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n > 0) {
        c.in.append(buf, size_t(n));
        if (c.in.size() > max_request_) return drop(fd);
        continue;
      }
      closed = !(n < 0 && errno == EAGAIN);
      break;
    }
    std::optional<Reply> out = answer_(c.in, fd);
    if (!out) {
      if (closed) drop(fd);  // closed before a whole request
      return;
    }
    c.out = std::move(out);
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.fd = fd;
    epoll_ctl(epoll_, EPOLL_CTL_MOD, fd, &ev);
  }
  if (!c.out) return;
  Reply& out = *c.out;
  while (c.sent < out.bytes.size()) {
    // The descriptors go with the first byte sent, and are closed here.
    std::string rest = out.bytes.substr(c.sent);
    ssize_t n = c.sent == 0 && !out.fds.empty() ? send_with_fds(fd, rest, out.fds, MSG_DONTWAIT)
                                                : send(fd, rest.data(), rest.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EAGAIN) return;  // the rest when it is writable
    if (n <= 0) return drop(fd);
    if (c.sent == 0)
      for (int passed : out.fds) close(passed);
    out.fds.clear();
    c.sent += size_t(n);
  }
  if (out.hold) {  // answered, and the connection goes on elsewhere
    auto hold = std::move(out.hold);
    epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    clients_.erase(fd);
    hold(fd);
    return;
  }
  drop(fd);  // answered
}

void OneShotServer::poll() {
  epoll_event events[32];
  int n = epoll_wait(epoll_, events, 32, 0);
  for (int i = 0; i < n; ++i) {
    int fd = events[i].data.fd;
    if (fd == listener_) {
      accept_clients();
      continue;
    }
    auto it = clients_.find(fd);
    if (it != clients_.end()) serve(fd, it->second, events[i].events);
  }
  uint64_t now = mono_ns();
  std::vector<int> late;
  for (const auto& [fd, c] : clients_)
    if (now > c.deadline_ns) late.push_back(fd);
  for (int fd : late) drop(fd);
}

namespace {

int listen_unix(const std::string& path) {
  sockaddr_un addr = socket_address(path);
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) throw Error(path + " exists and is not a socket; not replacing it");
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (probe >= 0) close(probe);
    if (live) throw Error("another flightrecd answers on " + path);
    unlink(path.c_str());  // left by one that was killed
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(errno_message("socket", errno));
  mode_t old = umask(0177);  // 0600 from the moment it exists
  int bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  umask(old);
  if (bound == 0 && listen(fd, 16) != 0) err = errno, bound = -1;
  if (bound != 0) {
    close(fd);
    throw Error(errno_message("cannot listen on " + path, err));
  }
  return fd;
}

// The line before the first newline, parsed as a JSON request.
std::optional<OneShotServer::Reply> control_answer(const std::string& in, int fd, const ControlServer::Handler& handler) {
  size_t nl = in.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  Exchange ex;
  ex.fd = fd;
  ucred peer{};
  socklen_t len = sizeof(peer);
  ex.peer_uid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 ? peer.uid : uid_t(-1);
  nlohmann::json answer;
  try {
    answer = handler(parse_request(nlohmann::json::parse(in.substr(0, nl))), ex);
  } catch (const nlohmann::json::exception&) {
    answer = refusal("the request is not a JSON object");
  } catch (const std::exception& e) {
    answer = refusal(e.what());
  }
  if (answer.contains("error")) {  // nothing goes with a refusal
    for (int passed : ex.fds) close(passed);
    return OneShotServer::Reply{line_of(answer), {}, nullptr};
  }
  return OneShotServer::Reply{line_of(answer), std::move(ex.fds), std::move(ex.hold)};
}

// Root, or a member of `group` (>= 0): the peer's primary or any of its
// supplementary groups, as the kernel recorded them at connect.
bool root_or_group(int fd, int group, std::string& refusal) {
  ucred peer{};
  socklen_t len = sizeof(peer);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0) {
    if (peer.uid == 0 || (group >= 0 && peer.gid == gid_t(group))) return true;
    if (group >= 0) {
      std::vector<gid_t> groups(256);
      socklen_t glen = socklen_t(groups.size() * sizeof(gid_t));
      if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &glen) == 0)
        for (size_t i = 0; i < glen / sizeof(gid_t); ++i)
          if (groups[i] == gid_t(group)) return true;
    }
  }
  refusal = line_of({{"error", std::string("permission denied: flightrecd answers root") +
                                (group >= 0 ? " and its socket.group" : " only")}});
  return false;
}

std::string http(const char* status, const std::string& type, const std::string& body) {
  return std::string("HTTP/1.1 ") + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

std::optional<std::string> metrics_answer(const std::string& in, const std::function<std::string()>& render) {
  if (in.find("\r\n\r\n") == std::string::npos && in.find("\n\n") == std::string::npos) return std::nullopt;
  std::string line = in.substr(0, in.find_first_of("\r\n"));
  size_t sp1 = line.find(' '), sp2 = line.find(' ', sp1 + 1);
  std::string method = line.substr(0, sp1), target = sp1 == std::string::npos ? "" : line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (method != "GET") return http("405 Method Not Allowed", "text/plain", "GET only\n");
  if (target != "/metrics" && target.rfind("/metrics?", 0) != 0) return http("404 Not Found", "text/plain", "see /metrics\n");
  return http("200 OK", "text/plain; version=0.0.4; charset=utf-8", render());
}

uint16_t port_of(const std::string& listen) {
  size_t colon = listen.rfind(':');
  std::string digits = colon == std::string::npos ? "" : listen.substr(colon + 1);
  if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(digits) > 65535)
    throw Error("metrics.listen: not HOST:PORT: " + listen);
  return uint16_t(std::stoul(digits));
}

int listen_tcp(const std::string& address) {
  uint16_t port = port_of(address);
  std::string host = address.substr(0, address.rfind(':'));
  if (host == "localhost") host = "127.0.0.1";
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof(*v4);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof(*v6);
  } else {
    throw Error("metrics.listen: not an IP address: " + host);
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(fd, 16) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    throw Error(errno_message("cannot serve metrics on " + address, err));
  }
  return fd;
}

}  // namespace

ControlServer::ControlServer(const std::string& path, Handler handler, int group)
    : OneShotServer(
          listen_unix(path), [handler](const std::string& in, int fd) { return control_answer(in, fd, handler); },
          [group](int fd, std::string& refusal) { return root_or_group(fd, group, refusal); }, kMaxRequest,
          line_of({{"error", "busy: too many clients at once"}})),
      path_(path) {
  if (group >= 0 && (chown(path.c_str(), 0, gid_t(group)) != 0 || chmod(path.c_str(), 0660) != 0)) {
    int err = errno;
    unlink(path.c_str());
    throw Error(errno_message("cannot give " + path + " to socket.group", err));
  }
}

ControlServer::~ControlServer() { unlink(path_.c_str()); }

MetricsServer::MetricsServer(const std::string& listen, std::function<std::string()> render)
    : OneShotServer(
          listen_tcp(listen),
          [render](const std::string& in, int) -> std::optional<Reply> {
            auto out = metrics_answer(in, render);
            if (!out) return std::nullopt;
            return Reply{std::move(*out), {}, nullptr};
          },
          [](int, std::string&) { return true; }, 8192,
          http("503 Service Unavailable", "text/plain", "busy: too many clients at once\n")),
      port_(port_of(listen)) {}

}  // namespace flightrec::control
