/* The Vulkan instance: loader, validation layer and messenger, physical-device snapshots. */
#include "vkd_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- process-wide state --------------------------------------------------------------------
 * volk keeps the loader's functions in globals. They are written once, by the first instance
 * creation (volkInitialize, under pthread_once), and read by every thread after; volk's
 * instance-level globals and its vkGetDeviceProcAddr, which each instance rewrites, are
 * written and used under loader_lock only. Kiln calls instance functions through each
 * instance's own table (vkd_instance_fns), never through those globals. */
static pthread_once_t loader_once = PTHREAD_ONCE_INIT;
static VkResult loader_result = VK_ERROR_INITIALIZATION_FAILED;
static pthread_mutex_t loader_lock = PTHREAD_MUTEX_INITIALIZER;

/* Instance and device creation and destruction, one thread at a time in the process, and the
 * lists of shared instances (below) and devices (device.c). Vulkan allows them on several
 * threads at once, but on NVIDIA's driver (580.159, H200 and H100) contexts created and
 * destroyed on four threads at once broke the process (exits with status 255, aborts, hangs,
 * a corrupted heap); this lock made it rarer, but the driver also fails when one VkDevice is
 * created or destroyed while another works (docs/gpus.md). So contexts with the same options
 * share one instance and one device per physical device: a device is created by the first of
 * them and destroyed by the last, never beside another of its kind. */
static pthread_mutex_t lifecycle_lock = PTHREAD_MUTEX_INITIALIZER;

void vkd_lifecycle_lock(void) {
    pthread_mutex_lock(&lifecycle_lock);
}

void vkd_lifecycle_unlock(void) {
    pthread_mutex_unlock(&lifecycle_lock);
}

static void load_loader(void) {
    loader_result = volkInitialize();
}

/* The Vulkan loader, loaded by the first call of the process (contexts may be created on
 * several threads at once). */
static bool loader_ready(void) {
    return pthread_once(&loader_once, load_loader) == 0 && loader_result == VK_SUCCESS;
}

/* volk's instance-level globals for handle (kept for code that uses volk directly). */
static void load_instance_globals(VkInstance handle) {
    pthread_mutex_lock(&loader_lock);
    volkLoadInstanceOnly(handle);
    pthread_mutex_unlock(&loader_lock);
}

static const char validation_layer[] = "VK_LAYER_KHRONOS_validation";

static VKAPI_ATTR VkBool32 VKAPI_CALL messenger_callback(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    (void)types;
    vkd_instance *inst = user;
    const char *msg = data && data->pMessage ? data->pMessage : "(no message)";
    /* Atomic: the contexts sharing the instance call from their own threads. */
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        __atomic_add_fetch(&inst->messages.errors, 1, __ATOMIC_RELAXED);
        base_log(BASE_LOG_ERROR, "validation", "%s", msg);
    } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        __atomic_add_fetch(&inst->messages.warnings, 1, __ATOMIC_RELAXED);
        base_log(BASE_LOG_WARN, "validation", "%s", msg);
    } else {
        __atomic_add_fetch(&inst->messages.infos, 1, __ATOMIC_RELAXED);
        base_log(BASE_LOG_DEBUG, "validation", "%s", msg);
    }
    return VK_FALSE; /* never abort the call that triggered the message */
}

static bool env_flag(const char *name) {
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

static kiln_status load_layers(vkd_instance *inst, base_error *err) {
    uint32_t n = 0;
    kiln_status st = vkd_check(vkEnumerateInstanceLayerProperties(&n, NULL),
                               "vkEnumerateInstanceLayerProperties", err);
    if (st != KILN_OK || n == 0)
        return st;
    inst->layers = base_calloc(&inst->alloc, n, sizeof *inst->layers);
    if (!inst->layers)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for layer list");
    st = vkd_check(vkEnumerateInstanceLayerProperties(&n, inst->layers),
                   "vkEnumerateInstanceLayerProperties", err);
    inst->layer_count = n;
    return st;
}

static bool has_layer(const vkd_instance *inst, const char *name) {
    for (uint32_t i = 0; i < inst->layer_count; i++) {
        if (strcmp(inst->layers[i].layerName, name) == 0)
            return true;
    }
    return false;
}

static bool has_instance_extension(const VkExtensionProperties *exts, uint32_t n,
                                   const char *name) {
    for (uint32_t i = 0; i < n; i++) {
        if (strcmp(exts[i].extensionName, name) == 0)
            return true;
    }
    return false;
}

/* Loads inst's instance-level functions (vkGetInstanceProcAddr is the loader's, valid for
 * every instance). */
static kiln_status load_instance_fns(vkd_instance *inst, base_error *err) {
    vkd_instance_fns *f = &inst->fn;
#define LOAD(name) f->name = (PFN_vk##name)vkGetInstanceProcAddr(inst->handle, "vk" #name)
    LOAD(DestroyInstance);
    LOAD(EnumeratePhysicalDevices);
    LOAD(GetPhysicalDeviceProperties);
    LOAD(GetPhysicalDeviceFormatProperties);
    LOAD(GetPhysicalDeviceProperties2);
    LOAD(GetPhysicalDeviceFeatures2);
    LOAD(GetPhysicalDeviceMemoryProperties);
    LOAD(GetPhysicalDeviceMemoryProperties2);
    LOAD(GetPhysicalDeviceQueueFamilyProperties);
    LOAD(EnumerateDeviceExtensionProperties);
    LOAD(CreateDevice);
    LOAD(GetDeviceProcAddr);
    LOAD(CreateDebugUtilsMessengerEXT);
    LOAD(DestroyDebugUtilsMessengerEXT);
#undef LOAD
    if (!f->DestroyInstance || !f->EnumeratePhysicalDevices || !f->GetPhysicalDeviceProperties2 ||
        !f->GetPhysicalDeviceFeatures2 || !f->CreateDevice || !f->GetDeviceProcAddr)
        return base_error_set(err, KILN_ERROR_UNSUPPORTED,
                              "the instance lacks Vulkan 1.1 functions (vkGetInstanceProcAddr)");
    return KILN_OK;
}

void vkd_load_device_table(const vkd_instance *inst, VkDevice device,
                           struct VolkDeviceTable *table) {
    /* volkLoadDeviceTable resolves through the global vkGetDeviceProcAddr: point it at this
     * instance's first (a device of another instance may sit behind other layers), with no
     * other thread doing the same for its own. */
    pthread_mutex_lock(&loader_lock);
    vkGetDeviceProcAddr = inst->fn.GetDeviceProcAddr;
    volkLoadDeviceTable(table, device);
    pthread_mutex_unlock(&loader_lock);
}

/* Creates the VkInstance with the extensions that exist and that Kiln uses. */
static kiln_status create_handle(vkd_instance *inst, const vkd_instance_options *opt,
                                 base_error *err) {
    uint32_t n = 0;
    kiln_status st = vkd_check(vkEnumerateInstanceExtensionProperties(NULL, &n, NULL),
                               "vkEnumerateInstanceExtensionProperties", err);
    if (st != KILN_OK)
        return st;
    VkExtensionProperties *exts = base_calloc(&inst->alloc, n ? n : 1, sizeof *exts);
    if (!exts)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for extensions");
    st = vkd_check(vkEnumerateInstanceExtensionProperties(NULL, &n, exts),
                   "vkEnumerateInstanceExtensionProperties", err);
    bool portability = has_instance_extension(exts, n, "VK_KHR_portability_enumeration");
    bool debug_utils = has_instance_extension(exts, n, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    base_free(&inst->alloc, exts, (n ? n : 1) * sizeof *exts);
    if (st != KILN_OK)
        return st;

    const char *ext_names[2];
    uint32_t ext_count = 0;
    if (portability)
        ext_names[ext_count++] = "VK_KHR_portability_enumeration";
    if (inst->validation) {
        if (!has_layer(inst, validation_layer) || !debug_utils)
            return base_error_set(err, KILN_ERROR_UNSUPPORTED,
                                  "validation was requested but %s is not installed "
                                  "(Debian: apt-get install vulkan-validationlayers)",
                                  validation_layer);
        ext_names[ext_count++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    }

    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = opt->app_name ? opt->app_name : "kiln",
        .pEngineName = "kiln",
        .apiVersion = inst->api_version,
    };
    VkDebugUtilsMessengerCreateInfoEXT messenger_info = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = messenger_callback,
        .pUserData = inst,
    };
    VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
    VkValidationFeaturesEXT features = {
        .sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
        .enabledValidationFeatureCount = 1,
        .pEnabledValidationFeatures = &sync,
    };
    /* The messenger in pNext also reports instance creation and destruction. */
    const void *next = NULL;
    if (inst->validation) {
        next = &messenger_info;
        if (opt->sync_validation) {
            features.pNext = &messenger_info;
            next = &features;
        }
    }
    const char *layers[] = {validation_layer};
    VkInstanceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = next,
        .flags = portability ? VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR : 0,
        .pApplicationInfo = &app,
        .enabledLayerCount = inst->validation ? 1u : 0u,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = ext_count,
        .ppEnabledExtensionNames = ext_names,
    };
    VkResult r = vkCreateInstance(&info, NULL, &inst->handle);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
        return base_error_set(err, KILN_ERROR_NO_DEVICE,
                              "no Vulkan driver found: vkCreateInstance failed with "
                              "VK_ERROR_INCOMPATIBLE_DRIVER (on a machine without a GPU install "
                              "lavapipe: apt-get install mesa-vulkan-drivers)");
    st = vkd_check(r, "vkCreateInstance", err);
    if (st != KILN_OK)
        return st;
    inst->owned = true;
    load_instance_globals(inst->handle);
    st = load_instance_fns(inst, err);
    if (st == KILN_OK && inst->validation) {
        st = vkd_check(inst->fn.CreateDebugUtilsMessengerEXT(inst->handle, &messenger_info, NULL,
                                                             &inst->messenger),
                       "vkCreateDebugUtilsMessengerEXT", err);
    }
    return st;
}

static bool device_has_extension(const VkExtensionProperties *exts, uint32_t n, const char *name) {
    return has_instance_extension(exts, n, name);
}

/* Chains s into the pNext list of head when the feature is core at `core` or ext is true. */
static void chain(void *head, void *s, bool wanted) {
    if (!wanted)
        return;
    VkBaseOutStructure *h = head, *x = s;
    x->pNext = h->pNext;
    h->pNext = x;
}

static int32_t pick_compute_family(const vkd_device_info *d) {
    int32_t any = -1;
    for (uint32_t i = 0; i < d->queue_family_count; i++) {
        VkQueueFlags f = d->queue_families[i].queueFlags;
        if (!(f & VK_QUEUE_COMPUTE_BIT) || d->queue_families[i].queueCount == 0)
            continue;
        if (!(f & VK_QUEUE_GRAPHICS_BIT))
            return (int32_t)i; /* a dedicated compute family */
        if (any < 0)
            any = (int32_t)i;
    }
    return any;
}

static kiln_status query_device(vkd_instance *inst, VkPhysicalDevice pd, uint32_t index,
                                vkd_device_info *d, base_error *err) {
    d->physical = pd;
    d->index = index;
    inst->fn.GetPhysicalDeviceProperties(pd, &d->props);
    VkFormatProperties texel;
    inst->fn.GetPhysicalDeviceFormatProperties(pd, VK_FORMAT_R32G32B32A32_UINT, &texel);
    d->texel_uint4 = texel.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT;
    uint32_t api =
        d->props.apiVersion < inst->api_version ? d->props.apiVersion : inst->api_version;
    d->api_version = api;

    uint32_t n = 0;
    kiln_status st = vkd_check(inst->fn.EnumerateDeviceExtensionProperties(pd, NULL, &n, NULL),
                               "vkEnumerateDeviceExtensionProperties", err);
    if (st != KILN_OK)
        return st;
    VkExtensionProperties *exts = base_calloc(&inst->alloc, n ? n : 1, sizeof *exts);
    if (!exts)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for extensions");
    st = vkd_check(inst->fn.EnumerateDeviceExtensionProperties(pd, NULL, &n, exts),
                   "vkEnumerateDeviceExtensionProperties", err);
    bool v12 = api >= VK_API_VERSION_1_2, v13 = api >= VK_API_VERSION_1_3;
    bool driver = v12 || device_has_extension(exts, n, "VK_KHR_driver_properties");
    bool float_controls = v12 || device_has_extension(exts, n, "VK_KHR_shader_float_controls");
    bool bda = v12 || device_has_extension(exts, n, "VK_KHR_buffer_device_address");
    d->ext_8bit_storage = !v12 && device_has_extension(exts, n, "VK_KHR_8bit_storage");
    d->ext_float16_int8 = !v12 && device_has_extension(exts, n, "VK_KHR_shader_float16_int8");
    d->ext_maintenance4 = !v13 && device_has_extension(exts, n, "VK_KHR_maintenance4");
    d->ext_subgroup_size_control =
        !v13 && device_has_extension(exts, n, "VK_EXT_subgroup_size_control");
    d->ext_portability_subset = device_has_extension(exts, n, "VK_KHR_portability_subset");
    d->has_atomic_int64 = v12 || device_has_extension(exts, n, "VK_KHR_shader_atomic_int64");
    d->has_atomic_float = device_has_extension(exts, n, "VK_EXT_shader_atomic_float");
    d->has_dot_product = v13 || device_has_extension(exts, n, "VK_KHR_shader_integer_dot_product");
    d->has_cooperative_matrix = device_has_extension(exts, n, "VK_NV_cooperative_matrix");
    d->has_memory_budget = device_has_extension(exts, n, "VK_EXT_memory_budget") &&
                           inst->fn.GetPhysicalDeviceMemoryProperties2;
    base_free(&inst->alloc, exts, (n ? n : 1) * sizeof *exts);
    if (st != KILN_OK)
        return st;

    d->has_driver = driver;
    d->has_float_controls = float_controls;
    d->has_subgroup_size_control = v13 || d->ext_subgroup_size_control;

    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    d->id.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES;
    d->maintenance3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
    d->subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
    d->driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
    d->subgroup_size_control.sType =
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES;
    d->float_controls.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES;
    chain(&p2, &d->id, true);
    chain(&p2, &d->maintenance3, true);
    chain(&p2, &d->subgroup, true);
    chain(&p2, &d->driver, driver);
    chain(&p2, &d->subgroup_size_control, d->has_subgroup_size_control);
    chain(&p2, &d->float_controls, float_controls);
    d->dot_product_props.sType =
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES;
    d->cooperative_matrix_props.sType =
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    chain(&p2, &d->dot_product_props, d->has_dot_product);
    chain(&p2, &d->cooperative_matrix_props, d->has_cooperative_matrix);
    inst->fn.GetPhysicalDeviceProperties2(pd, &p2);

    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    d->storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
    d->storage8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
    d->float16_int8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
    d->buffer_device_address.sType =
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES;
    d->maintenance4.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES;
    d->subgroup_size_control_features.sType =
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
    chain(&f2, &d->storage16, true);
    chain(&f2, &d->storage8, v12 || d->ext_8bit_storage);
    chain(&f2, &d->float16_int8, v12 || d->ext_float16_int8);
    chain(&f2, &d->buffer_device_address, bda);
    chain(&f2, &d->maintenance4, v13 || d->ext_maintenance4);
    chain(&f2, &d->subgroup_size_control_features, d->has_subgroup_size_control);
    d->atomic_int64.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_INT64_FEATURES;
    d->atomic_float.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT;
    d->dot_product.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
    d->cooperative_matrix.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
    chain(&f2, &d->atomic_int64, d->has_atomic_int64);
    chain(&f2, &d->atomic_float, d->has_atomic_float);
    chain(&f2, &d->dot_product, d->has_dot_product);
    chain(&f2, &d->cooperative_matrix, d->has_cooperative_matrix);
    inst->fn.GetPhysicalDeviceFeatures2(pd, &f2);
    d->features = f2.features;
    /* The snapshot keeps no pointers into this stack frame's chains. */
    d->id.pNext = d->maintenance3.pNext = d->subgroup.pNext = d->driver.pNext = NULL;
    d->subgroup_size_control.pNext = d->float_controls.pNext = NULL;
    d->storage16.pNext = d->storage8.pNext = d->float16_int8.pNext = NULL;
    d->buffer_device_address.pNext = d->maintenance4.pNext = NULL;
    d->subgroup_size_control_features.pNext = NULL;
    d->atomic_int64.pNext = d->atomic_float.pNext = d->dot_product.pNext = NULL;
    d->dot_product_props.pNext = d->cooperative_matrix.pNext = NULL;
    d->cooperative_matrix_props.pNext = NULL;

    inst->fn.GetPhysicalDeviceMemoryProperties(pd, &d->memory);
    if (d->has_memory_budget) { /* a snapshot: budgets change as memory is used */
        VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
        VkPhysicalDeviceMemoryProperties2 m2 = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, .pNext = &budget};
        inst->fn.GetPhysicalDeviceMemoryProperties2(pd, &m2);
        memcpy(d->heap_budget, budget.heapBudget, sizeof d->heap_budget);
        memcpy(d->heap_usage, budget.heapUsage, sizeof d->heap_usage);
    }
    uint32_t qn = 0;
    inst->fn.GetPhysicalDeviceQueueFamilyProperties(pd, &qn, NULL);
    if (qn > VKD_MAX_QUEUE_FAMILIES)
        qn = VKD_MAX_QUEUE_FAMILIES;
    inst->fn.GetPhysicalDeviceQueueFamilyProperties(pd, &qn, d->queue_families);
    d->queue_family_count = qn;
    d->compute_family = pick_compute_family(d);
    return KILN_OK;
}

static kiln_status load_devices(vkd_instance *inst, base_error *err) {
    uint32_t n = 0;
    kiln_status st = vkd_check(inst->fn.EnumeratePhysicalDevices(inst->handle, &n, NULL),
                               "vkEnumeratePhysicalDevices", err);
    if (st != KILN_OK || n == 0)
        return st;
    VkPhysicalDevice *pds = base_calloc(&inst->alloc, n, sizeof *pds);
    inst->devices = base_calloc(&inst->alloc, n, sizeof *inst->devices);
    if (inst->devices)
        inst->device_capacity = n; /* the size it is freed with */
    if (!pds || !inst->devices) {
        st = base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for device list");
        goto free_list;
    }
    st = vkd_check(inst->fn.EnumeratePhysicalDevices(inst->handle, &n, pds),
                   "vkEnumeratePhysicalDevices", err);
    for (uint32_t i = 0; st == KILN_OK && i < n; i++)
        st = query_device(inst, pds[i], i, &inst->devices[i], err);
    if (st == KILN_OK)
        inst->device_count = n; /* the second call may report fewer */
free_list:
    base_free(&inst->alloc, pds, n * sizeof *pds);
    return st;
}

/* The instances Kiln created, each shared by every vkd_instance_create with its options (under
 * lifecycle_lock). */
static vkd_instance *shared_instances;

static bool same_allocator(const base_allocator *a, const base_allocator *b) {
    return a->fn == b->fn && a->user == b->user;
}

kiln_status vkd_instance_create(const vkd_instance_options *options, vkd_instance **out,
                                base_error *err) {
    static const vkd_instance_options defaults = {0};
    const vkd_instance_options *opt = options ? options : &defaults;
    *out = NULL;
    if (!loader_ready())
        return base_error_set(err, KILN_ERROR_VULKAN_UNAVAILABLE,
                              "the Vulkan loader (libvulkan.so.1) could not be loaded "
                              "(Debian: apt-get install libvulkan1 mesa-vulkan-drivers)");
    base_allocator alloc = opt->alloc ? *opt->alloc : base_allocator_make(NULL, NULL);
    bool validation = opt->validation || env_flag("KILN_VALIDATION");
    const char *app_name = opt->app_name ? opt->app_name : "kiln";
    vkd_lifecycle_lock();
    for (vkd_instance *s = shared_instances; s; s = s->next) {
        if (s->validation == validation && s->sync_validation == opt->sync_validation &&
            same_allocator(&s->alloc, &alloc) &&
            strncmp(s->app_name, app_name, sizeof s->app_name - 1) == 0) {
            s->refs++;
            vkd_lifecycle_unlock();
            *out = s;
            return KILN_OK;
        }
    }
    vkd_instance *inst = base_calloc(&alloc, 1, sizeof *inst);
    if (!inst) {
        vkd_lifecycle_unlock();
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for instance");
    }
    inst->alloc = alloc;
    inst->validation = validation;
    inst->sync_validation = opt->sync_validation;
    snprintf(inst->app_name, sizeof inst->app_name, "%s", app_name);
    uint32_t loader = volkGetInstanceVersion();
    inst->loader_version = loader;
    inst->api_version = loader < VK_API_VERSION_1_3 ? loader : VK_API_VERSION_1_3;
    kiln_status st = KILN_OK;
    if (inst->api_version < VK_API_VERSION_1_1)
        st = base_error_set(err, KILN_ERROR_UNSUPPORTED,
                            "the Vulkan loader offers version %u.%u; Kiln needs 1.1",
                            VK_API_VERSION_MAJOR(loader), VK_API_VERSION_MINOR(loader));
    if (st == KILN_OK && (st = load_layers(inst, err)) == KILN_OK &&
        (st = create_handle(inst, opt, err)) == KILN_OK)
        st = load_devices(inst, err);
    if (st == KILN_OK) {
        inst->refs = 1;
        inst->next = shared_instances;
        shared_instances = inst;
    }
    vkd_lifecycle_unlock();
    if (st != KILN_OK) {
        vkd_instance_destroy(inst);
        return st;
    }
    *out = inst;
    return KILN_OK;
}

kiln_status vkd_instance_wrap(VkInstance handle, uint32_t api_version, const base_allocator *alloc,
                              vkd_instance **out, base_error *err) {
    *out = NULL;
    if (!handle || api_version < VK_API_VERSION_1_1)
        return base_error_set(err, KILN_ERROR_INVALID_ARGUMENT,
                              "an application's instance must exist and use Vulkan 1.1 or newer");
    if (!loader_ready())
        return base_error_set(err, KILN_ERROR_VULKAN_UNAVAILABLE,
                              "the Vulkan loader (libvulkan.so.1) could not be loaded");
    base_allocator a = alloc ? *alloc : base_allocator_make(NULL, NULL);
    vkd_instance *inst = base_calloc(&a, 1, sizeof *inst);
    if (!inst)
        return base_error_set(err, KILN_ERROR_OUT_OF_HOST_MEMORY, "no memory for instance");
    inst->alloc = a;
    inst->handle = handle;
    inst->owned = false;
    inst->refs = 1; /* the application's: never shared */
    inst->loader_version = volkGetInstanceVersion();
    inst->api_version = api_version < VK_API_VERSION_1_3 ? api_version : VK_API_VERSION_1_3;
    load_instance_globals(handle);
    kiln_status st = load_instance_fns(inst, err);
    if (st == KILN_OK)
        st = load_layers(inst, err);
    if (st == KILN_OK)
        st = load_devices(inst, err);
    if (st != KILN_OK) {
        vkd_instance_destroy(inst);
        return st;
    }
    *out = inst;
    return KILN_OK;
}

void vkd_instance_destroy(vkd_instance *inst) {
    if (!inst)
        return;
    vkd_lifecycle_lock();
    if (inst->refs > 1) { /* another holder keeps it */
        inst->refs--;
        vkd_lifecycle_unlock();
        return;
    }
    for (vkd_instance **p = &shared_instances; *p; p = &(*p)->next) {
        if (*p == inst) {
            *p = inst->next;
            break;
        }
    }
    if (inst->messenger)
        inst->fn.DestroyDebugUtilsMessengerEXT(inst->handle, inst->messenger, NULL);
    if (inst->handle && inst->owned && inst->fn.DestroyInstance)
        inst->fn.DestroyInstance(inst->handle, NULL);
    vkd_lifecycle_unlock();
    base_allocator alloc = inst->alloc;
    base_free(&alloc, inst->layers, inst->layer_count * sizeof *inst->layers);
    base_free(&alloc, inst->devices, inst->device_capacity * sizeof *inst->devices);
    base_free(&alloc, inst, sizeof *inst);
}

VkInstance vkd_instance_handle(const vkd_instance *inst) {
    return inst->handle;
}

uint32_t vkd_instance_api_version(const vkd_instance *inst) {
    return inst->api_version;
}

uint32_t vkd_instance_loader_version(const vkd_instance *inst) {
    return inst->loader_version;
}

bool vkd_instance_validation(const vkd_instance *inst) {
    return inst->validation;
}

vkd_message_counts vkd_instance_messages(const vkd_instance *inst) {
    vkd_message_counts c;
    c.errors = __atomic_load_n(&inst->messages.errors, __ATOMIC_RELAXED);
    c.warnings = __atomic_load_n(&inst->messages.warnings, __ATOMIC_RELAXED);
    c.infos = __atomic_load_n(&inst->messages.infos, __ATOMIC_RELAXED);
    return c;
}

uint32_t vkd_instance_layer_count(const vkd_instance *inst) {
    return inst->layer_count;
}

const VkLayerProperties *vkd_instance_layer(const vkd_instance *inst, uint32_t index) {
    return index < inst->layer_count ? &inst->layers[index] : NULL;
}

uint32_t vkd_instance_device_count(const vkd_instance *inst) {
    return inst->device_count;
}

const vkd_device_info *vkd_instance_device(const vkd_instance *inst, uint32_t index) {
    return index < inst->device_count ? &inst->devices[index] : NULL;
}

uint32_t vkd_instance_device_extensions(const vkd_instance *inst, uint32_t index,
                                        VkExtensionProperties *out, uint32_t max) {
    if (index >= inst->device_count)
        return 0;
    VkPhysicalDevice pd = inst->devices[index].physical;
    uint32_t n = 0;
    if (inst->fn.EnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS)
        return 0;
    if (!out || max == 0)
        return n;
    uint32_t got = max;
    VkResult r = inst->fn.EnumerateDeviceExtensionProperties(pd, NULL, &got, out);
    return r == VK_SUCCESS || r == VK_INCOMPLETE ? n : 0;
}
