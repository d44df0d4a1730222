// The method of the conv_pool_*.comp references (which define CT and PT and include this): a
// convolution computed inside its max pool's windows: y (N, O, H/2, W/2) =
// max_pool2d(relu(conv2d(x (N, 1, H, W), w (O, 1, 3, 3), b), padding 1), 2), one kernel, the
// convolution's output never stored (the training example's conv1 and pool1; bench_ops
// conv1_pool). Each invocation computes CT output channels x PT pooled pixels of one pooled row:
// the two image rows of its windows, 2 PT pixels each (2 CT 2 PT accumulators), from the four
// input rows that feed them and their halo columns (4 (2 PT + 2) loads, each serving up to
// 3 x 3 taps of every channel of the tile), then each window's maximum, the bias and the relu
// (max(relu(a + b)) = relu(max(a) + b)), and stores CT PT pooled values, a quarter of what the
// convolution alone stores.
//   Grid: x over the pooled row tiles (N (H/2) (W/2 / PT) invocations, workgroups of 64), y over
// blocks of CT output channels (so the weights are the same for every lane of a workgroup).
// x, w and b are uniform texel buffers of R32G32B32A32_UINT texels (the host binds them so;
// element e is component e % 4 of texel e / 4): llvmpipe gathers a texel fetch for all lanes at
// once (docs/lavapipe.md). Push constants: O, H, W.
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_samplerless_texture_functions : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer Yb { float y[]; };
layout(binding = 1) uniform utextureBuffer x;
layout(binding = 2) uniform utextureBuffer w;
layout(binding = 3) uniform utextureBuffer b;
layout(push_constant) uniform P { uint o; uint h; uint wd; } p;

#define FETCH1(buf, e) uintBitsToFloat(texelFetch(buf, int((e) >> 2u))[(e) & 3u])

void main() {
    uint ph_n = p.h / 2u, pw_n = p.wd / 2u, tiles = pw_n / PT;
    uint item = gl_GlobalInvocationID.x; // the grid is exact: no bounds check
    uint tile = item % tiles, ph = (item / tiles) % ph_n, n = item / (tiles * ph_n);
    uint co0 = gl_WorkGroupID.y * CT;
    uint col0 = tile * (2u * PT); // the first image column of the tile's windows
    // The weights of the tile's channels: CT * 9 consecutive elements from co0 * 9 (co0 a
    // multiple of CT = 8: 72 elements, 18 whole texels).
    float wt[CT][9];
    [[unroll]] for (uint q = 0u; q < CT * 9u / 4u; q++) {
        vec4 t = uintBitsToFloat(texelFetch(w, int((co0 * 9u) / 4u + q)));
        [[unroll]] for (uint c = 0u; c < 4u; c++)
            wt[(q * 4u + c) / 9u][(q * 4u + c) % 9u] = t[c];
    }
    float acc[CT][2][2 * PT];
    [[unroll]] for (uint c = 0u; c < CT; c++)
        [[unroll]] for (uint r = 0u; r < 2u; r++)
            [[unroll]] for (uint j = 0u; j < 2u * PT; j++)
                acc[c][r][j] = 0.0;
    // Input rows 2 ph - 1 .. 2 ph + 2; row ir feeds output row r = 0, 1 through tap kh = ir - r.
    [[unroll]] for (uint ir = 0u; ir < 4u; ir++) {
        int ih = int(2u * ph + ir) - 1;
        if (ih < 0 || ih >= int(p.h))
            continue;
        float row[2u * PT + 2u];
        uint base = (n * p.h + uint(ih)) * p.wd;
        [[unroll]] for (uint j = 0u; j < 2u * PT + 2u; j++) {
            int iw = int(col0 + j) - 1;
            row[j] = iw < 0 || iw >= int(p.wd) ? 0.0 : FETCH1(x, base + uint(iw));
        }
        [[unroll]] for (uint r = 0u; r < 2u; r++) {
            int kh = int(ir) - int(r);
            if (kh < 0 || kh > 2)
                continue;
            [[unroll]] for (uint c = 0u; c < CT; c++)
                [[unroll]] for (uint j = 0u; j < 2u * PT; j++)
                    [[unroll]] for (uint kw = 0u; kw < 3u; kw++)
                        acc[c][r][j] += wt[c][uint(kh) * 3u + kw] * row[j + kw];
        }
    }
    uint pw0 = tile * PT;
    [[unroll]] for (uint c = 0u; c < CT; c++) {
        float bias = FETCH1(b, co0 + c);
        uint out0 = ((n * p.o + co0 + c) * ph_n + ph) * pw_n + pw0;
        [[unroll]] for (uint j = 0u; j < PT; j++) {
            float m = max(max(acc[c][0][2u * j], acc[c][0][2u * j + 1u]),
                          max(acc[c][1][2u * j], acc[c][1][2u * j + 1u]));
            y[out0 + j] = max(m + bias, 0.0);
        }
    }
}
