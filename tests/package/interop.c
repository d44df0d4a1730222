/* A program with Vulkan code of its own (linked with -lvulkan: its vkCreateInstance is the
 * loader's) that links Kiln (libkiln.a or libkiln.so, whose volk stays inside the library).
 * It makes its own Vulkan calls before and after using Kiln, uses a context of Kiln's own
 * (volk's loader entry points), then a context on its own device over its own buffer
 * (kiln_vulkan.h). Exits 0 when every result and call is right. */
#include <kiln/kiln_vulkan.h>

#include <vulkan/vulkan.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "interop: %s:%d: %s\n", __FILE__, __LINE__, #cond);                    \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

typedef struct app {
    VkInstance inst;
    VkPhysicalDevice pd;
    uint32_t device_count;
    uint32_t family;
    VkDevice dev;
} app;

/* The application's own instance and device: the first physical device, a compute queue. */
static int app_create(app *a) {
    VkApplicationInfo ai = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                            .pApplicationName = "interop",
                            .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &ai};
    if (vkCreateInstance(&ci, NULL, &a->inst) != VK_SUCCESS)
        return 0;
    VkPhysicalDevice pds[8];
    a->device_count = 8;
    VkResult r = vkEnumeratePhysicalDevices(a->inst, &a->device_count, pds);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || a->device_count == 0)
        return 0;
    a->pd = pds[0];
    VkQueueFamilyProperties fams[16];
    uint32_t nf = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(a->pd, &nf, fams);
    for (a->family = 0; a->family < nf; a->family++)
        if (fams[a->family].queueFlags & VK_QUEUE_COMPUTE_BIT)
            break;
    if (a->family == nf)
        return 0;
    float priority = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                  .queueFamilyIndex = a->family,
                                  .queueCount = 1,
                                  .pQueuePriorities = &priority};
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &qi};
    return vkCreateDevice(a->pd, &di, NULL, &a->dev) == VK_SUCCESS;
}

/* A sum on a context of Kiln's own (its instance, through volk). */
static void kiln_own_context(void) {
    kiln_context *ctx = NULL;
    CHECK(kiln_context_create(NULL, &ctx) == KILN_OK);
    float data[4] = {1, 2, 3, 4}, out = 0;
    kiln_tensor *t = kiln_from_data(ctx, KILN_F32, 1, (const int64_t[]){4}, data);
    CHECK(kiln_read(kiln_sum(t, 0, NULL, false), &out, sizeof out) == KILN_OK);
    CHECK(out == 10);
    kiln_context_destroy(ctx);
}

/* Row sums of the application's buffer (3 x 4 floats, 1..12) on a context on its device. */
static void kiln_on_app_device(const app *a) {
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = 12 * sizeof(float),
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    VkBuffer buf = VK_NULL_HANDLE;
    VkDeviceMemory mem = VK_NULL_HANDLE;
    CHECK(vkCreateBuffer(a->dev, &bi, NULL, &buf) == VK_SUCCESS);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(a->dev, buf, &req);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(a->pd, &mp);
    VkMemoryPropertyFlags want =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = 0;
    while (type < mp.memoryTypeCount && !((req.memoryTypeBits >> type & 1) &&
                                          (mp.memoryTypes[type].propertyFlags & want) == want))
        type++;
    CHECK(type < mp.memoryTypeCount);
    VkMemoryAllocateInfo mi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .allocationSize = req.size,
                               .memoryTypeIndex = type};
    CHECK(vkAllocateMemory(a->dev, &mi, NULL, &mem) == VK_SUCCESS);
    CHECK(vkBindBufferMemory(a->dev, buf, mem, 0) == VK_SUCCESS);
    float *host = NULL;
    CHECK(vkMapMemory(a->dev, mem, 0, VK_WHOLE_SIZE, 0, (void **)&host) == VK_SUCCESS);
    for (int i = 0; i < 12; i++)
        host[i] = (float)(i + 1);

    kiln_vulkan_device vd = {.instance = a->inst,
                             .physical_device = a->pd,
                             .device = a->dev,
                             .queue_family = a->family,
                             .api_version = VK_API_VERSION_1_1};
    kiln_context *ctx = NULL;
    CHECK(kiln_context_create_vulkan(&vd, NULL, &ctx) == KILN_OK);
    kiln_tensor *t = kiln_tensor_from_vulkan_buffer(
        ctx, buf, bi.size, KILN_F32, 2, (const int64_t[]){3, 4}, (const int64_t[]){4, 1}, 0);
    float out[3] = {0, 0, 0};
    CHECK(kiln_read(kiln_sum(t, 1, (const int32_t[]){1}, false), out, sizeof out) == KILN_OK);
    CHECK(out[0] == 10 && out[1] == 26 && out[2] == 42);
    if (kiln_context_status(ctx) != KILN_OK)
        fprintf(stderr, "interop: %s\n", kiln_context_message(ctx));
    kiln_context_destroy(ctx);
    vkUnmapMemory(a->dev, mem);
    vkDestroyBuffer(a->dev, buf, NULL);
    vkFreeMemory(a->dev, mem, NULL);
}

int main(void) {
    /* Lavapipe's driver leaks a little when it is unloaded: keep it loaded (LeakSanitizer). */
    (void)dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
    printf("kiln %s\n", kiln_version());
    app a = {0};
    if (!app_create(&a)) {
        fprintf(stderr, "interop: the application's own Vulkan calls failed\n");
        return 1;
    }
    kiln_own_context();
    kiln_on_app_device(&a);
    /* The application's own calls after Kiln's. */
    uint32_t n = 0;
    CHECK(vkEnumeratePhysicalDevices(a.inst, &n, NULL) == VK_SUCCESS && n == a.device_count);
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(a.pd, &props);
    CHECK(props.deviceName[0] != '\0');
    CHECK(vkDeviceWaitIdle(a.dev) == VK_SUCCESS);
    printf("interop: %s, %d failure(s)\n", props.deviceName, failures);
    vkDestroyDevice(a.dev, NULL);
    vkDestroyInstance(a.inst, NULL);
    return failures ? 1 : 0;
}
