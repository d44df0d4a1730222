// o[j] = reduce over rows of x[r, j] for x (rows, cols), cols a multiple of 4: one invocation per
// vec4 of columns walking down the rows (neighbouring invocations read neighbouring vec4).
// OP 0: sum times scale (sum, mean); OP 1: max. TEXELS (glslc -DTEXELS): x is a uniform texel
// buffer of R32G32B32A32_UINT texels (the host binds it so), each vec4 one texel fetch.
#version 450
#ifdef TEXELS
#extension GL_EXT_samplerless_texture_functions : require
#endif
#include "vec.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint OP = 0;
layout(std430, binding = 0) writeonly buffer O { V4 o[]; };
#ifdef TEXELS
layout(binding = 1) uniform utextureBuffer x;
#define LDX(i) uintBitsToFloat(texelFetch(x, int(i)))
#else
layout(std430, binding = 1) readonly buffer X { V4 x[]; };
#define LDX(i) LD(x[i])
#endif
layout(push_constant) uniform P { uint rows; uint cols4; float scale; } p;
void main() {
    uint j = gl_GlobalInvocationID.x;
    if (j >= p.cols4)
        return;
    vec4 acc = OP == 1u ? LDX(j) : vec4(0.0);
    for (uint r = OP == 1u ? 1u : 0u; r < p.rows; r++) {
        vec4 v = LDX(r * p.cols4 + j);
        acc = OP == 1u ? max(acc, v) : acc + v;
    }
    o[j] = ST(OP == 1u ? acc : acc * p.scale);
}
