/* escape_syslog: klogctl(SYSLOG_ACTION_SIZE_BUFFER) on the host kernel log.
 * ESCAPED if it returned >= 0; BLOCKED on EPERM/EACCES/ENOSYS; anything else is
 * inconclusive. */
#include "escape.h"
#include <sys/klog.h>

#define SYSLOG_ACTION_SIZE_BUFFER 10

int main(void)
{
	alarm(20);
	int r = klogctl(SYSLOG_ACTION_SIZE_BUFFER, NULL, 0);
	if (r >= 0)
		verdict(ESCAPED, "syslog(SYSLOG_ACTION_SIZE_BUFFER): returned %d", r);
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "syslog(SYSLOG_ACTION_SIZE_BUFFER): %s",
		strerror(e));
}
