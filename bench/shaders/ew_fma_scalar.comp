// o = a * b + c over n floats, PER consecutive scalars per invocation (no vector types): how far
// several outputs per invocation go without vec4 loads. 2-D grid linearised as in ew_fma.
#version 450
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint PER = 8;
layout(std430, binding = 0) writeonly buffer O { float o[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(std430, binding = 3) readonly buffer C { float c[]; };
layout(push_constant) uniform P { uint n; } p;
void main() {
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    for (uint k = 0u; k < PER; k++) {
        uint i = gid * PER + k;
        if (i < p.n)
            o[i] = a[i] * b[i] + c[i];
    }
}
