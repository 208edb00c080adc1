/* acldvpp* from C, as the samples write it: a JPEG file decoded on the card's DVPP engine
 * (sizes from acldvppJpegGetImageInfo / acldvppJpegPredictDecSize), resized to 224x224 by
 * VPC, the NV12 result written to a file; the channel's parameters set and read back; the
 * decoded luma halved by acldvppVpcPyrDownAsync, written to a second file; then refused
 * calls and a corrupt file's code.
 * Usage: dvpp IN.jpg OUT.nv12 OUT.gray */
#define ENABLE_DVPP_INTERFACE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "acl/acl.h"
#include "acl/ops/acl_dvpp.h"
#include "check.h"
#include "picture.h"

static uint32_t align_up(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    FILE *f = fopen(argv[1], "rb");
    EXPECT(f != NULL);
    fseek(f, 0, SEEK_END);
    uint32_t jpeg_size = (uint32_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *jpeg = malloc(jpeg_size);
    EXPECT(fread(jpeg, 1, jpeg_size, f) == jpeg_size);
    fclose(f);

    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream = NULL;
    CHECK(aclrtCreateStream(&stream));
    acldvppChannelDesc *channel = acldvppCreateChannelDesc();
    EXPECT(channel != NULL);
    CHECK(acldvppCreateChannel(channel));

    uint32_t w = 0, h = 0, dec_size = 0;
    int32_t components = 0;
    acldvppJpegFormat css = ACL_JPEG_CSS_UNKNOWN;
    CHECK(acldvppJpegGetImageInfoV2(jpeg, jpeg_size, &w, &h, &components, &css));
    CHECK(acldvppJpegPredictDecSize(jpeg, jpeg_size, PIXEL_FORMAT_YUV_SEMIPLANAR_420,
                                    &dec_size));
    printf("info %u %u %d %d size %u\n", w, h, components, (int)css, dec_size);
    void *src = NULL, *yuv = NULL, *small = NULL;
    CHECK(acldvppMalloc(&src, jpeg_size));
    CHECK(aclrtMemcpy(src, jpeg_size, jpeg, jpeg_size, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(acldvppMalloc(&yuv, dec_size));
    acldvppPicDesc *decoded = picture(yuv, dec_size, w, h, align_up(w, 16), align_up(h, 2));
    CHECK(acldvppJpegDecodeAsync(channel, src, jpeg_size, decoded, stream));
    uint32_t out_size = 224 * 224 * 3 / 2;
    CHECK(acldvppMalloc(&small, out_size));
    acldvppPicDesc *resized = picture(small, out_size, 224, 224, 224, 224);
    acldvppResizeConfig *resize = acldvppCreateResizeConfig();
    CHECK(acldvppVpcResizeAsync(channel, decoded, resized, resize, stream));
    CHECK(aclrtSynchronizeStream(stream));
    printf("decoded %u %u %u %u ret %u\n", acldvppGetPicDescWidth(decoded),
           acldvppGetPicDescHeight(decoded), acldvppGetPicDescWidthStride(decoded),
           acldvppGetPicDescHeightStride(decoded), acldvppGetPicDescRetCode(decoded));
    char *out = malloc(out_size);
    CHECK(aclrtMemcpy(out, out_size, small, out_size, ACL_MEMCPY_DEVICE_TO_HOST));
    f = fopen(argv[2], "wb");
    EXPECT(f != NULL && fwrite(out, 1, out_size, f) == out_size);
    fclose(f);

    /* channel parameters: a CSC matrix set and read back, the created channel's id */
    uint32_t csc = 3, back = 0;
    uint64_t id = 99;
    size_t got_size = 0, id_size = 0;
    CHECK(acldvppSetChannelDescParam(channel, ACL_DVPP_CSC_MATRIX_UINT32, sizeof csc, &csc));
    CHECK(acldvppGetChannelDescParam(channel, ACL_DVPP_CSC_MATRIX_UINT32, sizeof back,
                                     &got_size, &back));
    CHECK(acldvppGetChannelDescParam(channel, ACL_DVPP_CHANNEL_ID_UINT64, sizeof id, &id_size,
                                     &id));
    printf("param csc %u size %zu id %zu %d\n", back, got_size, id_size,
           id == acldvppGetChannelDescChannelId(channel));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,               /* a length below the type's size */
                acldvppSetChannelDescParam(channel, ACL_DVPP_CSC_MATRIX_UINT32, 2, &csc));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                acldvppGetChannelDescParam(channel, ACL_DVPP_CHANNEL_ID_UINT64, 4, &id_size,
                                           &id));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                acldvppSetChannelDescParam(channel, ACL_DVPP_CSC_MATRIX_UINT32, 4, NULL));

    /* the decoded luma (strides 512 x 368) as a YUV400 picture, halved */
    uint32_t sw = acldvppGetPicDescWidthStride(decoded);
    uint32_t sh = acldvppGetPicDescHeightStride(decoded);
    acldvppPicDesc *gray = picture(yuv, sw * sh, w, h, sw, sh);
    CHECK(acldvppSetPicDescFormat(gray, PIXEL_FORMAT_YUV_400));
    uint32_t half_w = w / 2, half_h = h / 2, half_sw = align_up(half_w, 16);
    void *halved = NULL;
    CHECK(acldvppMalloc(&halved, half_sw * half_h));
    acldvppPicDesc *half = picture(halved, half_sw * half_h, half_w, half_h, half_sw, half_h);
    CHECK(acldvppSetPicDescFormat(half, PIXEL_FORMAT_YUV_400));
    CHECK(acldvppVpcPyrDownAsync(channel, gray, half, NULL, stream));
    CHECK(aclrtSynchronizeStream(stream));
    char *rows = malloc(half_sw * half_h);
    CHECK(aclrtMemcpy(rows, half_sw * half_h, halved, half_sw * half_h,
                      ACL_MEMCPY_DEVICE_TO_HOST));
    f = fopen(argv[3], "wb");
    for (uint32_t r = 0; r < half_h; r++) {
        EXPECT(fwrite(rows + r * half_sw, 1, half_w, f) == half_w);
    }
    fclose(f);
    printf("halved %u %u\n", half_w, half_h);
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,               /* NV12 is not a pyramid format */
                acldvppVpcPyrDownAsync(channel, decoded, half, NULL, stream));
    CHECK(acldvppDestroyPicDesc(gray));
    CHECK(acldvppDestroyPicDesc(half));
    CHECK(acldvppFree(halved));
    free(rows);

    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                acldvppJpegDecodeAsync(channel, jpeg, jpeg_size, decoded, stream));
    memset(jpeg + jpeg_size / 2, 0, jpeg_size - jpeg_size / 2);
    CHECK(aclrtMemcpy(src, jpeg_size, jpeg, jpeg_size, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(acldvppJpegDecodeAsync(channel, src, jpeg_size / 2 + 16, decoded, stream));
    EXPECT_CODE(ACL_ERROR_RT_AICPU_EXCEPTION, aclrtSynchronizeStream(stream));

    CHECK(acldvppDestroyResizeConfig(resize));
    CHECK(acldvppDestroyPicDesc(decoded));
    CHECK(acldvppDestroyPicDesc(resized));
    CHECK(acldvppFree(src));
    CHECK(acldvppFree(yuv));
    CHECK(acldvppFree(small));
    CHECK(acldvppDestroyChannel(channel));
    CHECK(acldvppDestroyChannelDesc(channel));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    free(jpeg);
    free(out);
    printf("dvpp ok\n");
    return 0;
}
