/* Must NOT compile: base/ sits below vk/, so vk/'s header is not on base's include path.
 * tests/CMakeLists.txt builds this file against kiln_base alone and expects the build to fail,
 * proving that the targets enforce the layering of docs/architecture.md. */
#include "base.h"
#include "vkd.h"

int layering_violation(void);
int layering_violation(void) {
    return (int)sizeof(vkd_caps);
}
