// C = A B for row-major A (M, K), B (K, N); N a multiple of 64, K of 4, M of 8 * local_size_y.
// As sgemm.comp with 8x8 outputs per invocation, but the eight invocations of a subgroup (one
// workgroup row: local_size_x is the subgroup size, 8) share their row block: invocation l
// loads the vec4 of A row l of the block, and every invocation takes the eight rows from the
// subgroup with subgroupBroadcast (on lavapipe one load per row instead of one per invocation).
//   TEXELS (glslc -DTEXELS): A and B are uniform texel buffers of R32G32B32A32_UINT texels (the
// host binds them so), each vec4 one texel fetch (sgemm.comp); C stays a storage buffer (octets
// with OCTETS).
#version 450
#extension GL_KHR_shader_subgroup_ballot : require
#ifdef TEXELS
#extension GL_EXT_samplerless_texture_functions : require
#endif
#include "vec.glsl"
layout(local_size_x = 8, local_size_y_id = 1) in;
#ifdef OCTETS /* C's row (and without TEXELS B's row) of eight columns as one octet (vec.glsl) */
layout(std430, binding = 0) writeonly buffer Cb { V8 c[]; };
#else
layout(std430, binding = 0) writeonly buffer Cb { V4 c[]; };
#endif
#ifdef TEXELS
layout(binding = 1) uniform utextureBuffer a;
layout(binding = 2) uniform utextureBuffer b;
#define LDA(i) uintBitsToFloat(texelFetch(a, int(i)))
#define LDB(i) uintBitsToFloat(texelFetch(b, int(i)))
#else
#ifdef OCTETS
layout(std430, binding = 2) readonly buffer Bb { V8 b[]; };
#else
layout(std430, binding = 2) readonly buffer Bb { V4 b[]; };
#define LDB(i) LD(b[i])
#endif
layout(std430, binding = 1) readonly buffer Ab { V4 a[]; };
#define LDA(i) LD(a[i])
#endif
layout(push_constant) uniform P { uint m; uint n; uint k; } p;
void main() {
    uint cb = gl_GlobalInvocationID.x; // column block of 8
    uint rb = gl_GlobalInvocationID.y; // row block of 8
    uint lane = gl_SubgroupInvocationID;
    uint n4 = p.n / 4u, k4 = p.k / 4u;
    vec4 acc0[8], acc1[8];
    for (uint t = 0u; t < 8u; t++) {
        acc0[t] = vec4(0.0);
        acc1[t] = vec4(0.0);
    }
    for (uint kk = 0u; kk < k4; kk++) {
#if defined(OCTETS) && !defined(TEXELS)
        V8 r0 = b[(kk * 4u + 0u) * (n4 / 2u) + cb], r1 = b[(kk * 4u + 1u) * (n4 / 2u) + cb];
        V8 r2 = b[(kk * 4u + 2u) * (n4 / 2u) + cb], r3 = b[(kk * 4u + 3u) * (n4 / 2u) + cb];
        vec4 b00 = LO(r0), b01 = HI(r0), b10 = LO(r1), b11 = HI(r1);
        vec4 b20 = LO(r2), b21 = HI(r2), b30 = LO(r3), b31 = HI(r3);
#else
        vec4 b00 = LDB((kk * 4u + 0u) * n4 + 2u * cb);
        vec4 b01 = LDB((kk * 4u + 0u) * n4 + 2u * cb + 1u);
        vec4 b10 = LDB((kk * 4u + 1u) * n4 + 2u * cb);
        vec4 b11 = LDB((kk * 4u + 1u) * n4 + 2u * cb + 1u);
        vec4 b20 = LDB((kk * 4u + 2u) * n4 + 2u * cb);
        vec4 b21 = LDB((kk * 4u + 2u) * n4 + 2u * cb + 1u);
        vec4 b30 = LDB((kk * 4u + 3u) * n4 + 2u * cb);
        vec4 b31 = LDB((kk * 4u + 3u) * n4 + 2u * cb + 1u);
#endif
        vec4 mine = LDA((rb * 8u + lane) * k4 + kk);
#define ROW(t)                                                                                     \
    {                                                                                              \
        vec4 av = subgroupBroadcast(mine, t);                                                      \
        acc0[t] += av.x * b00 + av.y * b10 + av.z * b20 + av.w * b30;                              \
        acc1[t] += av.x * b01 + av.y * b11 + av.z * b21 + av.w * b31;                              \
    }
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
    }
    for (uint t = 0u; t < 8u; t++) {
        uint row = rb * 8u + t;
#ifdef OCTETS
        c[row * (n4 / 2u) + cb] = ST8(acc0[t], acc1[t]);
#else
        c[row * n4 + 2u * cb] = ST(acc0[t]);
        c[row * n4 + 2u * cb + 1u] = ST(acc1[t]);
#endif
    }
}
