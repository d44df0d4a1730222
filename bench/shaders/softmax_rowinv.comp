// Softmax over the last axis of x (rows, cols), cols a multiple of 4: one invocation per row,
// three passes over its contiguous row with vec4 loads (max, sum of exp, scaled exp); no
// barriers, which lavapipe runs as coroutine switches.
#version 450
#include "vec.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer O { V4 o[]; };
layout(std430, binding = 1) readonly buffer X { V4 x[]; };
layout(push_constant) uniform P { uint rows; uint cols4; } p;
void main() {
    uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows)
        return;
    uint base = r * p.cols4;
    vec4 m4 = LD(x[base]);
    for (uint i = 1u; i < p.cols4; i++)
        m4 = max(m4, LD(x[base + i]));
    float m = max(max(m4.x, m4.y), max(m4.z, m4.w));
    vec4 s4 = vec4(0.0);
    for (uint i = 0u; i < p.cols4; i++)
        s4 += exp(LD(x[base + i]) - m);
    float inv = 1.0 / ((s4.x + s4.y) + (s4.z + s4.w));
    for (uint i = 0u; i < p.cols4; i++)
        o[base + i] = ST(exp(LD(x[base + i]) - m) * inv);
}
