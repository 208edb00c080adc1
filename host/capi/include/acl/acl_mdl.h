/* npuemu C ABI: acl_mdl.h (declarations added as the calls are emulated). */
#ifndef NPUEMU_ACL_MDL_H_
#define NPUEMU_ACL_MDL_H_

#include "acl/acl_base.h"

#endif /* NPUEMU_ACL_MDL_H_ */
