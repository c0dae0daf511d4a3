// SPDX-License-Identifier: MIT
/*
 * export.c - statistics in the Prometheus 0.0.4 and OpenMetrics 1.0 text
 * formats (tally/export.h).
 *
 * An exporter is a list of sources, each with its families (metric name,
 * kind, the metadata lines already rendered in both formats),
 * and the set of every metric name its families claim (a counter "x"
 * claims x, x_total and x_created; a gauge its name), kept sorted: adding
 * a source whose names meet a claimed one fails, so no export can hold a
 * duplicate series whatever the trees hold.
 *
 * An export, per source: one flush decision of the tree's root, then one
 * walk of the tree through the snapshot interface (depth-first, siblings
 * by name, under the tree's structure lock for reading) copies each
 * group's escaped path and its values into the snapshot; the lock is
 * dropped and the families are written from the snapshot one after the other.
 * Everything is rendered into one buffer owned by the exporter, which the
 * three outputs (FILE, caller's buffer, textfile) then copy out: one
 * renderer serves them all, and a caller's buffer that is too small still
 * gets the exact length.  The buffers are kept from one export to the
 * next: a steady exporter allocates only the walk's stack.
 *
 * Costs: add O(stats log names); an export O(groups x stats) to format,
 * plus the flush and O(groups log fanout) for the sorted walk; the tree's
 * structure lock is held for the walk only (no formatting under it).
 * Memory: the snapshot holds 2 x nr_stats longs and the escaped path per
 * group, the text about (name + path + labels + 12) bytes per sample.
 *
 * The exporter's files: export_internal.h lists them.  This one owns the
 * exporter object (its options, sources and outputs).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "export_internal.h"
#include "memcg/memcg_snapshot.h"

static int check_labels(const struct tally_export_options *o)
{
	if (o->nr_labels > TALLY_EXPORT_MAX_LABELS ||
	    (o->nr_labels && !o->labels))
		return -EINVAL;
	for (unsigned int i = 0; i < o->nr_labels; i++) {
		const char *name = o->labels[i].name;

		/* instance and job are the target's labels, set by
		 * Prometheus at scrape time: one in the exposition would be
		 * renamed exported_instance or exported_job. */
		if (!export_valid_identifier(name, TALLY_EXPORT_PREFIX_MAX) ||
		    !o->labels[i].value || !strcmp(name, "group") ||
		    !strcmp(name, "instance") || !strcmp(name, "job") ||
		    (o->pid && !strcmp(name, "pid")))
			return -EINVAL;
		for (unsigned int j = 0; j < i; j++)
			if (!strcmp(o->labels[j].name, name))
				return -EINVAL;
	}
	return 0;
}

int tally_exporter_create(struct tally_exporter **out,
			  const struct tally_export_options *opts)
{
	static const struct tally_export_options defaults;
	const struct tally_export_options *o = opts ? opts : &defaults;
	struct tally_exporter *e;
	struct buf labels = { 0 };
	int err;

	if (!out || (o->format != TALLY_EXPORT_PROMETHEUS &&
		     o->format != TALLY_EXPORT_OPENMETRICS))
		return -EINVAL;
	err = check_labels(o);
	if (err)
		return err;
	for (unsigned int i = 0; i < o->nr_labels; i++) {
		buf_mem(&labels, ",", 1);
		buf_str(&labels, o->labels[i].name);
		buf_mem(&labels, "=\"", 2);
		export_buf_escaped(&labels, o->labels[i].value,
			    strlen(o->labels[i].value), true);
		buf_mem(&labels, "\"", 1);
	}
	buf_mem(&labels, "", 1);
	e = calloc(1, sizeof(*e));
	if (!e || labels.failed) {
		free(e);
		free(labels.p);
		return -ENOMEM;
	}
	e->format = o->format;
	e->pid = o->pid;
	e->const_labels = labels.p;
	*out = e;
	return 0;
}

void tally_exporter_destroy(struct tally_exporter *e)
{
	if (!e)
		return;
	for (unsigned int i = 0; i < e->nr_sources; i++)
		export_free_families(e->sources[i].families,
			      e->sources[i].nr_families);
	free(e->sources);
	for (size_t i = 0; i < e->nr_names; i++)
		free(e->names[i]);
	free(e->names);
	free(e->const_labels);
	free(e->out.p);
	free(e->labels.p);
	free(e->paths.p);
	free(e->rows);
	free(e->values);
	free(e->depth_row);
	free(e);
}

/*
 * Append @src, whose @built families are built (all of them unless @err),
 * claiming their names; on failure they are freed and nothing changes.
 */
static int add_source(struct tally_exporter *e, int err, struct family *fams,
		      unsigned int built, const struct source *src)
{
	struct source *sources;

	/* Grown first: once the names are claimed nothing can fail. */
	sources = err ? NULL : realloc(e->sources, (e->nr_sources + 1) *
							  sizeof(*sources));
	if (!err && !sources)
		err = -ENOMEM;
	if (!err) {
		e->sources = sources;
		err = export_claim_names(e, fams, src->nr_families);
	}
	if (err) {
		export_free_families(fams, built);
		return err;
	}
	e->sources[e->nr_sources++] = *src;
	return 0;
}

static int check_stats_options(const struct tally_stats_tree *t,
			       const struct tally_export_stats_options *o,
			       const char *prefix)
{
	if (!export_valid_identifier(prefix, TALLY_EXPORT_PREFIX_MAX) ||
	    (o->mode != TALLY_FLUSH_IF_NEEDED && o->mode != TALLY_FLUSH_FORCE))
		return -EINVAL;
	for (unsigned int i = 0; o->units && i < tally_stats_nr_stats(t); i++)
		if (o->units[i] && !export_valid_unit(o->units[i]))
			return -EINVAL;
	return 0;
}

int tally_exporter_add_stats(struct tally_exporter *e,
			     struct tally_stats_tree *t,
			     const struct tally_export_stats_options *opts)
{
	static const struct tally_export_stats_options defaults;
	const struct tally_export_stats_options *o = opts ? opts : &defaults;
	const char *prefix = o->prefix ? o->prefix : DEFAULT_PREFIX;
	unsigned int nr_stats, nr, built = 0;
	struct family *fams;
	int err;

	if (!e || !t)
		return -EINVAL;
	err = check_stats_options(t, o, prefix);
	if (err)
		return err;
	nr_stats = tally_stats_nr_stats(t);
	nr = 2 * nr_stats + 1;
	fams = calloc(nr, sizeof(*fams));
	if (!fams)
		return -ENOMEM;
	for (unsigned int i = 0; !err && i < nr_stats; i++) {
		const char *unit = o->units ? o->units[i] : NULL;

		err = export_build_family(&fams[built], prefix,
				   FAMILY_HIER, i, t, unit);
		built += !err;
		if (!err)
			err = export_build_family(&fams[built], prefix,
					   FAMILY_LOCAL, i, t, unit);
		built += !err;
	}
	if (!err)
		err = export_build_family(&fams[built], prefix,
				   FAMILY_ACCURACY, nr_stats, t, NULL);
	built += !err;
	return add_source(e, err, fams, built, &(struct source){
		.tree = t,
		.mode = o->mode,
		.bound = o->mode == TALLY_FLUSH_FORCE
				 ? 0
				 : tally_stats_read_bound(t),
		.nr_cols = 2 * nr_stats,
		.families = fams,
		.nr_families = nr,
	});
}

int tally_exporter_add_memcg(struct tally_exporter *e,
			     struct tally_memcg_tree *t,
			     const struct tally_export_memcg_options *opts)
{
	const char *prefix = opts && opts->prefix ? opts->prefix
						  : DEFAULT_PREFIX;
	unsigned int built = 0;
	struct family *fams;
	int err = 0;

	if (!e || !t || !export_valid_identifier(prefix, TALLY_EXPORT_PREFIX_MAX))
		return -EINVAL;
	fams = calloc(MEMCG_NR_COLS, sizeof(*fams));
	if (!fams)
		return -ENOMEM;
	for (unsigned int col = 0; !err && col < MEMCG_NR_COLS; col++) {
		err = export_build_memcg_family(&fams[built], prefix, col);
		built += !err;
	}
	return add_source(e, err, fams, built, &(struct source){
		.memcg = t,
		.nr_cols = MEMCG_NR_COLS,
		.families = fams,
		.nr_families = MEMCG_NR_COLS,
	});
}

/* --- outputs ------------------------------------------------------------ */

long tally_export_buffer_as(struct tally_exporter *e,
			    enum tally_export_format format, char *buf,
			    size_t len)
{
	int err;

	if (!e || (!buf && len) || (format != TALLY_EXPORT_PROMETHEUS &&
				    format != TALLY_EXPORT_OPENMETRICS))
		return -EINVAL;
	err = export_render_reset(e, format);
	if (err) {
		if (len)
			buf[0] = '\0';
		return err;
	}
	if (e->out.len < len) {
		if (e->out.len)
			memcpy(buf, e->out.p, e->out.len);
		buf[e->out.len] = '\0';
	} else if (len) {
		buf[0] = '\0';
	}
	return (long)e->out.len;
}

long tally_export_buffer(struct tally_exporter *e, char *buf, size_t len)
{
	if (!e)
		return -EINVAL;
	return tally_export_buffer_as(e, e->format, buf, len);
}

int tally_export_file(struct tally_exporter *e, FILE *f)
{
	int err;

	if (!e || !f)
		return -EINVAL;
	err = export_render_reset(e, e->format);
	if (err)
		return err;
	if ((e->out.len && fwrite(e->out.p, 1, e->out.len, f) != e->out.len) ||
	    fflush(f))
		return -EIO;
	return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* fsync() the directory of a path whose first @dirlen bytes name it. */
static int sync_dir(const char *path, size_t dirlen)
{
	char *dir = dirlen ? strndup(path, dirlen) : strdup(".");
	int fd, err = 0;

	if (!dir)
		return -ENOMEM;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd))
		err = -errno;
	if (fd >= 0)
		close(fd);
	free(dir);
	return err;
}

int tally_export_textfile(struct tally_exporter *e, const char *path)
{
	const char *slash;
	size_t dirlen, n;
	struct stat st;
	char *tmp;
	int fd, err;

	if (!e || !path || !*path || path[strlen(path) - 1] == '/')
		return -EINVAL;
	/* Only a regular file is replaced: never a device, FIFO or socket. */
	if (!lstat(path, &st) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
		return -EEXIST;
	err = export_render_reset(e, e->format);
	if (err)
		return err;
	slash = strrchr(path, '/');
	dirlen = slash ? (size_t)(slash - path) + 1 : 0;
	n = strlen(path);
	tmp = malloc(n + sizeof(".") + sizeof(".XXXXXX"));
	if (!tmp)
		return -ENOMEM;
	memcpy(tmp, path, dirlen);
	tmp[dirlen] = '.';
	memcpy(tmp + dirlen + 1, path + dirlen, n - dirlen);
	strcpy(tmp + n + 1, ".XXXXXX");
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		free(tmp);
		return err;
	}
	if (fchmod(fd, 0644))
		err = -errno;
	if (!err)
		err = write_all(fd, e->out.p, e->out.len);
	if (!err && fsync(fd))
		err = -errno;
	if (close(fd) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
	free(tmp);
	return err ? err : sync_dir(path, dirlen);
}
