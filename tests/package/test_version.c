/* kiln_version: the library a program runs with is the version its header says (libkiln.a). */
#include <kiln/kiln.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

static void test_package_version_matches_the_header(void **state) {
    (void)state;
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", KILN_VERSION_MAJOR, KILN_VERSION_MINOR,
             KILN_VERSION_PATCH);
    assert_string_equal(kiln_version(), want);
    assert_ptr_equal(kiln_version(), kiln_version()); /* a static string */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_package_version_matches_the_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
