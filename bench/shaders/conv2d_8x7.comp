// Implicit-GEMM convolution (forward, or the input gradient with FLIP): tiles of 8 output
// channels x 7 pixels of a row; conv2d.glsl has the method.
#version 450
#extension GL_GOOGLE_include_directive : require
#define CT 8
#define PT 7
#define FULL 0
#include "conv2d.glsl"
