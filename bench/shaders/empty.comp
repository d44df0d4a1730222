// The trivial shader of the dispatch-overhead reference: one invocation writes one float.
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer O { float o[]; };
void main() {
    if (gl_LocalInvocationIndex == 0u)
        o[gl_WorkGroupID.x] = 1.0;
}
