/* escape_io_uring: read $ESCAPE_SECRET through a hand-made io_uring
 * (IORING_OP_OPENAT + IORING_OP_READ), which syscall filters cannot see.
 * ESCAPED only if the bytes read hold FLIGHTREC-SECRET; BLOCKED if
 * io_uring_setup/enter or the ops fail with EPERM/EACCES/ENOSYS (ENOENT for the open). */
#include "escape.h"
#include <linux/io_uring.h>
#include <stdint.h>
#include <sys/mman.h>

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#ifndef __NR_io_uring_enter
#define __NR_io_uring_enter 426
#endif

struct ring {
	int fd;
	unsigned *sq_tail, *sq_mask, *sq_array;
	unsigned *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
};

static void __attribute__((noreturn)) refused_or_not(const char *what, int e)
{
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "%s: %s", what, strerror(e));
}

static void ring_init(struct ring *r)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof p);
	long fd = syscall(__NR_io_uring_setup, 4, &p);
	if (fd < 0)
		refused_or_not("io_uring_setup(4)", errno);
	r->fd = (int)fd;

	size_t sq_size = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cq_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	int single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
	if (single && cq_size > sq_size)
		sq_size = cq_size;
	char *sq = mmap(NULL, sq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
			IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED)
		refused_or_not("mmap(IORING_OFF_SQ_RING)", errno);
	char *cq = sq;
	if (!single) {
		cq = mmap(NULL, cq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
			  IORING_OFF_CQ_RING);
		if (cq == MAP_FAILED)
			refused_or_not("mmap(IORING_OFF_CQ_RING)", errno);
	}
	r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
	if (r->sqes == MAP_FAILED)
		refused_or_not("mmap(IORING_OFF_SQES)", errno);
	r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
	r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	r->sq_array = (unsigned *)(sq + p.sq_off.array);
	r->cq_head = (unsigned *)(cq + p.cq_off.head);
	r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
	r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
}

/* Submit one sqe, wait for its completion and return cqe->res (-errno on failure). */
static int ring_run(struct ring *r, const struct io_uring_sqe *sqe, const char *what)
{
	unsigned tail = *r->sq_tail;
	unsigned idx = tail & *r->sq_mask;

	r->sqes[idx] = *sqe;
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
	unsigned to_submit = 1;
	for (;;) {
		unsigned head = *r->cq_head;

		if (head != __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) {
			int res = r->cqes[head & *r->cq_mask].res;

			__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
			return res;
		}
		long n = syscall(__NR_io_uring_enter, r->fd, to_submit, 1, IORING_ENTER_GETEVENTS, NULL, 0);
		if (n < 0 && errno != EINTR) {
			char msg[128];

			snprintf(msg, sizeof msg, "io_uring_enter(%s)", what);
			refused_or_not(msg, errno);
		}
		if (n > 0)
			to_submit = 0;
	}
}

int main(void)
{
	static char buf[65536];
	struct ring r;
	struct io_uring_sqe sqe;

	alarm(20);
	const char *secret = need_env("ESCAPE_SECRET");
	ring_init(&r);

	memset(&sqe, 0, sizeof sqe);
	sqe.opcode = IORING_OP_OPENAT;
	sqe.fd = AT_FDCWD;
	sqe.addr = (uint64_t)(uintptr_t)secret;
	sqe.open_flags = O_RDONLY | O_CLOEXEC;
	sqe.user_data = 1;
	int fd = ring_run(&r, &sqe, "OPENAT");
	if (fd < 0)
		verdict(is_refusal(-fd) || -fd == ENOENT ? BLOCKED : INCONCLUSIVE,
			"io_uring IORING_OP_OPENAT(%s): %s", secret, strerror(-fd));

	memset(&sqe, 0, sizeof sqe);
	sqe.opcode = IORING_OP_READ;
	sqe.fd = fd;
	sqe.addr = (uint64_t)(uintptr_t)buf;
	sqe.len = sizeof buf;
	sqe.off = 0;
	sqe.user_data = 2;
	int n = ring_run(&r, &sqe, "READ");
	close(fd);
	if (n < 0)
		verdict(is_refusal(-n) ? BLOCKED : INCONCLUSIVE, "io_uring IORING_OP_READ(%s): %s", secret,
			strerror(-n));
	if (memmem(buf, (size_t)n, SECRET_MARKER, strlen(SECRET_MARKER)) == NULL)
		verdict(BLOCKED, "io_uring OPENAT+READ(%s): %d bytes without " SECRET_MARKER, secret, n);
	verdict(ESCAPED, "io_uring OPENAT+READ(%s): %d bytes containing " SECRET_MARKER, secret, n);
}
