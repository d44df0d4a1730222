/* What every benchmark shares: a monotonic clock, medians with their confidence interval, and
 * inputs whose sums are exact. Header-only (each benchmark is one executable). */
#ifndef KILN_BENCH_UTIL_H
#define KILN_BENCH_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Monotonic time in milliseconds. */
static inline double bench_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* qsort order of doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n), n > 0 (sorts v; an even count averages the middle two). */
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The rank (from 0) of the lower end of the confidence interval of a median of n: the largest
 * j with P(Binomial(n, 1/2) <= j - 1) <= 2.5%, at least 0 (then the interval is [min, max]). */
static inline int bench_median_ci_rank(int n) {
    int j = 0;
    double cdf = 0, p = 1;
    for (int i = 0; i < n; i++)
        p *= 0.5;                 /* P(B = 0) */
    for (int k = 0; k < n; k++) { /* cdf = P(B <= k) */
        cdf += p;
        if (cdf > 0.025)
            break;
        j = k + 1;
        p = p * (n - k) / (k + 1);
    }
    return j;
}

/* Multiples of 1/4 in [-1, 1] from seed: sums, products and means over powers of two of them
 * are exact in f32 in any order, so results compare exactly. */
static inline void bench_fill_quarters(float *x, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((int)((s >> 33) % 9) - 4) * 0.25f;
    }
}

#endif
