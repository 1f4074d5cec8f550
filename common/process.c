/* process.c - facts about other processes on this host (process.h). */
#include "process.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int hp_pid_stopped(long pid)
{
    char path[64], buf[512];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')'); /* the name may hold anything: the state follows it */
    return rp && rp[1] == ' ' && rp[2] == 'T';
}
