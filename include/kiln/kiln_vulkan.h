/* kiln_vulkan.h: interop for C programs that own Vulkan objects. The only public header that
 * includes Vulkan's.
 *
 * A program with its own VkInstance and VkDevice creates a Kiln context on them, wraps its
 * VkBuffers as tensors (no copy: sizes, strides and offset in elements describe a view of the
 * buffer), and takes the VkBuffer of any realized tensor out (with its storage offset and
 * strides) to use the result directly.
 *
 *     kiln_vulkan_device vd = {.instance = inst, .physical_device = pd, .device = dev,
 *                              .queue_family = family, .api_version = VK_API_VERSION_1_1};
 *     kiln_context *ctx;
 *     kiln_context_create_vulkan(&vd, NULL, &ctx);
 *     kiln_tensor *a = kiln_tensor_from_vulkan_buffer(ctx, buf, bytes, KILN_F32, 2,
 *                                                     (int64_t[]){4, 3}, (int64_t[]){1, 4}, 0);
 *     kiln_tensor *s = kiln_sum(a, 1, (int32_t[]){1}, false);
 *     VkBuffer out; VkDeviceSize size; int64_t offset, stride;
 *     kiln_tensor_vulkan_buffer(s, &out, &size, &offset, &stride);
 *
 * Synchronisation: every Kiln call that runs kernels or transfers has finished using the
 * device when it returns (Kiln waits on its own fence). The application must not use the given
 * queue from another thread while a Kiln call runs, and must finish its own writes to a
 * wrapped buffer before the Kiln call that reads it.
 */
#ifndef KILN_KILN_VULKAN_H
#define KILN_KILN_VULKAN_H

#include "kiln.h"

#include <vulkan/vulkan_core.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Kiln is built with hidden visibility: what this header declares is the library's exported
 * API (docs/packaging.md). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

typedef struct kiln_vulkan_device {
    VkInstance instance;
    VkPhysicalDevice physical_device;
    VkDevice device;
    uint32_t queue_family; /* a family with compute */
    uint32_t queue_index;
    uint32_t api_version; /* what the instance and device were created with (>= 1.1) */
    /* The features the application enabled at vkCreateDevice that Kiln may use (Kiln cannot
     * query what was enabled). Without the 8-bit (16-bit) ones, i8/u8/bool (f16) buffers are
     * packed into 32-bit words (docs/gpus.md); without shader_int64, i64 kernels are
     * KILN_ERROR_UNSUPPORTED. */
    bool shader_int64, shader_float16, shader_int8;
    bool storage_buffer_16bit, storage_buffer_8bit;
} kiln_vulkan_device;

/* A context on the application's device. options->device is ignored; validation is the
 * application's business (its instance's layers). */
kiln_status kiln_context_create_vulkan(const kiln_vulkan_device *device,
                                       const kiln_context_options *options, kiln_context **out);

/* A tensor over the application's buffer of size_bytes bytes holding dtype elements: the view
 * of the given shape, strides and storage offset (elements; the rules of kiln_as_strided). The
 * buffer needs STORAGE_BUFFER, TRANSFER_SRC and TRANSFER_DST usage and must outlive the
 * context. Writes through the tensor (kiln_copy_...) write the application's buffer. On a device
 * without 8-bit storage (storage_buffer_8bit and shader_int8 above) a u8, i8 or bool buffer, and
 * without 16-bit storage (storage_buffer_16bit and shader_float16) an f16 buffer, is accessed as
 * 32-bit words: size_bytes must then be a multiple of 4 (else KILN_ERROR_INVALID_ARGUMENT). */
kiln_tensor *kiln_tensor_from_vulkan_buffer(kiln_context *ctx, VkBuffer buffer,
                                            VkDeviceSize size_bytes, kiln_dtype dtype,
                                            uint32_t ndim, const int64_t *shape,
                                            const int64_t *strides, int64_t offset);

/* Realizes t and returns the VkBuffer holding its storage (Kiln's, valid while a tensor viewing
 * that storage lives, at most until the context is destroyed; or the application's when t
 * wraps one), the buffer's size in bytes (for Kiln's buffers at least the storage's, which
 * kiln_tensor_storage_size gives in elements: freed buffers are reused, so their sizes are
 * rounded up to a class, at most 25% larger), and t's storage offset and strides in elements
 * (strides may be NULL for a 0-d tensor). */
kiln_status kiln_tensor_vulkan_buffer(kiln_tensor *t, VkBuffer *buffer, VkDeviceSize *size_bytes,
                                      int64_t *offset, int64_t *strides);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
