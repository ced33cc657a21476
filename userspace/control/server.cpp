#include "daemon/control.h"

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

namespace flightrec::daemon {
namespace {

constexpr size_t kMaxRequest = 4096;
constexpr size_t kMaxClients = 16;
constexpr uint64_t kClientNs = 2'000'000'000;  // a client that takes longer is dropped

sockaddr_un address_of(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) throw Error("control socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

std::string dump(const nlohmann::json& j) {
  // Paths are bytes: what is not UTF-8 is shown replaced, never thrown on.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

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
  sockaddr_un addr = address_of(path);
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
    answer = handler(nlohmann::json::parse(in.substr(0, nl)), ex);
  } catch (const nlohmann::json::exception&) {
    answer = {{"error", "the request is not a JSON object"}};
  } catch (const std::exception& e) {
    answer = {{"error", e.what()}};
  }
  if (answer.contains("error")) {  // nothing goes with a refusal
    for (int passed : ex.fds) close(passed);
    return OneShotServer::Reply{dump(answer), {}, nullptr};
  }
  return OneShotServer::Reply{dump(answer), std::move(ex.fds), std::move(ex.hold)};
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
  refusal = dump({{"error", std::string("permission denied: flightrecd answers root") +
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
          dump({{"error", "busy: too many clients at once"}})),
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

namespace {

int connect_control(const std::string& path) {
  sockaddr_un addr = address_of(path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(errno_message("socket", errno));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    throw Error(errno_message("no flightrecd answers on " + path + " (is it running?)", err));
  }
  return fd;
}

// Sends `request` (with pass_fd beside it) and reads the answer: up to its
// first newline (whole_stream: to the end of the stream). Descriptors that
// came with it are appended to fds. Throws Error; closes nothing.
nlohmann::json exchange(int fd, const nlohmann::json& request, int pass_fd, int timeout_ms, bool whole_stream,
                        std::vector<int>& fds) {
  std::string line = dump(request), answer;
  std::vector<int> passed;
  if (pass_fd >= 0) passed.push_back(pass_fd);
  if (send_with_fds(fd, line, passed) != ssize_t(line.size()))
    throw Error(errno_message("cannot write to flightrecd", errno));
  uint64_t deadline = mono_ns() + uint64_t(timeout_ms) * 1'000'000ull;
  for (;;) {
    int left = int((deadline - std::min(deadline, mono_ns())) / 1'000'000);
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, left) <= 0)
      throw Error("flightrecd did not answer within " + std::to_string(timeout_ms) + " ms");
    char buf[65536];
    long n = receive_with_fds(fd, buf, sizeof(buf), fds);
    if (n <= 0) break;
    answer.append(buf, size_t(n));
    if (!whole_stream && answer.find('\n') != std::string::npos) break;
    if (answer.size() > (16u << 20)) throw Error("flightrecd's answer is too long");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(answer);
  } catch (const nlohmann::json::exception&) {
    throw Error(std::string("flightrecd's answer is not JSON") + (answer.empty() ? " (it closed the connection)" : ""));
  }
  if (!j.is_object()) throw Error("flightrecd's answer is not a JSON object");
  if (j.contains("error"))
    throw Error("flightrecd: " + (j["error"].is_string() ? j["error"].get<std::string>() : j["error"].dump()));
  return j;
}

void close_all(std::vector<int>& fds) {
  for (int fd : fds) close(fd);
  fds.clear();
}

}  // namespace

nlohmann::json control_request(const std::string& path, const nlohmann::json& request, int timeout_ms) {
  int fd = connect_control(path);
  std::vector<int> fds;
  try {
    auto j = exchange(fd, request, -1, timeout_ms, true, fds);
    close_all(fds);
    close(fd);
    return j;
  } catch (...) {
    close_all(fds);
    close(fd);
    throw;
  }
}

HeldConnection control_request_held(const std::string& path, const nlohmann::json& request, int timeout_ms) {
  HeldConnection held;
  held.fd = connect_control(path);
  try {
    held.answer = exchange(held.fd, request, -1, timeout_ms, false, held.fds);
  } catch (...) {
    close_all(held.fds);
    close(held.fd);
    throw;
  }
  return held;
}

nlohmann::json held_request(int fd, const nlohmann::json& request, int pass_fd, int timeout_ms) {
  std::vector<int> fds;
  auto j = exchange(fd, request, pass_fd, timeout_ms, false, fds);
  close_all(fds);  // none is expected
  return j;
}

}  // namespace flightrec::daemon
