/* escape_sethostname: sethostname("escaped"), restoring the old name at once.
 * ESCAPED if it returned 0; BLOCKED on EPERM/EACCES/ENOSYS. (Inside a private UTS
 * namespace this changes only the sandbox's own name.) */
#include "escape.h"

int main(void)
{
	alarm(20);
	set_uts_name_verdict("sethostname", sethostname, 0);
}
