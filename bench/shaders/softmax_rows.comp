// Softmax over the last axis of x (rows, cols), fused: one workgroup of 64 per row, each
// invocation keeping VPI contiguous vec4 in registers (cols = 256 * VPI); max and sum combined
// with subgroup operations and shared memory.
#version 450
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "vec.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint VPI = 4;
layout(std430, binding = 0) writeonly buffer O { V4 o[]; };
layout(std430, binding = 1) readonly buffer X { V4 x[]; };
shared float part[64];

float workgroup_max(float v) {
    v = subgroupMax(v);
    if (subgroupElect())
        part[gl_SubgroupID] = v;
    barrier();
    float m = part[0];
    for (uint i = 1u; i < gl_NumSubgroups; i++)
        m = max(m, part[i]);
    barrier();
    return m;
}

float workgroup_sum(float v) {
    v = subgroupAdd(v);
    if (subgroupElect())
        part[gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++)
        s += part[i];
    barrier();
    return s;
}

void main() {
    uint base = (gl_WorkGroupID.x * 64u + gl_LocalInvocationIndex) * VPI;
    vec4 v[VPI];
    vec4 m4 = vec4(-3.402823e38);
    for (uint k = 0u; k < VPI; k++) {
        v[k] = LD(x[base + k]);
        m4 = max(m4, v[k]);
    }
    float m = workgroup_max(max(max(m4.x, m4.y), max(m4.z, m4.w)));
    vec4 s4 = vec4(0.0);
    for (uint k = 0u; k < VPI; k++) {
        v[k] = exp(v[k] - m);
        s4 += v[k];
    }
    float inv = 1.0 / workgroup_sum((s4.x + s4.y) + (s4.z + s4.w));
    for (uint k = 0u; k < VPI; k++)
        o[base + k] = ST(v[k] * inv);
}
