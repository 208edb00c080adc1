/* The batch, border and paste calls of libacl_dvpp.so from C, on one NV12 picture read from a
 * file: a batch crop-resize of two ROIs (set with acldvppSetRoiConfig and its per-side
 * setters), a make-border into memory of acldvppMallocWithCfg, a crop-resize-paste, a batch
 * crop-resize-make-border and a batch crop-resize-paste; every output written to a file of
 * OUTDIR named after its step; the border config read back; then refused calls (NULL arrays,
 * size 0, counts past either batch) and the stream still synchronizing.
 * Usage: dvpp_batch IN.nv12 OUTDIR */
#define ENABLE_DVPP_INTERFACE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "acl/acl.h"
#include "acl/ops/acl_dvpp.h"
#include "check.h"
#include "picture.h"

#define W 128
#define H 96
#define NV12(w, h) ((uint32_t)(w) * (h) * 3 / 2)

static const char *out_dir;
static aclrtStream stream;

static void describe(acldvppPicDesc *desc, void *data, uint32_t w, uint32_t h) {
    describe_picture(desc, data, NV12(w, h), w, h, w, h);
}

/* an NV12 output of w x h in new DVPP memory set to fill, described by desc */
static void *output(acldvppPicDesc *desc, uint32_t w, uint32_t h, int fill) {
    void *data = NULL;
    CHECK(acldvppMalloc(&data, NV12(w, h)));
    CHECK(aclrtMemset(data, NV12(w, h), fill, NV12(w, h)));
    describe(desc, data, w, h);
    return data;
}

static void save(const char *name, void *data, uint32_t size) {
    char path[4096];
    char *host = malloc(size);
    CHECK(aclrtMemcpy(host, size, data, size, ACL_MEMCPY_DEVICE_TO_HOST));
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    FILE *f = fopen(path, "wb");
    EXPECT(f != NULL && fwrite(host, 1, size, f) == size);
    fclose(f);
    free(host);
}

static acldvppBorderConfig *border(acldvppBorderType type, uint32_t top, uint32_t bottom,
                                   uint32_t left, uint32_t right, const double *values) {
    acldvppBorderConfig *cfg = acldvppCreateBorderConfig();
    EXPECT(cfg != NULL);
    CHECK(acldvppSetBorderConfigBorderType(cfg, type));
    CHECK(acldvppSetBorderConfigTop(cfg, top));
    CHECK(acldvppSetBorderConfigBottom(cfg, bottom));
    CHECK(acldvppSetBorderConfigLeft(cfg, left));
    CHECK(acldvppSetBorderConfigRight(cfg, right));
    for (uint32_t i = 0; i < 3; i++) CHECK(acldvppSetBorderConfigValue(cfg, i, values[i]));
    return cfg;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    out_dir = argv[2];
    static char pixels[NV12(W, H)];
    FILE *f = fopen(argv[1], "rb");
    EXPECT(f != NULL && fread(pixels, 1, sizeof pixels, f) == sizeof pixels);
    fclose(f);

    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&stream));
    acldvppChannelDesc *channel = acldvppCreateChannelDesc();
    EXPECT(channel != NULL);
    CHECK(acldvppCreateChannel(channel));
    void *in = NULL;
    CHECK(acldvppMalloc(&in, sizeof pixels));
    CHECK(aclrtMemcpy(in, sizeof pixels, pixels, sizeof pixels, ACL_MEMCPY_HOST_TO_DEVICE));
    acldvppPicDesc *src = picture(in, sizeof pixels, W, H, W, H);

    /* the two crop areas: [0, 63] x [0, 47] at once, [32, 127] x [16, 95] side by side */
    acldvppRoiConfig *area0 = acldvppCreateRoiConfig(2, 3, 2, 3);
    acldvppRoiConfig *area1 = acldvppCreateRoiConfig(2, 3, 2, 3);
    CHECK(acldvppSetRoiConfig(area0, 0, 63, 0, 47));
    CHECK(acldvppSetRoiConfigLeft(area1, 32));
    CHECK(acldvppSetRoiConfigRight(area1, 127));
    CHECK(acldvppSetRoiConfigTop(area1, 16));
    CHECK(acldvppSetRoiConfigBottom(area1, 95));
    acldvppRoiConfig *crops[2] = {area0, area1};
    acldvppResizeConfig *bilinear = acldvppCreateResizeConfig();
    acldvppResizeConfig *nearest = acldvppCreateResizeConfig();
    CHECK(acldvppSetResizeConfigInterpolation(bilinear, 1));
    CHECK(acldvppSetResizeConfigInterpolation(nearest, 2));

    /* batch crop-resize: both areas of the one input, to 48x32 and 64x64 */
    acldvppBatchPicDesc *srcb = acldvppCreateBatchPicDesc(1);
    acldvppBatchPicDesc *dstb = acldvppCreateBatchPicDesc(2);
    EXPECT(srcb != NULL && dstb != NULL);
    EXPECT(acldvppGetPicDesc(srcb, 1) == NULL && acldvppCreateBatchPicDesc(0) == NULL);
    describe(acldvppGetPicDesc(srcb, 0), in, W, H);
    void *b0 = output(acldvppGetPicDesc(dstb, 0), 48, 32, 0);
    void *b1 = output(acldvppGetPicDesc(dstb, 1), 64, 64, 0);
    uint32_t one_input[1] = {2};
    CHECK(acldvppVpcBatchCropResizeAsync(channel, srcb, one_input, 1, dstb, crops, bilinear,
                                         stream));

    /* make border: 8 rows above and below, 16 columns each side, constant (200, 60, 90), in
     * memory of acldvppMallocWithCfg with a module id attribute */
    const double values[3] = {200, 60, 90};
    acldvppBorderConfig *frame = border(BORDER_CONSTANT, 8, 8, 16, 16, values);
    printf("border %d %u %u %u %u %g %g %g %g\n", (int)acldvppGetBorderConfigBorderType(frame),
           acldvppGetBorderConfigTop(frame), acldvppGetBorderConfigBottom(frame),
           acldvppGetBorderConfigLeft(frame), acldvppGetBorderConfigRight(frame),
           acldvppGetBorderConfigValue(frame, 0), acldvppGetBorderConfigValue(frame, 1),
           acldvppGetBorderConfigValue(frame, 2), acldvppGetBorderConfigValue(frame, 4));
    aclrtMallocAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.attr = ACL_RT_MEM_ATTR_MODULE_ID;
    attr.value.moduleId = 33;
    aclrtMallocConfig cfg = {&attr, 1};
    void *framed = NULL, *plain = NULL;
    CHECK(acldvppMallocWithCfg(&framed, NV12(160, 112), ACL_MEM_MALLOC_HUGE_FIRST, &cfg));
    CHECK(acldvppMallocWithCfg(&plain, 4096, ACL_MEM_MALLOC_NORMAL_ONLY, NULL));
    CHECK(acldvppFree(plain));
    acldvppPicDesc *bordered = picture(framed, NV12(160, 112), 160, 112, 160, 112);
    CHECK(acldvppVpcMakeBorderAsync(channel, src, bordered, frame, stream));

    /* crop-resize-paste: area 1 into [16, 79] x [8, 55] of a 96x64 picture of 0x55, nearest */
    acldvppPicDesc *canvas = acldvppCreatePicDesc();
    void *pasted = output(canvas, 96, 64, 0x55);
    acldvppRoiConfig *spot = acldvppCreateRoiConfig(16, 79, 8, 55);
    CHECK(acldvppVpcCropResizePasteAsync(channel, src, canvas, area1, spot, nearest, stream));

    /* batch crop-resize-make-border: into 64x48 less 8 each side (constant) and 64x64 less
     * 4 above and below and 8 each side (replicate) */
    const double grey[3] = {16, 128, 128}, none[3] = {0, 0, 0};
    acldvppBorderConfig *borders[2] = {border(BORDER_CONSTANT, 8, 8, 8, 8, grey),
                                       border(BORDER_REPLICATE, 4, 4, 8, 8, none)};
    acldvppBatchPicDesc *mb = acldvppCreateBatchPicDesc(2);
    void *m0 = output(acldvppGetPicDesc(mb, 0), 64, 48, 0);
    void *m1 = output(acldvppGetPicDesc(mb, 1), 64, 64, 0);
    CHECK(acldvppVpcBatchCropResizeMakeBorderAsync(channel, srcb, one_input, 1, mb, crops,
                                                   borders, bilinear, stream));

    /* batch crop-resize-paste: into [0, 31] x [0, 23] of a 48x32 and [16, 47] x [8, 39] of a
     * 64x64, both zero elsewhere, nearest */
    acldvppRoiConfig *spots[2] = {acldvppCreateRoiConfig(0, 31, 0, 23),
                                  acldvppCreateRoiConfig(16, 47, 8, 39)};
    acldvppBatchPicDesc *rp = acldvppCreateBatchPicDesc(2);
    void *r0 = output(acldvppGetPicDesc(rp, 0), 48, 32, 0);
    void *r1 = output(acldvppGetPicDesc(rp, 1), 64, 64, 0);
    CHECK(acldvppVpcBatchCropResizePasteAsync(channel, srcb, one_input, 1, rp, crops, spots,
                                              nearest, stream));
    CHECK(aclrtSynchronizeStream(stream));
    save("batch0", b0, NV12(48, 32));
    save("batch1", b1, NV12(64, 64));
    save("border", framed, NV12(160, 112));
    save("paste", pasted, NV12(96, 64));
    save("mborder0", m0, NV12(64, 48));
    save("mborder1", m1, NV12(64, 64));
    save("rpaste0", r0, NV12(48, 32));
    save("rpaste1", r1, NV12(64, 64));

    /* refused: NULL arrays, size 0, counts past the output batch or past the input batch */
    uint32_t three[1] = {3}, two_inputs[2] = {1, 1};
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                acldvppVpcBatchCropResizeAsync(channel, srcb, NULL, 1, dstb, crops, bilinear,
                                               stream));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                acldvppVpcBatchCropResizeAsync(channel, srcb, one_input, 1, dstb, NULL,
                                               bilinear, stream));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                acldvppVpcBatchCropResizeAsync(channel, srcb, one_input, 0, dstb, crops,
                                               bilinear, stream));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                acldvppVpcBatchCropResizeAsync(channel, srcb, three, 1, dstb, crops, bilinear,
                                               stream));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                acldvppVpcBatchCropAsync(channel, srcb, two_inputs, 2, dstb, crops, stream));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                acldvppVpcBatchCropResizeMakeBorderAsync(channel, srcb, one_input, 1, mb, crops,
                                                         NULL, bilinear, stream));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                acldvppVpcBatchCropAndPasteAsync(channel, srcb, one_input, 1, rp, crops, NULL,
                                                 stream));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, acldvppSetBorderConfigValue(frame, 4, 1.0));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, acldvppSetRoiConfigLeft(NULL, 0));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                acldvppMallocWithCfg(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST, NULL));
    CHECK(aclrtSynchronizeStream(stream));

    CHECK(acldvppDestroyBorderConfig(frame));
    CHECK(acldvppDestroyBorderConfig(borders[0]));
    CHECK(acldvppDestroyBorderConfig(borders[1]));
    acldvppRoiConfig *areas[5] = {area0, area1, spot, spots[0], spots[1]};
    for (int i = 0; i < 5; i++) CHECK(acldvppDestroyRoiConfig(areas[i]));
    CHECK(acldvppDestroyResizeConfig(bilinear));
    CHECK(acldvppDestroyResizeConfig(nearest));
    acldvppBatchPicDesc *batches[4] = {srcb, dstb, mb, rp};
    for (int i = 0; i < 4; i++) CHECK(acldvppDestroyBatchPicDesc(batches[i]));
    acldvppPicDesc *pics[3] = {src, bordered, canvas};
    for (int i = 0; i < 3; i++) CHECK(acldvppDestroyPicDesc(pics[i]));
    void *blocks[8] = {in, b0, b1, framed, pasted, m0, m1, r0};
    for (int i = 0; i < 8; i++) CHECK(acldvppFree(blocks[i]));
    CHECK(acldvppFree(r1));
    CHECK(acldvppDestroyChannel(channel));
    CHECK(acldvppDestroyChannelDesc(channel));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("dvpp batch ok\n");
    return 0;
}
