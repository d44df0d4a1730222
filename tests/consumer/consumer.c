/* A user's first program: a sum on the reference interpreter and on the default device, checked,
 * then weights read from a safetensors file it writes (kiln_safetensors.h, which needs cJSON:
 * the static links get it from the package's declared dependency), and no warning or error in
 * the log (the tests run it with the validation layer on). */
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#include <kiln/kiln.h>
#include <kiln/kiln_safetensors.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int warnings;

static void count_warnings(void *user, kiln_log_level level, const char *module,
                           const char *message) {
    (void)user;
    if (level <= KILN_LOG_WARN) {
        fprintf(stderr, "consumer: %s: %s\n", module, message);
        warnings++;
    }
}

/* A file of one BF16 tensor "w" of shape (2,) holding {1.5, -2}, and {"k": "v"} metadata. */
static int write_weights(char *path) {
    static const char header[] = "{\"__metadata__\":{\"k\":\"v\"},"
                                 "\"w\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}";
    unsigned char bytes[8 + sizeof header - 1 + 4] = {sizeof header - 1};
    memcpy(bytes + 8, header, sizeof header - 1);
    memcpy(bytes + 8 + sizeof header - 1, (const unsigned char[]){0xc0, 0x3f, 0x00, 0xc0}, 4);
    int fd = mkstemp(path);
    if (fd < 0)
        return 1;
    int failed = write(fd, bytes, sizeof bytes) != (ssize_t)sizeof bytes;
    return close(fd) != 0 || failed;
}

static int weights_on(kiln_context *ctx) {
    char path[] = "/tmp/kiln-consumer-XXXXXX";
    if (write_weights(path)) {
        fprintf(stderr, "consumer: cannot write %s\n", path);
        return 1;
    }
    kiln_safetensors *f = NULL;
    float out[2] = {0, 0};
    int failed = kiln_safetensors_open(ctx, path, &f) != KILN_OK ||
                 kiln_read(kiln_safetensors_load(f, "w", KILN_F32), out, sizeof out) != KILN_OK ||
                 out[0] != 1.5f || out[1] != -2.0f || !kiln_safetensors_metadata(f, "k");
    printf("%s: safetensors w = {%g, %g}%s\n", kiln_context_device_name(ctx), out[0], out[1],
           failed ? " (wrong)" : "");
    if (failed)
        fprintf(stderr, "consumer: %s\n", kiln_context_message(ctx));
    kiln_safetensors_close(f);
    remove(path);
    return failed;
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
    failed |= weights_on(ctx);
    kiln_context_destroy(ctx);
    return failed;
}

int main(void) {
    kiln_set_log_callback(count_warnings, NULL);
    printf("kiln %s\n", kiln_version());
    int failed = sum_on("interp") | sum_on(NULL);
    return failed || warnings ? 1 : 0;
}
