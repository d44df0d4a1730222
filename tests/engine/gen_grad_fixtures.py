#!/usr/bin/python3
"""Writes grad_fixtures.h: the gradient cases of test_grad.c, with PyTorch as the oracle.

Run by hand (torch is needed only here, never by the library or CI):

    /usr/bin/python3 tests/engine/gen_grad_fixtures.py   (then clang-formats the header)

Each case: up to three leaf inputs (small deterministic values, exact in f32), a view of each
(none, flip, expand, as_strided, transpose: made in Kiln with the same movement op), one op of
kiln.h (GOP_*, with its integer parameters p[] and one double d), and a fixed weighting r of
the output's shape: loss = sum(out * r). The gradients of each leaf are torch's, computed in
float64 from the f32 values and rounded to f32. The C side (test_grad.c) rebuilds every case
from the table with one switch over GOP_*.
"""
import os
import shutil
import subprocess

import torch

torch.set_default_dtype(torch.float64)
I64_MIN = "INT64_MIN"
I64_MAX = "INT64_MAX"

OPS = [
    "ADD", "SUB", "MUL", "DIV", "POW", "MAXIMUM", "MINIMUM", "WHERE",
    "NEG", "ABS", "EXP", "LOG", "SQRT", "RSQRT", "SIN", "COS", "TANH", "SIGMOID", "RELU",
    "CAST_F16", "ADD_SCALAR", "MUL_SCALAR",
    "SUM", "PROD", "MAX", "MIN", "MEAN", "VAR", "STD", "SOFTMAX", "LOG_SOFTMAX",
    "MATMUL", "CONV2D",
    "RESHAPE", "PERMUTE", "TRANSPOSE", "EXPAND", "PAD", "SHRINK", "FLIP", "SLICE", "SLICE_SYM",
    "UNSQUEEZE", "SQUEEZE", "NARROW", "SELECT", "DIAGONAL", "UNFOLD", "AS_STRIDED",
    "CHAIN_MLP", "CHAIN_PATHS", "CHAIN_UNUSED", "CHAIN_VIEWS",
    "CHAIN_CONVLIKE", "CHAIN_NORM", "CHAIN_ATTN", "CHAIN_MAXPOOL", "CHAIN_VIEWMIX", "CHAIN_DIAG",
]

_seed = [0]


def data(shape, kind="signed"):
    """Deterministic values that f32 holds exactly (multiples of 1/256)."""
    _seed[0] += 1
    g = torch.Generator().manual_seed(1000 + _seed[0])
    n = 1
    for s in shape:
        n *= s
    if kind == "signed":
        v = torch.rand(n, generator=g) * 2 - 1
    elif kind == "pos":
        v = torch.rand(n, generator=g) * 1.5 + 0.5
    elif kind == "int":  # small integers: ties for max/min/maximum
        v = torch.randint(-2, 3, (n,), generator=g).double()
        return v.reshape(shape)
    elif kind == "wide":
        v = torch.rand(n, generator=g) * 4 - 2
    else:
        raise ValueError(kind)
    v = torch.round(v * 256) / 256
    return v.reshape(shape)


def inp(shape, kind="signed", view=None, values=None):
    x = data(shape, kind) if values is None else torch.tensor(values, dtype=torch.float64).reshape(shape)
    return {"shape": list(shape), "x": x, "view": view}


def apply_view(t, view):
    if view is None:
        return t
    k = view[0]
    if k == "flip":
        return t.flip(view[1])
    if k == "expand":
        return t.expand(*view[1])
    if k == "as_strided":
        return t.as_strided(view[1], view[2], view[3])
    if k == "t":
        return t.transpose(0, 1)
    raise ValueError(k)


def py_slice(t, dim, start, stop, step):
    n = t.shape[dim]
    s = None if start in (I64_MIN, I64_MAX) else start
    e = None if stop in (I64_MIN, I64_MAX) else stop
    idx = list(range(n))[slice(s, e, step)]
    return torch.index_select(t, dim, torch.tensor(idx, dtype=torch.long))


def reduce_args(p):
    naxes = p[0]
    axes = p[1:1 + naxes]
    keep = bool(p[1 + naxes])
    return (tuple(axes) if naxes else tuple()), keep


def forward(op, xs, p, d):
    a = xs[0]
    b = xs[1] if len(xs) > 1 else None
    if op == "ADD":
        return a + b
    if op == "SUB":
        return a - b
    if op == "MUL":
        return a * b
    if op == "DIV":
        return a / b
    if op == "POW":
        return torch.pow(a, b)
    if op == "MAXIMUM":
        return torch.maximum(a, b)
    if op == "MINIMUM":
        return torch.minimum(a, b)
    if op == "WHERE":
        return torch.where(xs[2] > 0, a, b)
    unary = {"NEG": torch.neg, "ABS": torch.abs, "EXP": torch.exp, "LOG": torch.log,
             "SQRT": torch.sqrt, "RSQRT": torch.rsqrt, "SIN": torch.sin, "COS": torch.cos,
             "TANH": torch.tanh, "SIGMOID": torch.sigmoid, "RELU": torch.relu}
    if op in unary:
        return unary[op](a)
    if op == "CAST_F16":
        return a.float().half().double()
    if op == "ADD_SCALAR":
        return a + d
    if op == "MUL_SCALAR":
        return a * d
    if op in ("SUM", "PROD", "MAX", "MIN", "MEAN", "VAR", "STD"):
        axes, keep = reduce_args(p)
        if op == "SUM":
            return a.sum(dim=axes, keepdim=keep) if axes else a.sum()
        if op == "MEAN":
            return a.mean(dim=axes, keepdim=keep) if axes else a.mean()
        if op == "PROD":
            if not axes:
                return a.prod()
            for ax in sorted((x % a.dim() for x in axes), reverse=True):
                a = a.prod(dim=ax, keepdim=keep)
            return a
        if op == "MAX":
            return torch.amax(a, dim=axes, keepdim=keep)
        if op == "MIN":
            return torch.amin(a, dim=axes, keepdim=keep)
        dims = axes if axes else tuple(range(a.dim()))
        if op == "VAR":
            return torch.var(a, dim=dims, unbiased=bool(d), keepdim=keep)
        return torch.std(a, dim=dims, unbiased=bool(d), keepdim=keep)
    if op == "SOFTMAX":
        return torch.softmax(a, p[0])
    if op == "LOG_SOFTMAX":
        return torch.log_softmax(a, p[0])
    if op == "MATMUL":
        return torch.matmul(a, b)
    if op == "CONV2D":
        return torch.nn.functional.conv2d(a, b, stride=p[0], padding=p[1])
    if op == "RESHAPE":
        return a.reshape(p[1:1 + p[0]])
    if op == "PERMUTE":
        return a.permute(p[:a.dim()])
    if op == "TRANSPOSE":
        return a.transpose(p[0], p[1])
    if op == "EXPAND":
        return a.expand(p[1:1 + p[0]])
    if op == "PAD":
        nd = a.dim()
        tp = []
        for dd in reversed(range(nd)):
            tp += [p[2 * dd], p[2 * dd + 1]]
        return torch.nn.functional.pad(a, tp)
    if op == "SHRINK":
        nd = a.dim()
        for dd in range(nd):
            a = a.narrow(dd, p[dd], p[nd + dd] - p[dd])
        return a
    if op == "FLIP":
        return a.flip(p[0])
    if op in ("SLICE", "SLICE_SYM"):
        return py_slice(a, p[0], p[1], p[2], p[3])
    if op == "UNSQUEEZE":
        return a.unsqueeze(p[0])
    if op == "SQUEEZE":
        return a.squeeze(p[0])
    if op == "NARROW":
        return a.narrow(p[0], p[1], p[2])
    if op == "SELECT":
        return a.select(p[0], p[1])
    if op == "DIAGONAL":
        return torch.diagonal(a, p[0], p[1], p[2])
    if op == "UNFOLD":
        return a.unfold(p[0], p[1], p[2])
    if op == "AS_STRIDED":
        nd = p[0]
        return a.as_strided(p[1:1 + nd], p[1 + nd:1 + 2 * nd], p[1 + 2 * nd])
    if op == "CHAIN_MLP":  # log_softmax(tanh(x @ w + b), -1)
        return torch.log_softmax(torch.tanh(a @ b + xs[2]), -1)
    if op == "CHAIN_PATHS":  # x * x + sin(x) * exp(x): x along four paths
        return a * a + torch.sin(a) * torch.exp(a)
    if op == "CHAIN_UNUSED":  # mul_scalar(x, 3): y (the second input) unused
        return a * 3
    if op == "CHAIN_VIEWS":  # x * flip(x, 0) + transpose(x) + sum(x, 1, keepdim)
        return a * a.flip(0) + a.transpose(0, 1) + a.sum(1, keepdim=True)
    c = xs[2] if len(xs) > 2 else None
    if op == "CHAIN_CONVLIKE":  # softmax(unfold(a, 1, 3, 2) @ b, -1)
        return torch.softmax(a.unfold(1, 3, 2) @ b, -1)
    if op == "CHAIN_NORM":  # layer norm of a's rows, gain b, bias c
        m = a.mean(-1, keepdim=True)
        v = a.var(-1, unbiased=False, keepdim=True)
        return (a - m) / torch.sqrt(v + 1e-5) * b + c
    if op == "CHAIN_ATTN":  # softmax(a @ b^T / 2, -1) @ c
        return torch.softmax((a @ b.t()) * 0.5, -1) @ c
    if op == "CHAIN_MAXPOOL":  # amax over 3x3 windows, stride 2, of a zero-padded (C, H, W)
        p = torch.nn.functional.pad(a, (1, 1, 1, 1))
        return torch.amax(p.unfold(1, 3, 2).unfold(2, 3, 2), dim=(-1, -2))
    if op == "CHAIN_VIEWMIX":  # sum(expand(flip(a, 1)[1:4:2]^T), 0) * a[0:1]^T
        v = a.flip(1)[1:4:2].t().unsqueeze(0).expand(3, 5, 2).sum(0)
        return v * a.narrow(0, 0, 1).t()
    if op == "CHAIN_DIAG":  # diagonal(a @ a^T) * prod(a[:, 1])
        return torch.diagonal(a @ a.t(), 0, 0, 1) * a.select(1, 1).prod()
    raise ValueError(op)


CASES = []


def case(name, op, ins, p=(), d=0.0):
    CASES.append({"name": name, "op": op, "ins": ins, "p": list(p), "d": d})


# ---- elementwise, binary (with broadcasting) ----
case("add", "ADD", [inp([2, 3]), inp([2, 3])])
case("add_broadcast", "ADD", [inp([2, 1, 3]), inp([4, 1])])
case("sub_broadcast", "SUB", [inp([3]), inp([2, 3])])
case("mul", "MUL", [inp([2, 3]), inp([2, 3])])
case("mul_broadcast", "MUL", [inp([2, 3, 1]), inp([1, 4])])
case("div", "DIV", [inp([2, 3]), inp([2, 3], "pos")])
case("div_broadcast", "DIV", [inp([3, 1]), inp([2, 1, 4], "pos")])
case("pow", "POW", [inp([2, 3], "pos"), inp([2, 3], "wide")])
case("pow_broadcast", "POW", [inp([4], "pos"), inp([3, 1], "wide")])
case("pow_zeros", "POW", [inp([6], values=[0, 0, 1.5, 0.5, 2, 0]),
                          inp([6], values=[0, 2, 0, 3, 1, 1])])
case("maximum_ties", "MAXIMUM", [inp([3, 4], "int"), inp([3, 4], "int")])
case("minimum_ties_broadcast", "MINIMUM", [inp([3, 4], "int"), inp([4], "int")])
case("mul_0d", "MUL", [inp([]), inp([2, 3])])
case("pow_0d_exponent", "POW", [inp([2, 3], "pos"), inp([], "wide")])
case("where", "WHERE", [inp([2, 3]), inp([3]), inp([2, 3])])
# ---- elementwise, unary ----
case("neg", "NEG", [inp([2, 3])])
case("abs", "ABS", [inp([7], values=[-2, -0.5, 0, 0.25, 1, 0, -3])])
case("exp", "EXP", [inp([2, 3])])
case("log", "LOG", [inp([2, 3], "pos")])
case("sqrt", "SQRT", [inp([2, 3], "pos")])
case("rsqrt", "RSQRT", [inp([2, 3], "pos")])
case("sin", "SIN", [inp([2, 3], "wide")])
case("cos", "COS", [inp([2, 3], "wide")])
case("tanh", "TANH", [inp([2, 3], "wide")])
case("sigmoid", "SIGMOID", [inp([2, 3], "wide")])
case("relu", "RELU", [inp([8], values=[-1, -0.5, 0, 0.5, 1, 2, -2, 0.125])])
case("cast_f16", "CAST_F16", [inp([2, 3])])
case("add_scalar", "ADD_SCALAR", [inp([2, 3])], d=1.5)
case("mul_scalar", "MUL_SCALAR", [inp([2, 3])], d=-2.5)
# ---- reductions ----
case("sum_all", "SUM", [inp([2, 3, 2])], p=[0, 0])
case("sum_axis", "SUM", [inp([2, 3, 2])], p=[1, 1, 0])
case("sum_axes_keepdim", "SUM", [inp([2, 3, 2])], p=[2, 0, -1, 1])
case("prod_all", "PROD", [inp([2, 3], "pos")], p=[0, 0])
case("prod_axis", "PROD", [inp([3, 4], "pos")], p=[1, 1, 0])
case("prod_zeros", "PROD", [inp([4, 3], values=[0, 2, 3, 0, 0, 1.5, 1, 2, -1, 0.5, 0, 2])],
     p=[1, 1, 1])
case("prod_zeros_all", "PROD", [inp([5], values=[2, 0, 3, -1, 0.5])], p=[0, 0])
case("prod_axes_zeros", "PROD", [inp([2, 2, 3], values=[1, 2, 0, 3, -1, 2, 0.5, 0, 0, 2, 1, 4])],
     p=[2, 0, -1, 0])
case("max_axes_ties_keepdim", "MAX", [inp([2, 3, 2], "int")], p=[2, 0, 2, 1])
case("max_all_ties", "MAX", [inp([3, 4], "int")], p=[0, 0])
case("max_axis_ties", "MAX", [inp([3, 4], "int")], p=[1, 1, 0])
case("min_axis_ties_keepdim", "MIN", [inp([3, 4], "int")], p=[1, 0, 1])
case("min_axes", "MIN", [inp([2, 3, 2], "int")], p=[2, 0, 2, 0])
case("mean_all", "MEAN", [inp([2, 3])], p=[0, 0])
case("mean_axis", "MEAN", [inp([2, 3, 2])], p=[1, 1, 1])
case("var_c1", "VAR", [inp([3, 4])], p=[1, 1, 0], d=1.0)
case("var_c0_all", "VAR", [inp([3, 4])], p=[0, 0], d=0.0)
case("std_c1_keepdim", "STD", [inp([3, 4])], p=[1, 0, 1], d=1.0)
case("std_c0", "STD", [inp([2, 3, 2])], p=[2, 1, 2, 0], d=0.0)
case("softmax", "SOFTMAX", [inp([3, 4], "wide")], p=[-1])
case("softmax_dim0", "SOFTMAX", [inp([3, 4], "wide")], p=[0])
case("log_softmax", "LOG_SOFTMAX", [inp([3, 4], "wide")], p=[1])
case("log_softmax_dim0", "LOG_SOFTMAX", [inp([2, 3, 2], "wide")], p=[0])
# ---- matmul, conv2d ----
case("matmul_1d_1d", "MATMUL", [inp([4]), inp([4])])
case("matmul_1d_2d", "MATMUL", [inp([3]), inp([3, 2])])
case("matmul_2d_1d", "MATMUL", [inp([2, 3]), inp([3])])
case("matmul_2d", "MATMUL", [inp([2, 3]), inp([3, 4])])
case("matmul_batched", "MATMUL", [inp([2, 2, 3]), inp([2, 3, 2])])
case("matmul_broadcast_batch", "MATMUL", [inp([2, 1, 2, 3]), inp([3, 3, 2])])
case("matmul_batched_2d", "MATMUL", [inp([2, 2, 3]), inp([3, 2])])
case("matmul_1d_batched", "MATMUL", [inp([3]), inp([2, 3, 2])])
case("matmul_batched_1d", "MATMUL", [inp([2, 2, 3]), inp([3])])
case("conv2d", "CONV2D", [inp([1, 2, 4, 4]), inp([3, 2, 2, 2])], p=[1, 0])
case("conv2d_stride_pad", "CONV2D", [inp([2, 1, 5, 5]), inp([2, 1, 3, 3])], p=[2, 1])
case("conv2d_stride_uncovered", "CONV2D", [inp([1, 2, 6, 5]), inp([2, 2, 3, 2])], p=[2, 1])
# ---- movement ----
case("reshape", "RESHAPE", [inp([2, 6])], p=[3, 3, 2, 2])
case("reshape_of_transpose", "RESHAPE", [inp([3, 4], view=("t",))], p=[2, 2, 6])
case("permute", "PERMUTE", [inp([2, 3, 4])], p=[2, 0, 1])
case("transpose", "TRANSPOSE", [inp([2, 3, 4])], p=[0, -1])
case("expand", "EXPAND", [inp([3, 1])], p=[3, 2, 3, 4])
case("pad", "PAD", [inp([2, 3])], p=[1, 0, 2, 1])
case("shrink", "SHRINK", [inp([4, 5])], p=[1, 0, 3, 4])
case("flip", "FLIP", [inp([3, 4])], p=[1])
case("slice_step2", "SLICE", [inp([7, 2])], p=[0, 1, 6, 2])
case("slice_step3_omitted", "SLICE", [inp([2, 8])], p=[1, I64_MIN, I64_MAX, 3])
case("slice_neg_step", "SLICE", [inp([7, 2])], p=[0, 5, 0, -2])
case("slice_neg_step_all", "SLICE", [inp([2, 6])], p=[-1, I64_MAX, I64_MIN, -1])
case("slice_neg_bounds", "SLICE", [inp([8])], p=[0, -2, -8, -3])
case("slice_empty", "SLICE", [inp([2, 5])], p=[1, 3, 1, 1])
case("slice_sym_step2", "SLICE_SYM", [inp([2, 9])], p=[1, 1, 8, 2])
case("unsqueeze", "UNSQUEEZE", [inp([2, 3])], p=[-1])
case("squeeze", "SQUEEZE", [inp([2, 1, 3])], p=[1])
case("narrow", "NARROW", [inp([3, 5])], p=[1, 1, 3])
case("narrow_neg_start", "NARROW", [inp([5, 2])], p=[0, -3, 2])
case("select", "SELECT", [inp([3, 4])], p=[1, 2])
case("select_neg", "SELECT", [inp([3, 4, 2])], p=[0, -1])
case("diagonal", "DIAGONAL", [inp([3, 4])], p=[0, 0, 1])
case("diagonal_pos_offset", "DIAGONAL", [inp([3, 4])], p=[1, 0, 1])
case("diagonal_neg_offset", "DIAGONAL", [inp([4, 3])], p=[-1, 0, 1])
case("diagonal_dims", "DIAGONAL", [inp([3, 2, 4])], p=[1, 2, 0])
case("diagonal_dims_neg", "DIAGONAL", [inp([2, 3, 3])], p=[-1, -1, 1])
case("diagonal_empty", "DIAGONAL", [inp([2, 3])], p=[3, 0, 1])
case("sum_0d", "SUM", [inp([])], p=[0, 0])
case("unfold_overlap", "UNFOLD", [inp([7])], p=[0, 3, 2])
case("unfold_dim1", "UNFOLD", [inp([2, 6])], p=[1, 2, 1])
case("unfold_gap", "UNFOLD", [inp([2, 8])], p=[-1, 2, 3])
# disjoint windows (step >= size: autograd.c unfold_grad_disjoint), with elements past the last
case("unfold_disjoint_tail", "UNFOLD", [inp([2, 7])], p=[1, 2, 2])
case("unfold_gap_tail", "UNFOLD", [inp([9, 2])], p=[0, 2, 3])
case("unfold_disjoint_strided", "UNFOLD", [inp([6, 3], view=("t",))], p=[1, 3, 3])
case("as_strided_overlap", "AS_STRIDED", [inp([8])], p=[2, 3, 3, 2, 1, 1])
case("as_strided_offset", "AS_STRIDED", [inp([3, 4])], p=[2, 2, 2, 1, 4, 2])
case("as_strided_zero_stride", "AS_STRIDED", [inp([6])], p=[2, 2, 3, 0, 1, 2])
case("as_strided_of_expand", "AS_STRIDED", [inp([3], view=("expand", [2, 3]))],
     p=[2, 2, 2, 1, 1, 0])
case("as_strided_of_transpose", "AS_STRIDED", [inp([3, 4], view=("t",))], p=[2, 3, 2, 2, 1, 1])
# ---- inputs that are views ----
case("mul_flipped_input", "MUL", [inp([3, 4], view=("flip", 0)), inp([3, 4])])
case("mul_expanded_input", "MUL", [inp([1, 4], view=("expand", [3, 4])), inp([3, 4])])
case("mul_as_strided_input", "MUL", [inp([6], view=("as_strided", [3, 3], [1, 1], 1)),
                                      inp([3, 3])])
case("matmul_transposed_flipped", "MATMUL", [inp([3, 2], view=("t",)),
                                             inp([3, 4], view=("flip", 1))])
case("sum_of_expanded_input", "SUM", [inp([3], view=("expand", [2, 3]))], p=[1, 0, 0])
case("softmax_flipped", "SOFTMAX", [inp([3, 4], "wide", view=("flip", 1))], p=[1])
# ---- chains ----
case("chain_mlp", "CHAIN_MLP", [inp([2, 3]), inp([3, 4]), inp([4])])
case("chain_paths", "CHAIN_PATHS", [inp([2, 3])])
case("chain_unused", "CHAIN_UNUSED", [inp([2, 3]), inp([4])])
case("chain_views", "CHAIN_VIEWS", [inp([3, 3])])
case("chain_convlike", "CHAIN_CONVLIKE", [inp([2, 7]), inp([3, 2])])
case("chain_norm", "CHAIN_NORM", [inp([3, 4], "wide"), inp([4]), inp([4])])
case("chain_attn", "CHAIN_ATTN", [inp([3, 4]), inp([5, 4]), inp([5, 2])])
case("chain_maxpool_ties", "CHAIN_MAXPOOL", [inp([2, 4, 4], "int")])
case("chain_viewmix", "CHAIN_VIEWMIX", [inp([4, 5])])
case("chain_diag", "CHAIN_DIAG", [inp([3, 3])])


def fmt(v):
    s = "%.9g" % v
    if "e" not in s and "." not in s and "n" not in s:
        s += ".0"
    return s + "f"


def arr(name, t):
    vals = [fmt(float(v)) for v in t.reshape(-1).tolist()] or ["0.0f"]
    lines = []
    for i in range(0, len(vals), 8):
        lines.append("    " + ", ".join(vals[i:i + 8]) + ",")
    return "static const float %s[] = {\n%s\n};\n" % (name, "\n".join(lines))


def ints(v):
    return "{" + ", ".join(str(x) for x in v) + "}" if v else "{0}"


def main():
    out = []
    out.append("/* Generated by gen_grad_fixtures.py (torch %s): do not edit. The gradient cases\n"
               " * of test_grad.c: leaves, their views, the op, the weighting r of the output\n"
               " * (loss = sum(out * r)) and torch's gradient of each leaf. */\n" %
               torch.__version__)
    out.append("#ifndef KILN_TESTS_ENGINE_GRAD_FIXTURES_H\n#define KILN_TESTS_ENGINE_GRAD_FIXTURES_H\n")
    out.append("#include <stdint.h>\n")
    out.append("typedef enum gc_op {\n" + "".join("    GOP_%s,\n" % o for o in OPS) + "} gc_op;\n")
    out.append("typedef enum gc_view { GV_NONE, GV_FLIP, GV_EXPAND, GV_AS_STRIDED, GV_T } gc_view;\n")
    out.append("""/* A leaf: its shape and values, then the view the op reads (flip: vp[0] the dim; expand:
 * vp[0..vndim) the shape; as_strided: shape, strides (vndim each) and the offset; t: dims 0 and
 * 1 swapped), and torch's gradient of the leaf. */
typedef struct gc_input {
    uint32_t ndim;
    int64_t shape[6];
    const float *data;
    gc_view view;
    uint32_t vndim;
    int64_t vp[16];
    const float *grad;
} gc_input;
typedef struct gc_case {
    const char *name;
    gc_op op;
    uint32_t nin;
    gc_input in[3];
    int64_t p[16]; /* the op's integer parameters (see test_grad.c build_op) */
    double d;      /* its double parameter */
    uint32_t out_ndim;
    int64_t out_shape[8];
    const float *r; /* the weighting of the output */
} gc_case;
""")
    table = []
    for k, c in enumerate(CASES):
        leaves = [i["x"].clone().requires_grad_(True) for i in c["ins"]]
        xs = [apply_view(l, i["view"]) for l, i in zip(leaves, c["ins"])]
        y = forward(c["op"], xs, c["p"], c["d"])
        g = torch.Generator().manual_seed(5000 + k)
        r = torch.round((torch.rand(y.shape, generator=g) * 2 - 1) * 256) / 256
        loss = (y * r).sum()
        grads = torch.autograd.grad(loss, leaves, allow_unused=True)
        ins = []
        for j, (i, gr) in enumerate(zip(c["ins"], grads)):
            if gr is None:
                gr = torch.zeros(i["shape"])
            out.append(arr("gc_%d_x%d" % (k, j), i["x"]))
            out.append(arr("gc_%d_g%d" % (k, j), gr))
            v = i["view"]
            if v is None:
                vk, vn, vp = "GV_NONE", 0, []
            elif v[0] == "flip":
                vk, vn, vp = "GV_FLIP", 0, [v[1]]
            elif v[0] == "expand":
                vk, vn, vp = "GV_EXPAND", len(v[1]), list(v[1])
            elif v[0] == "as_strided":
                vk, vn, vp = "GV_AS_STRIDED", len(v[1]), list(v[1]) + list(v[2]) + [v[3]]
            else:
                vk, vn, vp = "GV_T", 0, []
            ins.append("{%d, %s, gc_%d_x%d, %s, %d, %s, gc_%d_g%d}" %
                       (len(i["shape"]), ints(i["shape"]), k, j, vk, vn, ints(vp), k, j))
        out.append(arr("gc_%d_r" % k, r))
        table.append("    {\"%s\", GOP_%s, %d, {%s}, %s, %s, %d, %s, gc_%d_r},\n" %
                     (c["name"], c["op"], len(ins), ", ".join(ins), ints(c["p"]),
                      repr(float(c["d"])), y.dim(), ints(list(y.shape)), k))
    out.append("static const gc_case gc_cases[] = {\n" + "".join(table) + "};\n")
    out.append("#endif\n")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grad_fixtures.h")
    with open(path, "w") as f:
        f.write("\n".join(out))
    if shutil.which("clang-format"):  # as the repository's other generated headers
        subprocess.run(["clang-format", "-i", path], check=True)
    print("wrote %s: %d cases" % (path, len(CASES)))


if __name__ == "__main__":
    main()
