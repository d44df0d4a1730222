/* Vulkan interop (include/kiln/kiln_vulkan.h): contexts on the application's device, tensors
 * over its buffers, and the buffers of Kiln's tensors. */
#include "eng.h"
#include "kiln/kiln_vulkan.h"

#include <stdio.h>
#include <string.h>

kiln_status kiln_context_create_vulkan(const kiln_vulkan_device *device,
                                       const kiln_context_options *options, kiln_context **out) {
    if (!device || !out)
        return KILN_ERROR_INVALID_ARGUMENT;
    kiln_context_options opt = options ? *options : (kiln_context_options){0};
    opt.device = NULL;
    vkd_external_device ext = {
        .physical = device->physical_device,
        .device = device->device,
        .queue_family = device->queue_family,
        .queue_index = device->queue_index,
        .int64 = device->shader_int64,
        .float16 = device->shader_float16,
        .int8 = device->shader_int8,
        .storage_buffer_16bit = device->storage_buffer_16bit,
        .storage_buffer_8bit = device->storage_buffer_8bit,
    };
    eng_external external = {.instance = device->instance,
                             .api_version = device->api_version,
                             .device = &ext,
                             .profile = opt.profile};
    return eng_context_create(&opt, &external, out);
}

kiln_status eng_runtime_init_external(kiln_context *ctx, const eng_external *e) {
    ctx->timing = e->timing || base_log_verbosity() >= 1;
    base_error err = {0};
    vkd_device_options dopt = {0};
    kiln_status st = eng_runtime_profile(ctx, e->profile, &dopt.profile);
    if (st != KILN_OK)
        return st;
    ctx->profile = dopt.profile;
    st = vkd_instance_wrap(e->instance, e->api_version, &ctx->alloc, &ctx->inst, &err);
    if (st == KILN_OK)
        st = vkd_device_wrap(ctx->inst, e->device, &dopt, &ctx->dev, &err);
    if (st != KILN_OK)
        return base_error_set(&ctx->err, st, "%s", base_error_message(&err));
    const vkd_device_info *info = vkd_device_info_of(ctx->dev);
    snprintf(ctx->device_name, sizeof ctx->device_name, "%s", info->props.deviceName);
    eng_runtime_tune(ctx);
    return KILN_OK;
}

kiln_tensor *kiln_tensor_from_vulkan_buffer(kiln_context *ctx, VkBuffer buffer,
                                            VkDeviceSize size_bytes, kiln_dtype dtype,
                                            uint32_t ndim, const int64_t *shape,
                                            const int64_t *strides, int64_t offset) {
    if (!ctx)
        return NULL;
    if (ctx->interpreter || !ctx->dev)
        return eng_fail(ctx, KILN_ERROR_UNSUPPORTED,
                        "kiln_tensor_from_vulkan_buffer: the context has no Vulkan device");
    if (!eng_dtype_valid(dtype))
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                        "kiln_tensor_from_vulkan_buffer: unknown dtype %d", (int)dtype);
    ir_type type = eng_ir_type(dtype);
    /* Without 8-bit (16-bit) storage a buffer of u8, i8 or bool (f16) is read and written as
     * 32-bit words (emit.h storage_8bit, as runtime.c decides it): the last word must lie in
     * the buffer. */
    const vkd_caps *caps = vkd_device_caps(ctx->dev);
    bool packed = type == IR_F16 ? !(caps->storage_buffer_16bit && caps->float16)
                  : type == IR_U8 || type == IR_I8 || type == IR_BOOL
                      ? !(caps->storage_buffer_8bit && caps->int8)
                      : false;
    if (packed && size_bytes % 4 != 0)
        return eng_fail(ctx, KILN_ERROR_INVALID_ARGUMENT,
                        "kiln_tensor_from_vulkan_buffer: a buffer of %llu bytes: the device has no "
                        "%s storage, so a buffer of %s is accessed as 32-bit words and its size "
                        "must be a multiple of 4",
                        (unsigned long long)size_bytes, type == IR_F16 ? "16-bit" : "8-bit",
                        type == IR_F16 ? "f16" : "u8, i8 or bool");
    uint64_t elements = size_bytes / eng_type_size(type);
    eng_storage *s = base_calloc(&ctx->alloc, 1, sizeof *s);
    if (!s)
        return eng_fail(ctx, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for a storage");
    s->type = type;
    s->elements = elements;
    s->wrapped = true;
    base_error err = {0};
    kiln_status st = vkd_buffer_wrap(ctx->dev, buffer, size_bytes, &s->buffer, &err);
    if (st != KILN_OK) {
        base_free(&ctx->alloc, s, sizeof *s);
        return eng_fail(ctx, st, "kiln_tensor_from_vulkan_buffer: %s", base_error_message(&err));
    }
    eng_storage_track(ctx, s);
    const sym_node *size = sym_const(ctx->sym, (int64_t)elements);
    eng_node *node = eng_node_new(ctx, ENG_BUFFER, IR_CONST, type, 1, &size);
    if (!node) {
        eng_storage_unref(ctx, s);
        return NULL;
    }
    node->storage = s;
    size_t mark = eng_temps_begin(ctx);
    kiln_tensor *whole =
        eng_tensor_new(ctx, eng_node_adopt(ctx, node), eng_tracker_contiguous(ctx, 1, &size));
    return eng_temps_end(ctx, mark, kiln_as_strided(whole, ndim, shape, strides, offset));
}

kiln_status kiln_tensor_vulkan_buffer(kiln_tensor *t, VkBuffer *buffer, VkDeviceSize *size_bytes,
                                      int64_t *offset, int64_t *strides) {
    kiln_context *ctx = NULL;
    kiln_status st;
    if (!eng_arg_status(t, &ctx, "kiln_tensor_vulkan_buffer", &st))
        return st;
    if (!buffer)
        return base_error_set(&ctx->err, KILN_ERROR_INVALID_ARGUMENT,
                              "kiln_tensor_vulkan_buffer: no output for the buffer");
    if (ctx->interpreter)
        return base_error_set(&ctx->err, KILN_ERROR_UNSUPPORTED,
                              "kiln_tensor_vulkan_buffer: the context has no Vulkan device");
    st = kiln_realize(t);
    if (st != KILN_OK)
        return st;
    eng_storage *s = eng_resolve(t)->storage;
    *buffer = vkd_buffer_handle(s->buffer);
    if (size_bytes)
        *size_bytes = vkd_buffer_size(s->buffer);
    if (offset && (st = kiln_tensor_offset(t, offset)) != KILN_OK)
        return st;
    if (strides && kiln_tensor_ndim(t) > 0)
        st = kiln_tensor_strides(t, strides);
    return st;
}
