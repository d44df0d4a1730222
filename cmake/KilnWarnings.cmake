# The warning list every Kiln module compiles with (as strict as Lua's); -Werror in CI.
set(KILN_WARNINGS
    -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wconversion
    -Wno-sign-conversion -Wundef -Wvla -Wimplicit-fallthrough -Wpointer-arith -Wcast-qual
    -Wwrite-strings -Wformat=2 -Wmissing-declarations -Wold-style-definition)
if(KILN_WERROR)
  list(APPEND KILN_WARNINGS -Werror)
endif()
