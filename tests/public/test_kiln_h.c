/* The public header alone gives a user the status enum, its messages and the allocator type. */
#include <kiln/kiln.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static void *counting_alloc(void *user, void *ptr, size_t osize, size_t nsize) {
    (void)user;
    (void)ptr;
    (void)osize;
    (void)nsize;
    return NULL;
}

static void test_public_kiln_h_reexports_status_and_allocator(void **state) {
    (void)state;
    kiln_status st = KILN_ERROR_OUT_OF_DEVICE_MEMORY;
    assert_string_equal(kiln_status_string(KILN_OK), "success");
    assert_string_equal(kiln_status_string(st), "out of device memory");
    assert_int_equal(KILN_OK, 0);
    kiln_alloc_fn fn = counting_alloc;
    assert_null(fn(NULL, NULL, 0, 16));
    assert_int_equal(KILN_VERSION_MAJOR, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_public_kiln_h_reexports_status_and_allocator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
