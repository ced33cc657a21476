/* escape_disk_fill: write 2 GiB in 1 MiB blocks to ./fill.bin (SIGXFSZ ignored so
 * a file-size limit shows as EFBIG). ESCAPED if all was written; BLOCKED on
 * EFBIG/ENOSPC/EDQUOT/EPERM/EACCES/ENOSYS. ./fill.bin is always removed. Uses
 * alarm(60), as 2 GiB can take more than 20 s on a slow disk. */
#include "escape.h"
#include <stdint.h>

#define BLOCK (1UL << 20)
#define BLOCKS 2048UL	/* 2 GiB */

static void on_alarm(int sig)
{
	(void)sig;
	unlink("./fill.bin");
	signal_verdict(INCONCLUSIVE, "write(./fill.bin): still writing after 60 s (file removed)");
}

int main(void)
{
	static unsigned char buf[BLOCK];
	unsigned long done = 0;	/* bytes written */
	uint64_t x = 0x9E3779B97F4A7C15ULL;

	signal(SIGALRM, on_alarm);
	alarm(60);
	signal(SIGXFSZ, SIG_IGN);
	for (size_t i = 0; i < sizeof buf; i += 8) {	/* incompressible content */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + i, &x, 8);
	}
	int fd = open("./fill.bin", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;

		verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "open(./fill.bin): %s", strerror(e));
	}
	while (done < BLOCKS * BLOCK) {
		size_t off = done % BLOCK;
		ssize_t n = write(fd, buf + off, BLOCK - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : ENOSPC;

			close(fd);
			unlink("./fill.bin");
			verdict(is_refusal(e) || e == EFBIG || e == ENOSPC || e == EDQUOT ? BLOCKED : INCONCLUSIVE,
				"write(./fill.bin) after %lu MiB: %s (file removed)", done >> 20, strerror(e));
		}
		done += (unsigned long)n;
	}
	int rc = close(fd);
	int e = errno;
	unlink("./fill.bin");
	if (rc != 0)
		verdict(e == ENOSPC || e == EDQUOT ? BLOCKED : INCONCLUSIVE,
			"close(./fill.bin) after writing %lu MiB: %s (file removed)", done >> 20, strerror(e));
	verdict(ESCAPED, "write(./fill.bin): wrote all %lu MiB (file removed)", done >> 20);
}
