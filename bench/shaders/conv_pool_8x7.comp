// A convolution inside its max pool's windows (conv_pool.glsl has the method): tiles of 8 output
// channels x 7 pooled pixels.
#version 450
#extension GL_GOOGLE_include_directive : require
#define CT 8
#define PT 7
#include "conv_pool.glsl"
