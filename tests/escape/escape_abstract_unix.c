/* escape_abstract_unix: connect to the abstract AF_UNIX socket "\0$ESCAPE_ABSTRACT"
 * that the runner listens on outside the sandbox (abstract names are per network
 * namespace). ESCAPED if connect succeeded; BLOCKED on EPERM/ECONNREFUSED/EACCES/ENOSYS. */
#include "escape.h"
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

int main(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	alarm(20);
	const char *name = need_env("ESCAPE_ABSTRACT");
	size_t len = strlen(name);
	if (len + 1 > sizeof sa.sun_path)
		verdict(INCONCLUSIVE, "ESCAPE_ABSTRACT is longer than sun_path");
	memcpy(sa.sun_path + 1, name, len);	/* sun_path[0] stays '\0' */
	socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		int e = errno;

		verdict(is_refusal(e) || e == EAFNOSUPPORT ? BLOCKED : INCONCLUSIVE,
			"socket(AF_UNIX, SOCK_STREAM): %s", strerror(e));
	}
	if (connect(s, (struct sockaddr *)&sa, salen) == 0) {
		close(s);
		verdict(ESCAPED, "connect(@%s): connected", name);
	}
	int e = errno;
	close(s);
	verdict(is_refusal(e) || e == ECONNREFUSED ? BLOCKED : INCONCLUSIVE, "connect(@%s): %s", name,
		strerror(e));
}
