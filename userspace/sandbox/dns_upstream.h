#pragma once
// How the session's resolver (sandbox/resolver.h) talks to sockets: waits
// that a stop signal (an eventfd) cuts short, and one exchange with an
// upstream resolver over UDP or TCP.
#include <cstddef>
#include <optional>
#include <string>

namespace flightrec::sandbox {

// Waits for fd (poll events) or stop_fd; false on stop, timeout or error.
bool wait_for(int fd, short events, int stop_fd, int ms);
// All n bytes, each wait up to ms; false if they do not all come (or go).
bool read_full(int fd, void* buf, size_t n, int stop_fd, int ms);
bool write_full(int fd, const void* buf, size_t n, int stop_fd, int ms);

// One query to one upstream ("ADDR", "ADDR:PORT", "[V6]:PORT" or a bare
// IPv6 address; port 53 by default) and its reply, matched by id; nullopt
// with *error saying why none came. Each wait is up to 1.5 s.
std::optional<std::string> exchange(const std::string& server, const std::string& query, bool tcp, int stop_fd,
                                    std::string* error);

}  // namespace flightrec::sandbox
