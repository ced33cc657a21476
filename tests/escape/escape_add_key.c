/* escape_add_key: add_key("user", "fr_escape", "x", 1, KEY_SPEC_PROCESS_KEYRING).
 * ESCAPED if it returned a key serial (the key is unlinked again); BLOCKED on
 * EPERM/EACCES/ENOSYS; anything else is inconclusive. */
#include "escape.h"
#include <linux/keyctl.h>

int main(void)
{
	alarm(20);
	long key = syscall(SYS_add_key, "user", "fr_escape", "x", (size_t)1, KEY_SPEC_PROCESS_KEYRING);
	if (key >= 0) {
		syscall(SYS_keyctl, KEYCTL_UNLINK, key, KEY_SPEC_PROCESS_KEYRING);
		verdict(ESCAPED, "add_key(user, fr_escape, KEY_SPEC_PROCESS_KEYRING): returned key %ld", key);
	}
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE,
		"add_key(user, fr_escape, KEY_SPEC_PROCESS_KEYRING): %s", strerror(e));
}
