/* escape_egress_port: TCP connect to 127.0.0.1:$ESCAPE_PORT (not allowlisted),
 * waiting at most 10 s. ESCAPED if connect succeeded; BLOCKED on EPERM/EACCES/
 * ENETUNREACH/ECONNREFUSED/EHOSTUNREACH/ETIMEDOUT or no answer (packets dropped). */
#include "escape.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

static int is_net_block(int e)
{
	return e == EPERM || e == EACCES || e == ENETUNREACH || e == ECONNREFUSED ||
	       e == EHOSTUNREACH || e == ETIMEDOUT;
}

int main(void)
{
	char *end;

	alarm(20);
	const char *port_text = need_env("ESCAPE_PORT");
	long port = strtol(port_text, &end, 10);
	if (*end != '\0' || port < 1 || port > 65535)
		verdict(INCONCLUSIVE, "ESCAPE_PORT=%s is not a port number", port_text);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0) {
		int e = errno;

		verdict(is_refusal(e) || e == EAFNOSUPPORT ? BLOCKED : INCONCLUSIVE,
			"socket(AF_INET, SOCK_STREAM): %s", strerror(e));
	}
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int err = 0;
	if (connect(s, (struct sockaddr *)&sa, sizeof sa) != 0) {
		err = errno;
		if (err == EINPROGRESS) {
			struct pollfd pfd = { .fd = s, .events = POLLOUT };
			int n = poll(&pfd, 1, 10000);

			if (n == 0)
				verdict(BLOCKED, "connect(127.0.0.1:%ld): no answer within 10 s", port);
			socklen_t len = sizeof err;
			if (n < 0 || getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
				verdict(INCONCLUSIVE, "poll/getsockopt after connect: %s", strerror(errno));
		}
	}
	close(s);
	if (err == 0)
		verdict(ESCAPED, "connect(127.0.0.1:%ld): connected", port);
	verdict(is_net_block(err) ? BLOCKED : INCONCLUSIVE, "connect(127.0.0.1:%ld): %s", port,
		strerror(err));
}
