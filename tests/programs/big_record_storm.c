/* big_record_storm TARGET THREADS OPENS: THREADS threads each open paths
 * of ~4 KB (a record of ~4 KB each, the largest a path makes) OPENS times
 * as fast as they can, and TARGET instead at every 50th: an attempt to
 * outrun backpressure and hide the TARGET opens in a gap of the record.
 * The work is counted, not timed: a paused storm takes longer, not less.
 * Prints how many times TARGET was opened, and how many of those failed:
 *   attempts N failed M */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char long_path[4000];
static const char *target;
static long opens;
static atomic_long attempts, failed;

static void *storm(void *arg)
{
	(void)arg;
	for (long i = 1; i <= opens; i++) {
		int fd = open(i % 50 ? long_path : target, O_RDONLY | O_CLOEXEC);
		if (i % 50 == 0) {
			atomic_fetch_add(&attempts, 1);
			if (fd < 0)
				atomic_fetch_add(&failed, 1);
		}
		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: big_record_storm TARGET THREADS OPENS\n");
		return 2;
	}
	target = argv[1];
	int threads = atoi(argv[2]);
	opens = atol(argv[3]);
	if (threads < 1 || threads > 1000 || opens < 1) {
		fprintf(stderr, "big_record_storm: THREADS in 1..1000, OPENS >= 1\n");
		return 2;
	}
	/* "/x/x/x/...": no such directory, so each open fails at once, after
	 * the kernel (and the probe) copied the whole path. */
	for (size_t i = 0; i + 2 < sizeof(long_path); i += 2)
		memcpy(long_path + i, "/x", 2);
	pthread_t *t = calloc((size_t)threads, sizeof(*t));
	int made = 0;
	for (; made < threads; made++)
		if (pthread_create(&t[made], NULL, storm, NULL) != 0) {
			fprintf(stderr, "big_record_storm: cannot make thread %d\n", made);
			break;
		}
	for (int i = 0; i < made; i++)
		pthread_join(t[i], NULL);
	printf("attempts %ld failed %ld\n", atomic_load(&attempts), atomic_load(&failed));
	return made == threads ? 0 : 1;
}
