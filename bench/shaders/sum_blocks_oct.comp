// sum_blocks with octets (vec.glsl; compile with PAIRED): workgroup g writes out[g] = the sum
// of its invocations' contiguous blocks of the n8 octets, combined with subgroup adds and
// shared memory.
#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "vec.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer O { float o[]; };
layout(std430, binding = 1) readonly buffer X { V8 x[]; };
layout(push_constant) uniform P { uint n8; } p;
shared float part[64];
void main() {
    uint total = gl_NumWorkGroups.x * 64u;
    uint per = (p.n8 + total - 1u) / total;
    uint begin = gl_GlobalInvocationID.x * per;
    uint end = min(begin + per, p.n8);
    vec4 lo = vec4(0.0), hi = vec4(0.0);
    for (uint i = begin; i < end; i++) {
        V8 v = x[i];
        lo += LO(v);
        hi += HI(v);
    }
    lo += hi;
    float s = subgroupAdd(lo.x + lo.y + lo.z + lo.w);
    if (subgroupElect())
        part[gl_SubgroupID] = s;
    barrier();
    if (gl_LocalInvocationIndex == 0u) {
        float t = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; i++)
            t += part[i];
        o[gl_WorkGroupID.x] = t;
    }
}
