#include "ship/connection.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "common/error.h"

namespace flightrec::ship {

namespace {

std::string ssl_error(const std::string& what) {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (!e) return what;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return what + ": " + buf;
}

void set_timeouts(int fd, int timeout_ms) {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

// A connected TCP socket to one of host's addresses, within timeout_ms.
int connect_tcp(const std::string& host, uint16_t port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    throw Error("cannot resolve " + host + ": " + gai_strerror(rc));
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc < 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = poll(&p, 1, timeout_ms);
      int err = 0;
      socklen_t len = sizeof(err);
      if (rc == 0) err = ETIMEDOUT;
      else if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
      rc = err ? -1 : 0;
      errno = err;
    }
    if (rc < 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) throw Error("cannot connect to " + host + " port " + service + ": " + why);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  set_timeouts(fd, timeout_ms);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

}  // namespace

bool split_address(const std::string& address, std::string& host, uint16_t& port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= address.size()) return false;
  host = address.substr(0, colon);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return false;  // an IPv6 address goes in brackets
  }
  std::string_view p(address.data() + colon + 1, address.size() - colon - 1);
  unsigned v = 0;
  auto r = std::from_chars(p.data(), p.data() + p.size(), v);
  if (r.ec != std::errc() || r.ptr != p.data() + p.size() || v == 0 || v > 65535) return false;
  port = uint16_t(v);
  return true;
}

Connection::Connection(const std::string& host, uint16_t port, const TlsSettings& tls, int timeout_ms) {
  fd_ = connect_tcp(host, port, timeout_ms);
  if (!tls.on) return;
  try {
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (!ctx_) throw Error(ssl_error("TLS"));
    SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    if (SSL_CTX_load_verify_locations(ctx_, tls.ca_file.c_str(), nullptr) != 1)
      throw Error(ssl_error("cannot read the CA file " + tls.ca_file));
    if (!tls.cert_file.empty()) {
      if (SSL_CTX_use_certificate_chain_file(ctx_, tls.cert_file.c_str()) != 1)
        throw Error(ssl_error("cannot read the client certificate " + tls.cert_file));
      if (SSL_CTX_use_PrivateKey_file(ctx_, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
        throw Error(ssl_error("cannot read the client key " + tls.key_file));
    }
    ssl_ = SSL_new(ctx_);
    if (!ssl_) throw Error(ssl_error("TLS"));
    const std::string& name = tls.server_name.empty() ? host : tls.server_name;
    SSL_set_hostflags(ssl_, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    bool is_ip = name.find_first_not_of("0123456789.") == std::string::npos || name.find(':') != std::string::npos;
    if (is_ip) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), name.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl_, name.c_str());
      SSL_set1_host(ssl_, name.c_str());
    }
    SSL_set_fd(ssl_, fd_);
    if (SSL_connect(ssl_) != 1) {
      long v = SSL_get_verify_result(ssl_);
      if (v != X509_V_OK)
        throw Error("TLS handshake with " + host + ": the server's certificate is not trusted: " +
                    X509_verify_cert_error_string(v));
      throw Error(ssl_error("TLS handshake with " + host + " failed"));
    }
  } catch (...) {
    if (ssl_) SSL_free(ssl_);
    if (ctx_) SSL_CTX_free(ctx_);
    ::close(fd_);
    throw;
  }
}

Connection::~Connection() {
  if (ssl_) {
    SSL_shutdown(ssl_);
    SSL_free(ssl_);
  }
  if (ctx_) SSL_CTX_free(ctx_);
  if (fd_ >= 0) ::close(fd_);
}

void Connection::write_all(std::string_view data) {
  while (!data.empty()) {
    if (ssl_) {
      size_t n = 0;
      if (SSL_write_ex(ssl_, data.data(), data.size(), &n) != 1) throw Error(ssl_error("TLS write failed"));
      data.remove_prefix(n);
      continue;
    }
    ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(errno == EAGAIN ? "send timed out" : errno_message("send", errno));
    data.remove_prefix(size_t(n));
  }
}

size_t Connection::read_some(char* buf, size_t n) {
  for (;;) {
    if (ssl_) {
      size_t got = 0;
      if (SSL_read_ex(ssl_, buf, n, &got) == 1) return got;
      int why = SSL_get_error(ssl_, 0);
      if (why == SSL_ERROR_ZERO_RETURN) return 0;
      if (why == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK)) throw Error("receive timed out");
      throw Error(ssl_error("TLS read failed"));
    }
    ssize_t got = recv(fd_, buf, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw Error(errno == EAGAIN || errno == EWOULDBLOCK ? "receive timed out" : errno_message("recv", errno));
    return size_t(got);
  }
}

bool Connection::peer_gone() {
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP)) return true;
  // Readable: a syslog server sends nothing, so this is EOF (or a TLS alert).
  char c;
  ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || (n > 0 && !ssl_);
}

}  // namespace flightrec::ship
