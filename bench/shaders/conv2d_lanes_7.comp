// Implicit-GEMM convolution (forward, or the input gradient with FLIP), a lane per output
// channel, tiles of 7 whole rows; conv2d_lanes.glsl has the method.
#version 450
#extension GL_GOOGLE_include_directive : require
#define RT 7
#include "conv2d_lanes.glsl"
