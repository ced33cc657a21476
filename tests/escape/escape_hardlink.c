/* escape_hardlink: link($ESCAPE_SECRET, "./hl") and read ./hl. ESCAPED if the
 * content holds FLIGHTREC-SECRET; BLOCKED if link fails with EPERM/EACCES/
 * ENOSYS/EXDEV/ENOENT, or the read is refused or withheld. ./hl is removed. */
#include "escape.h"

int main(void)
{
	char msg[SECRET_MSG_CAP];

	alarm(20);
	const char *secret = need_env("ESCAPE_SECRET");
	unlink("./hl");
	if (link(secret, "./hl") != 0) {
		int e = errno;

		verdict(is_refusal(e) || e == EXDEV || e == ENOENT ? BLOCKED : INCONCLUSIVE,
			"link(%s, ./hl): %s", secret, strerror(e));
	}
	int code = try_read_secret("./hl", msg, sizeof msg);
	unlink("./hl");
	verdict(code, "link(%s, ./hl) succeeded, then %s", secret, msg);
}
