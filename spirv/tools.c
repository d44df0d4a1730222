/* Validation and disassembly through SPIRV-Tools' C API, when the build found it
 * (KILN_HAVE_SPIRV_TOOLS); otherwise the calls report KILN_ERROR_UNSUPPORTED and the debug dump
 * prints the word count. */
#include "spv.h"

#include <stdio.h>
#include <string.h>

#if KILN_HAVE_SPIRV_TOOLS
#include <spirv-tools/libspirv.h>

bool spv_tools_available(void) {
    return true;
}

static spv_target_env spv_env(uint32_t api_version) {
    /* VK_MAKE_API_VERSION(0, 1, minor, 0): the minor version sits in bits 12..21. */
    uint32_t minor = api_version >> 12 & 0x3ffu;
    return minor >= 3 ? SPV_ENV_VULKAN_1_3 : minor == 2 ? SPV_ENV_VULKAN_1_2 : SPV_ENV_VULKAN_1_1;
}

kiln_status spv_validate(const uint32_t *words, size_t word_count, uint32_t api_version,
                         base_error *err) {
    if (!words || word_count == 0)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "spv_validate: no words");
    spv_context ctx = spvContextCreate(spv_env(api_version));
    spv_validator_options opts = spvValidatorOptionsCreate();
    if (!ctx || !opts) {
        spvContextDestroy(ctx);
        spvValidatorOptionsDestroy(opts);
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "spirv: out of host memory");
    }
    spv_const_binary_t binary = {words, word_count};
    spv_diagnostic diag = NULL;
    spv_result_t r = spvValidateWithOptions(ctx, opts, &binary, &diag);
    kiln_status status = KILN_OK;
    if (r != SPV_SUCCESS)
        status = base_error_set(err, KILN_ERROR_INVALID_SPIRV, "spirv-val: %s",
                                diag && diag->error ? diag->error : "validation failed");
    spvDiagnosticDestroy(diag);
    spvValidatorOptionsDestroy(opts);
    spvContextDestroy(ctx);
    return status;
}

kiln_status spv_disassemble(const base_allocator *alloc, const uint32_t *words, size_t word_count,
                            char **text, size_t *length, base_error *err) {
    if (!text || !length || !words)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT, "spv_disassemble: NULL argument");
    *text = NULL;
    *length = 0;
    base_allocator a = alloc ? *alloc : base_allocator_make(NULL, NULL);
    spv_context ctx = spvContextCreate(SPV_ENV_UNIVERSAL_1_6);
    if (!ctx)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "spirv: out of host memory");
    spv_text out = NULL;
    spv_diagnostic diag = NULL;
    uint32_t options = SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES | SPV_BINARY_TO_TEXT_OPTION_INDENT;
    spv_result_t r = spvBinaryToText(ctx, words, word_count, options, &out, &diag);
    kiln_status status = KILN_OK;
    if (r != SPV_SUCCESS || !out) {
        status = base_error_set(err, KILN_ERROR_INVALID_SPIRV, "spirv-dis: %s",
                                diag && diag->error ? diag->error : "disassembly failed");
    } else {
        char *copy = base_malloc(&a, out->length + 1);
        if (!copy) {
            status =
                base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "spirv: out of host memory");
        } else {
            memcpy(copy, out->str, out->length);
            copy[out->length] = '\0';
            *text = copy;
            *length = out->length;
        }
    }
    spvTextDestroy(out);
    spvDiagnosticDestroy(diag);
    spvContextDestroy(ctx);
    return status;
}

#else

bool spv_tools_available(void) {
    return false;
}

kiln_status spv_validate(const uint32_t *words, size_t word_count, uint32_t api_version,
                         base_error *err) {
    (void)words, (void)word_count, (void)api_version;
    return base_error_set(err, KILN_ERROR_UNSUPPORTED,
                          "spirv: built without SPIRV-Tools: no validator");
}

kiln_status spv_disassemble(const base_allocator *alloc, const uint32_t *words, size_t word_count,
                            char **text, size_t *length, base_error *err) {
    (void)alloc, (void)words, (void)word_count;
    if (text)
        *text = NULL;
    if (length)
        *length = 0;
    return base_error_set(err, KILN_ERROR_UNSUPPORTED,
                          "spirv: built without SPIRV-Tools: no disassembler");
}

#endif

void spv_debug_dump(const uint32_t *words, size_t word_count, const char *label) {
    if (base_log_verbosity() < 4)
        return;
    if (!label)
        label = "module";
    char *text = NULL;
    size_t length = 0;
    base_error err = {0};
    if (spv_disassemble(NULL, words, word_count, &text, &length, &err) == KILN_OK) {
        /* One log line per disassembled line (a log line holds at most 1 KiB). */
        base_log(BASE_LOG_TRACE, "spirv", "%s: %zu words", label, word_count);
        for (char *line = text; *line;) {
            char *end = strchr(line, '\n');
            int n = end ? (int)(end - line) : (int)strlen(line);
            base_log(BASE_LOG_TRACE, "spirv", "%.*s", n, line);
            line += n + (end != NULL);
        }
        base_allocator a = base_allocator_make(NULL, NULL);
        base_free(&a, text, length + 1);
    } else {
        base_log(BASE_LOG_TRACE, "spirv", "%s: %zu words (%s)", label, word_count,
                 base_error_message(&err));
    }
}
