// ew_fma with octets (vec.glsl; compile with PAIRED): o = a * b + c over n8 groups of eight
// elements, PER contiguous octets per invocation.
#version 450
#include "vec.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint PER = 1;
layout(std430, binding = 0) writeonly buffer O { V8 o[]; };
layout(std430, binding = 1) readonly buffer A { V8 a[]; };
layout(std430, binding = 2) readonly buffer B { V8 b[]; };
layout(std430, binding = 3) readonly buffer C { V8 c[]; };
layout(push_constant) uniform P { uint n8; } p;
void main() {
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    for (uint k = 0u; k < PER; k++) {
        uint i = gid * PER + k;
        if (i < p.n8) {
            V8 x = a[i], y = b[i], z = c[i];
            o[i] = ST8(LO(x) * LO(y) + LO(z), HI(x) * HI(y) + HI(z));
        }
    }
}
