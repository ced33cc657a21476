/* escape_fanotify: fanotify_init(FAN_CLASS_NOTIF, O_RDONLY), the variant that
 * needs CAP_SYS_ADMIN (no FAN_REPORT_FID). ESCAPED if it returned an fd; BLOCKED
 * on EPERM/EACCES/ENOSYS; anything else is inconclusive. */
#include "escape.h"
#include <sys/fanotify.h>

int main(void)
{
	alarm(20);
	int fd = fanotify_init(FAN_CLASS_NOTIF, O_RDONLY);
	if (fd >= 0) {
		close(fd);
		verdict(ESCAPED, "fanotify_init(FAN_CLASS_NOTIF, O_RDONLY): returned fd %d", fd);
	}
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "fanotify_init(FAN_CLASS_NOTIF, O_RDONLY): %s",
		strerror(e));
}
