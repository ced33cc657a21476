#pragma once
// A client's stream to a remote engine: TCP, or TLS over it (OpenSSL; the
// server's certificate checked against a CA file and its name, as RFC 5425
// asks of syslog over TLS; optionally a client certificate). Blocking with
// timeouts: it lives on an output's own thread.
#include <cstdint>
#include <string>
#include <string_view>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace flightrec::ship {

struct TlsSettings {
  bool on = false;
  std::string ca_file;      // the CAs the server's certificate must chain to (required with TLS)
  std::string cert_file, key_file;  // a client certificate, when the server asks for one
  std::string server_name;  // the name the certificate must carry; "" -> the address's host
  bool operator==(const TlsSettings&) const = default;
};

// "host:port", "[v6]:port"; false if it is not one.
bool split_address(const std::string& address, std::string& host, uint16_t& port);

class Connection {
 public:
  // Connects (and handshakes) within timeout_ms; throws Error saying why not.
  Connection(const std::string& host, uint16_t port, const TlsSettings& tls, int timeout_ms);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // All of data, or throws Error (the peer went away, or timeout_ms passed without progress).
  void write_all(std::string_view data);
  // Up to n bytes the peer sent: 0 when it closed the connection; throws
  // Error when it failed or timeout_ms passed without a byte.
  size_t read_some(char* buf, size_t n);
  // Whether the peer closed or reset the connection (never blocks).
  bool peer_gone();

 private:
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
};

}  // namespace flightrec::ship
