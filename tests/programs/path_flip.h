/* A path buffer a second thread keeps rewriting between two names of one
 * length, byte by byte: the TOCTOU race against a supervisor that decides
 * on a path it read from this process's memory (grant_race, exec_race). */
#ifndef FLIGHTREC_TEST_PATH_FLIP_H
#define FLIGHTREC_TEST_PATH_FLIP_H
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

static char flip_path[4096];
static const char *flip_a, *flip_b;
static size_t flip_len;
static atomic_int flip_stop;
static pthread_t flip_thread;

static inline void *flip_run(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&flip_stop, memory_order_relaxed)) {
		for (size_t i = 0; i < flip_len; i++)
			__atomic_store_n(&flip_path[i], flip_b[i], __ATOMIC_RELAXED);
		for (size_t i = 0; i < flip_len; i++)
			__atomic_store_n(&flip_path[i], flip_a[i], __ATOMIC_RELAXED);
	}
	return NULL;
}

/* 0 once flip_path holds a and the thread flips it; -1 if a and b differ
 * in length, are too long, or no thread starts. */
static inline int flip_start(const char *a, const char *b)
{
	flip_a = a;
	flip_b = b;
	flip_len = strlen(a);
	if (strlen(b) != flip_len || flip_len >= sizeof(flip_path))
		return -1;
	memcpy(flip_path, a, flip_len);
	return pthread_create(&flip_thread, NULL, flip_run, NULL) == 0 ? 0 : -1;
}

static inline void flip_end(void)
{
	atomic_store(&flip_stop, 1);
	pthread_join(flip_thread, NULL);
}
#endif
