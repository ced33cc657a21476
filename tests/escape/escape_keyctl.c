/* escape_keyctl: keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0), the
 * kernel keyring is not namespaced. ESCAPED if it returned an id (>= 0); BLOCKED
 * on EPERM/EACCES/ENOSYS; anything else is inconclusive. */
#include "escape.h"
#include <linux/keyctl.h>

int main(void)
{
	alarm(20);
	long id = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
	if (id >= 0)
		verdict(ESCAPED, "keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING): returned %ld", id);
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE,
		"keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING): %s", strerror(e));
}
