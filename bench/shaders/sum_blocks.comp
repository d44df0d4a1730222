// Stage of a sum: workgroup g writes out[g] = the sum of its invocations' blocks; each
// invocation sums one contiguous block of the n4 vec4 with vec4 loads (LAVAPIPE.md: 8-64
// workgroups), then the workgroup combines with subgroup adds and shared memory.
#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "vec.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer O { float o[]; };
layout(std430, binding = 1) readonly buffer X { V4 x[]; };
layout(push_constant) uniform P { uint n4; } p;
shared float part[64];
void main() {
    uint total = gl_NumWorkGroups.x * 64u;
    uint per = (p.n4 + total - 1u) / total;
    uint begin = gl_GlobalInvocationID.x * per;
    uint end = min(begin + per, p.n4);
    vec4 acc = vec4(0.0);
    for (uint i = begin; i < end; i++)
        acc += LD(x[i]);
    float s = subgroupAdd(acc.x + acc.y + acc.z + acc.w);
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
