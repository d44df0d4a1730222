/* kiln_version: the library's version, from the KILN_VERSION_* macros of kiln.h. */
#include "kiln/kiln.h"

#define ENG_STR_(x) #x
#define ENG_STR(x) ENG_STR_(x)

const char *kiln_version(void) {
    return ENG_STR(KILN_VERSION_MAJOR) "." ENG_STR(KILN_VERSION_MINOR) "." ENG_STR(
        KILN_VERSION_PATCH);
}
