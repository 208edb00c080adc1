/*
 * The part of npuemu's C libraries written in C (compiled into each library by
 * host/capi/build.py, after cffi's own code and the library's headers):
 *
 * - fork: a C program may call fork() itself, which Python never sees. The handlers below do
 *   what os.fork() does around the embedded interpreter (hold the GIL over the fork, then
 *   PyOS_AfterFork_*), so the runtime's own at-fork hooks run in the child: it then refuses
 *   every call with ACL_ERROR_RT_FEATURE_NOT_SUPPORT (the rings belong to the parent).
 *   Loaded into a Python process (ctypes), the library leaves forks to Python's own handling
 *   (npuemu_host_is_python, read by boot.py).
 * - the interpreter: before cffi starts Python (on the first call), the program name is set
 *   to the Python that built the library (NPUEMU_PYTHON, defined by build.py), so the
 *   embedded interpreter finds that Python's standard library, site-packages (cffi, npuemu)
 *   and virtual environment, whatever python3 comes first on the C program's PATH.
 * - aclAppLog: variadic, so written here; it formats the message and hands it to Python.
 * - the hot calls (libascendcl: aclrtMalloc, aclrtFree, aclrtLaunchKernel,
 *   aclrtSynchronizeStream): written here so that a call costs what the Python face's call
 *   costs plus taking the GIL. Each checks its arguments, takes the GIL with the calling
 *   thread's own Python state, calls the Python function bound for it (mem.hot_malloc,
 *   mem.hot_free, acl.rt.launch_kernel, acl.rt.synchronize_stream, looked up by name on each
 *   call, so the profiler's API timer still sees them) with ints, and releases the GIL. A NULL
 *   or malformed argument, a call before the runtime is bound and a thread's first call go
 *   through cffi's body of the same name instead (npuemu_py_<name>: the @export body, with its
 *   checks and messages; cffi starts the interpreter and gives the thread its Python state).
 *
 * Threads: the fork handlers run on the forking thread; the GIL state they save is only
 * touched between prepare and parent/child of one fork (fork is serialised by the C library).
 * The hot calls' table is written once, under the GIL, by npuemu_bind_hot (boot.attach), and
 * published by npuemu_hot_ready (release store, acquire load); afterwards it is only read,
 * under the GIL.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <wchar.h>

static PyGILState_STATE npuemu_fork_gil;
static int npuemu_fork_held;
static int npuemu_loaded_into_python;

static int npuemu_host_is_python(void)
{
    return npuemu_loaded_into_python;
}

static void npuemu_before_fork(void)
{
    npuemu_fork_held = !npuemu_loaded_into_python && Py_IsInitialized();
    if (npuemu_fork_held) {
        npuemu_fork_gil = PyGILState_Ensure();
        PyOS_BeforeFork();
    }
}

static void npuemu_after_fork_parent(void)
{
    if (npuemu_fork_held) {
        PyOS_AfterFork_Parent();
        PyGILState_Release(npuemu_fork_gil);
    }
}

static void npuemu_after_fork_child(void)
{
    if (npuemu_fork_held) {
        PyOS_AfterFork_Child();
        PyGILState_Release(npuemu_fork_gil);
    }
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void npuemu_name_the_interpreter(void)
{
    static wchar_t program[4096];
    if (mbstowcs(program, NPUEMU_PYTHON, sizeof program / sizeof program[0] - 1) !=
        (size_t)-1) {
        Py_SetProgramName(program);
    }
}
#pragma GCC diagnostic pop

__attribute__((constructor)) static void npuemu_register_fork_handlers(void)
{
    npuemu_loaded_into_python = Py_IsInitialized();
    if (!npuemu_loaded_into_python) {
        npuemu_name_the_interpreter();
    }
    pthread_atfork(npuemu_before_fork, npuemu_after_fork_parent, npuemu_after_fork_child);
}

#ifdef NPUEMU_HAS_APP_LOG
static void npuemu_app_log(int level, const char *func, const char *file, uint32_t line,
                           const char *msg);

void aclAppLog(aclLogLevel logLevel, const char *func, const char *file, uint32_t line,
               const char *fmt, ...)
{
    char msg[1024];
    va_list args;
    if (fmt == NULL) {
        return;
    }
    va_start(args, fmt);
    vsnprintf(msg, sizeof msg, fmt, args);
    va_end(args);
    npuemu_app_log((int)logLevel, func, file, line, msg);
}
#endif

#ifdef NPUEMU_HOT_CALLS
/* cffi's bodies (build.py renames the hot calls' declarations to these). */
aclError npuemu_py_aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
aclError npuemu_py_aclrtFree(void *devPtr);
aclError npuemu_py_aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t numBlocks,
                                     const void *argsData, size_t argsSize,
                                     aclrtStream stream);
aclError npuemu_py_aclrtSynchronizeStream(aclrtStream stream);

enum { HOT_MALLOC, HOT_FREE, HOT_LAUNCH, HOT_SYNC, HOT_COUNT };
static const char *const npuemu_hot_where[HOT_COUNT][2] = {
    {"npuemu.host.capi.mem", "hot_malloc"},
    {"npuemu.host.capi.mem", "hot_free"},
    {"npuemu.host.acl.rt", "launch_kernel"},
    {"npuemu.host.acl.rt", "synchronize_stream"},
};
static PyObject *npuemu_hot_owner[HOT_COUNT];  /* the module holding each function */
static PyObject *npuemu_hot_name[HOT_COUNT];   /* its interned name */
static PyObject *npuemu_hot_on_error;          /* boot._on_error */
static int npuemu_hot_ready;

/* Fills the table (called by boot.attach, through cffi, so without the GIL); 0 on success. */
static int npuemu_bind_hot(void)
{
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *boot = PyImport_ImportModule("npuemu.host.capi.boot");
    int i, ok = boot != NULL;
    if (ok) {
        npuemu_hot_on_error = PyObject_GetAttrString(boot, "_on_error");
        ok = npuemu_hot_on_error != NULL;
        Py_DECREF(boot);
    }
    for (i = 0; ok && i < HOT_COUNT; i++) {
        npuemu_hot_owner[i] = PyImport_ImportModule(npuemu_hot_where[i][0]);
        npuemu_hot_name[i] = PyUnicode_InternFromString(npuemu_hot_where[i][1]);
        ok = npuemu_hot_owner[i] != NULL && npuemu_hot_name[i] != NULL &&
             PyObject_HasAttr(npuemu_hot_owner[i], npuemu_hot_name[i]);
    }
    if (ok) {
        __atomic_store_n(&npuemu_hot_ready, 1, __ATOMIC_RELEASE);
    } else {
        PyErr_Print();
    }
    PyGILState_Release(gil);
    return ok ? 0 : -1;
}

/* Takes the GIL with this thread's Python state: 1 (and *saved: the state to release, NULL
 * if this thread held the GIL already), or 0 when cffi's body must run instead (not bound
 * yet, or this thread has no Python state yet). */
static int npuemu_hot_enter(PyThreadState **saved)
{
    PyThreadState *ts;
    if (!__atomic_load_n(&npuemu_hot_ready, __ATOMIC_ACQUIRE)) {
        return 0;
    }
    ts = PyGILState_GetThisThreadState();
    if (ts == NULL) {
        return 0;
    }
    if (PyGILState_Check()) {
        *saved = NULL;
    } else {
        PyEval_RestoreThread(ts);
        *saved = ts;
    }
    return 1;
}

/* Releases what npuemu_hot_enter took; errno back to `err` (the caller's, as cffi keeps it). */
static void npuemu_hot_leave(PyThreadState *saved, int err)
{
    if (saved != NULL) {
        PyEval_SaveThread();
    }
    errno = err;
}

/* The bound function `which` called with `n` new references (consumed); a new reference or
 * NULL (a Python exception set). */
static PyObject *npuemu_hot_call(int which, PyObject **args, size_t n)
{
    PyObject *fn = NULL, *res = NULL;
    size_t i;
    for (i = 0; i < n; i++) {
        if (args[i] == NULL) {
            goto done;
        }
    }
    fn = PyObject_GetAttr(npuemu_hot_owner[which], npuemu_hot_name[which]);
    if (fn != NULL) {
        res = PyObject_Vectorcall(fn, args, n, NULL);
    }
done:
    Py_XDECREF(fn);
    for (i = 0; i < n; i++) {
        Py_XDECREF(args[i]);
    }
    return res;
}

/* A Python exception in a hot call (a bug of npuemu): logged by boot._on_error, as cffi's
 * onerror does for the other calls; the call returns ACL_ERROR_INTERNAL_ERROR. */
static long long npuemu_hot_failed(void)
{
    PyObject *type, *value, *tb, *out;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    out = PyObject_CallFunctionObjArgs(npuemu_hot_on_error, type ? type : Py_None,
                                       value ? value : Py_None, tb ? tb : Py_None, NULL);
    if (out == NULL) {
        PyErr_Clear();
    }
    Py_XDECREF(out);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return -(long long)ACL_ERROR_INTERNAL_ERROR;
}

/* A hot call's int result (a Python int; anything else is an internal error), then the
 * reference dropped. */
static long long npuemu_hot_int(PyObject *res)
{
    long long v;
    if (res == NULL) {
        return npuemu_hot_failed();
    }
    v = PyLong_AsLongLong(res);
    Py_DECREF(res);
    if (v == -1 && PyErr_Occurred()) {
        return npuemu_hot_failed();
    }
    return v;
}

static aclError npuemu_hot_code(long long v)
{
    return v < 0 ? (aclError)-v : (aclError)v;
}

/* The bound function `which` called with one pointer (as an int): its int result. */
static long long npuemu_hot_on_pointer(int which, void *p)
{
    PyObject *args[1];
    args[0] = PyLong_FromVoidPtr(p);
    return npuemu_hot_int(npuemu_hot_call(which, args, 1));
}

/* Mirrors aclrtMalloc (returns at once); mem.hot_malloc answers the address or -code. */
aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    PyThreadState *saved;
    PyObject *args[2];
    long long v;
    int err = errno;
    if (devPtr == NULL || !npuemu_hot_enter(&saved)) {
        return npuemu_py_aclrtMalloc(devPtr, size, policy);
    }
    args[0] = PyLong_FromSize_t(size);
    args[1] = PyLong_FromLong((long)policy);
    v = npuemu_hot_int(npuemu_hot_call(HOT_MALLOC, args, 2));
    npuemu_hot_leave(saved, err);
    if (v < 0) {
        return npuemu_hot_code(v);
    }
    *devPtr = (void *)(uintptr_t)v;
    return ACL_SUCCESS;
}

/* Mirrors aclrtFree (returns at once); mem.hot_free answers the code. */
aclError aclrtFree(void *devPtr)
{
    PyThreadState *saved;
    long long v;
    int err = errno;
    if (devPtr == NULL || !npuemu_hot_enter(&saved)) {
        return npuemu_py_aclrtFree(devPtr);
    }
    v = npuemu_hot_on_pointer(HOT_FREE, devPtr);
    npuemu_hot_leave(saved, err);
    return npuemu_hot_code(v);
}

/* Mirrors aclrtLaunchKernel (asynchronous): argsData's 64-bit words as a list of ints, as
 * kernels.py's body hands them to acl.rt.launch_kernel. */
aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t numBlocks, const void *argsData,
                           size_t argsSize, aclrtStream stream)
{
    PyThreadState *saved;
    PyObject *args[4];
    const uint64_t *words = (const uint64_t *)argsData;
    size_t i, n = argsSize / sizeof(uint64_t);
    long long v;
    int err = errno;
    if (argsSize % sizeof(uint64_t) || (argsSize && argsData == NULL) ||
        !npuemu_hot_enter(&saved)) {
        return npuemu_py_aclrtLaunchKernel(funcHandle, numBlocks, argsData, argsSize, stream);
    }
    args[0] = PyLong_FromVoidPtr(funcHandle);
    args[1] = PyLong_FromUnsignedLong(numBlocks);
    args[2] = PyList_New((Py_ssize_t)n);
    args[3] = PyLong_FromVoidPtr(stream);
    for (i = 0; args[2] != NULL && i < n; i++) {
        PyObject *word = PyLong_FromUnsignedLongLong(words[i]);
        if (word == NULL) {
            Py_CLEAR(args[2]);
            break;
        }
        PyList_SET_ITEM(args[2], (Py_ssize_t)i, word);
    }
    v = npuemu_hot_int(npuemu_hot_call(HOT_LAUNCH, args, 4));
    npuemu_hot_leave(saved, err);
    return npuemu_hot_code(v);
}

/* Mirrors aclrtSynchronizeStream (blocks, with the GIL released by the runtime's wait). */
aclError aclrtSynchronizeStream(aclrtStream stream)
{
    PyThreadState *saved;
    long long v;
    int err = errno;
    if (!npuemu_hot_enter(&saved)) {
        return npuemu_py_aclrtSynchronizeStream(stream);
    }
    v = npuemu_hot_on_pointer(HOT_SYNC, stream);
    npuemu_hot_leave(saved, err);
    return npuemu_hot_code(v);
}
#endif
