// The references' vector access: a buffer of V4 is read with LD and written with ST. V4 is a
// vec4, or with PAIRED (glslc -DPAIRED) a pair of 64-bit integers holding the same 16 bytes:
// llvmpipe moves a vector access's components one invocation at a time, each with a bounds
// check, so two components cost less than four (bench/README.md).
#extension GL_GOOGLE_include_directive : require
#ifdef PAIRED
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#define V4 u64vec2
vec4 LD(u64vec2 v) {
    return vec4(uintBitsToFloat(unpackUint2x32(v.x)), uintBitsToFloat(unpackUint2x32(v.y)));
}
u64vec2 ST(vec4 v) {
    return u64vec2(packUint2x32(floatBitsToUint(v.xy)), packUint2x32(floatBitsToUint(v.zw)));
}
#else
#define V4 vec4
#define LD(v) (v)
#define ST(v) (v)
#endif
