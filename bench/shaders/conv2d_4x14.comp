// Implicit-GEMM convolution (forward, or the input gradient with FLIP): tiles of 4 output
// channels x 14 pixels of a row (whole rows of 14); conv2d.glsl has the method.
#version 450
#extension GL_GOOGLE_include_directive : require
#define CT 4
#define PT 14
#define FULL 1
#include "conv2d.glsl"
