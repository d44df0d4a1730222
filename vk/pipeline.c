/* The one table-driven compute pipeline constructor. */
#include "vkd_internal.h"

static kiln_status check_desc(const vkd_device *dev, const vkd_pipeline_desc *d, const char *name,
                              base_error *err) {
    const vkd_caps *caps = &dev->caps;
    if (!d->code || d->word_count < 5 || d->code[0] != 0x07230203u)
        return base_error_set(err, KILN_ERROR_INVALID_SPIRV,
                              "%s: not a SPIR-V module (missing code or magic number)", name);
    if (d->binding_count > VKD_MAX_BINDINGS ||
        d->binding_count > caps->max_storage_buffers_per_stage)
        return base_error_set(err, KILN_ERROR_LIMIT_EXCEEDED,
                              "%s: %u storage buffers exceed the limit of %u", name,
                              d->binding_count,
                              caps->max_storage_buffers_per_stage < VKD_MAX_BINDINGS
                                  ? caps->max_storage_buffers_per_stage
                                  : (uint32_t)VKD_MAX_BINDINGS);
    uint64_t descriptors = 0;
    for (uint32_t i = 0; i < d->binding_count; i++) {
        uint32_t c = d->descriptor_counts ? d->descriptor_counts[i] : 1;
        if (c == 0)
            return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                                  "%s: binding %u has no descriptor", name, i);
        if ((d->texel_bindings >> i & 1) && (c != 1 || !caps->texel_fetch))
            return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                                  "%s: binding %u cannot be a texel buffer (%s)", name, i,
                                  c != 1 ? "an array of descriptors"
                                         : "the device reads no R32G32B32A32_UINT texel buffers");
        descriptors += c;
    }
    if (descriptors > caps->max_storage_buffers_per_stage)
        return base_error_set(err, KILN_ERROR_LIMIT_EXCEEDED,
                              "%s: %llu storage-buffer descriptors exceed the device's "
                              "maxPerStageDescriptorStorageBuffers (%u)",
                              name, (unsigned long long)descriptors,
                              caps->max_storage_buffers_per_stage);
    if (d->push_constant_size % 4 != 0 || d->push_constant_size > caps->max_push_constants_size)
        return base_error_set(err, KILN_ERROR_LIMIT_EXCEEDED,
                              "%s: %u bytes of push constants (the device allows %u, in "
                              "multiples of 4)",
                              name, d->push_constant_size, caps->max_push_constants_size);
    for (uint32_t i = 0; i < d->spec_entry_count; i++) {
        const VkSpecializationMapEntry *e = &d->spec_entries[i];
        if (e->offset > d->spec_data_size || e->size > d->spec_data_size - e->offset)
            return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                                  "%s: specialization constant %u reads past its data", name,
                                  e->constantID);
    }
    if (d->required_subgroup_size &&
        (!caps->subgroup_size_control || d->required_subgroup_size < caps->min_subgroup_size ||
         d->required_subgroup_size > caps->max_subgroup_size))
        return base_error_set(err, KILN_ERROR_UNSUPPORTED,
                              "%s: subgroup size %u cannot be required on this device", name,
                              d->required_subgroup_size);
    return KILN_OK;
}

static kiln_status create_layouts(vkd_pipeline *p, const vkd_pipeline_desc *d, base_error *err) {
    vkd_device *dev = p->dev;
    VkDescriptorSetLayoutBinding bindings[VKD_MAX_BINDINGS];
    for (uint32_t i = 0; i < d->binding_count; i++) {
        bindings[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = (d->texel_bindings >> i & 1) ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
                                                           : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = d->descriptor_counts ? d->descriptor_counts[i] : 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    }
    VkDescriptorSetLayoutCreateInfo set_info = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = d->binding_count,
        .pBindings = bindings,
    };
    kiln_status st =
        vkd_check(dev->vk.vkCreateDescriptorSetLayout(dev->handle, &set_info, NULL, &p->set_layout),
                  "vkCreateDescriptorSetLayout", err);
    if (st != KILN_OK)
        return st;
    VkPushConstantRange range = {
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        .offset = 0,
        .size = d->push_constant_size,
    };
    VkPipelineLayoutCreateInfo layout_info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &p->set_layout,
        .pushConstantRangeCount = d->push_constant_size ? 1u : 0u,
        .pPushConstantRanges = &range,
    };
    return vkd_check(dev->vk.vkCreatePipelineLayout(dev->handle, &layout_info, NULL, &p->layout),
                     "vkCreatePipelineLayout", err);
}

static kiln_status create_pipeline(vkd_pipeline *p, const vkd_pipeline_desc *d, base_error *err) {
    vkd_device *dev = p->dev;
    VkShaderModuleCreateInfo module_info = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = d->word_count * sizeof(uint32_t),
        .pCode = d->code,
    };
    VkShaderModule module;
    kiln_status st =
        vkd_check(dev->vk.vkCreateShaderModule(dev->handle, &module_info, NULL, &module),
                  "vkCreateShaderModule", err);
    if (st != KILN_OK)
        return st;
    VkSpecializationInfo spec = {
        .mapEntryCount = d->spec_entry_count,
        .pMapEntries = d->spec_entries,
        .dataSize = d->spec_data_size,
        .pData = d->spec_data,
    };
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfo subgroup = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
        .requiredSubgroupSize = d->required_subgroup_size,
    };
    VkComputePipelineCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        /* DISPATCH_BASE lets vkd_batch_dispatch split grids beyond maxComputeWorkGroupCount. */
        .flags = VK_PIPELINE_CREATE_DISPATCH_BASE_BIT,
        .stage =
            {
                .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .pNext = d->required_subgroup_size ? &subgroup : NULL,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = d->entry_point ? d->entry_point : "main",
                .pSpecializationInfo = d->spec_entry_count ? &spec : NULL,
            },
        .layout = p->layout,
    };
    st = vkd_check(dev->vk.vkCreateComputePipelines(dev->handle, dev->pipeline_cache, 1, &info,
                                                    NULL, &p->handle),
                   "vkCreateComputePipelines", err);
    dev->vk.vkDestroyShaderModule(dev->handle, module, NULL);
    if (st == KILN_OK)
        dev->stats.pipelines_created++;
    return st;
}

kiln_status vkd_pipeline_create(vkd_device *dev, const vkd_pipeline_desc *desc, vkd_pipeline **out,
                                base_error *err) {
    *out = NULL;
    const char *name = desc->debug_name ? desc->debug_name : "kernel";
    kiln_status st = check_desc(dev, desc, name, err);
    if (st != KILN_OK)
        return st;
    vkd_pipeline *p = base_calloc(&dev->alloc, 1, sizeof *p);
    if (!p)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for pipeline");
    p->dev = dev;
    p->binding_count = desc->binding_count;
    p->descriptor_count = 0;
    for (uint32_t i = 0; i < desc->binding_count; i++) {
        p->descriptor_counts[i] = desc->descriptor_counts ? desc->descriptor_counts[i] : 1;
        p->descriptor_count += p->descriptor_counts[i];
    }
    p->push_constant_size = desc->push_constant_size;
    p->texel_bindings = desc->texel_bindings & ((1u << desc->binding_count) - 1u);
    if ((st = create_layouts(p, desc, err)) != KILN_OK ||
        (st = create_pipeline(p, desc, err)) != KILN_OK) {
        vkd_pipeline_destroy(p);
        return st;
    }
    *out = p;
    return KILN_OK;
}

void vkd_pipeline_destroy(vkd_pipeline *p) {
    if (!p)
        return;
    vkd_device *dev = p->dev;
    if (p->handle)
        dev->vk.vkDestroyPipeline(dev->handle, p->handle, NULL);
    if (p->layout)
        dev->vk.vkDestroyPipelineLayout(dev->handle, p->layout, NULL);
    if (p->set_layout)
        dev->vk.vkDestroyDescriptorSetLayout(dev->handle, p->set_layout, NULL);
    base_free(&dev->alloc, p, sizeof *p);
}
