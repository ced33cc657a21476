/* escape.h: the pieces shared by the escape-attempt programs (escape_*.c).
 *
 * Each program makes one attempt and reports it with verdict(): exactly one
 * line "ESCAPED: ...", "BLOCKED: ..." or "INCONCLUSIVE: ..." on stdout and exit
 * status 0, 1 or 2. Which errno values count as blocked is each program's own
 * rule; is_refusal() is only the common core (EPERM/EACCES/ENOSYS).
 *
 * Header-only (every function is static), C11 with GNU extensions. Include it
 * before any system header: it defines _GNU_SOURCE. */
#ifndef FLIGHTREC_TESTS_ESCAPE_H
#define FLIGHTREC_TESTS_ESCAPE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

enum { ESCAPED = 0, BLOCKED = 1, INCONCLUSIVE = 2 };

/* Print the one verdict line on stdout and exit with its code. Never call
 * this from a forked child: children leave with _exit(). Not async-signal-safe:
 * signal handlers use signal_verdict(). */
static void __attribute__((noreturn, unused, format(printf, 2, 3)))
verdict(int code, const char *fmt, ...)
{
	static const char *const tag[] = { "ESCAPED", "BLOCKED", "INCONCLUSIVE" };
	va_list ap;

	printf("%s: ", tag[code]);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	exit(code);
}

static void __attribute__((noreturn, unused))
write_line_and_exit(int code, const char *line, size_t len)
{
	if (write(STDOUT_FILENO, line, len) < 0)
		_exit(code);
	_exit(code);
}

/* The verdict from a signal handler, async-signal-safe: code is one of the
 * enum names and text a string literal; write(2)s the line "CODE: text\n" and
 * _exit(code)s. */
#define signal_verdict(code, text) \
	write_line_and_exit((code), #code ": " text "\n", sizeof(#code ": " text "\n") - 1)

/* The errno values with which a sandbox refuses a call. */
static int __attribute__((unused)) is_refusal(int e)
{
	return e == EPERM || e == EACCES || e == ENOSYS;
}

/* The value of an environment variable the runner sets; INCONCLUSIVE if it is
 * unset or empty. */
static __attribute__((unused)) const char *need_env(const char *name)
{
	const char *v = getenv(name);

	if (v == NULL || *v == '\0')
		verdict(INCONCLUSIVE, "environment variable %s is not set", name);
	return v;
}

/* For a call made with arguments the kernel always rejects once past its
 * privilege check: r == 0, or any errno e but a refusal, means the call got
 * through to the kernel's own checks (ESCAPED); a refusal is BLOCKED. */
static void __attribute__((noreturn, unused))
kernel_checks_verdict(const char *what, long r, int e)
{
	if (r == 0)
		verdict(ESCAPED, "%s: returned 0", what);
	verdict(is_refusal(e) ? BLOCKED : ESCAPED, "%s: %s%s", what, strerror(e),
		is_refusal(e) ? "" : " (reached the kernel's own checks)");
}

/* ---- forked children ---- */

/* pipe(p), then fork(); INCONCLUSIVE if either fails. Returns fork's result. */
static pid_t __attribute__((unused)) fork_with_pipe(int p[2])
{
	if (pipe(p) != 0)
		verdict(INCONCLUSIVE, "pipe: %s", strerror(errno));
	pid_t child = fork();
	if (child < 0)
		verdict(INCONCLUSIVE, "fork: %s", strerror(errno));
	return child;
}

/* SIGKILL the child and reap it. */
static void __attribute__((unused)) kill_child(pid_t child)
{
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}

/* In the parent: close the pipe's write end and wait for the child's one-byte
 * "ready"; if it does not come, kill the child and give INCONCLUSIVE. */
static void __attribute__((unused)) wait_child_ready(int p[2], pid_t child)
{
	char ready;

	close(p[1]);
	if (read(p[0], &ready, 1) != 1) {
		kill_child(child);
		verdict(INCONCLUSIVE, "child did not start");
	}
}

/* A forked child that died by SIGSYS (seccomp) or SIGKILL was stopped by the
 * sandbox; any other death is inconclusive. Does not return. */
static void __attribute__((noreturn, unused))
child_death_verdict(const char *what, int status)
{
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);

		verdict(sig == SIGSYS || sig == SIGKILL ? BLOCKED : INCONCLUSIVE,
			"%s: child killed by signal %d (%s)", what, sig, strsignal(sig));
	}
	verdict(INCONCLUSIVE, "%s: child exited (status %d) without reporting", what,
		WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* ---- reading $ESCAPE_SECRET ---- */

#define SECRET_MARKER "FLIGHTREC-SECRET"

/* Room for try_read_secret()'s description of a path of up to 4200 bytes. */
#define SECRET_MSG_CAP 4352

/* Open path read-only, read it and look for the marker. Returns the verdict
 * code and describes the outcome in msg. A hidden path (ENOENT) and content
 * without the marker count as blocked. */
static int __attribute__((unused)) try_read_secret(const char *path, char *msg, size_t cap)
{
	static char buf[65536];
	size_t len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		int e = errno;

		snprintf(msg, cap, "open(%s): %s", path, strerror(e));
		return is_refusal(e) || e == ENOENT ? BLOCKED : INCONCLUSIVE;
	}
	while (len < sizeof buf) {
		ssize_t n = read(fd, buf + len, sizeof buf - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			snprintf(msg, cap, "read(%s): %s", path, strerror(e));
			return is_refusal(e) ? BLOCKED : INCONCLUSIVE;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (memmem(buf, len, SECRET_MARKER, strlen(SECRET_MARKER)) == NULL) {
		snprintf(msg, cap, "open+read(%s): %zu bytes without " SECRET_MARKER, path, len);
		return BLOCKED;
	}
	snprintf(msg, cap, "open+read(%s): %zu bytes containing " SECRET_MARKER, path, len);
	return ESCAPED;
}

/* try_read_secret(path), and its outcome as the verdict. */
static void __attribute__((noreturn, unused)) read_secret_verdict(const char *path)
{
	char msg[SECRET_MSG_CAP];
	int code = try_read_secret(path, msg, sizeof msg);

	verdict(code, "%s", msg);
}

/* ---- sethostname / setdomainname ---- */

/* set("escaped", 7), restoring the old name (uname's nodename, or domainname if
 * domain) at once; call names set in the message. ESCAPED if it returned 0;
 * BLOCKED on a refusal. */
static void __attribute__((noreturn, unused))
set_uts_name_verdict(const char *call, int (*set)(const char *, size_t), int domain)
{
	struct utsname old;

	if (uname(&old) != 0)
		verdict(INCONCLUSIVE, "uname: %s", strerror(errno));
	const char *name = domain ? old.domainname : old.nodename;
	if (set("escaped", 7) == 0) {
		if (set(name, strlen(name)) != 0)
			verdict(ESCAPED, "%s(escaped): succeeded; RESTORING \"%s\" FAILED: %s", call,
				name, strerror(errno));
		verdict(ESCAPED, "%s(escaped): succeeded (restored \"%s\")", call, name);
	}
	int e = errno;
	verdict(is_refusal(e) ? BLOCKED : INCONCLUSIVE, "%s(escaped): %s", call, strerror(e));
}

#endif /* FLIGHTREC_TESTS_ESCAPE_H */
