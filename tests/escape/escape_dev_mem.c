/* escape_dev_mem: open("/dev/mem", O_RDONLY) (physical memory). ESCAPED if it
 * returned an fd; BLOCKED on EPERM/EACCES/ENOSYS/ENOENT. */
#include "escape.h"

int main(void)
{
	alarm(20);
	int fd = open("/dev/mem", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		verdict(ESCAPED, "open(/dev/mem, O_RDONLY): returned fd %d", fd);
	}
	int e = errno;
	verdict(is_refusal(e) || e == ENOENT ? BLOCKED : INCONCLUSIVE, "open(/dev/mem, O_RDONLY): %s",
		strerror(e));
}
