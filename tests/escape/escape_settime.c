/* escape_settime: clock_settime(CLOCK_REALTIME) to the time read just before
 * (harmless; the realtime clock is not namespaced). ESCAPED if it returned 0;
 * BLOCKED on EPERM/EACCES/ENOSYS. */
#include "escape.h"
#include <time.h>

int main(void)
{
	struct timespec now;

	alarm(20);
	if (clock_gettime(CLOCK_REALTIME, &now) != 0)
		verdict(INCONCLUSIVE, "clock_gettime(CLOCK_REALTIME): %s", strerror(errno));
	if (clock_settime(CLOCK_REALTIME, &now) == 0)
		verdict(ESCAPED, "clock_settime(CLOCK_REALTIME, now): succeeded");
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "clock_settime(CLOCK_REALTIME, now): %s",
		strerror(e));
}
