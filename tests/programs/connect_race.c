/* connect_race ADDR PORT_A PORT_B N: connects N times to ADDR through one
 * sockaddr while a second thread keeps rewriting its port between PORT_A
 * and PORT_B: the TOCTOU race against a supervisor that decides on the
 * address it read from this process's memory. Prints how many connects
 * reached each port (by getpeername, what the kernel connected to), then
 * on a second line one letter per connect in order: a, b, or x (failed).
 *
 * The port stays a while at each value (about 2/3 of the time at PORT_A,
 * in periods of microseconds, shorter than a decision takes): each read
 * sees either, and a read of PORT_A is often followed by a copy of
 * PORT_B. Back-to-back stores would leave what a reader sees to the
 * cache's timing, which can favour one value for a whole run. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in to;
static unsigned short port_a, port_b;
static atomic_int stop;

static void dwell(int n)
{
	for (int i = 0; i < n; i++) {
#if defined(__x86_64__) || defined(__i386__)
		__asm__ volatile("pause" ::: "memory");
#else
		__asm__ volatile("" ::: "memory");
#endif
	}
}

static void *flip(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		__atomic_store_n(&to.sin_port, htons(port_b), __ATOMIC_RELAXED);
		dwell(32);
		__atomic_store_n(&to.sin_port, htons(port_a), __ATOMIC_RELAXED);
		dwell(64);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: connect_race ADDR PORT_A PORT_B N\n");
		return 2;
	}
	to.sin_family = AF_INET;
	if (inet_pton(AF_INET, argv[1], &to.sin_addr) != 1)
		return 2;
	port_a = (unsigned short)atoi(argv[2]);
	port_b = (unsigned short)atoi(argv[3]);
	to.sin_port = htons(port_a);
	int n = atoi(argv[4]), at_a = 0, at_b = 0, failed = 0;
	char *order = calloc((size_t)(n > 0 ? n : 0) + 1, 1);
	pthread_t t;
	if (!order || pthread_create(&t, NULL, flip, NULL) != 0)
		return 1;
	for (int i = 0; i < n; i++) {
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in peer;
		socklen_t len = sizeof(peer);
		if (s < 0)
			return 1;
		if (connect(s, (struct sockaddr *)&to, sizeof(to)) == 0 &&
		    getpeername(s, (struct sockaddr *)&peer, &len) == 0) {
			at_a += ntohs(peer.sin_port) == port_a;
			at_b += ntohs(peer.sin_port) == port_b;
			order[i] = ntohs(peer.sin_port) == port_a ? 'a' : ntohs(peer.sin_port) == port_b ? 'b' : 'x';
		} else {
			failed++;
			order[i] = 'x';
		}
		close(s);
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	printf("a %d, b %d\n%s\n", at_a, at_b, order);
	fprintf(stderr, "%d of %d connects failed\n", failed, n);
	return 0;
}
