#pragma once
// The daemon's two listening sockets, both one request per connection,
// answered and closed, served on the daemon's thread without ever blocking
// it (clients are read and written as they become ready, bounded in size,
// number and time):
//
// - the control socket (a UNIX stream socket, root and socket.group only):
//   one request line of control/protocol.h, answered with one JSON object;
//   `flightrec status` and `flightrec run` are its clients (control/client.h).
//   One request, "session", keeps its connection: the answer carries file
//   descriptors and the connection is held by the daemon (Exchange::hold)
//   for the session's life;
// - the metrics endpoint (TCP): HTTP GET /metrics, Prometheus's text format.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "control/protocol.h"

namespace flightrec::control {

class OneShotServer {
 public:
  // An answer: its bytes, the descriptors sent with them (then closed
  // here), and, if set, who takes the connection once it is sent (instead
  // of closing it): called with it then, or with -1 if it could not be.
  struct Reply {
    std::string bytes;
    std::vector<int> fds;
    std::function<void(int fd)> hold;
  };
  // What a request (all bytes so far) on connection fd is answered with;
  // nullopt: not complete yet.
  using Answer = std::function<std::optional<Reply>(const std::string& request, int fd)>;
  // Whether to serve a new connection; else `refusal` is written to it.
  using Admit = std::function<bool(int fd, std::string& refusal)>;
  // busy: written to a connection past the client limit.
  OneShotServer(int listener, Answer answer, Admit admit, size_t max_request, std::string busy);  // takes the socket; throws Error
  virtual ~OneShotServer();
  OneShotServer(const OneShotServer&) = delete;
  OneShotServer& operator=(const OneShotServer&) = delete;

  int fd() const { return epoll_; }  // readable when a client needs attention
  void poll();                       // accepts, reads, answers; never blocks; drops clients too slow

 private:
  struct Client {
    std::string in;
    std::optional<Reply> out;
    size_t sent = 0;
    uint64_t deadline_ns = 0;
  };
  void accept_clients();
  void serve(int fd, Client& c, uint32_t events);
  void drop(int fd);
  Answer answer_;
  Admit admit_;
  std::string busy_;
  size_t max_request_;
  int listener_ = -1, epoll_ = -1;
  std::map<int, Client> clients_;
};

// A control request's connection, as its handler sees it.
struct Exchange {
  int fd = -1;             // the connection
  uid_t peer_uid = 0;      // the peer's, as the kernel recorded it at connect
  std::vector<int> fds;    // sent with the answer (SCM_RIGHTS), then closed
  std::function<void(int fd)> hold;  // takes the connection after the answer (-1: it could not be sent)
};

class ControlServer : public OneShotServer {
 public:
  // Called with each request that parses (control/protocol.h); one that
  // does not is refused here, naming the field at fault.
  using Handler = std::function<nlohmann::json(const Request& request, Exchange& exchange)>;
  // Binds `path` (0600, or 0660 and group `group` when it is a gid >= 0:
  // root and that group's members are answered; a stale socket file is
  // replaced, a live one means another flightrecd runs: Error). Throws Error.
  ControlServer(const std::string& path, Handler handler, int group = -1);
  ~ControlServer() override;  // removes the socket file

 private:
  std::string path_;
};

class MetricsServer : public OneShotServer {
 public:
  // listen: "HOST:PORT" (an IPv4 or [IPv6] literal, or localhost); render
  // makes the exposition text. Throws Error.
  MetricsServer(const std::string& listen, std::function<std::string()> render);
  uint16_t port() const { return port_; }

 private:
  uint16_t port_ = 0;
};

}  // namespace flightrec::control
