// First stage of a reduction over axis 0 of x (rows, cols), cols a multiple of 4 * CV: workgroup
// row s reduces its strip of rows_per_strip rows into o[s, :]; each invocation keeps CV
// contiguous vec4 of columns in registers, so a row step reads 16 * CV contiguous bytes per
// invocation. OP 0: sum; OP 1: max. col_reduce combines the strips.
#version 450
#include "vec.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint CV = 4;
layout(std430, binding = 0) writeonly buffer O { V4 o[]; };
layout(std430, binding = 1) readonly buffer X { V4 x[]; };
layout(push_constant) uniform P { uint rows_per_strip; uint cols4; } p;
void main() {
    uint c0 = gl_GlobalInvocationID.x * CV;
    if (c0 >= p.cols4)
        return;
    uint r0 = gl_WorkGroupID.y * p.rows_per_strip;
    vec4 acc[CV];
    for (uint k = 0u; k < CV; k++)
        acc[k] = OP == 1u ? LD(x[r0 * p.cols4 + c0 + k]) : vec4(0.0);
    for (uint r = OP == 1u ? 1u : 0u; r < p.rows_per_strip; r++) {
        uint base = (r0 + r) * p.cols4 + c0;
        for (uint k = 0u; k < CV; k++)
            acc[k] = OP == 1u ? max(acc[k], LD(x[base + k])) : acc[k] + LD(x[base + k]);
    }
    for (uint k = 0u; k < CV; k++)
        o[gl_WorkGroupID.y * p.cols4 + c0 + k] = ST(acc[k]);
}
