/* The generic message of each kiln_status, expanded from status.def. */
#include "base.h"

static const char *const status_messages[] = {
#define X(name, message) message,
#include "status.def"
#undef X
};

_Static_assert(BASE_COUNTOF(status_messages) == KILN_STATUS_COUNT_, "one message per status");

const char *kiln_status_string(kiln_status status) {
    if ((unsigned)status >= (unsigned)KILN_STATUS_COUNT_)
        return "unknown status";
    return status_messages[status];
}
