// softmax_rowinv with octets (vec.glsl; compile with PAIRED): one invocation per row, three
// passes over its contiguous row, eight elements per access (cols a multiple of 8).
#version 450
#include "vec.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer O { V8 o[]; };
layout(std430, binding = 1) readonly buffer X { V8 x[]; };
layout(push_constant) uniform P { uint rows; uint cols8; } p;
void main() {
    uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows)
        return;
    uint base = r * p.cols8;
    vec4 m4 = LO(x[base]), n4 = HI(x[base]);
    for (uint i = 1u; i < p.cols8; i++) {
        V8 v = x[base + i];
        m4 = max(m4, LO(v));
        n4 = max(n4, HI(v));
    }
    m4 = max(m4, n4);
    float m = max(max(m4.x, m4.y), max(m4.z, m4.w));
    vec4 s4 = vec4(0.0), t4 = vec4(0.0);
    for (uint i = 0u; i < p.cols8; i++) {
        V8 v = x[base + i];
        s4 += exp(LO(v) - m);
        t4 += exp(HI(v) - m);
    }
    s4 += t4;
    float inv = 1.0 / ((s4.x + s4.y) + (s4.z + s4.w));
    for (uint i = 0u; i < p.cols8; i++) {
        V8 v = x[base + i];
        o[base + i] = ST8(exp(LO(v) - m) * inv, exp(HI(v) - m) * inv);
    }
}
