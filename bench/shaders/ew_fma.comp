// o = a * b + c over n4 vec4 (the element count is a multiple of 4). Each invocation handles PER
// contiguous vec4 (LAVAPIPE.md: vec4 loads, a few per invocation); 2-D grid: x rows of
// workgroups, linearised.
#version 450
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint PER = 4;
layout(std430, binding = 0) writeonly buffer O { vec4 o[]; };
layout(std430, binding = 1) readonly buffer A { vec4 a[]; };
layout(std430, binding = 2) readonly buffer B { vec4 b[]; };
layout(std430, binding = 3) readonly buffer C { vec4 c[]; };
layout(push_constant) uniform P { uint n4; } p;
void main() {
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    uint base = gid * PER;
    for (uint k = 0u; k < PER; k++) {
        uint i = base + k;
        if (i < p.n4)
            o[i] = a[i] * b[i] + c[i];
    }
}
