/* examples/idx.h: a reader of IDX files, gzipped or not (the format of MNIST and Fashion-MNIST:
 * http://yann.lecun.com/exdb/mnist/, "THE IDX FILE FORMAT").
 *
 *     magic    4 bytes: 0x00, 0x00, the type code (0x08: unsigned byte, the only one read
 *              here), the number of dims (images: 0x00000803, labels: 0x00000801)
 *     dims     ndim big-endian uint32
 *     payload  the product of the dims, in bytes, row-major
 *
 * Every header field is checked, and so is the payload's length against the dims (neither
 * shorter nor longer). A file that cannot be read, a corrupt or truncated gzip stream, a wrong
 * magic, type code or ndim, dims whose product overflows or exceeds IDX_MAX_BYTES, and a
 * payload of another length are each a status and a message naming the file and the field;
 * nothing is allocated beyond what the file actually holds (the buffer grows as bytes arrive,
 * so a short file claiming huge dims costs nothing). Uses zlib (gzread reads a file that is
 * not gzipped as it is). Not part of the library: linked by the examples and their tests. */
#ifndef KILN_EXAMPLES_IDX_H
#define KILN_EXAMPLES_IDX_H

#include <stddef.h>
#include <stdint.h>

enum {
    IDX_MAX_DIMS = 3,
    IDX_TYPE_U8 = 0x08,
    IDX_MESSAGE_SIZE = 512, /* enough for any message with a path of up to ~400 bytes */
};
#define IDX_MAX_BYTES ((size_t)1 << 30) /* a payload beyond 1 GiB is refused */

typedef enum idx_status {
    IDX_OK = 0,
    IDX_ERROR_OPEN,      /* the file cannot be opened */
    IDX_ERROR_READ,      /* a read error, or a corrupt gzip stream */
    IDX_ERROR_TRUNCATED, /* the header, the payload or the gzip stream ends early */
    IDX_ERROR_MAGIC,     /* the first two bytes are not zero */
    IDX_ERROR_TYPE,      /* a type code other than 0x08 */
    IDX_ERROR_NDIM,      /* another number of dims than the caller expects */
    IDX_ERROR_SIZE,      /* dims whose product overflows or exceeds IDX_MAX_BYTES */
    IDX_ERROR_TRAILING,  /* bytes after the payload */
    IDX_ERROR_MISMATCH,  /* (idx_dataset_load) images and labels disagree */
    IDX_ERROR_NO_MEMORY,
} idx_status;

/* An IDX array of unsigned bytes: dims[0..ndim) and bytes = their product. */
typedef struct idx_array {
    uint8_t *data; /* malloc'd; NULL when bytes is 0 */
    uint32_t ndim;
    uint32_t dims[IDX_MAX_DIMS];
    size_t bytes;
} idx_array;

/* Reads path, which must hold an IDX array of unsigned bytes with ndim dims (1 to
 * IDX_MAX_DIMS), into *out (zeroed on failure). On failure message (message_size bytes, may be
 * NULL) receives "<path>: <field>: <what is wrong>". */
idx_status idx_read(const char *path, uint32_t ndim, idx_array *out, char *message,
                    size_t message_size);
void idx_array_finish(idx_array *a); /* frees a->data, zeroes *a; NULL is a no-op */
const char *idx_status_string(idx_status status);

/* An image data set: images (count, rows, cols) and their labels (count), each in [0,
 * classes). */
typedef struct idx_dataset {
    idx_array images, labels;
    int64_t count, rows, cols;
} idx_dataset;

/* Reads both files and checks that they agree: the same count, every label below classes
 * (IDX_ERROR_MISMATCH, naming both files or the label). */
idx_status idx_dataset_load(const char *images_path, const char *labels_path, uint32_t classes,
                            idx_dataset *out, char *message, size_t message_size);
void idx_dataset_finish(idx_dataset *d); /* NULL is a no-op */

#endif
