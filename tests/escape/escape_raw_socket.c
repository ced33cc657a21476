/* escape_raw_socket: socket(AF_INET, SOCK_RAW, IPPROTO_ICMP) (needs CAP_NET_RAW).
 * ESCAPED if it returned an fd; BLOCKED on EPERM/EACCES/ENOSYS/EAFNOSUPPORT;
 * anything else is inconclusive. */
#include "escape.h"
#include <netinet/in.h>
#include <sys/socket.h>

int main(void)
{
	alarm(20);
	int s = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
	if (s >= 0) {
		close(s);
		verdict(ESCAPED, "socket(AF_INET, SOCK_RAW, IPPROTO_ICMP): returned fd %d", s);
	}
	int e = errno;
	verdict(is_refusal(e) || e == EAFNOSUPPORT ? BLOCKED : INCONCLUSIVE,
		"socket(AF_INET, SOCK_RAW, IPPROTO_ICMP): %s", strerror(e));
}
