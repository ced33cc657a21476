#pragma once
// The control socket's client side (control/protocol.h has the messages):
// `flightrec status` asks for the daemon's status, `flightrec run` for a
// session of its own (a held connection it then makes requests on).
#include <sys/un.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "control/protocol.h"

namespace flightrec::control {

// The address of the socket at `path`; throws Error if it cannot be one.
sockaddr_un socket_address(const std::string& path);

// Sends one request to the daemon at `path` and returns its answer, whole.
// Throws Error (no daemon, refused: "flightrecd: WHY", no answer within
// timeout_ms, not a JSON object).
nlohmann::json request(const std::string& path, const Request& request, int timeout_ms = 5000);
DaemonStatus request_status(const std::string& path, int timeout_ms = 5000);

// The connection of a request the daemon holds on to ("session"), and the
// descriptors its answer carried; the caller owns both.
struct HeldConnection {
  int fd = -1;
  nlohmann::json answer;
  std::vector<int> fds;
};
// Throws Error as request() does (the connection is closed then).
HeldConnection request_held(const std::string& path, const Request& request, int timeout_ms = 5000);
// One more request on a held connection, with an optional descriptor
// beside it; its one-line answer. Throws Error (a refusal, none within
// timeout_ms, the connection gone).
nlohmann::json held_request(int fd, const RunRequest& request, int pass_fd = -1, int timeout_ms = 5000);

}  // namespace flightrec::control
