/* escape_packet_socket: socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL)) (needs
 * CAP_NET_RAW). ESCAPED if it returned an fd; BLOCKED on EPERM/EACCES/ENOSYS/
 * EAFNOSUPPORT; anything else is inconclusive. */
#include "escape.h"
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <sys/socket.h>

int main(void)
{
	alarm(20);
	int s = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (s >= 0) {
		close(s);
		verdict(ESCAPED, "socket(AF_PACKET, SOCK_RAW, ETH_P_ALL): returned fd %d", s);
	}
	int e = errno;
	verdict(is_refusal(e) || e == EAFNOSUPPORT ? BLOCKED : INCONCLUSIVE,
		"socket(AF_PACKET, SOCK_RAW, ETH_P_ALL): %s", strerror(e));
}
