#include "engine_fixture.h"
int main(void) {
    return 0;
}
