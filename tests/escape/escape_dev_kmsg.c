/* escape_dev_kmsg: open /dev/kmsg read-only and read one kernel log record.
 * ESCAPED if the read returned bytes; BLOCKED if open or read fail with
 * ENOENT/EACCES/EPERM/ENOSYS. */
#include "escape.h"

int main(void)
{
	char rec[8192];

	alarm(20);
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		verdict(is_refusal(e) || e == ENOENT ? BLOCKED : INCONCLUSIVE, "open(/dev/kmsg): %s",
			strerror(e));
	}
	ssize_t n;
	do	/* EPIPE: the record was overwritten, the next read gets the following one */
		n = read(fd, rec, sizeof rec);
	while (n < 0 && (errno == EPIPE || errno == EINTR));
	int e = errno;
	close(fd);
	if (n > 0)
		verdict(ESCAPED, "read(/dev/kmsg): got a %zd-byte record", n);
	if (n == 0)
		verdict(INCONCLUSIVE, "read(/dev/kmsg): end of file");
	verdict(is_refusal(e) || e == ENOENT ? BLOCKED : INCONCLUSIVE, "read(/dev/kmsg): %s", strerror(e));
}
