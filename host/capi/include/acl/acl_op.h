/* npuemu C ABI: acl_op.h (declarations added as the calls are emulated). */
#ifndef NPUEMU_ACL_OP_H_
#define NPUEMU_ACL_OP_H_

#include "acl/acl_base.h"

#endif /* NPUEMU_ACL_OP_H_ */
