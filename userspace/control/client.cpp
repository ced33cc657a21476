#include "control/client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/system.h"

namespace flightrec::control {

sockaddr_un socket_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) throw Error("control socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

namespace {

int connect_control(const std::string& path) {
  sockaddr_un addr = socket_address(path);
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
  std::string line = line_of(request), answer;
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

nlohmann::json request(const std::string& path, const Request& request, int timeout_ms) {
  int fd = connect_control(path);
  std::vector<int> fds;
  try {
    auto j = exchange(fd, to_json(request), -1, timeout_ms, true, fds);
    close_all(fds);
    close(fd);
    return j;
  } catch (...) {
    close_all(fds);
    close(fd);
    throw;
  }
}

DaemonStatus request_status(const std::string& path, int timeout_ms) {
  return parse_status(request(path, StatusRequest{}, timeout_ms));
}

HeldConnection request_held(const std::string& path, const Request& request, int timeout_ms) {
  HeldConnection held;
  held.fd = connect_control(path);
  try {
    held.answer = exchange(held.fd, to_json(request), -1, timeout_ms, false, held.fds);
  } catch (...) {
    close_all(held.fds);
    close(held.fd);
    throw;
  }
  return held;
}

nlohmann::json held_request(int fd, const RunRequest& request, int pass_fd, int timeout_ms) {
  std::vector<int> fds;
  auto j = exchange(fd, to_json(request), pass_fd, timeout_ms, false, fds);
  close_all(fds);  // none is expected
  return j;
}

}  // namespace flightrec::control
