/* npuemu C ABI: acl_prof.h (declarations added as the calls are emulated). */
#ifndef NPUEMU_ACL_PROF_H_
#define NPUEMU_ACL_PROF_H_

#include "acl/acl_base.h"

#endif /* NPUEMU_ACL_PROF_H_ */
