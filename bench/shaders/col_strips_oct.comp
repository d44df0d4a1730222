// col_strips with octets (vec.glsl; compile with PAIRED): workgroup row s reduces its strip
// of rows into o[s, :], each invocation keeping CV vec4 of columns (CV / 2 octets, CV even)
// in registers. OP 0: sum; OP 1: max. col_reduce combines the strips.
#version 450
#include "vec.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint CV = 4;
layout(std430, binding = 0) writeonly buffer O { V4 o[]; };
layout(std430, binding = 1) readonly buffer X { V8 x[]; };
layout(push_constant) uniform P { uint rows_per_strip; uint cols4; } p;
void main() {
    uint c0 = gl_GlobalInvocationID.x * CV;
    if (c0 >= p.cols4)
        return;
    uint r0 = gl_WorkGroupID.y * p.rows_per_strip, cols8 = p.cols4 / 2u;
    vec4 acc[CV];
    for (uint k = 0u; k < CV; k++)
        acc[k] = OP == 1u ? vec4(-3.402823e38) : vec4(0.0);
    for (uint r = 0u; r < p.rows_per_strip; r++) {
        uint base = (r0 + r) * cols8 + c0 / 2u;
        for (uint k = 0u; k < CV / 2u; k++) {
            V8 v = x[base + k];
            vec4 lo = LO(v), hi = HI(v);
            acc[2u * k] = OP == 1u ? max(acc[2u * k], lo) : acc[2u * k] + lo;
            acc[2u * k + 1u] = OP == 1u ? max(acc[2u * k + 1u], hi) : acc[2u * k + 1u] + hi;
        }
    }
    for (uint k = 0u; k < CV; k++)
        o[gl_WorkGroupID.y * p.cols4 + c0 + k] = ST(acc[k]);
}
