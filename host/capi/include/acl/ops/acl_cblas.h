/*
 * npuemu C ABI: the BLAS header some samples include but never call. npuemu declares no
 * BLAS calls (none is emulated); including it is harmless.
 */
#ifndef NPUEMU_ACL_CBLAS_H_
#define NPUEMU_ACL_CBLAS_H_

#include "acl/acl.h"

#endif /* NPUEMU_ACL_CBLAS_H_ */
