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
//   FLIP (spec constant 0) = 1 computes the input gradient dX = conv(dY, w flipped and
// transposed): the input then has C = the forward's output channels, the output O = the forward's
// input channels, and weight (o, c, kh, kw) is read as w[c][o][2 - kh][2 - kw] in place.
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_EXT_control_flow_attributes : require
#if defined(PAIRED) && FULL && (PT % 2) == 0
#define ROW_PAIRS 1
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#endif
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint FLIP = 0u;
layout(constant_id = 1) const uint SHARE = 0u;
#ifdef ROW_PAIRS
layout(std430, binding = 0) writeonly buffer Yb { uint64_t y[]; };
layout(std430, binding = 1) readonly buffer Xb { uint64_t x[]; };
#else
layout(std430, binding = 0) writeonly buffer Yb { float y[]; };
layout(std430, binding = 1) readonly buffer Xb { float x[]; };
#endif
layout(std430, binding = 2) readonly buffer Wb { float w[]; };
layout(push_constant) uniform P { uint c; uint o; uint h; uint wd; } p;

// The weight of output channel co, input channel ci, tap t = kh * 3 + kw.
float weight(uint co, uint ci, uint t) {
    return FLIP != 0u ? w[(ci * p.o + co) * 9u + 8u - t] : w[(co * p.c + ci) * 9u + t];
}

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
            [[unroll]] for (uint t = 0u; t < 9u; t++)
                wl[t] = weight(mine, ci, t);
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
                [[unroll]] for (uint t = 0u; t < 9u; t++)
                    wv[c][t] = weight(co0 + c, ci, t);
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
#else
                v[0] = x[rb - lofs] * lm;
                v[PT + 1] = x[rb + rofs] * rm;
#endif
#ifdef ROW_PAIRS
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
