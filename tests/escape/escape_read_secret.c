/* escape_read_secret: open and read the host file $ESCAPE_SECRET, which lies
 * outside the sandbox's allowed tree. ESCAPED if the content holds
 * FLIGHTREC-SECRET; BLOCKED on EPERM/EACCES/ENOSYS/ENOENT or withheld content. */
#include "escape.h"

int main(void)
{
	alarm(20);
	read_secret_verdict(need_env("ESCAPE_SECRET"));
}
