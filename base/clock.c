/* Elapsed time for statistics and polling. */
#include "base.h"

#include <time.h>

int64_t base_now_ns(void) {
    struct timespec ts;
    if (timespec_get(&ts, TIME_UTC) != TIME_UTC)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
