/* kiln_safetensors.h: reading weights from safetensors files (docs/safetensors.md).
 *
 *     kiln_safetensors *f;
 *     if (kiln_safetensors_open(ctx, "model.safetensors", &f) != KILN_OK) {
 *         fprintf(stderr, "%s\n", kiln_context_message(ctx)); // names the file and the field
 *         return 1;
 *     }
 *     for (uint32_t i = 0; i < kiln_safetensors_count(f); i++)
 *         printf("%s\n", kiln_safetensors_name(f, i));
 *     kiln_tensor *w = kiln_safetensors_load(f, "layers.0.weight", KILN_F32); // BF16 -> F32
 *     ...
 *     kiln_safetensors_close(f); // w stays: it is a tensor of the context like any other
 *
 * The format: an 8-byte little-endian header length N, N bytes of JSON
 * ({"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [begin, end]}}), then
 * the tensors' bytes, little-endian and row-major, at offsets relative to the end of the
 * header. The file is memory-mapped until kiln_safetensors_close; the whole header is checked
 * by kiln_safetensors_open, so that a file that opens has tensors that all fit.
 *
 * Errors follow kiln.h's conventions: kiln_safetensors_open and kiln_safetensors_info return a
 * status, and their own failure's message (naming the call, the file and the field) is
 * kiln_context_message's; kiln_safetensors_load is a graph-building call (NULL, and the first
 * error recorded in the context, sticky until kiln_context_clear_error). No file, however
 * malformed, crashes a call or leaks anything.
 *
 * Thread-safety: a file handle belongs to its context and is used by the context's thread.
 *
 * This header is part of the library (libkiln, with the Debian package libcjson1 as a
 * dependency: docs/packaging.md) and is installed next to kiln.h. */
#ifndef KILN_KILN_SAFETENSORS_H
#define KILN_KILN_SAFETENSORS_H

#include "kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

typedef struct kiln_safetensors kiln_safetensors;

/* The largest header kiln_safetensors_open accepts (safetensors' own limit): a longer one is
 * refused before anything is allocated. */
#define KILN_SAFETENSORS_MAX_HEADER 100000000

/* Opens path (a regular file: a FIFO, a device or a directory is refused without blocking),
 * maps it, and checks its header: JSON that is one object; "__metadata__", if present, an
 * object of strings; every other key a tensor with a known dtype ("BOOL", "U8", "I8",
 * "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64", "I64",
 * "U64"), a shape of at most KILN_MAX_DIMS sizes >= 0 whose product, in bytes, fits an int64,
 * and data_offsets [begin, end] inside the data, end - begin being exactly what the shape and
 * dtype need; no two tensors overlap or share a name (gaps between tensors are allowed).
 * Statuses: KILN_ERROR_INVALID_ARGUMENT (ctx, path or out NULL), KILN_ERROR_NOT_FOUND (no such
 * file), KILN_ERROR_IO (it cannot be opened, stat'ed or mapped, or is not a regular file),
 * KILN_ERROR_CORRUPT_DATA (shorter than its header, invalid JSON, a missing or ill-typed field,
 * an unknown dtype, offsets that lie, overlapping tensors, a duplicate name),
 * KILN_ERROR_LIMIT_EXCEEDED (a header over KILN_SAFETENSORS_MAX_HEADER bytes, a tensor of more
 * than KILN_MAX_DIMS dims), KILN_ERROR_OVERFLOW (a shape whose size overflows),
 * KILN_ERROR_UNSUPPORTED (a big-endian host), KILN_ERROR_OUT_OF_HOST_MEMORY, or the context's
 * sticky error. *out is NULL on failure. The file must not be truncated while it is open (the
 * mapping would fault). */
kiln_status kiln_safetensors_open(kiln_context *ctx, const char *path, kiln_safetensors **out);
/* Unmaps the file and releases the file's own handles of the tensors it loaded: the handles
 * kiln_safetensors_load returned stay valid (the storage lives while any tensor uses it). Close
 * every file before destroying its context. NULL is a no-op. */
void kiln_safetensors_close(kiln_safetensors *f);

/* The tensors, in the order of the header (0 for NULL). name(i) is NULL for i >= count; the
 * string is the file's, valid until kiln_safetensors_close. */
uint32_t kiln_safetensors_count(const kiln_safetensors *f);
const char *kiln_safetensors_name(const kiln_safetensors *f, uint32_t i);
/* A tensor's stored dtype (a static string such as "BF16"), its rank and its sizes (shape
 * receives ndim values, at most KILN_MAX_DIMS); each of dtype, ndim and shape may be NULL.
 * Statuses: KILN_ERROR_INVALID_ARGUMENT (f or name NULL), KILN_ERROR_NOT_FOUND (no tensor of
 * that name). A query: the context's sticky error does not stop it. */
kiln_status kiln_safetensors_info(const kiln_safetensors *f, const char *name, const char **dtype,
                                  uint32_t *ndim, int64_t *shape);
/* The value of key in the header's "__metadata__", or NULL when absent (or f or key NULL). The
 * string is the file's, valid until kiln_safetensors_close. */
const char *kiln_safetensors_metadata(const kiln_safetensors *f, const char *key);

/* A tensor of the file as a tensor of dtype, of the stored shape, uploaded at once. Stored
 * dtypes and what they load as: F32 as KILN_F32; F16 as KILN_F16 (bit for bit) or KILN_F32
 * (exactly); BF16 as KILN_F32 (exactly: BF16 is the upper half of an F32); BOOL, U8, I8, I32,
 * U32, I64 as the Kiln dtype of the same name (bit for bit; a BOOL byte other than 0 or 1 is
 * KILN_ERROR_CORRUPT_DATA). Another dtype asked of a loadable one is KILN_ERROR_DTYPE_MISMATCH;
 * F64, F8_*, I16, U16 and U64 load as nothing (KILN_ERROR_UNSUPPORTED). A name not in the file
 * is KILN_ERROR_NOT_FOUND (kiln_safetensors_info asks without a sticky error).
 *
 * Each tensor is uploaded once per file handle and dtype: the first load makes its storage
 * (converting on the host where asked, in a temporary buffer of the converted tensor), and
 * every load, that one included, returns a new handle of that storage (in the current scope,
 * like kiln_detach's), which the caller releases. So all loads of a name share one storage: a
 * write through one (kiln_copy_, an optimizer's step) is seen by the others. The file holds
 * the storage until kiln_safetensors_close. Returns NULL for f NULL (no context to record in). */
kiln_tensor *kiln_safetensors_load(kiln_safetensors *f, const char *name, kiln_dtype dtype);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
