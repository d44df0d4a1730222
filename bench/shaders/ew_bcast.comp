// o[r, j] = a[r, j] + b[r] for a (rows, cols), cols a multiple of 4 * 64 * PER; each invocation
// adds PER vec4 of one row: contiguous ones (INTERLEAVE 0) or one per step of the workgroup's
// block (INTERLEAVE 1: neighbouring invocations read neighbouring vec4).
#version 450
#include "vec.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint PER = 4;
layout(constant_id = 1) const uint INTERLEAVE = 0;
layout(std430, binding = 0) writeonly buffer O { V4 o[]; };
layout(std430, binding = 1) readonly buffer A { V4 a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(push_constant) uniform P { uint n4; uint cols4; } p;
void main() {
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    uint group = gid / 64u, lane = gid % 64u;
    uint base = INTERLEAVE == 1u ? group * PER * 64u + lane : gid * PER;
    uint step = INTERLEAVE == 1u ? 64u : 1u;
    if (base >= p.n4)
        return;
    float s = b[base / p.cols4];
    for (uint k = 0u; k < PER; k++)
        o[base + k * step] = ST(LD(a[base + k * step]) + s);
}
