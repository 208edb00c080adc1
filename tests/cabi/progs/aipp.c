/* AIPP from C: argv = static.om dynamic.om raw.bin out_static.bin out_dynamic.bin hw.om.
 * The static AIPP model: aclmdlGetAippType / aclmdlGetFirstAippInfo, one execute on the raw
 * RGB image. The dynamic AIPP model: its parameter input found by ACL_DYNAMIC_AIPP_NAME, an
 * aclmdlAIPP set (crop 8x8 at (2, 1), mean) applied with aclmdlSetInputAIPP, one execute;
 * bad setter values and a batch index past the set give 100000. The dynamic image size model:
 * aclmdlGetDynamicHW lists its gears, aclmdlSetDynamicHWSize takes one and refuses 5x5. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "acl/acl.h"
#include "check.h"

static void *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        printf("FAIL cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *data = malloc(*size);
    if (fread(data, 1, *size, f) != *size) {
        printf("FAIL short read of %s\n", path);
        exit(1);
    }
    fclose(f);
    return data;
}

static void run(uint32_t id, aclmdlDesc *desc, const void *raw, size_t raw_size,
                const aclmdlAIPP *set, const char *out_path)
{
    aclmdlDataset *in = aclmdlCreateDataset(), *out = aclmdlCreateDataset();
    void *ptrs[4];
    size_t n_in = aclmdlGetNumInputs(desc);
    for (size_t i = 0; i < n_in; i++) {
        size_t size = aclmdlGetInputSizeByIndex(desc, i);
        CHECK(aclrtMalloc(&ptrs[i], size, ACL_MEM_MALLOC_HUGE_FIRST));
        if (i == 0) {
            CHECK(aclrtMemcpy(ptrs[i], size, raw, raw_size < size ? raw_size : size,
                              ACL_MEMCPY_HOST_TO_DEVICE));
        }
        CHECK(aclmdlAddDatasetBuffer(in, aclCreateDataBuffer(ptrs[i], size)));
    }
    size_t out_size = aclmdlGetOutputSizeByIndex(desc, 0);
    void *dev_out;
    CHECK(aclrtMalloc(&dev_out, out_size, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclmdlAddDatasetBuffer(out, aclCreateDataBuffer(dev_out, out_size)));
    if (set != NULL) {
        size_t index = 0;
        CHECK(aclmdlGetInputIndexByName(desc, ACL_DYNAMIC_AIPP_NAME, &index));
        printf("aipp data input %zu of %zu bytes\n", index, aclmdlGetInputSizeByIndex(desc, index));
        CHECK(aclmdlSetInputAIPP(id, in, index, set));
    }
    CHECK(aclmdlExecute(id, in, out));
    void *host = malloc(out_size);
    CHECK(aclrtMemcpy(host, out_size, dev_out, out_size, ACL_MEMCPY_DEVICE_TO_HOST));
    FILE *f = fopen(out_path, "wb");
    fwrite(host, 1, out_size, f);
    fclose(f);
    free(host);
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        printf("usage: aipp static.om dynamic.om raw.bin out_static.bin out_dynamic.bin "
               "hw.om\n");
        return 2;
    }
    size_t raw_size;
    void *raw = read_all(argv[3], &raw_size);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));

    uint32_t id;
    CHECK(aclmdlLoadFromFile(argv[1], &id));
    aclmdlDesc *desc = aclmdlCreateDesc();
    CHECK(aclmdlGetDesc(desc, id));
    aclmdlInputAippType type;
    size_t attached;
    CHECK(aclmdlGetAippType(id, 0, &type, &attached));
    printf("static type %d attached %zx format %d\n", (int)type, attached,
           (int)aclmdlGetInputFormat(desc, 0));
    aclAippInfo *info = (aclAippInfo *)calloc(1, sizeof(aclAippInfo));
    CHECK(aclmdlGetFirstAippInfo(id, 0, info));
    printf("info %d %dx%d crop %d at %d,%d mean %d var %.4f dims %zu\n", (int)info->inputFormat,
           info->srcImageSizeW, info->srcImageSizeH, info->cropSwitch, info->loadStartPosW,
           info->loadStartPosH, info->meanChn0, info->varReciChn0,
           info->outDims[0].srcDims.dimCount);
    run(id, desc, raw, raw_size, NULL, argv[4]);

    uint32_t dyn;
    CHECK(aclmdlLoadFromFile(argv[2], &dyn));
    aclmdlDesc *ddesc = aclmdlCreateDesc();
    CHECK(aclmdlGetDesc(ddesc, dyn));
    EXPECT_CODE(100038, aclmdlGetFirstAippInfo(dyn, 0, info));
    size_t size = 0;
    CHECK(aclmdlGetAippDataSize(1, &size));
    printf("data size %zu\n", size);
    aclmdlAIPP *set = aclmdlCreateAIPP(1);
    CHECK(aclmdlSetAIPPSrcImageSize(set, 12, 10));
    CHECK(aclmdlSetAIPPInputFormat(set, ACL_RGB888_U8));
    CHECK(aclmdlSetAIPPCscParams(set, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
    CHECK(aclmdlSetAIPPRbuvSwapSwitch(set, 0));
    CHECK(aclmdlSetAIPPAxSwapSwitch(set, 0));
    CHECK(aclmdlSetAIPPCropParams(set, 1, 2, 1, 8, 8, 0));
    CHECK(aclmdlSetAIPPScfParams(set, 0, 0, 0, 0, 0, 0));
    CHECK(aclmdlSetAIPPPaddingParams(set, 0, 0, 0, 0, 0, 0));
    CHECK(aclmdlSetAIPPDtcPixelMean(set, 124, 117, 104, 0, 0));
    CHECK(aclmdlSetAIPPDtcPixelMin(set, 0.0f, 0.0f, 0.0f, 0.0f, 0));
    CHECK(aclmdlSetAIPPPixelVarReci(set, 0.5f, 0.5f, 0.5f, 1.0f, 0));
    EXPECT_CODE(100000, aclmdlSetAIPPCropParams(set, 1, 0, 0, 8, 8, 1));
    EXPECT_CODE(100000, aclmdlSetAIPPInputFormat(set, ACL_RAW10));
    EXPECT_CODE(100000, aclmdlSetAIPPDtcPixelMean(set, -1, 0, 0, 0, 0));
    run(dyn, ddesc, raw, raw_size, set, argv[5]);
    CHECK(aclmdlDestroyAIPP(set));
    EXPECT_CODE(100000, aclmdlDestroyAIPP(set));
    free(info);

    uint32_t hw_id;
    CHECK(aclmdlLoadFromFile(argv[6], &hw_id));
    aclmdlDesc *hdesc = aclmdlCreateDesc();
    CHECK(aclmdlGetDesc(hdesc, hw_id));
    aclmdlHW gears;
    CHECK(aclmdlGetDynamicHW(hdesc, 0, &gears));
    printf("hw gears %zu:", gears.hwCount);
    for (size_t k = 0; k < gears.hwCount; k++) {
        printf(" %llux%llu", (unsigned long long)gears.hw[k][0],
               (unsigned long long)gears.hw[k][1]);
    }
    printf("\n");
    size_t gear = 0;
    CHECK(aclmdlGetInputIndexByName(hdesc, ACL_DYNAMIC_TENSOR_NAME, &gear));
    aclmdlDataset *hin = aclmdlCreateDataset();
    CHECK(aclmdlSetDynamicHWSize(hw_id, hin, gear, 16, 12));
    EXPECT_CODE(145000, aclmdlSetDynamicHWSize(hw_id, hin, gear, 5, 5));
    CHECK(aclmdlDestroyDataset(hin));
    CHECK(aclmdlUnload(hw_id));
    CHECK(aclmdlUnload(id));
    CHECK(aclmdlUnload(dyn));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("aipp program done\n");
    return 0;
}
