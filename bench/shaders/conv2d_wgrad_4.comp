// The convolution's weight gradient, first pass: 4 output channels x 9 taps per invocation over
// a slice of image rows; conv2d_wgrad.glsl has the method.
#version 450
#extension GL_GOOGLE_include_directive : require
#define CT 4
#include "conv2d_wgrad.glsl"
