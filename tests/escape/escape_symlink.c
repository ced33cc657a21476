/* escape_symlink: create a symlink in the work directory pointing at
 * $ESCAPE_SECRET and read through it. ESCAPED if the content holds
 * FLIGHTREC-SECRET; BLOCKED if symlink/open/read are refused or content withheld. */
#include "escape.h"

int main(void)
{
	char link[64], msg[SECRET_MSG_CAP];

	alarm(20);
	const char *secret = need_env("ESCAPE_SECRET");
	snprintf(link, sizeof link, "./flightrec-escape-link.%d", (int)getpid());
	unlink(link);
	if (symlink(secret, link) != 0) {
		int e = errno;

		verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "symlink(%s, %s): %s",
			secret, link, strerror(e));
	}
	int code = try_read_secret(link, msg, sizeof msg);
	unlink(link);
	verdict(code, "symlink -> %s, then %s", secret, msg);
}
