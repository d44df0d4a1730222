/* examples/idx.c: IDX files written at test time (zlib) into a temporary directory: a good
 * small data set (gzipped and plain), then every way a file can be wrong: every truncated
 * prefix, a truncated payload, a wrong magic, type code or ndim, huge dims, an empty file,
 * trailing bytes, a corrupt gzip stream, images and labels that disagree. Each is its status and
 * a message naming the file and the field. */
#include "../../examples/idx.h"

#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

static char dir[64];

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/kiln_test_idx_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int teardown(void **state) {
    (void)state;
    return nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* dir/name in a static buffer of its own per slot (two paths live at once at most). */
static const char *path_of(const char *name, int slot) {
    static char paths[2][128];
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", dir, name);
    return paths[slot];
}

/* An IDX file image: the magic, ndim dims (big-endian) and payload bytes 0, 1, 2, ... (mod
 * 10: valid labels) in buf; returns its length. */
static size_t idx_image(uint8_t *buf, uint32_t magic, uint32_t ndim, const uint32_t *dims,
                        size_t payload) {
    size_t n = 0;
    for (uint32_t i = 0; i <= ndim; i++) {
        uint32_t v = i == 0 ? magic : dims[i - 1];
        for (int b = 3; b >= 0; b--)
            buf[n++] = (uint8_t)(v >> (8 * b));
    }
    for (size_t i = 0; i < payload; i++)
        buf[n++] = (uint8_t)(i % 10);
    return n;
}

static void write_raw(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void write_gz(const char *path, const void *bytes, size_t n) {
    gzFile gz = gzopen(path, "wb");
    assert_non_null(gz);
    if (n)
        assert_int_equal(gzwrite(gz, bytes, (unsigned)n), (int)n);
    assert_int_equal(gzclose(gz), Z_OK);
}

/* The whole file in a malloc'd buffer; *n its length. */
static uint8_t *read_raw(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *buf = malloc(1 << 16);
    assert_non_null(buf);
    *n = fread(buf, 1, 1 << 16, f);
    assert_true(feof(f));
    fclose(f);
    return buf;
}

/* Reads path as ndim dims, expects status, and a message "<path>: <field>: ..." that contains
 * want (or NULL). */
static void expect_failure(const char *path, uint32_t ndim, idx_status status, const char *field,
                           const char *want) {
    char msg[IDX_MESSAGE_SIZE];
    idx_array a;
    idx_status st = idx_read(path, ndim, &a, msg, sizeof msg);
    if (st != status)
        fail_msg("%s: status %s, expected %s (%s)", path, idx_status_string(st),
                 idx_status_string(status), msg);
    assert_null(a.data);
    assert_int_equal(a.bytes, 0);
    char begins[256];
    snprintf(begins, sizeof begins, "%s: %s: ", path, field);
    if (strncmp(msg, begins, strlen(begins)) != 0)
        fail_msg("the message \"%s\" does not begin with \"%s\"", msg, begins);
    if (want && !strstr(msg, want))
        fail_msg("the message \"%s\" does not contain \"%s\"", msg, want);
}

static void test_examples_idx_reads_a_gzipped_data_set(void **state) {
    (void)state;
    uint8_t buf[256];
    size_t n = idx_image(buf, 0x803, 3, (uint32_t[]){3, 2, 4}, 24);
    write_gz(path_of("images.gz", 0), buf, n);
    n = idx_image(buf, 0x801, 1, (uint32_t[]){3}, 3);
    write_gz(path_of("labels.gz", 1), buf, n);
    idx_dataset d;
    char msg[IDX_MESSAGE_SIZE];
    idx_status st =
        idx_dataset_load(path_of("images.gz", 0), path_of("labels.gz", 1), 10, &d, msg, sizeof msg);
    if (st != IDX_OK)
        fail_msg("%s", msg);
    assert_int_equal(d.count, 3);
    assert_int_equal(d.rows, 2);
    assert_int_equal(d.cols, 4);
    assert_int_equal(d.images.ndim, 3);
    assert_int_equal(d.images.bytes, 24);
    assert_int_equal(d.labels.bytes, 3);
    for (int i = 0; i < 24; i++)
        assert_int_equal(d.images.data[i], i % 10);
    assert_int_equal(d.labels.data[2], 2);
    idx_dataset_finish(&d);
    assert_null(d.images.data);
    idx_dataset_finish(NULL);
}

/* gzread reads a file that is not gzipped as it is. */
static void test_examples_idx_reads_a_plain_file(void **state) {
    (void)state;
    uint8_t buf[64];
    size_t n = idx_image(buf, 0x801, 1, (uint32_t[]){5}, 5);
    write_raw(path_of("plain", 0), buf, n);
    idx_array a;
    assert_int_equal(idx_read(path_of("plain", 0), 1, &a, NULL, 0), IDX_OK);
    assert_int_equal(a.dims[0], 5);
    assert_int_equal(a.bytes, 5);
    static const uint8_t want[5] = {0, 1, 2, 3, 4};
    assert_memory_equal(a.data, want, 5);
    idx_array_finish(&a);
}

/* Every proper prefix of a gzipped file and of a plain one is refused, with a message. */
static void test_examples_idx_rejects_every_truncated_prefix(void **state) {
    (void)state;
    uint8_t buf[256];
    size_t n = idx_image(buf, 0x803, 3, (uint32_t[]){4, 3, 5}, 60);
    const char *full = path_of("full.gz", 0), *cut = path_of("cut", 1);
    write_gz(full, buf, n);
    size_t gz_n;
    uint8_t *gz = read_raw(full, &gz_n);
    for (size_t len = 0; len < gz_n; len++) {
        write_raw(cut, gz, len);
        char msg[IDX_MESSAGE_SIZE];
        idx_array a;
        idx_status st = idx_read(cut, 3, &a, msg, sizeof msg);
        if (st == IDX_OK)
            fail_msg("a gzip file cut to %zu of %zu bytes was read", len, gz_n);
        assert_null(a.data);
        assert_true(strncmp(msg, cut, strlen(cut)) == 0);
    }
    free(gz);
    for (size_t len = 0; len < n; len++) {
        write_raw(cut, buf, len);
        expect_failure(cut, 3, IDX_ERROR_TRUNCATED,
                       len < 4    ? "magic"
                       : len < 16 ? "dims"
                                  : "payload",
                       NULL);
    }
    write_raw(cut, buf, n);
    idx_array a;
    assert_int_equal(idx_read(cut, 3, &a, NULL, 0), IDX_OK);
    idx_array_finish(&a);
}

static void test_examples_idx_rejects_a_truncated_gzip_stream(void **state) {
    (void)state;
    uint8_t buf[4096];
    size_t n = idx_image(buf, 0x803, 3, (uint32_t[]){4, 28, 28}, 4 * 28 * 28);
    const char *full = path_of("stream.gz", 0), *cut = path_of("stream_cut.gz", 1);
    write_gz(full, buf, n);
    size_t gz_n;
    uint8_t *gz = read_raw(full, &gz_n);
    write_raw(cut, gz, gz_n / 2); /* inside the deflate data */
    expect_failure(cut, 3, IDX_ERROR_TRUNCATED, "gzip stream", "ends early");
    write_raw(cut, gz, gz_n - 4); /* inside the trailer: every payload byte is there */
    expect_failure(cut, 3, IDX_ERROR_TRUNCATED, "gzip stream", "ends early");
    free(gz);
}

static void test_examples_idx_rejects_a_corrupt_gzip_stream(void **state) {
    (void)state;
    uint8_t buf[256];
    size_t n = idx_image(buf, 0x801, 1, (uint32_t[]){100}, 100);
    const char *full = path_of("crc.gz", 0), *bad = path_of("crc_bad.gz", 1);
    write_gz(full, buf, n);
    size_t gz_n;
    uint8_t *gz = read_raw(full, &gz_n);
    gz[gz_n - 8] ^= 0x55; /* the CRC-32 of the trailer */
    write_raw(bad, gz, gz_n);
    expect_failure(bad, 1, IDX_ERROR_READ, "gzip stream", "corrupt (incorrect data check)");
    free(gz);
}

static void test_examples_idx_rejects_a_truncated_payload(void **state) {
    (void)state;
    uint8_t buf[64];
    size_t n = idx_image(buf, 0x803, 3, (uint32_t[]){3, 2, 2}, 11); /* 12 promised */
    write_gz(path_of("short.gz", 0), buf, n);
    expect_failure(path_of("short.gz", 0), 3, IDX_ERROR_TRUNCATED, "payload",
                   "11 bytes, the dims (3, ...) need 12");
}

static void test_examples_idx_rejects_trailing_bytes(void **state) {
    (void)state;
    uint8_t buf[64];
    size_t n = idx_image(buf, 0x803, 3, (uint32_t[]){3, 2, 2}, 13);
    write_gz(path_of("long.gz", 0), buf, n);
    expect_failure(path_of("long.gz", 0), 3, IDX_ERROR_TRAILING, "payload", "12 bytes");
}

static void test_examples_idx_rejects_a_wrong_magic(void **state) {
    (void)state;
    uint8_t buf[64];
    size_t n = idx_image(buf, 0x1f8b0803, 3, (uint32_t[]){1, 1, 1}, 1);
    write_gz(path_of("magic.gz", 0), buf, n);
    expect_failure(path_of("magic.gz", 0), 3, IDX_ERROR_MAGIC, "magic", "0x1f8b0803");
    /* a labels file where images are expected */
    n = idx_image(buf, 0x801, 1, (uint32_t[]){3}, 3);
    write_gz(path_of("labels.gz", 0), buf, n);
    expect_failure(path_of("labels.gz", 0), 3, IDX_ERROR_NDIM, "ndim",
                   "1 (magic 0x00000801), expected 3 (magic 0x00000803)");
}

static void test_examples_idx_rejects_a_wrong_type(void **state) {
    (void)state;
    uint8_t buf[64];
    size_t n = idx_image(buf, 0x0d03, 3, (uint32_t[]){1, 1, 1}, 4);
    write_gz(path_of("float.gz", 0), buf, n);
    expect_failure(path_of("float.gz", 0), 3, IDX_ERROR_TYPE, "type code", "0x0d (float)");
}

/* Dims whose product overflows, or exceeds the limit, are refused before any allocation; dims
 * within the limit that the file does not hold are a truncated payload (the buffer grows only
 * as bytes arrive). */
static void test_examples_idx_rejects_huge_dims(void **state) {
    (void)state;
    uint8_t buf[64];
    size_t n = idx_image(buf, 0x803, 3, (uint32_t[]){0xffffffffu, 0xffffffffu, 0xffffffffu}, 4);
    write_gz(path_of("huge.gz", 0), buf, n);
    expect_failure(path_of("huge.gz", 0), 3, IDX_ERROR_SIZE, "dims",
                   "4294967295 x 4294967295 x 4294967295 bytes overflows");
    n = idx_image(buf, 0x803, 3, (uint32_t[]){65536, 65536, 1}, 4);
    write_gz(path_of("huge.gz", 0), buf, n);
    expect_failure(path_of("huge.gz", 0), 3, IDX_ERROR_SIZE, "dims", "beyond the limit");
    n = idx_image(buf, 0x803, 3, (uint32_t[]){1000000, 28, 28}, 4);
    write_gz(path_of("huge.gz", 0), buf, n);
    expect_failure(path_of("huge.gz", 0), 3, IDX_ERROR_TRUNCATED, "payload",
                   "4 bytes, the dims (1000000, ...) need 784000000");
}

static void test_examples_idx_rejects_an_empty_or_missing_file(void **state) {
    (void)state;
    write_raw(path_of("empty", 0), "", 0);
    expect_failure(path_of("empty", 0), 1, IDX_ERROR_TRUNCATED, "magic", "the file is empty");
    write_gz(path_of("empty.gz", 0), "", 0);
    expect_failure(path_of("empty.gz", 0), 1, IDX_ERROR_TRUNCATED, "magic", "the file is empty");
    expect_failure(path_of("missing.gz", 0), 1, IDX_ERROR_OPEN, "open", "No such file");
}

static void test_examples_idx_rejects_images_and_labels_that_disagree(void **state) {
    (void)state;
    uint8_t buf[256];
    const char *images = path_of("img.gz", 0), *labels = path_of("lab.gz", 1);
    size_t n = idx_image(buf, 0x803, 3, (uint32_t[]){3, 2, 2}, 12);
    write_gz(images, buf, n);
    n = idx_image(buf, 0x801, 1, (uint32_t[]){2}, 2);
    write_gz(labels, buf, n);
    idx_dataset d;
    char msg[IDX_MESSAGE_SIZE], want[512];
    assert_int_equal(idx_dataset_load(images, labels, 10, &d, msg, sizeof msg), IDX_ERROR_MISMATCH);
    snprintf(want, sizeof want, "%s: dims[0]: 2 labels, but %s holds 3 images", labels, images);
    assert_string_equal(msg, want);
    assert_null(d.images.data);
    assert_null(d.labels.data);
    /* a label beyond the classes */
    n = idx_image(buf, 0x801, 1, (uint32_t[]){3}, 3);
    write_gz(labels, buf, n);
    assert_int_equal(idx_dataset_load(images, labels, 2, &d, msg, sizeof msg), IDX_ERROR_MISMATCH);
    snprintf(want, sizeof want, "%s: payload: label 2 is 2, not a class (0 to 1)", labels);
    assert_string_equal(msg, want);
    /* the images file's own errors name it */
    assert_int_equal(idx_dataset_load(labels, labels, 10, &d, msg, sizeof msg), IDX_ERROR_NDIM);
    assert_true(strncmp(msg, labels, strlen(labels)) == 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples_idx_reads_a_gzipped_data_set),
        cmocka_unit_test(test_examples_idx_reads_a_plain_file),
        cmocka_unit_test(test_examples_idx_rejects_every_truncated_prefix),
        cmocka_unit_test(test_examples_idx_rejects_a_truncated_gzip_stream),
        cmocka_unit_test(test_examples_idx_rejects_a_corrupt_gzip_stream),
        cmocka_unit_test(test_examples_idx_rejects_a_truncated_payload),
        cmocka_unit_test(test_examples_idx_rejects_trailing_bytes),
        cmocka_unit_test(test_examples_idx_rejects_a_wrong_magic),
        cmocka_unit_test(test_examples_idx_rejects_a_wrong_type),
        cmocka_unit_test(test_examples_idx_rejects_huge_dims),
        cmocka_unit_test(test_examples_idx_rejects_an_empty_or_missing_file),
        cmocka_unit_test(test_examples_idx_rejects_images_and_labels_that_disagree),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
