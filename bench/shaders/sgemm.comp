// C = A B for row-major A (M, K), B (K, N), C (M, N); N a multiple of 8, K of 4, M of TM.
// Register blocking without shared memory (LAVAPIPE.md): each invocation computes TM rows x 8
// columns (2 vec4 per row); A read as vec4 along k, B as vec4 along n. Grid: x over column
// blocks of 8, y over row blocks of TM. The workgroup shape (spec constants 1, 2) decides how much
// of B a workgroup's invocations share: 64x1 spans 512 columns, 8x8 spans 64 columns and 8 row
// blocks, whose invocations (run one subgroup after another on lavapipe) reread the same B panel
// from cache.
//   TEXELS (glslc -DTEXELS): A and B are uniform texel buffers of R32G32B32A32_UINT texels (the
// host binds them so), each vec4 one texel fetch: on lavapipe a fetch gathers all lanes at once
// where a storage-buffer load moves them one at a time (docs/lavapipe.md). C stays a storage
// buffer (V4: pairs with PAIRED).
#version 450
#ifdef TEXELS
#extension GL_EXT_samplerless_texture_functions : require
#endif
#include "vec.glsl"
layout(local_size_x_id = 1, local_size_y_id = 2) in;
layout(constant_id = 0) const uint TM = 1;
layout(std430, binding = 0) writeonly buffer Cb { V4 c[]; };
#ifdef TEXELS
layout(binding = 1) uniform utextureBuffer a;
layout(binding = 2) uniform utextureBuffer b;
#define LDA(i) uintBitsToFloat(texelFetch(a, int(i)))
#define LDB(i) uintBitsToFloat(texelFetch(b, int(i)))
#else
layout(std430, binding = 1) readonly buffer Ab { V4 a[]; };
layout(std430, binding = 2) readonly buffer Bb { V4 b[]; };
#define LDA(i) LD(a[i])
#define LDB(i) LD(b[i])
#endif
layout(push_constant) uniform P { uint m; uint n; uint k; } p;
void main() {
    uint cb = gl_GlobalInvocationID.x; // column block of 8
    uint rb = gl_GlobalInvocationID.y; // row block of TM
    uint n4 = p.n / 4u, k4 = p.k / 4u;
    if (cb * 8u >= p.n || rb * TM >= p.m)
        return;
    vec4 acc0[TM], acc1[TM];
    for (uint t = 0u; t < TM; t++) {
        acc0[t] = vec4(0.0);
        acc1[t] = vec4(0.0);
    }
    for (uint kk = 0u; kk < k4; kk++) {
        vec4 b00 = LDB((kk * 4u + 0u) * n4 + 2u * cb);
        vec4 b01 = LDB((kk * 4u + 0u) * n4 + 2u * cb + 1u);
        vec4 b10 = LDB((kk * 4u + 1u) * n4 + 2u * cb);
        vec4 b11 = LDB((kk * 4u + 1u) * n4 + 2u * cb + 1u);
        vec4 b20 = LDB((kk * 4u + 2u) * n4 + 2u * cb);
        vec4 b21 = LDB((kk * 4u + 2u) * n4 + 2u * cb + 1u);
        vec4 b30 = LDB((kk * 4u + 3u) * n4 + 2u * cb);
        vec4 b31 = LDB((kk * 4u + 3u) * n4 + 2u * cb + 1u);
        for (uint t = 0u; t < TM; t++) {
            vec4 av = LDA((rb * TM + t) * k4 + kk);
            acc0[t] += av.x * b00 + av.y * b10 + av.z * b20 + av.w * b30;
            acc1[t] += av.x * b01 + av.y * b11 + av.z * b21 + av.w * b31;
        }
    }
    for (uint t = 0u; t < TM; t++) {
        uint row = rb * TM + t;
        c[row * n4 + 2u * cb] = ST(acc0[t]);
        c[row * n4 + 2u * cb + 1u] = ST(acc1[t]);
    }
}
