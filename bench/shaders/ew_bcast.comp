// o[r, j] = a[r, j] + b[r] for a (rows, cols), cols a multiple of 4 * PER; each invocation adds
// PER contiguous vec4 of one row.
#version 450
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint PER = 4;
layout(std430, binding = 0) writeonly buffer O { vec4 o[]; };
layout(std430, binding = 1) readonly buffer A { vec4 a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(push_constant) uniform P { uint n4; uint cols4; } p;
void main() {
    uint gid = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    uint base = gid * PER;
    if (base >= p.n4)
        return;
    float s = b[base / p.cols4];
    for (uint k = 0u; k < PER; k++)
        o[base + k] = a[base + k] + s;
}
