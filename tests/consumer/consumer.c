/* A user's first program: a sum on the reference interpreter and on the default device, checked,
 * and no warning or error in the log (the tests run it with the validation layer on). */
#include <kiln/kiln.h>

#include <stdio.h>

static int warnings;

static void count_warnings(void *user, kiln_log_level level, const char *module,
                           const char *message) {
    (void)user;
    if (level <= KILN_LOG_WARN) {
        fprintf(stderr, "consumer: %s: %s\n", module, message);
        warnings++;
    }
}

static int sum_on(const char *device) {
    kiln_context *ctx = NULL;
    kiln_context_options opt = {.device = device};
    if (kiln_context_create(&opt, &ctx) != KILN_OK) {
        fprintf(stderr, "consumer: no context on %s\n", device ? device : "the default device");
        return 1;
    }
    float data[6] = {1, 2, 3, 4, 5, 6}, out[2] = {0, 0};
    kiln_tensor *a = kiln_from_data(ctx, KILN_F32, 2, (const int64_t[]){2, 3}, data);
    kiln_tensor *s = kiln_sum(a, 1, (const int32_t[]){1}, false);
    int failed = kiln_read(s, out, sizeof out) != KILN_OK || out[0] != 6 || out[1] != 15;
    printf("%s: sum = {%g, %g}%s\n", kiln_context_device_name(ctx), out[0], out[1],
           failed ? " (wrong)" : "");
    if (failed)
        fprintf(stderr, "consumer: %s\n", kiln_context_message(ctx));
    kiln_context_destroy(ctx);
    return failed;
}

int main(void) {
    kiln_set_log_callback(count_warnings, NULL);
    printf("kiln %s\n", kiln_version());
    int failed = sum_on("interp") | sum_on(NULL);
    return failed || warnings ? 1 : 0;
}
