/* escape_proc_root: read $ESCAPE_SECRET through /proc/1/root, i.e. through
 * pid 1's root directory. ESCAPED if the content holds FLIGHTREC-SECRET;
 * BLOCKED on EPERM/EACCES/ENOSYS/ENOENT or withheld content. */
#include "escape.h"

int main(void)
{
	char path[4200];

	alarm(20);
	const char *secret = need_env("ESCAPE_SECRET");
	snprintf(path, sizeof path, "/proc/1/root%s", secret);
	read_secret_verdict(path);
}
