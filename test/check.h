// check.h: PASS/FAIL lines for the C tests, counted into the "N passed, N failed" line at the end.
#ifndef CHECK_H
#define CHECK_H
#include <stdarg.h>
#include <stdio.h>

static int passed = 0, failed = 0;

static void check(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (ok) passed++; else failed++;
}

static int check_summary(void) {
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
#endif
