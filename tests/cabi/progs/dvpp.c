/* acldvpp* from C, as the samples write it: a JPEG file decoded on the card's DVPP engine
 * (sizes from acldvppJpegGetImageInfo / acldvppJpegPredictDecSize), resized to 224x224 by
 * VPC, the NV12 result written to a file; then a refused call and a corrupt file's code.
 * Usage: dvpp IN.jpg OUT.nv12 */
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
    if (argc != 3) return 2;
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
