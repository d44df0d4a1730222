/* The README's example: relu(a * a) summed over rows, on the default device. */
#include <kiln/kiln.h>

#include <stdio.h>

int main(void) {
    kiln_context *ctx;
    if (kiln_context_create(NULL, &ctx) != KILN_OK)
        return 1;
    float data[6] = {1, -2, 3, 4, 5, -6}, out[2];
    kiln_tensor *a = kiln_from_data(ctx, KILN_F32, 2, (int64_t[]){2, 3}, data);
    kiln_tensor *s = kiln_sum(kiln_relu(kiln_mul(a, a)), 1, (int32_t[]){1}, false);
    if (kiln_read(s, out, sizeof out) != KILN_OK)
        fprintf(stderr, "kiln: %s\n", kiln_context_message(ctx));
    else
        printf("%g %g (on %s)\n", out[0], out[1], kiln_context_device_name(ctx));
    kiln_context_destroy(ctx);
    return 0;
}
