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
 *
 * Threads: the fork handlers run on the forking thread; the GIL state they save is only
 * touched between prepare and parent/child of one fork (fork is serialised by the C library).
 */
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
