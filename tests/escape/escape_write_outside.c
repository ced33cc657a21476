/* escape_write_outside: create a file in the host directory $ESCAPE_OUTSIDE
 * (outside the work directory). ESCAPED if open(O_CREAT|O_EXCL) succeeded (the
 * file is removed again); BLOCKED on EPERM/EACCES/ENOSYS/EROFS/ENOENT. */
#include "escape.h"

int main(void)
{
	char path[4096];

	alarm(20);
	const char *dir = need_env("ESCAPE_OUTSIDE");
	snprintf(path, sizeof path, "%s/flightrec-escape-%d", dir, (int)getpid());
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;

		verdict(is_refusal(e) || e == EROFS || e == ENOENT ? BLOCKED : INCONCLUSIVE,
			"open(%s, O_CREAT|O_EXCL): %s", path, strerror(e));
	}
	ssize_t n = write(fd, "x\n", 2);
	close(fd);
	if (unlink(path) != 0)
		verdict(ESCAPED, "open(%s, O_CREAT|O_EXCL): created, write returned %zd; unlink failed: %s",
			path, n, strerror(errno));
	verdict(ESCAPED, "open(%s, O_CREAT|O_EXCL): created, write returned %zd (file removed)", path, n);
}
