/* Test-only overrides (eng_testing.h). */
#include "eng_testing.h"

static eng_testing overrides;

void eng_testing_set(const eng_testing *options) {
    overrides = options ? *options : (eng_testing){0};
}

const eng_testing *eng_testing_options(void) {
    return &overrides;
}

kiln_status eng_testing_context_create(const kiln_context_options *options,
                                       const eng_testing *testing, kiln_context **out) {
    eng_testing_set(testing);
    kiln_status st = kiln_context_create(options, out);
    eng_testing_set(NULL);
    return st;
}
