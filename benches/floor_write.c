/* The floor of a durable replace of one file, for benches/bench_files_floor.py: write a temp in
 * the file's folder, fsync it, rename it over the file, fsync the folder. Nothing else: no
 * reading, no checks, no metadata kept.
 *
 * Usage: floor_write FOLDER NAME [overlap]. Each line on stdin is the length of a content that
 * follows it (that many bytes); the program replaces FOLDER/NAME with it and answers with the
 * nanoseconds the steps took (the pipe is outside the timing). With `overlap`, the replaced file
 * is held open across the rename and let go on a second thread while the folder is synced (what
 * toolroute does: freeing its blocks, a discard on a disk mounted with `discard`, then overlaps
 * the folder's sync instead of lengthening the rename). Built by the bench: `cc -O2 -pthread`. */

#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void check(int ok, const char *what) {
    if (!ok) {
        perror(what);
        exit(1);
    }
}

static void *let_go(void *fd) {
    close((int)(long)fd);
    return NULL;
}

int main(int argc, char **argv) {
    check(argc == 3 || argc == 4, "usage: floor_write FOLDER NAME [overlap]");
    int overlap = argc == 4;
    int folder = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    check(folder >= 0, "open the folder");
    const char *temp = ".floor-write.tmp";
    size_t size;
    while (scanf("%zu", &size) == 1) {
        check(getchar() == '\n', "read the length");
        char *content = malloc(size + 1);
        check(content != NULL, "malloc");
        check(fread(content, 1, size, stdin) == size, "read the content");

        long long start = now_ns();
        int fd = openat(folder, temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        check(fd >= 0, "create the temp");
        check(write(fd, content, size) == (ssize_t)size, "write");
        check(fsync(fd) == 0, "fsync the file");
        check(close(fd) == 0, "close");
        int old = overlap ? openat(folder, argv[2], O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
        check(renameat(folder, temp, folder, argv[2]) == 0, "rename");
        pthread_t releaser;
        if (old >= 0) {
            check(pthread_create(&releaser, NULL, let_go, (void *)(long)old) == 0, "start a thread");
        }
        check(fsync(folder) == 0, "fsync the folder");
        if (old >= 0) {
            pthread_join(releaser, NULL);
        }
        long long took = now_ns() - start;

        free(content);
        printf("%lld\n", took);
        fflush(stdout);
    }
    return 0;
}
