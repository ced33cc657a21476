/* escape_core_pattern: open("/proc/sys/kernel/core_pattern", O_WRONLY) and close
 * it again, writing nothing. ESCAPED if the open succeeded; BLOCKED on
 * EPERM/EACCES/ENOSYS/EROFS/ENOENT. */
#include "escape.h"

int main(void)
{
	alarm(20);
	int fd = open("/proc/sys/kernel/core_pattern", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);	/* never write: it would act on the host */
		verdict(ESCAPED, "open(/proc/sys/kernel/core_pattern, O_WRONLY): returned fd %d "
			"(nothing written)", fd);
	}
	int e = errno;
	verdict(is_refusal(e) || e == EROFS || e == ENOENT ? BLOCKED : INCONCLUSIVE,
		"open(/proc/sys/kernel/core_pattern, O_WRONLY): %s", strerror(e));
}
