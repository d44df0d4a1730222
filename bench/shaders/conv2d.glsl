// Implicit-GEMM 2-d convolution for the conv*.comp references (which define CT, PT and FULL and
// include this): y (N, O, H, W) = conv(x (N, C, H, W), w), 3x3 kernel, stride 1, padding 1 (the
// fashion_net shape), no im2col buffer. Each invocation computes a register tile of CT output
// channels x PT consecutive pixels of one output row (PT divides W; FULL: PT == W, a whole row,
// whose padding columns are then known zeros). The reduction walks (ci, kh): the tile's input row
// segment and its two halo columns are loaded once and serve the three kw taps of every output
// channel of the tile (3 CT PT multiply-adds per PT + 2 loads); a padding row (ih outside the
// image) is skipped, and the halo columns of a partial row are clamped loads scaled by 0 or 1,
// both decided once per invocation, outside the reduction loop.
//   Grid: x over the row tiles (N H W / PT invocations, workgroups of 64), y over blocks of CT
// output channels. On llvmpipe (lavapipe) every load whose address differs between lanes is a
// loop over the lanes, so the tile is chosen to have few loads per multiply-add:
//   - SHARE (spec constant 1): a subgroup's lanes share their output channels (the workgroup's y),
//     so lane l < CT loads the nine weights of channel co0 + l and every lane takes them with
//     subgroupBroadcast: 9 loads per input channel instead of 9 CT. Needs a subgroup of at
//     least CT lanes with ballot operations (the host decides).
//   - PAIRED (glslc -DPAIRED) with FULL: rows moved as 64-bit pairs of floats (W even), half the
//     loads and stores (vec.glsl explains why this pays on llvmpipe).
//   TEXELS (glslc -DTEXELS): x and w are uniform texel buffers of R32G32B32A32_UINT texels (the
// host binds them so; element e is component e % 4 of texel e / 4): on llvmpipe a texel fetch
// gathers all lanes at once where a storage-buffer load moves them one at a time
// (docs/lavapipe.md). The nine weights of (co, ci), consecutive at any alignment, come from three
// texels; a whole row (FULL, PT % 4 == 2: it starts at an even element) from (PT + 2) / 4 texels,
// from the first component of the first or from its third; a partial row's elements one by one.
// The stores stay storage-buffer stores (pairs with PAIRED).
//   FLIP (spec constant 0) = 1 computes the input gradient dX = conv(dY, w flipped and
// transposed): the input then has C = the forward's output channels, the output O = the forward's
// input channels, and weight (o, c, kh, kw) is read as w[c][o][2 - kh][2 - kw] in place.
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_EXT_control_flow_attributes : require
#if defined(PAIRED) && FULL && (PT % 2) == 0
#define ROW_PAIRS 1
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
#ifdef TEXELS
#extension GL_EXT_samplerless_texture_functions : require
#endif
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint FLIP = 0u;
layout(constant_id = 1) const uint SHARE = 0u;
#ifdef ROW_PAIRS
layout(std430, binding = 0) writeonly buffer Yb { uint64_t y[]; };
#else
layout(std430, binding = 0) writeonly buffer Yb { float y[]; };
#endif
#ifdef TEXELS
layout(binding = 1) uniform utextureBuffer x;
layout(binding = 2) uniform utextureBuffer w;
#elif defined(ROW_PAIRS)
layout(std430, binding = 1) readonly buffer Xb { uint64_t x[]; };
#else
layout(std430, binding = 1) readonly buffer Xb { float x[]; };
#endif
#ifndef TEXELS
layout(std430, binding = 2) readonly buffer Wb { float w[]; };
#endif
layout(push_constant) uniform P { uint c; uint o; uint h; uint wd; } p;

#ifdef TEXELS
// Element e of texel buffer buf.
#define FETCH1(buf, e) uintBitsToFloat(texelFetch(buf, int((e) >> 2u))[(e) & 3u])

// The nine weights of output channel co, input channel ci (r[t], tap t = kh * 3 + kw): nine
// consecutive elements from e = the first's offset, within the three texels from e / 4, shifted
// down by e % 4 components in two steps (by e & 1, then by e & 2).
void weights9(uint co, uint ci, out float r[9]) {
    uint e = FLIP != 0u ? (ci * p.o + co) * 9u : (co * p.c + ci) * 9u;
    int t0 = int(e >> 2u);
    uvec4 q0 = texelFetch(w, t0), q1 = texelFetch(w, t0 + 1), q2 = texelFetch(w, t0 + 2);
    uint u[12] = uint[12](q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w, q2.x, q2.y, q2.z, q2.w);
    bool by1 = (e & 1u) != 0u, by2 = (e & 2u) != 0u;
    uint s[11];
    [[unroll]] for (uint k = 0u; k < 11u; k++)
        s[k] = mix(u[k], u[k + 1u], by1);
    float f[9]; // in memory order: f[8 - t] is tap t with FLIP
    [[unroll]] for (uint k = 0u; k < 9u; k++)
        f[k] = uintBitsToFloat(mix(s[k], s[k + 2u], by2));
    [[unroll]] for (uint t = 0u; t < 9u; t++)
        r[t] = FLIP != 0u ? f[8u - t] : f[t];
}
#else
// The weight of output channel co, input channel ci, tap t = kh * 3 + kw.
float weight(uint co, uint ci, uint t) {
    return FLIP != 0u ? w[(ci * p.o + co) * 9u + 8u - t] : w[(co * p.c + ci) * 9u + t];
}
#endif

void main() {
    uint segs = p.wd / PT;
    uint tile = gl_GlobalInvocationID.x;
    uint ow0 = (tile % segs) * PT, row = tile / segs;
    uint oh = row % p.h, n = row / p.h;
    uint co0 = gl_WorkGroupID.y * CT;
    uint plane = p.h * p.wd;
    float acc[CT][PT];
    [[unroll]] for (uint c = 0u; c < CT; c++) {
        [[unroll]] for (uint q = 0u; q < PT; q++)
            acc[c][q] = 0.0;
    }
#if !FULL
    // The halo columns ow0 - 1 and ow0 + PT: clamped into the row, scaled by 0 outside it.
    uint lofs = ow0 > 0u ? 1u : 0u;
    float lm = ow0 > 0u ? 1.0 : 0.0;
    uint rofs = ow0 + PT < p.wd ? PT : PT - 1u;
    float rm = ow0 + PT < p.wd ? 1.0 : 0.0;
#endif
    // The rows kh = 0 and 2 exist unless oh is the first or last row (decided once).
    bool top = oh > 0u, bottom = oh + 1u < p.h;
    uint mine = co0 + min(gl_SubgroupInvocationID, CT - 1u); // the channel this lane loads (SHARE)
    for (uint ci = 0u; ci < p.c; ci++) {
        float wv[CT][9];
        if (SHARE != 0u) {
            float wl[9];
#ifdef TEXELS
            weights9(mine, ci, wl);
#else
            [[unroll]] for (uint t = 0u; t < 9u; t++)
                wl[t] = weight(mine, ci, t);
#endif
            [[unroll]] for (uint t = 0u; t < 9u; t++) {
#define BC(l) wv[l][t] = subgroupBroadcast(wl[t], l);
                BC(0) BC(1) BC(2) BC(3)
#if CT > 4
                BC(4) BC(5) BC(6) BC(7)
#endif
#undef BC
            }
        } else {
            [[unroll]] for (uint c = 0u; c < CT; c++) {
#ifdef TEXELS
                weights9(co0 + c, ci, wv[c]);
#else
                [[unroll]] for (uint t = 0u; t < 9u; t++)
                    wv[c][t] = weight(co0 + c, ci, t);
#endif
            }
        }
        uint base = (n * p.c + ci) * plane + ow0;
        [[unroll]] for (uint kh = 0u; kh < 3u; kh++) {
            if ((kh != 0u || top) && (kh != 2u || bottom)) {
                uint rb = base + (oh + kh - 1u) * p.wd;
                float v[PT + 2];
#if FULL
                v[0] = 0.0;
                v[PT + 1] = 0.0;
#elif defined(TEXELS)
                v[0] = FETCH1(x, rb - lofs) * lm;
                v[PT + 1] = FETCH1(x, rb + rofs) * rm;
#else
                v[0] = x[rb - lofs] * lm;
                v[PT + 1] = x[rb + rofs] * rm;
#endif
#if defined(TEXELS) && FULL && (PT % 4) == 2
                {
                    // rb is even (a whole row of even width): elements rb .. rb + PT - 1 are
                    // components 0 .. PT - 1 of the row's texels, or 2 .. PT + 1 (rb % 4 == 2).
                    uvec4 q[(PT + 2) / 4];
                    [[unroll]] for (int k = 0; k < (PT + 2) / 4; k++)
                        q[k] = texelFetch(x, int(rb >> 2u) + k);
                    bool by2 = (rb & 2u) != 0u;
                    [[unroll]] for (uint j = 0u; j < PT; j++)
                        v[1u + j] = uintBitsToFloat(
                            mix(q[j / 4u][j % 4u], q[(j + 2u) / 4u][(j + 2u) % 4u], by2));
                }
#elif defined(TEXELS)
                [[unroll]] for (uint j = 0u; j < PT; j++)
                    v[1u + j] = FETCH1(x, rb + j);
#elif defined(ROW_PAIRS)
                [[unroll]] for (uint j = 0u; j < PT / 2u; j++) {
                    vec2 pr = uintBitsToFloat(unpackUint2x32(x[rb / 2u + j]));
                    v[1u + 2u * j] = pr.x;
                    v[2u + 2u * j] = pr.y;
                }
#else
                [[unroll]] for (uint j = 0u; j < PT; j++)
                    v[1u + j] = x[rb + j];
#endif
                [[unroll]] for (uint c = 0u; c < CT; c++) {
                    float w0 = wv[c][kh * 3u], w1 = wv[c][kh * 3u + 1u], w2 = wv[c][kh * 3u + 2u];
                    [[unroll]] for (uint q = 0u; q < PT; q++)
                        acc[c][q] += v[q] * w0 + v[q + 1u] * w1 + v[q + 2u] * w2;
                }
            }
        }
    }
    [[unroll]] for (uint c = 0u; c < CT; c++) {
        uint ob = ((n * p.o + co0 + c) * p.h + oh) * p.wd + ow0;
#ifdef ROW_PAIRS
        [[unroll]] for (uint j = 0u; j < PT / 2u; j++)
            y[ob / 2u + j] = packUint2x32(floatBitsToUint(vec2(acc[c][2u * j], acc[c][2u * j + 1u])));
#else
        [[unroll]] for (uint q = 0u; q < PT; q++)
            y[ob + q] = acc[c][q];
#endif
    }
}
