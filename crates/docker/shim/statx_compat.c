/*
 * Preloaded (/etc/ld.so.preload) into every process of the project's images.
 *
 * Debian 12's runsc (gVisor release 20221219) answers statx() with EINVAL when the flags
 * include AT_NO_AUTOMOUNT, and Debian 12's coreutils always pass it: under gVisor `ls -l` and
 * `stat` fail on every file. AT_NO_AUTOMOUNT only matters for automount points, which these
 * containers never have, so a call refused for it is made again without it. Everywhere else
 * (runc, a newer runsc) the first call succeeds and this costs nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

typedef int (*statx_fn)(int, const char *, int, unsigned int, struct statx *);

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf)
{
    static statx_fn real;
    if (!real) {
        real = (statx_fn)dlsym(RTLD_NEXT, "statx");
        if (!real) {
            errno = ENOSYS;
            return -1;
        }
    }
    int r = real(dirfd, path, flags, mask, buf);
    if (r < 0 && errno == EINVAL && (flags & AT_NO_AUTOMOUNT)) {
        r = real(dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
    }
    return r;
}
