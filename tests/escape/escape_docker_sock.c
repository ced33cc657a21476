/* escape_docker_sock: connect an AF_UNIX stream socket to the host socket
 * $ESCAPE_UNIX_SOCK (like /run/docker.sock). ESCAPED if connect succeeded;
 * BLOCKED on EACCES/EPERM/ENOENT/ENOSYS (and EAFNOSUPPORT for socket()). */
#include "escape.h"
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

int main(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	alarm(20);
	const char *path = need_env("ESCAPE_UNIX_SOCK");
	if (strlen(path) >= sizeof sa.sun_path)
		verdict(INCONCLUSIVE, "ESCAPE_UNIX_SOCK is longer than sun_path");
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		int e = errno;

		verdict(is_refusal(e) || e == EAFNOSUPPORT ? BLOCKED : INCONCLUSIVE,
			"socket(AF_UNIX, SOCK_STREAM): %s", strerror(e));
	}
	if (connect(s, (struct sockaddr *)&sa, sizeof sa) == 0) {
		close(s);
		verdict(ESCAPED, "connect(%s): connected", path);
	}
	int e = errno;
	close(s);
	verdict(is_refusal(e) || e == ENOENT ? BLOCKED : INCONCLUSIVE, "connect(%s): %s", path, strerror(e));
}
