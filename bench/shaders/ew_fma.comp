// o = a * b + c over n4 vec4 (the element count is a multiple of 4). Each invocation handles PER
// vec4 (LAVAPIPE.md: vec4 loads, a few per invocation): contiguous ones (INTERLEAVE 0) or, with
// INTERLEAVE 1, one per step of the workgroup's block so neighbouring invocations read
// neighbouring vec4. 2-D grid: x rows of workgroups, linearised.
#version 450
#include "vec.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint PER = 4;
layout(constant_id = 1) const uint INTERLEAVE = 0;
layout(std430, binding = 0) writeonly buffer O { V4 o[]; };
layout(std430, binding = 1) readonly buffer A { V4 a[]; };
layout(std430, binding = 2) readonly buffer B { V4 b[]; };
layout(std430, binding = 3) readonly buffer C { V4 c[]; };
layout(push_constant) uniform P { uint n4; } p;
void main() {
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    uint group = gid / 64u, lane = gid % 64u;
    for (uint k = 0u; k < PER; k++) {
        uint i = INTERLEAVE == 1u ? (group * PER + k) * 64u + lane : gid * PER + k;
        if (i < p.n4)
            o[i] = ST(LD(a[i]) * LD(b[i]) + LD(c[i]));
    }
}
