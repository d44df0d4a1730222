/* kilninfo --selftest (selftest.c). */
#ifndef KILN_TOOLS_KILNINFO_SELFTEST_H
#define KILN_TOOLS_KILNINFO_SELFTEST_H

#include "vkd.h"

#include <stdbool.h>
#include <stdio.h>

/* Creates device index of inst, builds, validates and runs the selftest kernels on it and
 * reports each kernel's verdict and the measurements to out (text, or JSON: the keys are in
 * tools/kilninfo/README.md). Returns the process exit status: 0 when every kernel passed (or
 * was skipped), 1 otherwise. */
/* profile: the device profile the device is seen through (NULL: none; docs/gpus.md). */
int kilninfo_selftest(vkd_instance *inst, uint32_t index, const vkd_profile *profile, FILE *out,
                      bool json);

#endif
