// check.h: PASS/FAIL lines for the C tests, counted into the "N passed, N failed" line at the end, and the
// relative error they measure tensors by.
#ifndef CHECK_H
#define CHECK_H
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
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

// max |a - b| / max |b|: relative to the tensor's scale, so tiny entries do not dominate
static double rel_err(const float *a, const float *b, size_t n) {
    double maxdiff = 0.0, maxref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > maxdiff || d != d) maxdiff = d != d ? INFINITY : d;
        if (fabs(b[i]) > maxref) maxref = fabs(b[i]);
    }
    return maxref > 0 ? maxdiff / maxref : maxdiff;
}

static int check_summary(void) {
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
#endif
