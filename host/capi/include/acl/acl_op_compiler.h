/* npuemu C ABI: acl_op_compiler.h (declarations added as the calls are emulated). */
#ifndef NPUEMU_ACL_OP_COMPILER_H_
#define NPUEMU_ACL_OP_COMPILER_H_

#include "acl/acl_base.h"

#endif /* NPUEMU_ACL_OP_COMPILER_H_ */
