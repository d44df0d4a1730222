/* The table of known driver issues: what a real device showed that the Vulkan specification
 * does not explain, keyed by vendor, driver and version (as ncnn keeps its own). Kiln works
 * around each for every device, so nothing here changes what Kiln does; kilninfo lists the
 * entries that match a device, and docs/gpus.md tells how each was found. */
#include "vkd.h"

#include <string.h>

/* NVIDIA packs its driver version as major << 22 | minor << 14 | patch << 6. */
#define NV_VERSION(major, minor, patch)                                                            \
    (((uint32_t)(major) << 22) | ((uint32_t)(minor) << 14) | ((uint32_t)(patch) << 6))

static const vkd_driver_issue issues[] = {
    {.vendor_id = 0x10de,
     .driver_id = VK_DRIVER_ID_NVIDIA_PROPRIETARY,
     .min_version = NV_VERSION(580, 0, 0),
     .max_version = NV_VERSION(580, 159, 4),
     .seen = "580.159.04 on an H200",
     .what = "OpSRem of a negative dividend by a constant power of two returns a non-negative "
             "remainder (SRem(-1, 4) = 3)",
     .workaround = "floor division and modulo from unsigned division of the magnitudes "
                   "(engine/codegen/emit.c int_divmod)"},
    {.vendor_id = 0x10de,
     .driver_id = VK_DRIVER_ID_NVIDIA_PROPRIETARY,
     .min_version = NV_VERSION(580, 0, 0),
     .max_version = NV_VERSION(580, 159, 4),
     .seen = "580.159.04 on an H200",
     .what = "without SignedZeroInfNanPreserve, x != x folds to false (maximum(NaN, 1) = 1)",
     .workaround = "SignedZeroInfNanPreserve declared where allowed; NaN tests read the bits"},
    {.vendor_id = 0x10de,
     .driver_id = VK_DRIVER_ID_NVIDIA_PROPRIETARY,
     .min_version = NV_VERSION(580, 0, 0),
     .max_version = NV_VERSION(580, 159, 4),
     .seen = "580.159.04 on an H200",
     .what = "Sin and Cos lose accuracy outside [-pi, pi] (sin(100) 1.4e-5 off, sin(1e-30) = 0)",
     .workaround =
         "Kiln's own argument reduction and polynomials (engine/codegen/emit.c float_sincos)"},
    {.vendor_id = 0x10005, /* Mesa's */
     .driver_id = VK_DRIVER_ID_MESA_LLVMPIPE,
     .min_version = 0,
     .max_version = UINT32_MAX,
     .seen = "Mesa 22.3.6 (lavapipe)",
     .what = "loops stop after 65,535 iterations per invocation, silently; 1 / (a constant 0) "
             "is wrong even with SignedZeroInfNanPreserve",
     .workaround =
         "kernel loops split below the budget (engine/codegen/lower.c); docs/lavapipe.md"},
};

uint32_t vkd_driver_issues(const vkd_device_info *d, const vkd_driver_issue **out, uint32_t max) {
    uint32_t n = 0;
    for (size_t i = 0; i < sizeof issues / sizeof issues[0]; i++) {
        const vkd_driver_issue *e = &issues[i];
        if (d->props.vendorID != e->vendor_id || !d->has_driver ||
            (uint32_t)d->driver.driverID != e->driver_id ||
            d->props.driverVersion < e->min_version || d->props.driverVersion > e->max_version)
            continue;
        if (n < max)
            out[n] = e;
        n++;
    }
    return n;
}
