// The references' vector access: a buffer of V4 is read with LD and written with ST. V4 is a
// vec4, or with PAIRED (glslc -DPAIRED) a pair of 64-bit integers holding the same 16 bytes:
// llvmpipe moves a vector access's components one invocation at a time, each with a bounds
// check, so two components cost less than four (bench/README.md). The *_oct shaders need
// PAIRED (their name ends in "+paired" in bench_ops).
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
// Octets: a buffer of V8 (four 64-bit integers: eight 32-bit elements) read by LO and HI (the
// first and last four elements) and written by ST8; one access moves eight elements.
#define V8 u64vec4
vec4 LO(u64vec4 v) {
    return LD(v.xy);
}
vec4 HI(u64vec4 v) {
    return LD(v.zw);
}
u64vec4 ST8(vec4 lo, vec4 hi) {
    return u64vec4(ST(lo), ST(hi));
}
#else
#define V4 vec4
#define LD(v) (v)
#define ST(v) (v)
#endif
