/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Minimal TAP helpers shared by the C test programs: `ok N - name` or
 * `not ok N - name` followed by `# ` diagnostics; exit status 1 if any
 * test failed.
 */
#ifndef TT_TAP_H
#define TT_TAP_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed, tap_cur_failed;
static const char *tap_cur;

/* Starts a test; diagnostics are buffered until it ends. */
static char tap_diag[4096];

static void tap_begin(const char *name)
{
	tap_cur = name;
	tap_cur_failed = 0;
	tap_diag[0] = 0;
}

/* Records a failed check with a printf-style diagnostic. */
static void __attribute__((format(printf, 1, 2))) tap_fail(const char *fmt, ...)
{
	size_t len = strlen(tap_diag);
	va_list ap;

	tap_cur_failed = 1;
	if (len + 3 >= sizeof(tap_diag))
		return;
	strcat(tap_diag, "# ");
	len += 2;
	va_start(ap, fmt);
	vsnprintf(tap_diag + len, sizeof(tap_diag) - len - 1, fmt, ap);
	va_end(ap);
	strcat(tap_diag, "\n");
}

static void tap_end(void)
{
	tap_n++;
	if (tap_cur_failed)
		tap_failed++;
	printf("%sok %d - %s\n%s", tap_cur_failed ? "not " : "", tap_n, tap_cur, tap_diag);
	fflush(stdout);
}

/* CHECK(cond, fmt, ...): records a failure unless cond. */
#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond))                                                   \
			tap_fail(__VA_ARGS__);                                 \
	} while (0)

static int tap_exit(void)
{
	printf("# summary: %d ok, %d not ok\n", tap_n - tap_failed, tap_failed);
	return tap_failed ? 1 : 0;
}

#endif
