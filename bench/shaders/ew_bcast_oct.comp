// ew_bcast with octets (vec.glsl; compile with PAIRED): o[r, j] = a[r, j] + b[r], PER
// contiguous octets of one row per invocation (cols a multiple of 8 * PER).
#version 450
#include "vec.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint PER = 1;
layout(std430, binding = 0) writeonly buffer O { V8 o[]; };
layout(std430, binding = 1) readonly buffer A { V8 a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(push_constant) uniform P { uint n8; uint cols8; } p;
void main() {
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    uint base = gid * PER;
    if (base >= p.n8)
        return;
    float s = b[base / p.cols8];
    for (uint k = 0u; k < PER; k++) {
        V8 x = a[base + k];
        o[base + k] = ST8(LO(x) + s, HI(x) + s);
    }
}
