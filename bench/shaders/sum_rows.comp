// o[r] = sum of row r of x (rows, cols), cols a multiple of 4: one invocation per row, a
// contiguous block with vec4 loads.
#version 450
#include "vec.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer O { float o[]; };
layout(std430, binding = 1) readonly buffer X { V4 x[]; };
layout(push_constant) uniform P { uint rows; uint cols4; } p;
void main() {
    uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows)
        return;
    vec4 acc = vec4(0.0);
    uint base = r * p.cols4;
    for (uint i = 0u; i < p.cols4; i++)
        acc += LD(x[base + i]);
    o[r] = (acc.x + acc.y) + (acc.z + acc.w);
}
