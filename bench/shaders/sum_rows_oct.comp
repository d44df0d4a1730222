// sum_rows with octets (vec.glsl; compile with PAIRED): o[r] = sum of row r, one invocation
// per row, eight elements per load (cols a multiple of 8).
#version 450
#include "vec.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer O { float o[]; };
layout(std430, binding = 1) readonly buffer X { V8 x[]; };
layout(push_constant) uniform P { uint rows; uint cols8; } p;
void main() {
    uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows)
        return;
    vec4 lo = vec4(0.0), hi = vec4(0.0);
    uint base = r * p.cols8;
    for (uint i = 0u; i < p.cols8; i++) {
        V8 v = x[base + i];
        lo += LO(v);
        hi += HI(v);
    }
    lo += hi;
    o[r] = (lo.x + lo.y) + (lo.z + lo.w);
}
