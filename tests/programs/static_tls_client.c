/* A TLS client whose TLS library no probe can find: OpenSSL linked in
 * statically and the symbols stripped (CMake builds it with -static -s).
 * GET PATH from 127.0.0.1:PORT with server name NAME, prints the response,
 * then stays SECONDS so its mappings can still be read.
 * usage: static_tls_client PORT NAME PATH SECONDS */
#include <arpa/inet.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1]))};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(s, (struct sockaddr*)&a, sizeof(a)) != 0) return 3;
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, s);
  SSL_set_tlsext_host_name(ssl, argv[2]);
  if (SSL_connect(ssl) != 1) return 4;
  char req[512];
  snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", argv[3], argv[2]);
  if (SSL_write(ssl, req, (int)strlen(req)) <= 0) return 5;
  char buf[4096];
  int n;
  while ((n = SSL_read(ssl, buf, sizeof(buf))) > 0) fwrite(buf, 1, (size_t)n, stdout);
  fflush(stdout);
  sleep((unsigned)atoi(argv[4]));
  return 0;
}
