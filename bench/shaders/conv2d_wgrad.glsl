// The weight gradient of the 3x3, stride 1, padding 1 convolution (conv2d.glsl) for the
// conv2d_wgrad_*.comp references (which define CT): dW (O, C, 3, 3) = sum over (n, oh, ow) of
// dY[n, o, oh, ow] x[n, c, oh + kh - 1, ow + kw - 1], rows of RW = 14 (the fashion_net maps).
// A long reduction (N H W = 12544 terms per weight for N = 64) over a small output (O C 9), so
// it is split: this first pass writes part[s] (O, C, 3, 3) for slices s of p.rows image rows
// (n, oh) each, and a second pass (col_reduce.comp) sums the slices.
//   Invocation: one input channel ci (local x: workgroups of C x 4, the y being four slices) and
// a block of CT output channels (workgroup y), all nine taps: CT x 9 accumulators. Per image row
// it loads the three input rows its taps read (a padding row is skipped: the row is the same for
// every lane of the subgroup) and the CT rows of dY, and makes 9 x 14 multiply-adds per channel.
//   SHARE (spec constant 1): the lanes of a subgroup share the image row and the output channels
// (the subgroup lies within one slice: C a multiple of the subgroup size, decided by the host),
// so lane l < CT loads dY's row of channel co0 + l and every lane takes the CT rows with
// subgroupBroadcast: 14 loads per row instead of 14 CT. PAIRED (glslc -DPAIRED): rows moved as
// 64-bit pairs of floats. TEXELS (glslc -DTEXELS, instead of PAIRED): x and dY are uniform texel
// buffers of R32G32B32A32_UINT texels (the host binds them so; element e is component e % 4 of
// texel e / 4), whose fetches llvmpipe gathers for all lanes at once (docs/lavapipe.md): a row
// (at an even element, RW % 4 == 2) is 4 texel fetches, its elements taken from the first
// component of the first texel or from its third.
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_EXT_control_flow_attributes : require
#define RW 14u
#ifdef TEXELS
#extension GL_EXT_samplerless_texture_functions : require
#elif defined(PAIRED)
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#define ELEM uint64_t
#else
#define ELEM float
#endif
layout(local_size_x_id = 0, local_size_y = 4) in;
layout(constant_id = 1) const uint SHARE = 0u;
layout(std430, binding = 0) writeonly buffer Pb { float part[]; };
#ifdef TEXELS
layout(binding = 1) uniform utextureBuffer x;
layout(binding = 2) uniform utextureBuffer dy;
#else
layout(std430, binding = 1) readonly buffer Xb { ELEM x[]; };
layout(std430, binding = 2) readonly buffer Gb { ELEM dy[]; };
#endif
layout(push_constant) uniform P { uint c; uint o; uint h; uint rows; } p;

// The row of RW floats at element offset at (even when PAIRED or TEXELS).
#ifdef TEXELS
#define LOAD_ROW(buf, at, out)                                                                     \
    {                                                                                              \
        uint at_ = (at);                                                                           \
        uvec4 q_[4];                                                                               \
        [[unroll]] for (int k = 0; k < 4; k++)                                                     \
            q_[k] = texelFetch(buf, int(at_ >> 2u) + k);                                           \
        bool by2_ = (at_ & 2u) != 0u;                                                              \
        [[unroll]] for (uint j = 0u; j < RW; j++) {                                                \
            uint lo_ = q_[j / 4u][j % 4u], hi_ = q_[(j + 2u) / 4u][(j + 2u) % 4u];                 \
            out[j] = uintBitsToFloat(mix(lo_, hi_, by2_));                                         \
        }                                                                                          \
    }
#elif defined(PAIRED)
#define LOAD_ROW(buf, at, out)                                                                     \
    [[unroll]] for (uint j = 0u; j < RW / 2u; j++) {                                               \
        vec2 pr = uintBitsToFloat(unpackUint2x32(buf[(at) / 2u + j]));                             \
        out[2u * j] = pr.x;                                                                        \
        out[2u * j + 1u] = pr.y;                                                                   \
    }
#else
#define LOAD_ROW(buf, at, out)                                                                     \
    [[unroll]] for (uint j = 0u; j < RW; j++)                                                      \
        out[j] = buf[(at) + j];
#endif

void main() {
    uint ci = gl_LocalInvocationID.x;
    uint s = gl_WorkGroupID.x * gl_WorkGroupSize.y + gl_LocalInvocationID.y;
    uint co0 = gl_WorkGroupID.y * CT;
    uint mine = co0 + min(gl_SubgroupInvocationID, CT - 1u); // the dY row this lane loads (SHARE)
    uint plane = p.h * RW;
    float acc[CT][9];
    [[unroll]] for (uint c = 0u; c < CT; c++) {
        [[unroll]] for (uint t = 0u; t < 9u; t++)
            acc[c][t] = 0.0;
    }
    for (uint r = 0u; r < p.rows; r++) {
        uint row = s * p.rows + r;
        uint n = row / p.h, oh = row % p.h;
        // The three input rows oh - 1, oh, oh + 1 (zeros outside the image).
        float xv[3][RW];
        uint xb = (n * p.c + ci) * plane + oh * RW;
        [[unroll]] for (uint kh = 0u; kh < 3u; kh++) {
            if ((kh == 0u && oh == 0u) || (kh == 2u && oh + 1u == p.h)) {
                [[unroll]] for (uint j = 0u; j < RW; j++)
                    xv[kh][j] = 0.0;
            } else {
                LOAD_ROW(x, xb + kh * RW - RW, xv[kh])
            }
        }
        float mine_row[RW];
        if (SHARE != 0u) {
            LOAD_ROW(dy, ((n * p.o + mine) * p.h + oh) * RW, mine_row)
        }
        [[unroll]] for (uint c = 0u; c < CT; c++) {
            float g[RW];
            if (SHARE != 0u) {
                [[unroll]] for (uint j = 0u; j < RW; j++) {
#define BC(l)                                                                                      \
    if (c == l)                                                                                    \
        g[j] = subgroupBroadcast(mine_row[j], l);
                    BC(0u) BC(1u) BC(2u) BC(3u)
#if CT > 4
                    BC(4u) BC(5u) BC(6u) BC(7u)
#endif
#undef BC
                }
            } else {
                LOAD_ROW(dy, ((n * p.o + co0 + c) * p.h + oh) * RW, g)
            }
            [[unroll]] for (uint kh = 0u; kh < 3u; kh++) {
                float s0 = 0.0, s1 = 0.0, s2 = 0.0;
                [[unroll]] for (uint j = 0u; j < RW; j++) {
                    if (j > 0u)
                        s0 += g[j] * xv[kh][j - 1u];
                    s1 += g[j] * xv[kh][j];
                    if (j + 1u < RW)
                        s2 += g[j] * xv[kh][j + 1u];
                }
                acc[c][kh * 3u] += s0;
                acc[c][kh * 3u + 1u] += s1;
                acc[c][kh * 3u + 2u] += s2;
            }
        }
    }
    [[unroll]] for (uint c = 0u; c < CT; c++) {
        [[unroll]] for (uint t = 0u; t < 9u; t++)
            part[((s * p.o + co0 + c) * p.c + ci) * 9u + t] = acc[c][t];
    }
}
