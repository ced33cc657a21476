/* escape_tiocsti: push a character ('x') into the terminal's input queue with
 * ioctl(TIOCSTI) on /dev/tty (or fd 0). ESCAPED if it returned 0; BLOCKED on
 * EPERM/EACCES/ENOSYS (or EIO: dev.tty.legacy_tiocsti=0); INCONCLUSIVE without a tty. */
#include "escape.h"
#include <sys/ioctl.h>

int main(void)
{
	char c = 'x';
	const char *which = "/dev/tty";

	alarm(20);
	int fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		fd = 0;
		which = "fd 0";
	}
	int tty = isatty(fd);
	if (ioctl(fd, TIOCSTI, &c) == 0)
		verdict(ESCAPED, "ioctl(%s, TIOCSTI, 'x'): succeeded", which);
	int e = errno;
	if (e == EPERM || (tty && (is_refusal(e) || e == EIO)))
		verdict(BLOCKED, "ioctl(%s, TIOCSTI): %s", which, strerror(e));
	verdict(INCONCLUSIVE, "ioctl(%s, TIOCSTI): %s%s", which, strerror(e), tty ? "" : " (no tty)");
}
