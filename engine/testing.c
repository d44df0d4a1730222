/* Test-only overrides (eng_testing.h). */
#include "eng_testing.h"

static eng_testing overrides;

void eng_testing_set(const eng_testing *options) {
    overrides = options ? *options : (eng_testing){0};
}

const eng_testing *eng_testing_options(void) {
    return &overrides;
}
