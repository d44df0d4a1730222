/* kilninfo: its JSON report parsed with python3's json module and compared with what vk/
 * reports; bad usage and a machine without a driver give clear failures. */
#include "vk_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

/* Runs a shell command; returns its exit status and its output (stdout and stderr).
 * kilninfo runs without leak detection: the Vulkan loader unloads lavapipe at
 * vkDestroyInstance and the driver's own leak then cannot be attributed or suppressed. Kiln's
 * leaks are checked in process by the vk/ tests, where the driver stays loaded. */
static int run(const char *cmd, char *out, size_t cap) {
    char full[4200];
    snprintf(full, sizeof full, "ASAN_OPTIONS=detect_leaks=0 %s", cmd);
    FILE *p = popen(full, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Extracts "key=value" lines for the default device with python3's json module. */
static const char extract_py[] =
    "import json, sys\n"
    "d = json.load(sys.stdin)\n"
    "dev = [x for x in d['devices'] if x['default']][0]\n"
    "c, s, f = dev['compute'], dev['subgroup'], dev['features']\n"
    "fields = {\n"
    "  'default_device': d['default_device'], 'index': dev['index'], 'name': dev['name'],\n"
    "  'type': dev['type'], 'vendor_id': int(dev['vendor_id'], 16),\n"
    "  'device_id': int(dev['device_id'], 16), 'extensions': len(dev['extensions']),\n"
    "  'issues': len(dev['known_driver_issues']),\n"
    "  'driver_id': dev['driver_id'], 'api_version': dev['api_version'],\n"
    "  'pipeline_cache_uuid': dev['pipeline_cache_uuid'],\n"
    "  'max_push_constants_size': c['max_push_constants_size'],\n"
    "  'max_storage_buffer_range': c['max_storage_buffer_range'],\n"
    "  'max_workgroup_invocations': c['max_workgroup_invocations'],\n"
    "  'max_shared_memory_size': c['max_shared_memory_size'],\n"
    "  'max_workgroup_count_x': c['max_workgroup_count'][0],\n"
    "  'subgroup_size': s['size'], 'int64': int(f['int64']), 'float16': int(f['float16']),\n"
    "  'storage_buffer_8bit': int(f['storage_buffer_8bit']),\n"
    "  'memory_types': len(dev['memory']['types']), 'queue_families': len(dev['queue_families']),\n"
    "}\n"
    "for k, v in fields.items(): print('%s=%s' % (k, v))\n";

static const char *field(const char *out, const char *key, char *buf, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "%s=", key);
    for (const char *p = out; (p = strstr(p, pat)); p++) {
        if (p == out || p[-1] == '\n') {
            p += strlen(pat);
            size_t n = strcspn(p, "\n");
            snprintf(buf, cap, "%.*s", (int)n, p);
            return buf;
        }
    }
    fail_msg("kilninfo --json has no field %s:\n%s", key, out);
    return NULL;
}

static void expect_u64(const char *out, const char *key, uint64_t want) {
    char buf[128], w[32];
    snprintf(w, sizeof w, "%llu", (unsigned long long)want);
    assert_string_equal(field(out, key, buf, sizeof buf), w);
}

static void test_kilninfo_json_matches_vk(void **state) {
    vk_fixture *f = *state;
    static char out[1 << 16];
    char cmd[4096];
    FILE *py = fopen("kilninfo_extract.py", "w");
    assert_non_null(py);
    fputs(extract_py, py);
    fclose(py);
    snprintf(cmd, sizeof cmd, "'%s' --json | '%s' kilninfo_extract.py 2>&1", KILNINFO_PATH,
             PYTHON_PATH);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    uint32_t def = 0;
    base_error err = {0};
    assert_int_equal(vkd_instance_select(f->inst, NULL, &def, &err), KILN_OK);
    const vkd_device_info *d = vkd_instance_device(f->inst, def);
    const VkPhysicalDeviceLimits *l = &d->props.limits;
    char buf[300];
    expect_u64(out, "default_device", def);
    expect_u64(out, "index", def);
    assert_string_equal(field(out, "name", buf, sizeof buf), d->props.deviceName);
    expect_u64(out, "vendor_id", d->props.vendorID);
    expect_u64(out, "device_id", d->props.deviceID);
    expect_u64(out, "driver_id", d->driver.driverID);
    uint32_t extensions = vkd_instance_device_extensions(f->inst, def, NULL, 0);
    assert_true(extensions > 0);
    expect_u64(out, "extensions", extensions);
    expect_u64(out, "issues", vkd_driver_issues(d, NULL, 0));
    expect_u64(out, "max_push_constants_size", l->maxPushConstantsSize);
    expect_u64(out, "max_storage_buffer_range", l->maxStorageBufferRange);
    expect_u64(out, "max_workgroup_invocations", l->maxComputeWorkGroupInvocations);
    expect_u64(out, "max_shared_memory_size", l->maxComputeSharedMemorySize);
    expect_u64(out, "max_workgroup_count_x", l->maxComputeWorkGroupCount[0]);
    expect_u64(out, "subgroup_size", d->subgroup.subgroupSize);
    expect_u64(out, "int64", d->features.shaderInt64);
    expect_u64(out, "float16", d->float16_int8.shaderFloat16);
    expect_u64(out, "storage_buffer_8bit", d->storage8.storageBuffer8BitAccess);
    expect_u64(out, "memory_types", d->memory.memoryTypeCount);
    expect_u64(out, "queue_families", d->queue_family_count);
    snprintf(buf, sizeof buf, "%u.%u.%u", VK_API_VERSION_MAJOR(d->props.apiVersion),
             VK_API_VERSION_MINOR(d->props.apiVersion), VK_API_VERSION_PATCH(d->props.apiVersion));
    char got[64];
    assert_string_equal(field(out, "api_version", got, sizeof got), buf);
    const uint8_t *u = d->props.pipelineCacheUUID;
    snprintf(buf, sizeof buf, "%02x%02x%02x%02x-%02x%02x-", u[0], u[1], u[2], u[3], u[4], u[5]);
    assert_memory_equal(field(out, "pipeline_cache_uuid", got, sizeof got), buf, strlen(buf));
    remove("kilninfo_extract.py");
}

static void test_kilninfo_text_names_the_device(void **state) {
    vk_fixture *f = *state;
    static char out[1 << 16];
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' --device %u 2>&1", KILNINFO_PATH, f->device_index);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    const vkd_device_info *d = vkd_instance_device(f->inst, f->device_index);
    assert_non_null(strstr(out, d->props.deviceName));
    assert_non_null(strstr(out, "max_push_constants_size: "));
    assert_non_null(strstr(out, "subgroup:"));
}

static void test_kilninfo_rejects_bad_usage(void **state) {
    (void)state;
    static char out[4096];
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' --device 4000 2>&1", KILNINFO_PATH);
    assert_int_equal(run(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "device 4000 does not exist"));
    snprintf(cmd, sizeof cmd, "'%s' --frobnicate 2>&1", KILNINFO_PATH);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "usage: kilninfo"));
    snprintf(cmd, sizeof cmd, "'%s' --device x 2>&1", KILNINFO_PATH);
    assert_int_equal(run(cmd, out, sizeof out), 2);
}

static void test_kilninfo_without_a_driver_fails_clearly(void **state) {
    (void)state;
    static char out[4096];
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "VK_ICD_FILENAMES=/nonexistent/icd.json VK_DRIVER_FILES=/nonexistent/icd.json "
             "KILN_VALIDATION=0 '%s' --json 2>&1",
             KILNINFO_PATH);
    assert_int_equal(run(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "kilninfo: "));
    assert_non_null(strstr(out, "mesa-vulkan-drivers"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kilninfo_json_matches_vk),
        cmocka_unit_test(test_kilninfo_text_names_the_device),
        cmocka_unit_test(test_kilninfo_rejects_bad_usage),
        cmocka_unit_test(test_kilninfo_without_a_driver_fails_clearly),
    };
    return cmocka_run_group_tests(tests, vk_fixture_setup, vk_fixture_teardown);
}
