// One step of the dispatch-overhead chain: o[j] = sum_k x[k] w[k, j] over n = 64 (one workgroup),
// the same computation as each of Kiln's chained kernels.
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer O { float o[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer W { float w[]; };
void main() {
    uint j = gl_LocalInvocationIndex;
    float s = 0.0;
    for (uint k = 0u; k < 64u; k++)
        s += x[k] * w[k * 64u + j];
    o[j] = s;
}
