/*
 * sysfs_check: what a program sees of goroce0 in /dev and sysfs under the
 * preload (TestSysfsTree, TestSysfsEdges in sysfs_test.go).
 *
 *   sysfs_check tree DIR...  every entry under each DIR as `cd DIR; find .`
 *                            walks it (links not followed), after a line
 *                            "### DIR", one line each, as testdata/rxe0-sysfs.txt
 *                            has them: ./PATH [TYPE MODE SIZE] = FIRST LINE (bytes N),
 *                            ./PATH [...] -> TARGET, or ./PATH [...] = read error: ERRNO
 *   sysfs_check edges        the edge cases, one line each, for the test to
 *                            compare with what it finds on the host itself
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *err_name(int e)
{
	switch (e) {
	case 0: return "ok";
	case ENOENT: return "ENOENT";
	case EACCES: return "EACCES";
	case EEXIST: return "EEXIST";
	case EINVAL: return "EINVAL";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case ENOTTY: return "ENOTTY";
	case EBADF: return "EBADF";
	case ELOOP: return "ELOOP";
	case EIO: return "EIO";
	}
	return strerrorname_np(e);
}

static const char *type_name(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFDIR: return "directory";
	case S_IFREG: return "regular file";
	case S_IFLNK: return "symbolic link";
	case S_IFCHR: return "character special file";
	}
	return "other";
}

/* read_all reads path with open/read into buf; the errno value or 0. */
static int read_all(const char *path, char *buf, size_t len, ssize_t *n)
{
	int fd = open(path, O_RDONLY);
	*n = 0;
	buf[0] = 0;
	if (fd < 0)
		return errno;
	ssize_t r = read(fd, buf, len - 1);
	int e = r < 0 ? errno : 0;
	close(fd);
	if (r >= 0)
		buf[*n = r] = 0;
	return e;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* walk prints the entry at path (shown as shown) and, for a directory, the
 * entries under it, sorted. */
static void walk(const char *path, const char *shown)
{
	struct stat st;
	char buf[4096];
	if (lstat(path, &st)) {
		printf("%s [lstat: %s]\n", shown, err_name(errno));
		return;
	}
	printf("%s [%s %o %lld]", shown, type_name(st.st_mode), st.st_mode & 07777, (long long)st.st_size);
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlink(path, buf, sizeof buf - 1);
		buf[n < 0 ? 0 : n] = 0;
		printf(" -> %s\n", buf);
		return;
	}
	if (S_ISREG(st.st_mode)) {
		ssize_t n;
		int e = read_all(path, buf, sizeof buf, &n);
		if (e) {
			printf(" = read error: %s\n", err_name(e));
			return;
		}
		printf(" = %.*s (bytes %zd)\n", (int)strcspn(buf, "\n"), buf, n);
		return;
	}
	printf("\n");
	if (!S_ISDIR(st.st_mode))
		return;
	DIR *d = opendir(path);
	if (!d) {
		printf("%s [opendir: %s]\n", shown, err_name(errno));
		return;
	}
	char **names = NULL;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		names = realloc(names, (n + 1) * sizeof *names);
		names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof *names, by_name);
	for (size_t i = 0; i < n; i++) {
		char p[PATH_MAX], s[PATH_MAX];
		snprintf(p, sizeof p, "%s/%s", path, names[i]);
		snprintf(s, sizeof s, "%s/%s", shown, names[i]);
		walk(p, s);
		free(names[i]);
	}
	free(names);
}

#define DEV "/sys/class/infiniband/goroce0"
#define PORT DEV "/ports/1"

/* listing prints a directory's names, sorted, read with readdir (or
 * scandir), without . and .. */
static void listing(const char *what, const char *path, int use_scandir)
{
	char *names[512];
	int n = 0;
	if (use_scandir) {
		struct dirent **list;
		int k = scandir(path, &list, NULL, alphasort);
		if (k < 0) {
			printf("%s: %s\n", what, err_name(errno));
			return;
		}
		for (int i = 0; i < k; i++) {
			if (strcmp(list[i]->d_name, ".") && strcmp(list[i]->d_name, "..") && n < 512)
				names[n++] = strdup(list[i]->d_name);
			free(list[i]);
		}
		free(list);
	} else {
		DIR *d = opendir(path);
		struct dirent *e;
		if (!d) {
			printf("%s: %s\n", what, err_name(errno));
			return;
		}
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && n < 512)
				names[n++] = strdup(e->d_name);
		closedir(d);
	}
	qsort(names, n, sizeof *names, by_name);
	printf("%s:", what);
	for (int i = 0; i < n; i++) {
		printf(" %s", names[i]);
		free(names[i]);
	}
	printf("\n");
}

static void show_read(const char *what, const char *path)
{
	char buf[4096];
	ssize_t n;
	int e = read_all(path, buf, sizeof buf, &n);
	printf("%s: %s %.*s\n", what, err_name(e), (int)strcspn(buf, "\n"), buf);
}

static void show_open(const char *what, const char *path, int flags)
{
	int fd = open(path, flags, 0644);
	printf("%s: %s\n", what, err_name(fd < 0 ? errno : 0));
	if (fd >= 0)
		close(fd);
}

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* hammer reads the tree from several threads at once. */
static void *hammer(void *arg)
{
	long bad = 0;
	(void)arg;
	for (int i = 0; i < 300; i++) {
		char buf[64];
		ssize_t n;
		struct stat st;
		bad += read_all(PORT "/state", buf, sizeof buf, &n) || strcmp(buf, "4: ACTIVE\n");
		bad += stat("/dev/infiniband/uverbs0", &st) || !S_ISCHR(st.st_mode);
		DIR *d = opendir(PORT);
		int k = 0;
		while (d && readdir(d))
			k++;
		bad += !d || k != 14; /* . .. and the 12 entries of ports/1 */
		if (d)
			closedir(d);
		FILE *f = fopen(DEV "/node_type", "r");
		bad += !f || !fgets(buf, sizeof buf, f) || strcmp(buf, "1: CA\n");
		if (f)
			fclose(f);
	}
	return (void *)bad;
}

static void edges(void)
{
	char buf[PATH_MAX];
	struct stat st;
	int fd;

	/* Paths outside the tree are the host's. */
	show_read("host /sys/class/net/lo/mtu", "/sys/class/net/lo/mtu");
	printf("host /etc/hostname stat: %s\n", err_name(stat("/etc/hostname", &st) ? errno : 0));
	/* Directories both have list the host's entries and the tree's. */
	listing("listing /sys/class", "/sys/class", 0);
	listing("scandir /sys/class", "/sys/class", 1);
	listing("listing /dev/infiniband", "/dev/infiniband", 0);
	listing("scandir " PORT, PORT, 1);

	/* What the tree lacks. */
	printf("stat ports/2: %s\n", err_name(stat(DEV "/ports/2", &st) ? errno : 0));
	show_open("open ports/2", DEV "/ports/2", O_RDONLY);
	printf("opendir ports/2: %s\n", err_name(opendir(DEV "/ports/2") ? 0 : errno));
	printf("access ports/2: %s\n", err_name(access(DEV "/ports/2", F_OK) ? errno : 0));
	show_open("open node_guid/x", DEV "/node_guid/x", O_RDONLY);

	/* Writes: sysfs refuses them. */
	show_open("open node_guid O_WRONLY", DEV "/node_guid", O_WRONLY);
	show_open("open node_guid O_RDWR", DEV "/node_guid", O_RDWR);
	printf("fopen node_guid w: %s\n", err_name(fopen(DEV "/node_guid", "w") ? 0 : errno));
	show_open("open newfile O_CREAT", DEV "/newfile", O_WRONLY | O_CREAT);
	show_open("open node_guid O_CREAT|O_EXCL", DEV "/node_guid", O_WRONLY | O_CREAT | O_EXCL);
	show_open("open ports O_WRONLY", DEV "/ports", O_WRONLY);
	show_open("open node_guid O_DIRECTORY", DEV "/node_guid", O_RDONLY | O_DIRECTORY);
	fd = open(DEV "/node_guid", O_RDONLY);
	printf("write to a node_guid opened for reading: %s\n", err_name(write(fd, "x", 1) < 0 ? errno : 0));
	close(fd);

	/* The uverbs device. */
	if (!stat("/dev/infiniband/uverbs0", &st))
		printf("stat uverbs0: %s %o %u:%u\n", type_name(st.st_mode), st.st_mode & 07777, major(st.st_rdev),
		       minor(st.st_rdev));
	printf("access uverbs0 R_OK|W_OK: %s\n", err_name(access("/dev/infiniband/uverbs0", R_OK | W_OK) ? errno : 0));
	fd = open("/dev/infiniband/uverbs0", O_RDWR | O_CLOEXEC);
	printf("open uverbs0: %s\n", err_name(fd < 0 ? errno : 0));
	if (!fstat(fd, &st))
		printf("fstat uverbs0: %s %u:%u\n", type_name(st.st_mode), major(st.st_rdev), minor(st.st_rdev));
	printf("read uverbs0: %s\n", err_name(read(fd, buf, sizeof buf) < 0 ? errno : 0));
	printf("write uverbs0: %s\n", err_name(write(fd, buf, 8) < 0 ? errno : 0));
	printf("ioctl uverbs0 RDMA_VERBS_IOCTL: %s\n", ioctl(fd, 0xc0181b01, buf) < 0 ? "fails" : "succeeds");
	printf("close uverbs0: %s\n", err_name(close(fd) ? errno : 0));
	printf("close uverbs0 again: %s\n", err_name(close(fd) ? errno : 0));

	/* Other spellings of a path. */
	show_read("ports/1/../1/state", PORT "/../1/state");
	show_read("//sys//class/./infiniband/goroce0/ports/1/state", "//sys//class/./infiniband/goroce0/ports/1/state");
	printf("stat " DEV "/: %s\n", err_name(stat(DEV "/", &st) || !S_ISDIR(st.st_mode) ? errno : 0));
	printf("stat node_guid/: %s\n", err_name(stat(DEV "/node_guid/", &st) ? errno : 0));
	char *rp = realpath(PORT "/../1/state", NULL);
	printf("realpath ports/1/../1/state: %s\n", rp ? rp : err_name(errno));
	free(rp);
	ssize_t n = readlink(DEV, buf, sizeof buf - 1);
	printf("readlink " DEV ": %.*s\n", (int)(n < 0 ? 0 : n), buf);
	printf("readlink node_guid: %s\n", err_name(readlink(DEV "/node_guid", buf, sizeof buf) < 0 ? errno : 0));
	printf("lstat " DEV ": %s\n", lstat(DEV, &st) ? err_name(errno) : type_name(st.st_mode));
	struct statx sx;
	if (!statx(AT_FDCWD, DEV "/node_guid", 0, STATX_BASIC_STATS, &sx))
		printf("statx node_guid: %s %o %llu\n", type_name(sx.stx_mode), sx.stx_mode & 07777,
		       (unsigned long long)sx.stx_size);
	char here[PATH_MAX];
	if (!getcwd(here, sizeof here))
		return;
	printf("chdir " DEV ": %s\n", err_name(chdir(DEV) ? errno : 0));
	printf("getcwd: %s\n", getcwd(buf, sizeof buf) ? buf : err_name(errno));
	show_read("relative ports/1/state", "ports/1/state");
	listing("listing .", ".", 0);
	printf("chdir ports/1/gids: %s\n", err_name(chdir("ports/1/gids") ? errno : 0));
	show_read("relative 0", "0");
	printf("chdir ../../..: %s\n", err_name(chdir("../../..") ? errno : 0));
	printf("getcwd: %s\n", getcwd(buf, sizeof buf) ? buf : err_name(errno));
	printf("chdir ../../../class/net: %s\n", err_name(chdir("../../../class/net") ? errno : 0));
	printf("chdir ../../../../class/net: %s\n", err_name(chdir("../../../../class/net") ? errno : 0));
	printf("getcwd: %s\n", getcwd(buf, sizeof buf) ? buf : err_name(errno));
	show_read("relative lo/mtu", "lo/mtu");
	printf("chdir back: %s\n", err_name(chdir(here) ? errno : 0));

	/* A directory's descriptor, and the calls relative to it. */
	int dfd = open(DEV, O_RDONLY | O_DIRECTORY);
	printf("open " DEV " O_DIRECTORY: %s\n", err_name(dfd < 0 ? errno : 0));
	printf("fstat it: %s\n", fstat(dfd, &st) ? err_name(errno) : type_name(st.st_mode));
	fd = openat(dfd, "ports/1/state", O_RDONLY);
	n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	printf("openat it ports/1/state: %.*s\n", (int)(n < 0 ? 0 : strcspn(buf, "\n")), buf);
	if (fd >= 0)
		close(fd);
	printf("fstatat it node_type: %s\n",
	       fstatat(dfd, "node_type", &st, 0) ? err_name(errno) : type_name(st.st_mode));
	printf("read it: %s\n", err_name(read(dfd, buf, sizeof buf) < 0 ? errno : 0));
	DIR *d = fdopendir(dfd);
	int k = 0;
	while (d && readdir(d))
		k++;
	printf("fdopendir it: %d entries\n", k);
	int before = count_fds();
	closedir(d);
	printf("closedir closes it: %d fewer descriptors, fcntl: %s\n", before - count_fds(),
	       err_name(fcntl(dfd, F_GETFD) < 0 ? errno : 0));
	d = opendir(PORT);
	fd = dirfd(d);
	printf("dirfd of a stream of the tree: %s\n", err_name(fd < 0 ? errno : 0));
	fd = openat(fd, "state", O_RDONLY);
	printf("openat dirfd state: %s\n", err_name(fd < 0 ? errno : 0));
	close(fd);
	closedir(d);

	/* The GID table: one entry past its end is missing, as rxe's
	 * gids/1024; an empty entry reads as the zero GID and its attributes
	 * fail with EINVAL. */
	int ngid = 0, empty = -1;
	d = opendir(PORT "/gids");
	while (d && readdir(d))
		ngid++;
	if (d)
		closedir(d);
	ngid -= 2;
	printf("gids: %d entries\n", ngid);
	snprintf(buf, sizeof buf, PORT "/gids/%d", ngid);
	printf("stat gids/%d: %s\n", ngid, err_name(stat(buf, &st) ? errno : 0));
	printf("stat gids/01: %s\n", err_name(stat(PORT "/gids/01", &st) ? errno : 0));
	for (int i = 0; i < ngid && empty < 0; i++) {
		char p[PATH_MAX], g[64];
		snprintf(p, sizeof p, PORT "/gids/%d", i);
		if (!read_all(p, g, sizeof g, &n) && !strcmp(g, "0000:0000:0000:0000:0000:0000:0000:0000\n"))
			empty = i;
	}
	if (empty >= 0) {
		snprintf(buf, sizeof buf, PORT "/gid_attrs/types/%d", empty);
		show_read("an empty entry's type", buf);
		snprintf(buf, sizeof buf, PORT "/gid_attrs/ndevs/%d", empty);
		show_read("an empty entry's ndev", buf);
	}

	/* Threads: the same answers, and nothing left behind. */
	int fds0 = count_fds();
	size_t heap0 = mallinfo2().uordblks;
	pthread_t th[8];
	long bad = 0;
	for (int i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, hammer, NULL);
	for (int i = 0; i < 8; i++) {
		void *r;
		pthread_join(th[i], &r);
		bad += (long)r;
	}
	printf("8 threads x 300 rounds: %ld wrong answers, %d descriptors left, heap grew under 64 KiB: %d\n", bad,
	       count_fds() - fds0, mallinfo2().uordblks < heap0 + 65536);

	/* A forked child reads the tree without the parent's Go runtime. */
	pid_t pid = fork();
	if (!pid) {
		ssize_t m;
		_exit(read_all(PORT "/gids/0", buf, sizeof buf, &m) || read_all(DEV "/node_guid", buf, sizeof buf, &m));
	}
	int status;
	waitpid(pid, &status, 0);
	printf("forked child reads: %s\n", WIFEXITED(status) && !WEXITSTATUS(status) ? "ok" : "failed");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "edges")) {
		edges();
		return 0;
	}
	if (argc > 2 && !strcmp(argv[1], "tree")) {
		for (int i = 2; i < argc; i++) {
			printf("### %s\n", argv[i]);
			walk(argv[i], ".");
		}
		return 0;
	}
	fprintf(stderr, "usage: sysfs_check tree DIR... | edges\n");
	return 2;
}
