// Implicit-GEMM 2-d convolution as conv2d.glsl computes it (3x3, stride 1, padding 1; FLIP for
// the input gradient), with the roles of the lanes swapped, for the conv2d_lanes_*.comp
// references (which define RT): a lane is one output channel (local x: the O channels; a
// subgroup lies within one block of rows), and its tile is RT whole output rows of RW = 14
// pixels (workgroup x: image n, rows oh0 .. oh0 + RT - 1). Per input channel a lane loads its own
// nine weights, and the RT + 2 input rows its taps read are loaded once for the whole subgroup:
// lane l < 7 loads the pair of pixels 2l, 2l + 1 of the row and every lane takes the seven pairs
// with subgroupBroadcast. That is 9 + RT + 2 loads per lane for 9 x 14 x RT multiply-adds (the
// tile of 8 channels x 14 pixels of conv2d.glsl makes 9 + 21 for 9 x 14 x 8). Padding rows are
// skipped (the same rows for every lane of the subgroup); padding columns are known zeros.
// Needs a subgroup of at least 7 lanes with ballot operations, O a multiple of its size.
// PAIRED (glslc -DPAIRED): rows moved as 64-bit pairs of floats.
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_EXT_control_flow_attributes : require
#define RW 14u
#ifdef PAIRED
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#define ELEM uint64_t
#else
#define ELEM float
#endif
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const uint FLIP = 0u;
layout(std430, binding = 0) writeonly buffer Yb { ELEM y[]; };
layout(std430, binding = 1) readonly buffer Xb { ELEM x[]; };
layout(std430, binding = 2) readonly buffer Wb { float w[]; };
layout(push_constant) uniform P { uint c; uint o; uint h; } p;

// Pixels 2 j, 2 j + 1 of the row at element offset at (even).
vec2 load_pair(uint at, uint j) {
#ifdef PAIRED
    return uintBitsToFloat(unpackUint2x32(x[at / 2u + j]));
#else
    return vec2(x[at + 2u * j], x[at + 2u * j + 1u]);
#endif
}

void main() {
    uint co = gl_LocalInvocationID.x;
    uint blocks = p.h / RT;
    uint n = gl_WorkGroupID.x / blocks, oh0 = (gl_WorkGroupID.x % blocks) * RT;
    uint plane = p.h * RW;
    uint lane = min(gl_SubgroupInvocationID, RW / 2u - 1u); // the pair this lane loads
    float acc[RT][RW];
    [[unroll]] for (uint t = 0u; t < RT; t++) {
        [[unroll]] for (uint q = 0u; q < RW; q++)
            acc[t][q] = 0.0;
    }
    for (uint ci = 0u; ci < p.c; ci++) {
        float wv[9];
        [[unroll]] for (uint t = 0u; t < 9u; t++)
            wv[t] = FLIP != 0u ? w[(ci * p.o + co) * 9u + 8u - t] : w[(co * p.c + ci) * 9u + t];
        uint base = (n * p.c + ci) * plane;
        // Input row oh0 - 1 + r feeds output rows oh0 + t with kh = r - t in 0..2.
        [[unroll]] for (uint r = 0u; r < RT + 2u; r++) {
            if ((r != 0u || oh0 != 0u) && (r != RT + 1u || oh0 + RT != p.h)) {
                vec2 mine = load_pair(base + (oh0 + r - 1u) * RW, lane);
                float v[RW + 2u];
                v[0] = 0.0;
                v[RW + 1u] = 0.0;
#define BC(l)                                                                                      \
    {                                                                                              \
        vec2 pr = subgroupBroadcast(mine, l);                                                      \
        v[1u + 2u * l] = pr.x;                                                                     \
        v[2u + 2u * l] = pr.y;                                                                     \
    }
                BC(0u) BC(1u) BC(2u) BC(3u) BC(4u) BC(5u) BC(6u)
#undef BC
                [[unroll]] for (uint t = 0u; t < RT; t++) {
                    if (r >= t && r <= t + 2u) {
                        uint kh = r - t;
                        float w0 = wv[kh * 3u], w1 = wv[kh * 3u + 1u], w2 = wv[kh * 3u + 2u];
                        [[unroll]] for (uint q = 0u; q < RW; q++)
                            acc[t][q] += v[q] * w0 + v[q + 1u] * w1 + v[q + 2u] * w2;
                    }
                }
            }
        }
    }
    [[unroll]] for (uint t = 0u; t < RT; t++) {
        uint ob = ((n * p.o + co) * p.h + oh0 + t) * RW;
#ifdef PAIRED
        [[unroll]] for (uint j = 0u; j < RW / 2u; j++)
            y[ob / 2u + j] = packUint2x32(floatBitsToUint(vec2(acc[t][2u * j], acc[t][2u * j + 1u])));
#else
        [[unroll]] for (uint q = 0u; q < RW; q++)
            y[ob + q] = acc[t][q];
#endif
    }
}
