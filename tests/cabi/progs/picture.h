/* An NV12 picture descriptor of the DVPP test programs (include after acl_dvpp.h). */
#ifndef NPUEMU_TEST_PICTURE_H_
#define NPUEMU_TEST_PICTURE_H_

#include "check.h"

/* desc's fields set to an NV12 picture */
static void describe_picture(acldvppPicDesc *desc, void *data, uint32_t size, uint32_t w,
                             uint32_t h, uint32_t sw, uint32_t sh) {
    CHECK(acldvppSetPicDescData(desc, data));
    CHECK(acldvppSetPicDescSize(desc, size));
    CHECK(acldvppSetPicDescFormat(desc, PIXEL_FORMAT_YUV_SEMIPLANAR_420));
    CHECK(acldvppSetPicDescWidth(desc, w));
    CHECK(acldvppSetPicDescHeight(desc, h));
    CHECK(acldvppSetPicDescWidthStride(desc, sw));
    CHECK(acldvppSetPicDescHeightStride(desc, sh));
}

static acldvppPicDesc *picture(void *data, uint32_t size, uint32_t w, uint32_t h,
                               uint32_t sw, uint32_t sh) {
    acldvppPicDesc *desc = acldvppCreatePicDesc();
    EXPECT(desc != NULL);
    describe_picture(desc, data, size, w, h, sw, sh);
    return desc;
}

#endif
