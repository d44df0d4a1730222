/* kilninfo --selftest (selftest.c). */
#ifndef KILN_TOOLS_KILNINFO_SELFTEST_H
#define KILN_TOOLS_KILNINFO_SELFTEST_H

#include "vkd.h"

#include <stdio.h>

/* Creates device index of inst, builds, validates and runs the selftest kernels on it and prints
 * one line per kernel plus the measurements to out. Returns the process exit status: 0 when
 * every kernel passed (or was skipped), 1 otherwise. */
int kilninfo_selftest(vkd_instance *inst, uint32_t index, FILE *out);

#endif
